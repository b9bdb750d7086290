"""A user's gate end to end: markers, thresholds, the failure message, the JSON report, JUnit."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import by_test, run_json, write_project


def test_verdicts_and_numbers_are_the_ones_known_in_advance(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result, report = run_json(pytester)
    result.assert_outcomes(passed=1, failed=1)
    tests = by_test(report)
    passed, failed = tests["test_passes"], tests["test_fails_on_worst_format"]
    assert passed["verdict"] == "passed" and failed["verdict"] == "failed"
    for entry in (passed, failed):
        # Fixed mode over a 2-variant space enumerates it: each wrapper twice in 4 resamplings.
        assert entry["n_resamplings"] == 4 and entry["mode"] == "fixed"
        assert entry["mean"] == pytest.approx(0.5)
        assert entry["std"] == pytest.approx(0.5)
        assert entry["formats"]["grouping"] == "formats"
        assert (entry["formats"]["min"], entry["formats"]["max"]) == (0.0, 1.0)
        assert entry["dimensions"]["wrapper"] == {"({})": 1.0, "{}.": 0.0}
        # The canonical variant is the first value of each dimension: "({})", which is right.
        assert entry["canonical"]["score"] == 1.0
        assert entry["canonical"]["wilson_low"] == pytest.approx(0.5655, abs=1e-4)
        assert entry["pass_at_1"] == 1.0 and entry["k"] == 1
        assert entry["calls"]["made"] + entry["calls"]["cached"] == 5 * (4 + 1)
        assert entry["model"] == "scripted-format-sensitive"
    [check] = failed["thresholds"]
    assert {key: check[key] for key in ("name", "limit", "observed", "bound", "decide", "passed")} \
        == {"name": "min_worst", "limit": 0.5, "observed": 0.0, "bound": 0.0,
            "decide": "pass-on-evidence", "passed": False}
    assert "paired within instance" in check["method"]
    assert failed["decide"] == "pass-on-evidence"
    assert failed["worst_variant"]["score"] == 0.0
    assert "A. " in failed["worst_variant"]["prompt"] or "B. " in failed["worst_variant"]["prompt"]


def test_failure_message_names_threshold_grouping_and_worst_prompt(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.stdout.fnmatch_lines(
        [
            ("*min_worst: observed 0.0000, required >= 0.5; lower bound 0.0000 at 95% "
             "(pass-on-evidence*(grouping: formats)*"),
            "*worst formats group*wrapper*",
            "*its rendered prompt for one instance:*",
        ]
    )
    # The product is the message, not the plugin's traceback.
    assert "pytest_reliable/" not in result.stdout.str()


def test_summary_table_lists_every_reliable_test(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.stdout.fnmatch_lines(["*reliable summary*"])
    out = result.stdout.str()
    assert "test_passes" in out and "test_fails_on_worst_format" in out


def test_junit_properties(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    xml = pytester.path / "junit.xml"
    pytester.runpytest_subprocess(f"--junitxml={xml}")
    text = xml.read_text()
    assert 'name="reliable_mean" value="0.5000"' in text


@pytest.mark.slow
def test_seed_is_in_header_and_json(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result, report = run_json(pytester, "--reliable-seed=7")
    result.stdout.fnmatch_lines(["reliable: seed=7*"])
    assert report["seed"] == 7 and report["schema_version"] >= 1
    _, report_last = run_json(pytester, "--reliable-seed=last", name="again.json")
    assert report_last["seed"] == 7


def test_report_can_be_asserted_on_before_the_gate(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file='''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_worst=0.9)
def test_own_assertion_first(reliable):
    report = reliable.evaluate(DATA, MultipleChoice())
    assert report.formats["max"] == 2.0, "the user's own assertion"
''')
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the user's own assertion*"])


def _format_sensitive_rule(messages: object, params: dict) -> str:
    """The scripted server's rule: the same format sensitivity as the conftest's callable."""
    import re

    prompt = messages if isinstance(messages, str) else messages[-1]["content"]  # type: ignore
    right = re.search(r"^\((\w)\) right", prompt, re.MULTILINE)
    if right:
        return right.group(1)
    wrong = re.search(r"^\W*(\w)\W+\s*wrong", prompt, re.MULTILINE)
    return wrong.group(1) if wrong else "no idea"


def test_openai_compatible_server_through_the_options(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_reliable.testing import ScriptedServer

    write_project(pytester, conftest="")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with ScriptedServer(_format_sensitive_rule) as server:
        result, report = run_json(pytester, "--reliable-model=scripted-llm",
                                  f"--reliable-base-url={server.base_url}")
        distinct_prompts = 2 * 5  # two wrappers x five questions; repeats are replayed
        assert server.completed == distinct_prompts
    result.assert_outcomes(passed=1, failed=1)
    entry = by_test(report)["test_passes"]
    assert entry["model"] == "openai:scripted-llm@127.0.0.1"
    assert entry["mean"] == pytest.approx(0.5) and entry["canonical"]["score"] == 1.0
    cache_bytes = (pytester.path / ".reliable" / "cache.sqlite").read_bytes()
    assert b"sk-test-not-a-real-key" not in cache_bytes


def test_github_step_summary(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester)
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest_subprocess()
    text = summary.read_text()
    assert "| test_passes |" in text and "| test_fails_on_worst_format |" in text
    assert "### Failures" in text
