"""What a user types to run gates: xdist, --reliable-n auto, offline replay, the lock."""

from __future__ import annotations

import pytest

from pytest_reliable.schema.entries import independent_of_run_order
from tests.acceptance.helpers import by_test, run_json, write_project

AUTO_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", eps=0.2, delta=0.2)
def test_auto(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def _without_calls(report: dict) -> list[dict]:
    """The entries without what depends on which test cached an answer first (SPEC 10)."""
    return [independent_of_run_order(entry) for entry in report["tests"]]


@pytest.mark.slow
def test_xdist_gives_the_same_numbers_as_one_process(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    single, report_single = run_json(pytester, "--reliable-no-cache", name="one.json")
    multi, report_multi = run_json(pytester, "-n", "2", "--reliable-no-cache", name="two.json")
    single.assert_outcomes(passed=1, failed=1)
    multi.assert_outcomes(passed=1, failed=1)
    assert _without_calls(report_single) == _without_calls(report_multi)
    assert report_single["seed"] == report_multi["seed"]
    multi.stdout.fnmatch_lines(["*reliable summary*"])
    assert multi.stdout.str().count("test_fails_on_worst_format") >= 2  # failure + table row


@pytest.mark.slow
def test_auto_n_pilots_once_then_reuses_the_store(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=AUTO_TEST)
    _, report_first = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12",
                                   name="first.json")
    entry = by_test(report_first)["test_auto"]
    assert entry["n_star_source"] == "pilot" and entry["pilot_n"] == 12
    n_star = entry["n_star"]
    assert 1 <= n_star <= 12 and entry["n_resamplings"] == n_star
    # The pilot's calls count: 5 instances x (12 pilot resamplings + 1 canonical sample).
    assert entry["calls"]["made"] + entry["calls"]["cached"] == 5 * (12 + 1)

    # Second run: n* from the store, no pilot; --reliable-no-cache does not bypass the store.
    _, report_second = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12",
                                     "--reliable-no-cache", name="second.json")
    again = by_test(report_second)["test_auto"]
    # A stored n* keeps its pilot's size (SPEC 7), and with it n_star_reliable: false under 30.
    assert again["n_star_source"] == "store" and again["pilot_n"] == 12
    assert again["n_star_reliable"] is entry["n_star_reliable"] is False
    assert again["n_star"] == n_star and again["n_resamplings"] == n_star
    assert again["calls"]["made"] + again["calls"]["cached"] == 5 * (n_star + 1)
    assert again["mean"] == pytest.approx(entry["mean"])


@pytest.mark.slow
def test_offline_replay_in_record_mode_none(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    record, _ = run_json(pytester, name="record.json")
    record.assert_outcomes(passed=1, failed=1)
    replay, report = run_json(pytester, "--reliable-record=none", name="replay.json")
    replay.assert_outcomes(passed=1, failed=1)
    assert all(entry["calls"]["made"] == 0 for entry in report["tests"])
    assert all(entry["calls"]["cached"] == 25 for entry in report["tests"])

    (pytester.path / ".reliable" / "cache.sqlite").unlink()
    missing = pytester.runpytest_subprocess("--reliable-record=none")
    missing.assert_outcomes(failed=2)
    missing.stdout.fnmatch_lines(["*--reliable-record*"])
    assert not (pytester.path / ".reliable" / "cache.sqlite").exists()


@pytest.mark.slow
def test_lock_catches_a_changed_space(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    created = pytester.runpytest_subprocess("--reliable-lock-update")
    assert (pytester.path / "reliable.lock").exists()
    created.assert_outcomes(passed=1, failed=1)
    pytester.runpytest_subprocess("--reliable-lock").assert_outcomes(passed=1, failed=1)

    pytester.makefile(".yaml", reliable='spaces:\n  wrappers:\n    wrapper: ["({})", "{}.", "[{}]"]\n')
    result = pytester.runpytest_subprocess("--reliable-lock")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "wrappers" in text and "wrapper" in text and "--reliable-lock-update" in text
    assert "Traceback" not in text


CODE_SPACE_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice, Space

SPACE = Space.from_mapping("inline", dict(wrapper={wrappers}))

@pytest.mark.reliable(space=SPACE, n=2)
def test_code_space(reliable):
    reliable.evaluate(Dataset.from_records({{dataset!r}}), MultipleChoice())
'''


def code_space_test(wrappers: list[str]) -> str:
    # The file is .format()ed twice (here and in write_project): escape the wrappers' braces.
    return CODE_SPACE_TEST.format(wrappers=repr(wrappers).replace("{", "{{").replace("}", "}}"))


@pytest.mark.slow
def test_lock_covers_spaces_declared_in_code(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=code_space_test(["({})", "{}."]))
    pytester.runpytest_subprocess("--reliable-lock-update").assert_outcomes(passed=1)
    assert "inline" in (pytester.path / "reliable.lock").read_text()
    pytester.runpytest_subprocess("--reliable-lock").assert_outcomes(passed=1)

    write_project(pytester, test_file=code_space_test(["({})", "[{}]"]))
    result = pytester.runpytest_subprocess("--reliable-lock")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "inline" in result.stdout.str() + result.stderr.str()
