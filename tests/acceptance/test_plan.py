"""``pytest --reliable-plan``: sizing before spending, as a user runs it (SPEC section 11)."""

from __future__ import annotations

import pytest

CONFTEST = r'''
import pytest

from pytest_reliable import text_model


def never(prompt: str) -> str:
    raise AssertionError("--reliable-plan called the model")


@pytest.fixture
def reliable_model():
    return text_model(never, id="must-not-be-called")
'''

TEST_FILE = r'''
import pytest

from pytest_reliable import MultipleChoice

BODY_RAN = []


def records(n):
    return [{"question": f"Question {i}?", "choices": ["right", "wrong", "other"], "answer": 0}
            for i in range(n)]


@pytest.mark.reliable(space="wrappers", n=30, min_score=0.6, min_lower_ci=0.5, max_std=0.05)
def test_gate(reliable):
    BODY_RAN.append("before")
    report = reliable.evaluate(records(100), MultipleChoice())
    BODY_RAN.append("after")  # never reached under --reliable-plan: there is no report
    assert report.mean > 2


@pytest.mark.reliable(space="wrappers", n=5, mode="fixed", k=4, temperature=0.7,
                      min_worst=0.5, max_spread=0.2, min_pass_hat_k=0.3)
def test_ranges(reliable):
    reliable.evaluate(records(40), MultipleChoice())


@pytest.mark.invariance(perturb=["typos", "casing"], max_flip_rate=0.1)
def test_inv(reliable):
    from pytest_reliable import Classification
    data = [{"text": f"A fine review number {i}.", "label": "positive"} for i in range(12)]
    reliable.invariance(data, Classification(labels=["positive", "negative"]))


def test_plain():
    raise AssertionError("a plain test must not run under --reliable-plan")
'''

YAML = '''
spaces:
  wrappers:
    wrapper: ["({})", "{}.", "[{}]"]
    enumerator: [upper, number]
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=YAML)
    pytester.makepyfile(test_gate=TEST_FILE)
    return pytester


def test_plan_makes_no_call_prints_calls_and_resolution_and_exits_0(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest_subprocess("--reliable-plan", "-p", "no:randomly", "-rs")
    assert result.ret == 0
    result.assert_outcomes(skipped=4)
    out = result.stdout.str()
    assert "called the model" not in out
    result.stdout.fnmatch_lines([
        "*reliable plan (no model call made)*",
        "*test_gate.py::test_gate (reliable, pass-on-evidence)",
        "*calls: 100 instances x (30 resamplings + k=1) = 3100",
        "*min_score=0.6: passes on evidence with 80% probability only if the true score is >= 0.*",
        ("*min_lower_ci=0.5: passes on evidence with 80% probability only if the true canonical "
         "score is >= 0.*"),
        ("*max_std=0.05: passes on evidence with 80% probability only if the true std over "
         "resamplings is <= 0.0*"),
        "*test_gate.py::test_ranges (reliable, pass-on-evidence)",
        "*calls: 40 instances x (5 resamplings + k=4) = 360",
        "*ranges grouped by formats",
        "*test_gate.py::test_inv (invariance)",
        "*calls: 12 examples + their perturbed copies: at most 36*",
        "total: 3496 model calls planned over 3 tests*",
        "method: min_score and min_win_rate by *simulated gates*",
    ])
    # The resolvable value lies on the right side of the limit, by a margin that N=100 implies.
    line = next(s for s in out.splitlines() if "min_score=0.6:" in s)
    value = float(line.split(">= ")[1].split()[0])
    assert 0.65 < value < 0.8


def test_plan_under_n_auto_counts_the_pilot(project: pytest.Pytester) -> None:
    project.makepyfile(test_auto=r'''
import pytest
from pytest_reliable import MultipleChoice

@pytest.mark.reliable(space="wrappers", min_score=0.5)
def test_auto(reliable):
    data = [{"question": f"Q{i}?", "choices": ["a", "b"], "answer": 0} for i in range(20)]
    reliable.evaluate(data, MultipleChoice())
''')
    result = project.runpytest_subprocess("--reliable-plan", "--reliable-n", "auto",
                                          "--reliable-pilot-n", "50", "test_auto.py")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        ("*calls: 20 instances x (50 pilot resamplings + k=1) = 1020; the gate runs on the "
         "pilot's first n* resamplings*"),
        "*figures below are at n = 50 (the pilot)*",
    ])


def test_plan_prices_every_test_warns_over_the_budget_and_gives_the_likely_n_star(
    project: pytest.Pytester,
) -> None:
    """SPEC 11 and 13: CheckList tests are priced and resolved too; an estimate above the USD
    budget is a warning; under --reliable-n auto the likely n* stands beside the cap."""
    project.makepyfile(test_auto=r'''
import pytest
from pytest_reliable import MultipleChoice

@pytest.mark.reliable(space="wrappers", min_score=0.5)
def test_auto(reliable):
    data = [{"question": f"Q{i}?", "choices": ["a", "b"], "answer": 0} for i in range(20)]
    reliable.evaluate(data, MultipleChoice())
''')
    pricing = project.path / "prices.yaml"
    pricing.write_text("models:\n  must-not-be-called: {input: 100, output: 400}\n")
    result = project.runpytest_subprocess(
        "--reliable-plan", f"--reliable-pricing={pricing}", "--reliable-budget=0.5usd",
        "--reliable-n", "auto", "--reliable-pilot-n", "30", "--reliable-n-max", "500",
        "-p", "no:randomly")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*test_auto.py::test_auto (reliable, pass-on-evidence)",
        "*calls: 20 instances x (30 pilot resamplings + k=1) = 620; *",
        "*likely n*: ~* calls, ~$* (an estimate, not a promise: *",
        "*worst case: 10020 calls, at most ~$*",
        "*spend: ~$* (at the likely n*)",
        "*test_gate.py::test_inv (invariance)",
        "*calls: 12 examples + their perturbed copies: at most 36 *",
        "*spend: ~$* for * uncached calls*",
        ("*max_flip_rate=0.1: passes on evidence with 80% probability only if the true flip "
         "rate is <= 0.0*"),
        ("total: * model calls planned over 4 tests (at the likely n*; at most * if every n* "
         "reaches --reliable-n-max)*"),
        "warning: the estimated spend ~$* exceeds --reliable-budget 0.5usd*",
    ])


@pytest.mark.slow
def test_plan_under_xdist_reaches_the_controller(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess("--reliable-plan", "-n", "2", "-p", "no:randomly")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*total: 3496 model calls planned over 3 tests*"])
    assert "called the model" not in result.stdout.str()


def test_plan_reports_a_bad_dataset_clearly(project: pytest.Pytester) -> None:
    project.makepyfile(test_bad=r'''
import pytest
from pytest_reliable import MultipleChoice

@pytest.mark.reliable(space="wrappers", min_score=0.5)
def test_bad(reliable):
    reliable.evaluate([{"question": "Q?", "choices": ["a", "b"], "answer": 7}], MultipleChoice())
''')
    result = project.runpytest_subprocess("--reliable-plan", "test_bad.py")
    result.assert_outcomes(failed=1)
    assert "pytest_reliable/" not in result.stdout.str()
