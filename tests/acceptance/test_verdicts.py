"""Verdicts on evidence (SPEC sections 4, 8, 11), driven as a user drives pytest.

The scripted models know their truth: the "insensitive" model answers instance i right exactly
when i % 10 < 7, whatever the prompt (true accuracy 0.7 over the dataset, no format effect).
"""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import by_test, run_json, write_project
from tests.acceptance.test_usage_errors import assert_usage_error

CONFTEST = r'''
import re

import pytest

from pytest_reliable import text_model


def insensitive(prompt: str) -> str:
    """Right on questions whose number ends in 0-6, whatever the format; wrong otherwise."""
    number = int(re.search(r"Question number (\d+)", prompt).group(1))
    target = "right answer" if number % 10 < 7 else "wrong one"
    found = re.search(r"(\w)\W{1,2}\s*" + target, prompt)
    return found.group(1) if found else "no idea"


@pytest.fixture
def reliable_model():
    return text_model(insensitive, id="scripted-insensitive")
'''

YAML = '''
spaces:
  mcq:
    instruction: ["Answer with the label of the correct option.", "Pick the right option."]
    wrapper: ["({})", "{}.", "{})", "[{}]"]
    option_separator: ["\\n", " | "]
'''

DATA = '''[
    {{"question": f"Question number {{i}}?",
      "choices": ["right answer", "wrong one", "wrong two"] if i % 3 == 0 else
                 ["wrong one", "right answer", "wrong two"] if i % 3 == 1 else
                 ["wrong one", "wrong two", "right answer"],
      "answer": i % 3}}
    for i in range({n_instances})
]'''


def _project(pytester: pytest.Pytester, tests: str, n_instances: int = 30) -> None:
    body = (
        "import pytest\nfrom pytest_reliable import Dataset, Generation, MultipleChoice\n\n"
        f"DATA = Dataset.from_records({DATA.format(n_instances=n_instances)})\n\n" + tests
    )
    write_project(pytester, test_file=body.replace("{", "{{").replace("}", "}}"),
                  yaml_text=YAML, conftest=CONFTEST)


def test_a_prompt_insensitive_model_passes_a_fail_on_evidence_range_gate(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, '''
@pytest.mark.reliable(space="mcq", n=10, decide="fail-on-evidence", max_spread=0.1, min_worst=0.6)
def test_ilr(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="mcq", n=10, mode="fixed", decide="fail-on-evidence",
                      max_spread=0.1, min_worst=0.6)
def test_fixed(reliable):
    reliable.evaluate(DATA, MultipleChoice())
''')
    result, report = run_json(pytester)
    result.assert_outcomes(passed=2)
    for name, grouping in (("test_ilr", "dimensions"), ("test_fixed", "formats")):
        entry = by_test(report)[name]
        assert entry["decide"] == "fail-on-evidence"
        formats = entry["formats"]
        assert formats["grouping"] == grouping
        # Paired within instance: no spread at all, and nothing below the model's accuracy.
        assert formats["max"] - formats["min"] == pytest.approx(0.0, abs=1e-9)
        assert formats["min"] == pytest.approx(0.7)
        assert formats["noise_floor"] == 0.0
        for group in formats["per_variant"].values():
            assert group["low"] <= 0.7 <= group["high"]
        checks = {c["name"]: c for c in entry["thresholds"]}
        assert checks["max_spread"]["passed"] and checks["min_worst"]["passed"]
        assert "Holm" in checks["max_spread"]["method"]


def test_a_model_at_the_limit_does_not_pass_on_evidence(pytester: pytest.Pytester) -> None:
    _project(pytester, '''
@pytest.mark.reliable(space="mcq", n=5, min_score=0.7)
def test_on_evidence(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="mcq", n=5, min_score=0.7, decide="estimate")
def test_estimate(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="mcq", n=5, min_score=0.7, decide="fail-on-evidence")
def test_fail_on_evidence(reliable):
    reliable.evaluate(DATA, MultipleChoice())
''')
    result, report = run_json(pytester)
    result.assert_outcomes(passed=2, failed=1)
    tests = by_test(report)
    [check] = tests["test_on_evidence"]["thresholds"]
    assert check["observed"] == pytest.approx(0.7) and check["bound"] < 0.7
    assert check["decide"] == "pass-on-evidence" and not check["passed"]
    assert "clustered by instance" in check["method"]
    assert tests["test_estimate"]["verdict"] == "passed"
    assert tests["test_fail_on_evidence"]["verdict"] == "passed"
    result.stdout.fnmatch_lines([
        ("*min_score: observed 0.7000, required >= 0.7; lower bound 0.5* at 95% "
         "(pass-on-evidence*"),
    ])
    assert any("no error control" in note for note in tests["test_estimate"]["notes"])


@pytest.mark.parametrize("n", [2, 40])
def test_the_grouping_is_the_declared_one_whatever_n(pytester: pytest.Pytester, n: int) -> None:
    _project(pytester, '''
@pytest.mark.reliable(space="mcq")
def test_default(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="mcq", group_by=["wrapper"], order_group_by="permutations")
def test_listed(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="mcq", group_by="formats", min_cells=1000)
def test_formats_in_ilr(reliable):
    reliable.evaluate(DATA, MultipleChoice())
''', n_instances=10)
    result, report = run_json(pytester, f"--reliable-n={n}")
    result.assert_outcomes(passed=3)
    tests = by_test(report)
    assert tests["test_default"]["formats"]["grouping"] == "dimensions"
    assert set(tests["test_default"]["formats"]["per_variant"]) <= {
        f"{dim}={value}" for dim, values in tests["test_default"]["dimensions"].items()
        for value in values
    }
    assert tests["test_default"]["orders"]["grouping"] == "gold_position"
    listed = tests["test_listed"]
    assert listed["formats"]["grouping"] == "dimensions:wrapper"
    assert all(key.startswith("wrapper=") for key in listed["formats"]["per_variant"])
    assert listed["orders"]["grouping"] == "permutations"
    formats = tests["test_formats_in_ilr"]["formats"]
    assert formats["grouping"] == "formats"
    assert all(group["thin"] for group in formats["per_variant"].values())


def test_a_half_credit_grader_reports_half(pytester: pytest.Pytester) -> None:
    _project(pytester, '''
def half(answer, example):
    return 0.5


@pytest.mark.reliable(space="mcq", n=3)
def test_half(reliable):
    report = reliable.evaluate(
        [{"question": f"Question number {i}?", "reference": "x"} for i in range(8)],
        Generation(grader=half),
    )
    assert report.pass_at_1 == 0.5
''')
    result, report = run_json(pytester)
    result.assert_outcomes(passed=1)
    entry = by_test(report)["test_half"]
    canonical = entry["canonical"]
    assert canonical["score"] == 0.5 and entry["mean"] == 0.5 and entry["pass_at_1"] == 0.5
    assert canonical["wilson_low"] < 0.5 < canonical["wilson_high"]
    assert "clustered" in canonical["interval_method"]


def test_a_grader_out_of_range_is_a_clear_error(pytester: pytest.Pytester) -> None:
    _project(pytester, '''
def generous(answer, example):
    return 3.7


@pytest.mark.reliable(space="mcq", n=2)
def test_generous(reliable):
    reliable.evaluate(
        [{"question": f"Question number {i}?", "reference": "x"} for i in range(4)],
        Generation(grader=generous),
    )
''')
    result, report = run_json(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        ("*Generation(grader='generous'): the grader returned score 3.7 for the instance at records, record 1 *"
         "scores must be numbers in [[]0, 1]*"),
    ])
    assert "Traceback" not in result.stdout.str() and "pytest_reliable/" not in result.stdout.str()
    assert by_test(report)["test_generous"]["verdict"] == "error"


def test_an_unfinished_evaluation_reports_no_statistics(pytester: pytest.Pytester) -> None:
    _project(pytester, '''
@pytest.mark.reliable(space="mcq", n=3, min_score=0.1)
def test_cut_short(reliable):
    reliable.evaluate(DATA, MultipleChoice())
''', n_instances=5)
    result, report = run_json(pytester, "--reliable-budget=7calls", "--reliable-no-cache")
    result.assert_outcomes(failed=1)
    entry = by_test(report)["test_cut_short"]
    assert entry["verdict"] == "error"
    for field in ("mean", "std", "pass_at_1", "n_star"):
        assert entry[field] is None, field
    # Every field present, null (SPEC section 8): canonical.score reads null, not missing.
    assert set(entry["canonical"].values()) == {None} and "score" in entry["canonical"]
    for field in ("formats", "orders"):
        assert [entry[field][k] for k in ("min", "median", "max")] == [None, None, None], field
    assert entry["thresholds"][0]["observed"] is None
    row = next(line for line in result.stdout.lines if line.startswith("test_cut_short"))
    assert " - " in row


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "fragments", "workers"),
    [
        ("decide='on-evidence'", ["test_marked", "decide='on-evidence'", "pass-on-evidence"], []),
        ("decide='on-evidence'", ["test_marked", "decide='on-evidence'", "pass-on-evidence"],
         ["-n", "2"]),
        ("group_by='format'", ["test_marked", "group_by='format'", "'formats', 'dimensions'"], []),
        ("group_by=['wraper']", ["test_marked", "'wraper' is not a dimension", "wrapper"],
         ["-n", "2"]),
        ("order_group_by='orders'", ["test_marked", "order_group_by", "gold_position"], []),
    ],
)
def test_bad_decide_and_group_by_are_usage_errors(
    pytester: pytest.Pytester, args: str, fragments: list[str], workers: list[str]
) -> None:
    write_project(pytester, test_file=f'''
import pytest
from pytest_reliable import Dataset, MultipleChoice

@pytest.mark.reliable({args})
def test_marked(reliable):
    reliable.evaluate(Dataset.from_records({{dataset!r}}), MultipleChoice())
''')
    assert_usage_error(pytester.runpytest_subprocess(*workers), *fragments)


def test_bad_decide_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result = pytester.runpytest_subprocess("--reliable-decide=maybe")
    assert_usage_error(result, "--reliable-decide", "'maybe'", "fail-on-evidence")


def test_project_default_policy_from_the_ini(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    pytester.makeini("[pytest]\nreliable_decide = estimate\n")
    _, report = run_json(pytester)
    assert {entry["decide"] for entry in report["tests"]} == {"estimate"}
