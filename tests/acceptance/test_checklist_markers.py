"""CheckList markers with a scripted model that misreads misspellings."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import by_test, run_json

CONFTEST = r'''
import re

import pytest

from pytest_reliable import text_model

VOCABULARY = set("""
the a an this that it is was were are be not very really quite service food staff room
movie film book phone battery screen great good lovely nice terrible awful bad slow rude
friendly fast cold warm clean dirty and but i we they loved hated liked enjoyed did do does
plot acting music view price cheap expensive so too always never ever here there of in on
with for to at again will come back my our your he she
""".split())


def misreads_typos(prompt: str) -> str:
    text = re.search(r"Review: (.*)", prompt).group(1)
    words = re.findall(r"[a-z']+", text.lower())
    negative = "not" in words or "n't" in text.lower()
    if any(w not in VOCABULARY for w in words):  # a misspelling confuses it
        negative = not negative
    return "negative" if negative else "positive"


@pytest.fixture
def reliable_model():
    return text_model(misreads_typos, id="scripted-misreads-typos")
'''

TESTS = '''
import pytest
from pytest_reliable import Classification, Dataset

TASK = Classification(labels=["positive", "negative"], template="Review: {{text}}\\nSentiment:")
DATA = Dataset.from_records([
    {{"text": "The food was great", "label": "positive"}},
    {{"text": "The staff was friendly", "label": "positive"}},
    {{"text": "The room was clean", "label": "positive"}},
    {{"text": "The movie was good", "label": "positive"}},
    {{"text": "The service was slow", "label": "positive"}},
    {{"text": "The phone was cheap", "label": "positive"}},
])


@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.1)
def test_typos(reliable):
    reliable.invariance(DATA, TASK)


@pytest.mark.invariance(perturb=["punctuation"], max_flip_rate=0.0)
def test_punctuation(reliable):
    reliable.invariance(DATA, TASK)


@pytest.mark.directional(perturb=["negation"], expect="flip", max_fail_rate=0.0)
def test_negation_flips(reliable):
    reliable.directional(DATA, TASK)


@pytest.mark.mft(min_pass=0.6)
def test_mft(reliable):
    reliable.mft(DATA, TASK)
'''


@pytest.mark.slow
def test_checklist_verdicts(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_checklist=TESTS.format())
    result, report = run_json(pytester)
    result.assert_outcomes(passed=3, failed=1)
    tests = by_test(report)
    typos = tests["test_typos"]
    assert typos["kind"] == "invariance" and typos["verdict"] == "failed"
    # Every typo introduces a non-vocabulary word, which this model always misreads.
    assert typos["rate"] == 1.0 and typos["pairs"] >= 6
    low, high = typos["interval"]
    assert 0 < low < 1.0 and high == pytest.approx(1.0)
    assert 1 <= len(typos["failures"]) <= 3
    assert tests["test_punctuation"]["rate"] == 0.0
    assert tests["test_negation_flips"]["kind"] == "directional"
    assert tests["test_negation_flips"]["rate"] == 0.0 and tests["test_negation_flips"]["pairs"] >= 6
    assert tests["test_mft"]["rate"] == 1.0 and tests["test_mft"]["pairs"] == 6
    # Decided on evidence (the default policy): 6 of 6 right shows a pass rate >= 0.6 at 95%.
    mft = tests["test_mft"]
    assert mft["decide"] == "pass-on-evidence"
    (check,) = mft["thresholds"]
    assert check["name"] == "min_pass" and check["decide"] == "pass-on-evidence"
    assert 0.6 <= check["bound"] < 0.7 and check["passed"] and "Clopper-Pearson" in check["method"]
    # max_flip_rate=0.0 is zero tolerance: decided exactly (no flip), not on a bound.
    (zero,) = tests["test_punctuation"]["thresholds"]
    assert zero["passed"] and zero["bound"] == 0.0 and "zero tolerance" in zero["method"]
    result.stdout.fnmatch_lines(["*flip rate*", "*reliable summary*"])
    # A recorded run replays offline with zero calls and the same verdicts.
    replay, again = run_json(pytester, "--reliable-record=none", name="replay.json")
    replay.assert_outcomes(passed=3, failed=1)
    for name, entry in by_test(again).items():
        assert entry["calls"]["made"] == 0 and entry["calls"]["cached"] > 0, name
        assert entry["rate"] == tests[name]["rate"] and entry["verdict"] == tests[name]["verdict"]


POLICY_TESTS = '''
import pytest
from pytest_reliable import Classification, Dataset

TASK = Classification(labels=["positive", "negative"], template="Review: {text}\\nSentiment:")
DATA = Dataset.from_records([
    {"text": "The food was great", "label": "positive"},
    {"text": "The staff was friendly", "label": "positive"},
    {"text": "The room was clean", "label": "positive"},
    {"text": "The movie was good", "label": "positive"},
    {"text": "The service was slow", "label": "positive"},
    {"text": "The phone was cheap", "label": "positive"},
])


@pytest.mark.mft(min_pass=0.8)
def test_mft_default(reliable):
    reliable.mft(DATA, TASK)


@pytest.mark.mft(min_pass=0.8, decide="fail-on-evidence")
def test_mft_fail_on_evidence(reliable):
    reliable.mft(DATA, TASK)


@pytest.mark.mft(min_pass=0.8, decide="estimate")
def test_mft_estimate(reliable):
    reliable.mft(DATA, TASK)


@pytest.mark.invariance(perturb=["punctuation", "casing"], max_flip_rate=0.5)
def test_two_pairs_per_example(reliable):
    reliable.invariance(DATA, TASK)
'''


@pytest.mark.parametrize(
    ("option", "outcomes", "default_policy"),
    [
        ((), {"passed": 3, "failed": 1}, "pass-on-evidence"),
        (("--reliable-decide=estimate",), {"passed": 4}, "estimate"),
    ],
)
def test_checklist_thresholds_follow_the_policy(
    pytester: pytest.Pytester, option: tuple[str, ...], outcomes: dict[str, int],
    default_policy: str,
) -> None:
    """6 of 6 right and min_pass=0.8: the one-sided 95% exact lower bound (0.61) does not show
    0.8, so pass-on-evidence fails; nothing shows a breach, so fail-on-evidence passes; the
    estimate (1.0) passes. The marker's decide= wins over --reliable-decide."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_policies=POLICY_TESTS)
    result, report = run_json(pytester, *option)
    result.assert_outcomes(**outcomes)
    tests = by_test(report)
    default = tests["test_mft_default"]
    assert default["decide"] == default_policy
    assert default["verdict"] == ("failed" if default_policy == "pass-on-evidence" else "passed")
    (check,) = default["thresholds"]
    if default_policy == "pass-on-evidence":
        assert check["bound"] == pytest.approx(0.05 ** (1 / 6))  # Clopper-Pearson, 6 of 6
        line = ("*min_pass: observed 1.0000, required >= 0.8; lower bound 0.6070 at 95% "
                "(pass-on-evidence*")
        result.stdout.fnmatch_lines([line])
    else:
        assert check["bound"] == 1.0 and "no error control" in check["method"]
    (fail_check,) = tests["test_mft_fail_on_evidence"]["thresholds"]
    assert fail_check["decide"] == "fail-on-evidence" and fail_check["passed"]
    assert fail_check["bound"] == pytest.approx(1.0) and "Holm over 1 claims" in fail_check["method"]
    assert tests["test_mft_estimate"]["thresholds"][0]["decide"] == "estimate"
    # Two perturbations of each example: the bound is on the 6 examples' own rates, not on 12
    # independent pairs.
    two = tests["test_two_pairs_per_example"]
    assert two["pairs"] == 12 and two["rate"] == 0.0
    assert ("6 examples' rates (2 pairs each)" in two["thresholds"][0]["method"]
            or default_policy == "estimate")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("mft(min_pass=0.5, decide='on-evidence')",
         ["*test_bad*decide='on-evidence'*allowed: 'pass-on-evidence'*"]),
        ("invariance(perturb=['typos'], gate_on_bound=True)",
         ["*test_bad*gate_on_bound=True*allowed arguments*decide*"]),
    ],
)
def test_bad_checklist_policy_is_a_usage_error(
    pytester: pytest.Pytester, marker: str, expected: list[str]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_bad=f"""
import pytest
from pytest_reliable import Classification, Dataset

@pytest.mark.{marker}
def test_bad(reliable):
    reliable.mft(Dataset.from_records([{{"text": "x", "label": "positive"}}]),
                 Classification(labels=["positive", "negative"]))
""")
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    assert result.ret == 4
    result.stderr.fnmatch_lines(expected)
    assert "Traceback" not in result.stderr.str()


ASYNC_TESTS = '''
import asyncio

import pytest
from pytest_reliable import Classification, Dataset

TASK = Classification(labels=["positive", "negative"], template="Review: {text}\\nSentiment:")
DATA = Dataset.from_records([
    {"text": "The food was great", "label": "positive"},
    {"text": "The staff was friendly", "label": "positive"},
])


@pytest.mark.invariance(perturb=["punctuation"], max_flip_rate=0.0)
@pytest.mark.mft(min_pass=1.0)
@pytest.mark.directional(perturb=["negation"], expect="flip", max_fail_rate=0.0)
def test_async_checklist(reliable):
    async def body():
        return (await reliable.ainvariance(DATA, TASK), await reliable.amft(DATA, TASK),
                await reliable.adirectional(DATA, TASK))

    inv, mft, dir_ = asyncio.run(body())
    assert (inv.kind, inv.rate) == ("invariance", 0.0)
    assert (mft.kind, mft.rate) == ("mft", 1.0)
    assert (dir_.kind, dir_.rate) == ("directional", 0.0)
'''


def test_async_checklist_methods_give_the_sync_results(pytester: pytest.Pytester) -> None:
    """`await reliable.ainvariance/amft/adirectional(...)` in an async test body: the same
    reports as the sync methods, their calls counted."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_async=ASYNC_TESTS)
    result, report = run_json(pytester, "--reliable-no-cache")
    result.assert_outcomes(passed=1)
    entries = [e for e in report["tests"] if e["nodeid"].endswith("test_async_checklist")]
    assert sorted(e["kind"] for e in entries) == ["directional", "invariance", "mft"]
    assert all(e["verdict"] == "passed" for e in entries)
    # The three share prompts (the MFT's are INV's originals): answered once, then from the cache.
    assert all(e["calls"]["made"] + e["calls"]["cached"] > 0 for e in entries)
    assert sum(e["calls"]["made"] for e in entries) > 0
