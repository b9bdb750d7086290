"""`--reliable-n auto` as a CI user runs it (SPEC section 7), and early stopping (issue 12).

The project's model is the scripted format-sensitive one (tests/acceptance/helpers.py): in `ilr`
mode each instance of a resampling draws one of two wrappers, and only "({})" is answered right,
so a resampling scores the share of its 5 instances that drew it (sd about 0.22).
"""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import CONFTEST, by_test, run_json, write_project

AUTO_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", eps={eps}, delta=0.2)
def test_auto(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def auto_project(pytester: pytest.Pytester, eps: float) -> None:
    write_project(pytester, test_file=AUTO_TEST.replace("{eps}", str(eps)))


def test_paper_is_the_papers_recipe_n_star_within_the_pilot(pytester: pytest.Pytester) -> None:
    auto_project(pytester, eps=0.01)
    result, report = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=8",
                              "--reliable-n-method=paper")
    entry = by_test(report)["test_auto"]
    assert entry["n_star_method"] == "paper" and entry["n_star_paper"] is None
    # eps=0.01 on 0.2-steps: no subset short of the whole pilot is that close.
    assert entry["n_star"] == 8 and entry["n_star_reliable"] is False
    assert entry["n_resamplings"] == 8
    assert entry["calls"]["made"] + entry["calls"]["cached"] == 5 * (8 + 1)
    result.stdout.fnmatch_lines(["*n* = 8 is all the resamplings there were: not reliable at*"])


@pytest.mark.slow
def test_bootstrap_extends_the_pilot_and_a_later_run_reuses_n_star_and_calls(
    pytester: pytest.Pytester,
) -> None:
    auto_project(pytester, eps=0.05)
    _, first = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12", name="first.json")
    entry = by_test(first)["test_auto"]
    n_star = entry["n_star"]
    assert entry["n_star_method"] == "bootstrap" and entry["n_star_source"] == "pilot"
    # A bootstrap pilot under 30 cannot vouch for its n* (SPEC 7): not reliable, and it says why.
    assert entry["pilot_n"] == 12 and n_star > 12 and entry["n_star_reliable"] is False
    assert 1 <= entry["n_star_paper"] <= 12
    # The gate ran n* resamplings: the pilot's 12 and n* - 12 more, every call counted once.
    assert entry["n_resamplings"] == n_star
    assert entry["calls"]["made"] + entry["calls"]["cached"] == 5 * (n_star + 1)

    # The store gives n* without a pilot, and the extended plan is exactly the full plan of n*:
    # every call replays from the response cache.
    shown, second = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12",
                             name="second.json")
    again = by_test(second)["test_auto"]
    shown.stdout.fnmatch_lines(["*from a bootstrap pilot of 12 resamplings*"])
    # A stored n* keeps its pilot's size, so the later run says the same.
    assert again["n_star_source"] == "store" and again["pilot_n"] == 12
    assert again["n_star_reliable"] is False
    assert (again["n_star"], again["n_star_paper"]) == (n_star, entry["n_star_paper"])
    assert again["n_resamplings"] == n_star
    assert (again["calls"]["made"], again["calls"]["cached"]) == (0, 5 * (n_star + 1))
    assert again["mean"] == pytest.approx(entry["mean"])

    # Method and cap are part of the store's key: the paper's n* needs its own pilot.
    _, third = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12",
                        "--reliable-n-method=paper", name="third.json")
    paper = by_test(third)["test_auto"]
    assert paper["n_star_source"] == "pilot" and paper["n_star"] == entry["n_star_paper"]


def test_bootstrap_at_the_cap(pytester: pytest.Pytester) -> None:
    auto_project(pytester, eps=0.02)
    result, report = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=6",
                              "--reliable-n-max=9")
    entry = by_test(report)["test_auto"]
    assert entry["n_star"] > 9 and entry["n_star_reliable"] is False
    assert entry["n_resamplings"] == 9
    assert entry["calls"]["made"] + entry["calls"]["cached"] == 5 * (9 + 1)
    assert entry["achievable_eps"] > 0.02
    result.stdout.fnmatch_lines(["*is beyond the cap (--reliable-n-max): ran 9, not reliable*"])


@pytest.mark.parametrize(
    ("option", "fragment"),
    [("--reliable-n-method=exact", "invalid choice: 'exact' (choose from 'bootstrap', 'paper')"),
     ("--reliable-n-max=0", "give an integer >= 1")],
)
def test_bad_n_options_are_usage_errors(pytester: pytest.Pytester, option: str, fragment: str) -> None:
    auto_project(pytester, eps=0.1)
    result = pytester.runpytest_subprocess(option)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{fragment}*"])


# --------------------------------------------------------------------------- early stopping

MOSTLY_RIGHT = CONFTEST.replace(
    'return text_model(format_sensitive, id="scripted-format-sensitive")',
    'return text_model(mostly_right, id="scripted-mostly-right")',
) + r'''

def mostly_right(prompt: str) -> str:
    """Right everywhere except question 4 under the "{}." wrapper: about 0.9 on average."""
    if "Question number 4" in prompt and not re.search(r"^\(\w\) ", prompt, re.M):
        return format_sensitive(prompt)
    CALLS.append(prompt)
    return re.search(r"^\W*(\w)\W+\s*right", prompt, re.M).group(1)
'''

STOP_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", n=60, min_score=0.3, stop_early=True)
def test_clear_cut(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="wrappers", n=60, min_score=0.3)
def test_full(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="wrappers", n=12, min_score=0.3, min_worst=0.2, stop_early=True)
def test_uncovered(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_early_stopping_reports_what_it_ran_and_gives_the_full_runs_verdict(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester, test_file=STOP_TEST, conftest=MOSTLY_RIGHT)
    result, report = run_json(pytester, "--reliable-no-cache")
    result.assert_outcomes(passed=2, failed=1)
    tests = by_test(report)
    stopped, full, uncovered = tests["test_clear_cut"], tests["test_full"], tests["test_uncovered"]
    assert full["stopped_early"] is False and full["stop_reason"] is None
    assert full["n_resamplings"] == 60
    assert stopped["stopped_early"] is True and "settled after" in stopped["stop_reason"]
    n = stopped["n_resamplings"]
    assert n < 60 / 2
    assert stopped["calls"]["made"] + stopped["calls"]["cached"] == 5 * (n + 1)
    assert stopped["verdict"] == full["verdict"] == "passed"
    # The stopped run is the prefix of the full one (plan order).
    assert stopped["mean"] == pytest.approx(full["mean"], abs=0.1)
    # Group ranges have no anytime-valid bound: that gate runs all n and says why.
    assert uncovered["stopped_early"] is False and uncovered["n_resamplings"] == 12
    assert "not covered by anytime-valid bounds: min_worst" in uncovered["stop_reason"]
    # Its worst group's errors all sit on one of the 5 instances: about one instance's worth of
    # evidence (effective-cluster degrees of freedom), so min_worst cannot pass on evidence.
    failing = [t["name"] for t in uncovered["thresholds"] if not t["passed"]]
    assert failing == ["min_worst"]


@pytest.mark.slow
def test_stop_early_option_and_a_bad_marker_value(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=STOP_TEST.replace(", stop_early=True", ""),
                  conftest=MOSTLY_RIGHT)
    _, report = run_json(pytester, "--reliable-no-cache", "--reliable-stop-early")
    assert by_test(report)["test_full"]["stopped_early"] is True

    write_project(pytester, test_file=STOP_TEST.replace("stop_early=True", "stop_early='yes'"),
                  conftest=MOSTLY_RIGHT)
    result = pytester.runpytest_subprocess()
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*stop_early='yes' is not allowed; allowed: True or False*"])
