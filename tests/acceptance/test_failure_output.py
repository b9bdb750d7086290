"""A new user gating their own app (issue 28 item 4 and its "Also", issue 32), driven as they
drive it: the failure shows a failure, an undeclared space says where it was looked for, a narrow
table keeps parametrized tests apart, a stored baseline is saved before it is compared with, and
the lock can be written without a model call."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.acceptance.helpers import CONFTEST, DATASET, by_test, run_json, write_project

# Right on the first question whatever the format; otherwise right only with "(A)" options.
FIRST_RIGHT_CONFTEST = CONFTEST.replace(
    '    right = re.search(r"^\\((\\w)\\) right", prompt, re.M)',
    '    right = re.search(r"^\\((\\w)\\) right", prompt, re.M) or (\n'
    '        "number 0?" in prompt and re.search(r"^\\W*(\\w)\\W+\\s*right", prompt, re.M))',
)

GATES = '''
import pytest

from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_worst=0.5)
def test_worst(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="wrappers", n=2, mode="fixed", min_score=0.5)
def test_unread(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''

UNREAD_CONFTEST = FIRST_RIGHT_CONFTEST + '''

@pytest.fixture
def reliable_model(request):
    if request.node.name == "test_unread":
        return text_model(lambda prompt: "Let me think about it.", id="thinker")
    return text_model(format_sensitive, id="scripted-format-sensitive")
'''


def test_the_failure_shows_a_prompt_the_model_got_wrong_and_unread_answers(
        pytester: pytest.Pytester) -> None:
    assert FIRST_RIGHT_CONFTEST != CONFTEST
    write_project(pytester, conftest=UNREAD_CONFTEST, test_file=GATES)
    result, report = run_json(pytester)
    result.assert_outcomes(failed=2)
    worst = by_test(report)["test_worst"]["worst_variant"]
    # The bad format's first cell is question 0, which the model gets right: not that one.
    assert worst["answer_score"] == 0.0 and worst["instance"] >= 1
    assert worst["record"] == f"records, record {worst['instance'] + 1}"
    result.stdout.fnmatch_lines([
        "*worst formats group*wrapper*",
        f"*an instance the model got wrong in this group: {worst['record']} (resampling * of 4)",
        "*its rendered prompt for one instance:*",
        f"*Question number {worst['instance']}?",
        "*the model answered: '?' (wrong)",
    ])
    total = 2 * len(DATASET) + len(DATASET)
    result.stdout.fnmatch_lines([
        (f"*{total} of {total} answers could not be read: check the task's answer format*"
        "'Let me think about it.'*"),
        "*min_score: observed 0.0000, required >= 0.5*",
    ])
    unread = by_test(report)["test_unread"]["message"]
    assert "worst formats group" not in unread


def test_an_undeclared_space_says_which_reliable_yaml_was_read(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    write_project(pytester)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "cache.sqlite").touch()
    # pytest reads the option's value as a path and moves the rootdir above the project.
    result = pytester.runpytest_subprocess("--reliable-cache", str(elsewhere / "cache.sqlite"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert f"but there is {pytester.path / 'reliable.yaml'}" in text
    assert f"--reliable-cache={elsewhere / 'cache.sqlite'}" in text
    assert "Traceback" not in text


def test_a_space_name_in_another_unicode_form_says_what_differs(
        pytester: pytest.Pytester) -> None:
    write_project(pytester, yaml_text="spaces:\n  cafe\u0301:\n    wrapper: [\"({})\", \"{}.\"]\n",
                  test_file='''
import pytest
from pytest_reliable import MultipleChoice

@pytest.mark.reliable(space="caf\\u00e9", n=2)
def test_accented(reliable):
    reliable.evaluate({dataset!r}, MultipleChoice())
''')
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "differs only in Unicode normalisation" in text
    assert "'caf\\xe9' vs 'cafe\\u0301'" in text


PARAMETRIZED = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.parametrize("release", ["candidate-alpha-2024-07-18-mcq",
                                     "candidate-beta-2024-07-18-mcq"])
@pytest.mark.reliable(space="wrappers", n=2, mode="fixed")
def test_answers_multiple_choice_questions_robustly(reliable, release):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_a_narrow_table_keeps_parametrized_tests_apart(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, test_file=PARAMETRIZED)
    monkeypatch.setenv("COLUMNS", "80")
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=2)
    section = result.stdout.str().split("reliable summary")[-1].splitlines()
    rows = list(itertools.takewhile(lambda line: line and not line.startswith(("!", "=")),
                                    section[3:]))  # after the rule, the header and the dashes
    assert len(rows) == 2 and all(len(line) <= 80 for line in rows), section
    names = [line.split("  ")[0] for line in rows]
    assert names[0] != names[1], names
    # Each shown name is its own nodeid cut: its visible pieces are in it, in order.
    for name, release in zip(names, ["alpha", "beta"]):
        nodeid = ("test_answers_multiple_choice_questions_robustly"
                  f"[candidate-{release}-2024-07-18-mcq]")
        pieces = [piece for piece in name.split("...") if piece]
        assert pieces and all(piece in nodeid for piece in pieces), (name, nodeid)


COMPARING = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", max_regression=0.1, decide="estimate")
def test_compares(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_a_first_run_saves_the_baseline_a_later_run_compares_with(
        pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=COMPARING)
    # No baseline exists yet: max_regression alone would be a usage error.
    assert pytester.runpytest_subprocess().ret == pytest.ExitCode.USAGE_ERROR
    saved = pytester.path / "baseline.json"
    result, report = run_json(pytester, f"--reliable-save-baseline={saved}")
    result.assert_outcomes(passed=1)
    entry = by_test(report)["test_compares"]
    assert entry["baseline"] is None
    assert [t["name"] for t in entry["thresholds"]] == []
    assert any("--reliable-save-baseline" in note for note in entry["notes"])
    assert json.loads(saved.read_text())["tests"] == report["tests"]
    result.stdout.fnmatch_lines([(f"reliable baseline: saved 1 reliable test to {saved}; "
                                 f"compare a later run with --reliable-baseline-report {saved}")])

    # A run that evaluates nothing keeps the saved baseline (it would pair with nothing).
    kept = saved.read_text()
    listed = pytester.runpytest_subprocess("--collect-only", f"--reliable-save-baseline={saved}")
    listed.stdout.fnmatch_lines(["reliable baseline: nothing saved: no reliable test ran*"])
    assert saved.read_text() == kept

    later, compared = run_json(pytester, f"--reliable-baseline-report={saved}", name="later.json")
    later.assert_outcomes(passed=1)
    baseline = by_test(compared)["test_compares"]["baseline"]
    assert baseline["source"] == "report" and baseline["difference"]["estimate"] == 0.0

    both = pytester.runpytest_subprocess(f"--reliable-save-baseline={saved}",
                                         f"--reliable-baseline-report={saved}")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    assert "give one of them" in both.stderr.str()


def test_a_baseline_fixture_before_the_stored_report_is_said(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=COMPARING)
    saved = pytester.path / "baseline.json"
    run_json(pytester, f"--reliable-save-baseline={saved}")[0].assert_outcomes(passed=1)
    pytester.makeconftest(CONFTEST + '''

@pytest.fixture
def reliable_baseline():
    return text_model(format_sensitive, id="production")
''')
    result, report = run_json(pytester, f"--reliable-baseline-report={saved}")
    result.assert_outcomes(passed=1, warnings=1)
    entry = by_test(report)["test_compares"]
    assert entry["baseline"]["model"] == "production"
    note = ("compared with the reliable_baseline fixture, not with --reliable-baseline-report "
            f"{saved}")
    assert any(note in n for n in entry["notes"])
    result.stdout.fnmatch_lines([(f"*BaselineReportUnused: 1 comparing test "
                                 f"(test_gate.py::test_compares) is {note}*")])


CODE_SPACE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice, Space

SPACE = Space.from_mapping("inline", dict(wrapper=["[{{}}]", "{{}}:"]))

@pytest.mark.reliable(space=SPACE, n=2)
def test_code_space(reliable):
    reliable.evaluate(Dataset.from_records({dataset!r}), MultipleChoice())
'''

NO_CALLS_CONFTEST = '''
import pytest
from pytest_reliable import text_model


def never(prompt: str) -> str:
    raise AssertionError("no model call while the lock is written")


@pytest.fixture
def reliable_model():
    return text_model(never, id="never")
'''


@pytest.mark.parametrize("how", ["--collect-only", "--reliable-plan"])
def test_the_lock_is_written_without_a_model_call(pytester: pytest.Pytester, how: str) -> None:
    write_project(pytester, test_file=CODE_SPACE, conftest=NO_CALLS_CONFTEST)
    result = pytester.runpytest_subprocess("--reliable-lock-update", how)
    assert result.ret == pytest.ExitCode.OK
    lock = json.loads((pytester.path / "reliable.lock").read_text())
    assert sorted(lock["spaces"]) == ["inline", "wrappers"]
    lock_file = pytester.path / "reliable.lock"
    result.stdout.fnmatch_lines([(f"reliable lock: wrote {lock_file} with 2 spaces: inline * (new),"
                                 " wrappers * (new); commit it")])
    assert "no model call while" not in result.stdout.str()
    checked = pytester.runpytest_subprocess("--reliable-lock", "--collect-only")
    assert checked.ret == pytest.ExitCode.OK
    again = pytester.runpytest_subprocess("--reliable-lock-update", how)
    again.stdout.fnmatch_lines([("reliable lock: wrote * inline * (unchanged), wrappers * "
                                "(unchanged); commit it")])
