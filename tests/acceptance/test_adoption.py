"""What a team meets when it adopts the plugin in CI (issue 15, items 5 and 8-12): other pytest
plugins (rerunfailures, timeout, xdist), pytest's conventions (--markers, native TOML, capture,
terminal width), huge model output, the extension hooks."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_reliable.contract.markers import (
    CHECKLIST_ARGUMENTS,
    CHECKLIST_THRESHOLDS,
    RELIABLE_ARGUMENTS,
)
from tests.acceptance.helpers import CONFTEST, by_test, run_json, write_project
from tests.acceptance.test_runs import code_space_test

# A model that is wrong on the first attempt of a test and right on every later one. Its id
# changes with the attempt, so the second attempt is not answered from the first one's cache.
FLAKY_CONFTEST = r'''
import pathlib
import re

import pytest

from pytest_reliable import text_model


def right(prompt: str) -> str:
    return re.search(r"^\W*(\w)\W+\s*right", prompt, re.M).group(1)


def wrong(prompt: str) -> str:
    return re.search(r"^\W*(\w)\W+\s*wrong", prompt, re.M).group(1)


@pytest.fixture
def reliable_model(request):
    counter = pathlib.Path(request.node.name + ".attempts")
    attempt = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(attempt))
    return text_model(wrong if attempt == 1 else right, id=f"flaky-attempt-{attempt}")
'''

GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=2, mode="fixed", min_score=0.9, decide="estimate")
def test_flaky(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.reliable(space="wrappers", n=2, mode="fixed", min_score=0.9, decide="estimate")
def test_steady(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_reruns_count_the_last_attempt_only(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_rerunfailures")
    write_project(pytester, test_file=GATE, conftest=FLAKY_CONFTEST)
    xml = pytester.path / "junit.xml"
    result, report = run_json(pytester, "--reruns=2", f"--junitxml={xml}")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("rerun"), outcomes.get("failed")) == (2, 2, None)
    assert [e["nodeid"].split("::")[-1] for e in report["tests"]] == ["test_flaky", "test_steady"]
    assert {e["verdict"] for e in report["tests"]} == {"passed"}
    summary = result.stdout.str().split("reliable summary")[-1]
    rows = [line for line in summary.splitlines() if line.startswith("test_flaky ")]
    assert len(rows) == 1, summary
    for case in ET.parse(xml).getroot().iter("testcase"):
        names = [p.get("name") for p in case.iter("property")]
        assert names.count("reliable_verdict") == 1, names


def test_a_timed_out_test_has_an_error_entry(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_timeout")
    write_project(pytester, conftest='''
import time

import pytest

from pytest_reliable import text_model


@pytest.fixture
def reliable_model():
    return text_model(lambda prompt: time.sleep(3) or "A", id="slow")
''')
    result, report = run_json(pytester, "--timeout=1", "--timeout-method=signal",
                              "-k", "test_passes")
    result.assert_outcomes(failed=1)
    entry = by_test(report)["test_passes"]
    assert entry["verdict"] == "error" and entry["kind"] == "reliable"
    assert "Timeout" in entry["message"]
    assert "test_passes: error" in result.stdout.str()


def test_markers_list_every_accepted_argument(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    lines = {line.split("(")[0].removeprefix("@pytest.mark."): line
             for line in result.stdout.lines if line.startswith("@pytest.mark.")}
    for argument in RELIABLE_ARGUMENTS:
        assert f"{argument}=" in lines["reliable"], argument
    for kind, arguments in CHECKLIST_ARGUMENTS.items():
        for argument in arguments | set(CHECKLIST_THRESHOLDS[kind]):
            assert f"{argument}=" in lines[kind], (kind, argument)


def test_the_cache_directory_is_kept_out_of_git(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    pytester.runpytest_subprocess("-k", "test_passes").assert_outcomes(passed=1)
    cache_dir = pytester.path / ".reliable"
    assert (cache_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith(
        "Signature: 8a477f597d28d172789f06886806bc55")


def test_a_reliable_model_fixture_is_the_model_everywhere(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result, report = run_json(pytester)
    header = next(line for line in result.stdout.lines if line.startswith("reliable: seed="))
    assert "SmolLM2" not in header and "reliable_model fixture of conftest.py" in header
    assert report["model"] and report["model"] == report["tests"][0]["model"]
    assert f"model `{report['model']}`" in summary.read_text()


HUGE = '''
import pytest
from pytest_reliable import text_model

@pytest.fixture
def reliable_model():
    return text_model(lambda prompt: "no idea " * 125_000, id="verbose")
'''


@pytest.mark.slow
def test_huge_answers_are_cut_in_every_report(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, conftest=HUGE)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    xml = pytester.path / "junit.xml"
    result, _ = run_json(pytester, f"--junitxml={xml}")
    result.assert_outcomes(failed=2)
    assert max(len(line) for line in result.stdout.lines) < 10_000
    assert "more characters cut]" in result.stdout.str()
    text = Path(pytester.path / "report.json").read_text()
    assert len(text) < 200_000 and "more characters cut]" in text
    assert summary.stat().st_size < 100_000 and xml.stat().st_size < 100_000
    _, whole = run_json(pytester, "--reliable-full-text", name="whole.json")
    answers = [e["worst_variant"]["answer"] for e in whole["tests"] if e["worst_variant"]]
    assert answers and all(len(answer) == 1_000_000 for answer in answers)


def test_the_summary_table_fits_a_narrow_terminal(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester)
    monkeypatch.setenv("COLUMNS", "80")
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    # The reliable section ends at pytest's next section ("short test summary info", whose lines
    # pytest does not cut to the width under CI).
    section = result.stdout.str().split("reliable summary")[-1].splitlines()[1:]
    table = list(itertools.takewhile(lambda line: not line.startswith("="), section))
    table = [line for line in table if line]
    assert table and max(len(line) for line in table) <= 80, table
    head = table[0]
    for kept in ("test", "mean", "canonical", "verdict"):
        assert kept in head, head
    assert "worst format" in head or "formats" in head
    assert any("test_fails_on_worst_format" in line or "test_fails" in line for line in table)


HOOKS = CONFTEST + '''

def pytest_reliable_report_entry(entry):
    entry["team"] = "search"


def pytest_reliable_table_columns(columns):
    columns.insert(0, ("owner", lambda entry: entry.get("team", "-")))
'''


@pytest.mark.slow
def test_hooks_add_a_json_field_and_a_table_column(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, conftest=HOOKS)
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the optional column
    result, report = run_json(pytester, "-n", "2")
    assert {entry["team"] for entry in report["tests"]} == {"search"}
    table = result.stdout.str().split("reliable summary")[-1].splitlines()
    header = next(line for line in table if line.startswith("test "))
    assert "owner" in header
    assert any("search" in line for line in table if "test_passes" in line)


def test_mft_compares_labels_as_the_task_accepts_them(pytester: pytest.Pytester) -> None:
    write_project(pytester, conftest='''
import pytest
from pytest_reliable import text_model

@pytest.fixture
def reliable_model():
    return text_model(lambda p: "positive" if "good" in p else "negative", id="always-right")
''', test_file='''
import pytest
from pytest_reliable import Classification

DATA = [{{"text": "a good film", "label": "Positive"}}, {{"text": "a bad film", "label": 1}},
        {{"text": "so good", "label": 0}}]

@pytest.mark.mft(min_pass=1.0)
def test_mft(reliable):
    report = reliable.mft(DATA, Classification(labels=["positive", "negative"]))
    assert report.rate == 1.0
''')
    result, report = run_json(pytester)
    result.assert_outcomes(passed=1)
    assert report["tests"][0]["rate"] == 1.0


def test_native_toml_numbers_are_accepted(pytester: pytest.Pytester) -> None:
    if pytest.version_tuple < (9, 2):
        pytest.skip("[tool.pytest] with typed ini values needs pytest >= 9.2")
    write_project(pytester)
    pytester.makepyprojecttoml("[tool.pytest]\nreliable_seed = 7\nreliable_concurrency = 2\n")
    result = pytester.runpytest_subprocess("-k", "test_passes")
    result.stdout.fnmatch_lines(["reliable: seed=7*"])
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_lock_update_under_xdist_covers_spaces_declared_in_code(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=code_space_test(["({})", "{}."]))
    pytester.runpytest_subprocess("-n", "2", "--reliable-lock-update").assert_outcomes(passed=1)
    assert "inline" in (pytester.path / "reliable.lock").read_text()
    pytester.runpytest_subprocess("-n", "2", "--reliable-lock").assert_outcomes(passed=1)
    write_project(pytester, test_file=code_space_test(["({})", "[{}]"]))
    result = pytester.runpytest_subprocess("-n", "2", "--reliable-lock")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "--reliable-lock: the declared spaces differ" in text and "inline" in text
    assert "marker arguments" not in text


def test_progress_is_shown_outside_the_captured_output(pytester: pytest.Pytester) -> None:
    # Output to a pipe gets a progress line every PROGRESS_INTERVAL_LOG seconds: 0 here.
    write_project(pytester, conftest=CONFTEST + '''
import pytest_reliable.plugin
pytest_reliable.plugin.PROGRESS_INTERVAL_LOG = 0.0
''')
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-k", "test_fails_on_worst")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "reliable test_gate.py:" in out and "/25 calls (" in out
    assert "Captured stdout" not in out


@pytest.mark.slow
def test_progress_under_xdist_comes_from_the_workers(pytester: pytest.Pytester) -> None:
    write_project(pytester, conftest=CONFTEST + '''
import pytest_reliable.plugin
pytest_reliable.plugin.PROGRESS_INTERVAL_LOG = 0.0
''')
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str() + result.stderr.str()
    assert "] reliable test_gate.py::" in out and "/25 calls (" in out
    assert "[gw0] reliable" in out or "[gw1] reliable" in out


def test_json_entry_count_is_one_per_test(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    _, report = run_json(pytester)
    assert len(report["tests"]) == 2
    json.dumps(report)
