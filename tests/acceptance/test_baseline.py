"""Release candidate vs baseline, as a user runs it (SPEC section 9).

Scripted pairs of known difference: `production` is always right; `format_sensitive` is right only
when options are wrapped as "(A)", so in the two-wrapper space it is worse by half its cells, all
of them in the group `wrapper={}.`. Every call a model gets is logged to calls.jsonl.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from tests.acceptance.helpers import CONFTEST, RELIABLE_YAML, by_test, run_json, write_project
from tests.acceptance.test_usage_errors import assert_usage_error

PAIR_CONFTEST = r'''
import json
import os
import re
from pathlib import Path

import pytest

from pytest_reliable import text_model

LOG = Path(__file__).parent / "calls.jsonl"


def production(prompt: str) -> str:
    found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.M)
    return found.group(1) if found else "?"


def format_sensitive(prompt: str) -> str:
    found = re.search(r"^\((\w)\) right", prompt, re.M)
    if found:
        return found.group(1)
    wrong = re.search(r"^\W*(\w)\W+\s*wrong", prompt, re.M)
    return wrong.group(1) if wrong else "?"


BEHAVIOUR = {"production": production, "production_copy": production,
             "format_sensitive": format_sensitive}


def scripted(name):
    if os.environ.get("FAIL_IF_CALLED") == name:
        def refuse(prompt: str) -> str:
            raise AssertionError(f"{name} must not be called")
        return text_model(refuse, id=name)

    def answer(prompt: str) -> str:
        with LOG.open("a") as handle:
            handle.write(json.dumps([name, prompt]) + "\n")
        return BEHAVIOUR[name](prompt)
    return text_model(answer, id=name)


@pytest.fixture
def reliable_model():
    return scripted(os.environ.get("CANDIDATE", "format_sensitive"))


@pytest.fixture
def reliable_baseline():
    name = os.environ.get("BASELINE")
    return scripted(name) if name else None
'''

DATASET = [
    {"question": f"Question number {i}?",
     "choices": (["right answer", "wrong one", "wrong two"] * 2)[3 - i % 3: 6 - i % 3],
     "answer": "right answer"}
    for i in range(30)
]

GATES = '''
import pytest

from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=4, max_regression=0.02)
def test_pass_on_evidence(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="wrappers", n=4, max_regression=0.02, decide="fail-on-evidence")
def test_fail_on_evidence(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def pair_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, candidate: str,
                 baseline: str | None, test_file: str = GATES) -> None:
    pytester.makeconftest(PAIR_CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_gate=test_file.format(dataset=DATASET))
    monkeypatch.setenv("CANDIDATE", candidate)
    if baseline is None:
        monkeypatch.delenv("BASELINE", raising=False)
    else:
        monkeypatch.setenv("BASELINE", baseline)


def logged(pytester: pytest.Pytester) -> Counter:
    path = pytester.path / "calls.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(tuple(json.loads(line)) for line in lines)


def test_worse_candidate_fails_naming_the_worst_group_and_a_prompt(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "format_sensitive", "production")
    result, report = run_json(pytester, "-k", "pass_on_evidence")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*max_regression: candidate worse than baseline by 0.5*(pass-on-evidence, *",
        "*largest regressions (dimensions):*",
        "*wrapper={}.: -1.0000*",
        "*a prompt the baseline got right and the candidate wrong*",
        "*the baseline answered*",
    ])
    assert "pytest_reliable/" not in result.stdout.str()
    entry = by_test(report)["test_pass_on_evidence"]
    baseline = entry["baseline"]
    assert baseline["model"] == "production" and baseline["mean"] == 1.0
    assert baseline["difference"]["estimate"] == pytest.approx(-0.5, abs=0.1)
    assert baseline["difference"]["high"] < 0
    assert baseline["regressed"][0] == "wrapper={}."
    assert baseline["groups"]["wrapper=({})"]["estimate"] == 0.0
    assert set(baseline["orp"]) >= {"sigma_d", "rho", "area", "curve"}
    assert entry["thresholds"][-1]["name"] == "max_regression"
    assert entry["thresholds"][-1]["passed"] is False


def test_equal_candidate_passes_under_fail_on_evidence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "production", "production_copy")
    result, report = run_json(pytester, "-k", "fail_on_evidence")
    result.assert_outcomes(passed=1)
    baseline = by_test(report)["test_fail_on_evidence"]["baseline"]
    assert baseline["difference"] == {**baseline["difference"], "estimate": 0.0, "low": 0.0,
                                      "high": 0.0}
    assert baseline["mcnemar_p"] == 1.0


def test_better_candidate_passes_under_pass_on_evidence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "production", "format_sensitive")
    result, report = run_json(pytester, "-k", "pass_on_evidence")
    result.assert_outcomes(passed=1)
    baseline = by_test(report)["test_pass_on_evidence"]["baseline"]
    assert baseline["difference"]["low"] > 0
    # The table shows candidate - baseline with its interval.
    result.stdout.fnmatch_lines(["*cand-base ?CI?*", "*+0.5*"])


def test_baseline_makes_exactly_the_candidates_calls(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "format_sensitive", "production")
    _, report = run_json(pytester, "-k", "pass_on_evidence")
    calls = logged(pytester)
    candidate = Counter({p: c for (who, p), c in calls.items() if who == "format_sensitive"})
    baseline = Counter({p: c for (who, p), c in calls.items() if who == "production"})
    assert candidate == baseline and sum(candidate.values()) > 0
    # The response cache holds both models' answers for the same (sample, scope, params).
    with sqlite3.connect(pytester.path / ".reliable" / "cache.sqlite") as db:
        rows = db.execute("SELECT model, meta FROM responses").fetchall()
    by_model: dict[str, Counter] = {}
    for model, meta in rows:
        data = json.loads(meta)
        by_model.setdefault(model, Counter())[json.dumps(
            [data["sample_index"], data["scope"], data["params"]], sort_keys=True)] += 1
    assert set(by_model) == {"format_sensitive", "production"}
    assert by_model["format_sensitive"] == by_model["production"]
    entry = by_test(report)["test_pass_on_evidence"]
    total = entry["calls"]["made"] + entry["calls"]["cached"]
    assert entry["baseline"]["calls"]["made"] + entry["baseline"]["calls"]["cached"] == total


@pytest.mark.slow
def test_xdist_gives_the_same_numbers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "format_sensitive", "production")
    _, one = run_json(pytester, "--reliable-no-cache", name="one.json")
    _, two = run_json(pytester, "-n", "2", "--reliable-no-cache", name="two.json")
    for name in ("test_pass_on_evidence", "test_fail_on_evidence"):
        a, b = by_test(one)[name]["baseline"], by_test(two)[name]["baseline"]
        a.pop("calls"), b.pop("calls")
        assert a == b
        assert by_test(one)[name]["verdict"] == by_test(two)[name]["verdict"]


@pytest.mark.slow
def test_stored_report_baseline_makes_no_baseline_call(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Production's own gate run, production as the model under test.
    pair_project(pytester, monkeypatch, "production", None, test_file=GATES.replace(
        ", max_regression=0.02", ""))
    result, _ = run_json(pytester, name="production.json")
    result.assert_outcomes(passed=2)
    production_calls = sum(c for (who, _), c in logged(pytester).items() if who == "production")
    assert production_calls > 0
    # The candidate's run compares against it; production would raise if it were called.
    pair_project(pytester, monkeypatch, "format_sensitive", None)
    monkeypatch.setenv("FAIL_IF_CALLED", "production")
    stored = pytester.path / "production.json"
    result, report = run_json(pytester, f"--reliable-baseline-report={stored}")
    result.assert_outcomes(failed=2)
    assert sum(c for (who, _), c in logged(pytester).items()
               if who == "production") == production_calls
    for entry in report["tests"]:
        assert entry["baseline"]["source"] == "report"
        assert entry["baseline"]["calls"] == {"made": 0, "cached": 0}
        assert entry["baseline"]["difference"]["estimate"] == pytest.approx(-0.5, abs=0.1)
    # The same numbers as against the live baseline.
    monkeypatch.delenv("FAIL_IF_CALLED")
    monkeypatch.setenv("BASELINE", "production")
    _, live = run_json(pytester, name="live.json")
    for name, entry in by_test(report).items():
        assert entry["baseline"]["difference"] == by_test(live)[name]["baseline"]["difference"]


@pytest.mark.slow
def test_mismatched_stored_report_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "production", None)
    run_json(pytester, name="production.json")
    stored = pytester.path / "production.json"
    data = json.loads(stored.read_text())
    data["tests"][0]["dataset_hash"] = "0" * 64
    stored.write_text(json.dumps(data))
    result = pytester.runpytest_subprocess(f"--reliable-baseline-report={stored}", "-p",
                                           "no:randomly")
    assert_usage_error(result, data["tests"][0]["nodeid"], "dataset hash: stored 000000000000")
    result = pytester.runpytest_subprocess(f"--reliable-baseline-report={stored}",
                                           "--reliable-seed=3")
    assert_usage_error(result, "seed: stored 0, this run 3")


@pytest.mark.slow
def test_max_regression_without_a_baseline_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester, conftest=CONFTEST, test_file=GATES)
    result = pytester.runpytest_subprocess()
    assert_usage_error(result, "test_pass_on_evidence", "max_regression=0.02",
                       "none is configured")
    result = pytester.runpytest_subprocess("-n", "2")
    assert_usage_error(result, "max_regression=0.02", "none is configured")


@pytest.mark.slow
def test_unknown_baseline_model_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_project(pytester, conftest=CONFTEST, test_file=GATES)
    result = pytester.runpytest_subprocess("--reliable-baseline-model=no-such-model")
    assert_usage_error(result, "baseline model 'no-such-model'", "OPENAI_API_KEY")
    write_project(pytester, conftest=CONFTEST, test_file=GATES.replace(
        "max_regression=0.02)", "baseline='no-such-model', max_regression=0.02)"))
    result = pytester.runpytest_subprocess()
    assert_usage_error(result, "test_pass_on_evidence", "baseline='no-such-model'")


def test_junit_and_step_summary_carry_the_difference(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair_project(pytester, monkeypatch, "production", "format_sensitive")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    xml = pytester.path / "junit.xml"
    pytester.runpytest_subprocess(f"--junitxml={xml}", "-k", "pass_on_evidence")
    text = xml.read_text()
    assert 'name="reliable_baseline_model" value="format_sensitive"' in text
    assert 'name="reliable_baseline_difference"' in text
    assert "cand-base [CI]" in Path(summary).read_text()


def _always_right_rule(messages: object, params: dict) -> str:
    import re

    prompt = messages if isinstance(messages, str) else messages[-1]["content"]  # type: ignore
    found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.MULTILINE)
    return found.group(1) if found else "?"


def test_baseline_model_option_calls_the_openai_compatible_server(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_reliable.testing import ScriptedServer

    pair_project(pytester, monkeypatch, "format_sensitive", None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with ScriptedServer(_always_right_rule) as server:
        result, report = run_json(pytester, "-k", "pass_on_evidence",
                                  "--reliable-baseline-model=production-llm",
                                  f"--reliable-baseline-base-url={server.base_url}")
        assert server.completed > 0
    result.assert_outcomes(failed=1)
    baseline = by_test(report)["test_pass_on_evidence"]["baseline"]
    assert baseline["model"] == "openai:production-llm@127.0.0.1"
    assert baseline["mean"] == 1.0 and baseline["regressed"][0] == "wrapper={}."


GROUPED = '''
import pytest

from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=6, max_regression=0.02, group_by=["wrapper"])
def test_grouped_by_wrapper(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="wrappers", n=6, max_regression=0.02)
def test_default_grouping(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_per_group_differences_are_over_the_tests_grouping(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 9: per-group paired differences over the test's grouping (its group_by=), the same
    groups as its format range."""
    pair_project(pytester, monkeypatch, "format_sensitive", "production", test_file=GROUPED)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML + '    instruction: ["Pick one.", "Choose."]\n')
    result, report = run_json(pytester)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*largest regressions (dimensions:wrapper):*"])
    grouped, default = by_test(report)["test_grouped_by_wrapper"], \
        by_test(report)["test_default_grouping"]
    assert set(grouped["baseline"]["groups"]) == {"wrapper=({})", "wrapper={}."}
    assert set(grouped["baseline"]["groups"]) == set(grouped["formats"]["per_variant"])
    assert grouped["baseline"]["grouping"] == grouped["formats"]["grouping"]
    assert grouped["baseline"]["regressed"] == ["wrapper={}."]
    # Without group_by=, ilr's default grouping: every varied dimension's values.
    assert set(default["baseline"]["groups"]) == {"wrapper=({})", "wrapper={}.",
                                                  "instruction=Pick one.", "instruction=Choose."}
