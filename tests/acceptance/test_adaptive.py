"""search="adaptive" (SPEC section 14) as a user meets it: the marker and the option, the entry's
fields, the cache serving a rerun, and the usage errors."""

from __future__ import annotations

import re

import pytest

from tests.acceptance.helpers import CONFTEST, by_test, run_json, write_project

INSTANCES = 40

ALWAYS_RIGHT = CONFTEST.replace(
    'return text_model(format_sensitive, id="scripted-format-sensitive")',
    'return text_model(always_right, id="scripted-always-right")',
) + r'''

def always_right(prompt: str) -> str:
    CALLS.append(prompt)
    return re.search(r"^\W*(\w)\W+\s*right", prompt, re.M).group(1)
'''

SPACE = '''
spaces:
  formats:
    wrapper: ["({})", "{}.", "{}:", "[{}]"]
    enumerator: ["upper", "number"]
'''

TESTS = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records([
    dict(question=f"Question number {{i}}?", answer=i % 3,
         choices=[["right answer", "wrong one", "wrong two"][(j - i) % 3] for j in range(3)])
    for i in range(40)
])

@pytest.mark.reliable(space="formats", mode="fixed", n=48, min_score=0.5, min_worst=0.5,
                      max_spread=0.5, search="adaptive")
def test_adaptive(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="formats", mode="fixed", n=48, min_score=0.5, min_worst=0.5,
                      max_spread=0.5)
def test_uniform(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def _project(pytester: pytest.Pytester, tests: str = TESTS) -> None:
    write_project(pytester, test_file=tests, conftest=ALWAYS_RIGHT, yaml_text=SPACE)


def test_adaptive_search_spends_fewer_calls_and_the_cache_serves_its_rerun(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    result, report = run_json(pytester)
    result.assert_outcomes(passed=2)
    tests = by_test(report)
    adaptive, uniform = tests["test_adaptive"], tests["test_uniform"]
    assert adaptive["search"] == "adaptive" and uniform["search"] == "uniform"
    assert uniform["stopped_early"] is False and uniform["n_resamplings"] == 48
    assert adaptive["stopped_early"] is True and "settled after" in adaptive["stop_reason"]
    n = adaptive["n_resamplings"]
    assert n < 48 / 2
    assert adaptive["calls"]["made"] + adaptive["calls"]["cached"] == INSTANCES * (n + 1)
    # per_variant cells are true: every group's cells add up to the cells received.
    groups = adaptive["formats"]["per_variant"]
    assert sum(g["cells"] for g in groups.values()) == INSTANCES * n
    # Every format of the space got its cells (8 formats, enumerated: one resampling each is
    # evidence), and the rounds stopped once every group was settled.
    assert len(groups) == 8 and all(g["cells"] >= INSTANCES for g in groups.values())
    assert "in plan order" in adaptive["stop_reason"]
    assert adaptive["verdict"] == uniform["verdict"] == "passed"

    again, rerun = run_json(pytester, "-k", "adaptive", name="again.json")
    again.assert_outcomes(passed=1)
    second = by_test(rerun)["test_adaptive"]
    assert second["calls"]["made"] == 0
    assert second["calls"]["cached"] == adaptive["calls"]["made"] + adaptive["calls"]["cached"]
    assert second["n_resamplings"] == n
    assert second["formats"]["per_variant"] == groups


def test_the_option_chooses_the_search_of_tests_without_their_own(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, TESTS.replace(', search="adaptive"', ""))
    result, report = run_json(pytester, "--reliable-search", "adaptive", "-k", "adaptive")
    result.assert_outcomes(passed=1)
    entry = by_test(report)["test_adaptive"]
    assert entry["search"] == "adaptive" and entry["n_resamplings"] < 48


@pytest.mark.parametrize(("arguments", "expected"), [
    ('search="sometimes"', "*search='sometimes' is not allowed; allowed: 'uniform', "
                           "'adaptive'*"),
    ('search="adaptive", max_std=0.1',
     "*max_std=0.1 is not allowed; not with search='adaptive': its error rates are not "
     "measured under adaptive search*"),
    ("min_quantile=(0.1, 0.5)",
     "*min_quantile is not supported under pass-on-evidence: its bound's error rates are not "
     "measured*"),
    ('min_quantile=(0.1, 0.5), decide="fail-on-evidence"',
     "*min_quantile is not supported under fail-on-evidence*"),
    ("min_quantile=(1.5, 0.5)", "*min_quantile=(1.5, 0.5) is not allowed; allowed: a pair "
                                "(q, limit) with 0 < q < 1 and 0 <= limit <= 1*"),
    ("min_quantile=0.5", "*min_quantile=0.5 is not allowed; allowed: a pair*"),
])
def test_what_a_search_cannot_decide_is_a_usage_error_before_any_call(
    pytester: pytest.Pytester, arguments: str, expected: str,
) -> None:
    tests = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

@pytest.mark.reliable(space="formats", n=4, ARGUMENTS)
def test_it(reliable):
    reliable.evaluate(Dataset.from_records([dict(question="q?", choices=["right", "wrong"],
                                                 answer=0)]), MultipleChoice())
'''.replace("ARGUMENTS", arguments)
    _project(pytester, tests)
    result = pytester.runpytest_subprocess()
    assert result.ret == 4
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / ".reliable" / "cache.sqlite").exists()


def test_a_bad_search_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess("--reliable-search", "greedy")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*greedy*choose from*uniform*adaptive*"])


def test_the_plan_of_an_adaptive_test_states_its_worst_case(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest("--reliable-plan", "-k", "adaptive")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*40 instances x (48 resamplings + k=1) = 1960; search='adaptive': that is the worst "
        "case (all 48 resamplings)*"])


MEAN_ONLY = TESTS.split("@pytest.mark")[0] + '''
@pytest.mark.reliable(space="formats", mode="ilr", n=30, min_score=0.6, search="adaptive")
def test_adaptive_mean(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="formats", mode="ilr", n=30, min_score=0.6, stop_early=True)
def test_stopping_mean(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="formats", mode="ilr", n=30, min_score=0.6)
def test_all_n(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_the_plan_states_the_expected_calls_of_a_test_that_stops_on_the_mean(
    pytester: pytest.Pytester,
) -> None:
    """SPEC 14's "Also": a test stopping on the mean alone (adaptive or stop_early) is
    simulated through its stopping rule at min_score's figure; a test without either is not."""
    _project(pytester, MEAN_ONLY)
    result = pytester.runpytest_subprocess("--reliable-plan")
    assert result.ret == 0
    out = result.stdout.str()
    expected = re.findall(r"expected (\d+)(?:-(\d+))? of 30 resamplings \((\d+)", out)
    assert len(expected) == 2, out  # the adaptive and the stop_early test, not the third
    for low, high, calls in expected:
        assert 2 <= int(low) <= int(high or low) <= 30
        assert int(calls) == 40 * (int(low) + 1)
    assert "for a model at the figure" in out
    again = pytester.runpytest_subprocess("--reliable-plan")
    assert re.findall(r"expected [^;]*", again.stdout.str()) == re.findall(r"expected [^;]*", out)


SENSITIVE = ALWAYS_RIGHT + r'''

def wrong_with_numbers(prompt: str) -> str:
    """Right except under the number enumerator: there, the label of a wrong option."""
    CALLS.append(prompt)
    if re.search(r"^\W*1\W", prompt, re.M):
        return re.search(r"^\W*(\w)\W+\s*wrong", prompt, re.M).group(1)
    return re.search(r"^\W*(\w)\W+\s*right", prompt, re.M).group(1)
'''.replace('text_model(always_right, id="scripted-always-right")', "")

THOMPSON = TESTS.split("@pytest.mark")[0] + '''
@pytest.mark.reliable(space="formats", mode="fixed", n=6, search="thompson")
def test_explore(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_thompson_reports_an_exploration_never_a_verdict(pytester: pytest.Pytester) -> None:
    conftest = SENSITIVE.replace('return text_model(always_right, id="scripted-always-right")',
                                 'return text_model(wrong_with_numbers, id="scripted-numbers")')
    write_project(pytester, test_file=THOMPSON, conftest=conftest, yaml_text=SPACE)
    page = pytester.path / "page.html"
    result, report = run_json(pytester, f"--reliable-html={page}")
    result.assert_outcomes(passed=1)
    entry = by_test(report)["test_explore"]
    assert entry["search"] == "thompson" and entry["n_resamplings"] == 6
    found = entry["exploration"]
    assert found["calls"] == 6 * INSTANCES
    assert sum(f["cells"] for f in found["per_format"].values()) == 6 * INSTANCES
    assert len(found["per_format"]) == 8
    assert found["worst"]["score"] == 0.0 and "number" in found["worst"]["description"]
    assert found["best"]["score"] == 1.0
    assert "not a verdict" in found["label"]
    result.stdout.fnmatch_lines(["*exploration (search='thompson', not a verdict): best format*"])
    html = page.read_text()
    assert "Exploration (not a verdict)" in html
    # Other searches carry no exploration.
    write_project(pytester, test_file=TESTS, conftest=ALWAYS_RIGHT, yaml_text=SPACE)
    _, uniform = run_json(pytester, "-k", "uniform", name="uniform.json")
    assert by_test(uniform)["test_uniform"]["exploration"] is None


def test_thompson_in_ilr_mode_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester, THOMPSON.replace('mode="fixed", ', ""))
    result = pytester.runpytest_subprocess()
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*search='thompson' pulls one format at a time, which needs "
                                 "mode='fixed'*"])


BY_CELLS = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records([
    dict(question=f"Question number {{i}}?", answer=i % 3,
         choices=[["right answer", "wrong one", "wrong two"][(j - i) % 3] for j in range(3)])
    for i in range(40)
])

@pytest.mark.reliable(space="formats", mode="fixed", n=16, min_worst=0.5, search="adaptive"{decide})
def test_by_cells(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="formats", mode="fixed", n=16, min_worst=0.5{decide})
def test_whole_rows(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_a_min_worst_search_runs_single_cells_and_the_cache_serves_its_rerun(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester, test_file=BY_CELLS.replace("{decide}", ""), conftest=ALWAYS_RIGHT,
                  yaml_text=SPACE)
    result, report = run_json(pytester)
    result.assert_outcomes(passed=2)
    tests = by_test(report)
    cells, rows = tests["test_by_cells"], tests["test_whole_rows"]
    used = cells["calls"]["made"] + cells["calls"]["cached"]
    assert used < (rows["calls"]["made"] + rows["calls"]["cached"]) / 2
    assert cells["stopped_early"] is True and "every format settled" in cells["stop_reason"]
    groups = cells["formats"]["per_variant"]
    # The first resampling is run whole; every other format is brought to its first look (10
    # of the 40 instances), which settles a format that is always right.
    assert sorted(g["cells"] for g in groups.values()) == [10] * 7 + [INSTANCES]
    assert used == sum(g["cells"] for g in groups.values()) + INSTANCES  # and the canonical pass
    assert "one cell per instance" in cells["formats"]["estimator"]
    assert all(g["low"] >= 0.5 for g in groups.values())

    again, rerun = run_json(pytester, "-k", "by_cells", name="again.json")
    again.assert_outcomes(passed=1)
    second = by_test(rerun)["test_by_cells"]
    assert second["calls"]["made"] == 0 and second["formats"]["per_variant"] == groups


def test_a_search_by_cells_stops_on_the_first_format_it_can_show_is_below_the_limit(
    pytester: pytest.Pytester,
) -> None:
    # The default scripted model is right only when options look like "(A) text".
    write_project(pytester, test_file=BY_CELLS.replace("{decide}", ', decide="fail-on-evidence"'),
                  yaml_text=SPACE)
    result, report = run_json(pytester)
    result.assert_outcomes(failed=2)
    cells = by_test(report)["test_by_cells"]
    assert "settled below the limit" in cells["stop_reason"]
    assert cells["calls"]["made"] < by_test(report)["test_whole_rows"]["calls"]["made"]
    failing = [t for t in cells["thresholds"] if not t["passed"]]
    assert [t["name"] for t in failing] == ["min_worst"]


def test_the_plan_of_a_search_by_cells_states_its_looks_and_first_round(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester, test_file=BY_CELLS.replace("{decide}", ""), conftest=ALWAYS_RIGHT,
                  yaml_text=SPACE)
    result = pytester.runpytest_subprocess("--reliable-plan", "-k", "by_cells")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*40 instances x (16 resamplings + k=1) = 680; search='adaptive': that is the worst case "
        "(all 16 resamplings); single cells, 10 instances per look of a format, stop once every "
        "threshold is settled, at least 80 calls (the first round)*"])


PLAN_SPACE = SPACE + '''    instruction: ["Pick one.", "Choose."]
'''

PLAN_TESTS = BY_CELLS.replace("range(40)", "range(60)").replace(
    'n=16, min_worst=0.5', 'n=8, min_worst=0.2').replace("{decide}", ', decide="fail-on-evidence"')


def test_the_plan_sizes_a_search_by_cells_through_its_own_bounds(
    pytester: pytest.Pytester,
) -> None:
    """A search by cells decides min_worst on each format's exact bound over its instances, not
    on the uniform gate's paired estimator: 8 of 16 formats, 60 instances, fail-on-evidence
    min_worst=0.2 catches a format at 0.05 (it once said <= 0.00, the uniform gate's figure)."""
    write_project(pytester, test_file=PLAN_TESTS, conftest=ALWAYS_RIGHT, yaml_text=PLAN_SPACE)
    result = pytester.runpytest_subprocess("--reliable-plan")
    assert result.ret == 0
    out = result.stdout.str()
    figures = dict(re.findall(r"(test_by_cells|test_whole_rows).*?min_worst=0\.2: fails on "
                              r"evidence with 80% probability only if the true worst group's "
                              r"score is <= (\d\.\d\d)", out, re.DOTALL))
    assert float(figures["test_by_cells"]) >= 0.04, out
    assert float(figures["test_whole_rows"]) < float(figures["test_by_cells"]), out
    assert "every one of 8 formats through the search's exact bounds at its last look" in out
    assert "every one of 8 groups through the gate's bounds" in out  # the uniform test's
