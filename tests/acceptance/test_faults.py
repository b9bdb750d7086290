"""Faults a team meets in CI, driven as users do: a hung model, a failing cache store, a budget
under pytest-xdist, a bad cache path, SIGTERM, a key a server echoes, an async test."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time

import pytest

from tests.acceptance.helpers import CONFTEST, by_test, run_json, write_project

ONE_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r}[:1])

@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.4, decide="estimate")
def test_gate(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_a_sync_model_that_never_returns_times_out(pytester: pytest.Pytester) -> None:
    conftest = CONFTEST.replace(
        "return text_model(format_sensitive, id=\"scripted-format-sensitive\")",
        "import time\n    return text_model(lambda p: time.sleep(10**6), id=\"hung\")",
    )
    write_project(pytester, conftest=conftest, test_file=ONE_TEST)
    start = time.monotonic()
    result, report = run_json(pytester, "--reliable-timeout=1", "--reliable-max-retries=0",
                              "--reliable-no-cache")
    assert time.monotonic() - start < 60
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not evaluated: error: timed out*"])
    assert by_test(report)["test_gate"]["verdict"] == "error"


BIG_ANSWER_CONFTEST = CONFTEST.replace(
    "    return text_model(format_sensitive, id=\"scripted-format-sensitive\")",
    "    return text_model(lambda p: format_sensitive(p) + '\\n' + 'filler ' * 400, id='big')",
)


def _limit_file_size() -> None:
    limit = 96 * 1024  # the cache's WAL outgrows this after a few answers; the report does not
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_full_disk_loses_no_paid_answer_and_no_test(pytester: pytest.Pytester) -> None:
    write_project(pytester, conftest=BIG_ANSWER_CONFTEST)
    report_path = pytester.path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
         f"--reliable-report={report_path}"],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
        preexec_fn=_limit_file_size, check=False,
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    cache = pytester.path / ".reliable" / "cache.sqlite"
    assert f"the response cache {cache} could not store an answer" in output
    assert output.count("could not store an answer") <= 2  # the warning and its summary line
    report = json.loads(report_path.read_text())
    entries = by_test(report)
    assert set(entries) == {"test_passes", "test_fails_on_worst_format"}
    for entry in entries.values():
        assert entry["verdict"] in ("passed", "failed")
        assert entry["calls"]["made"] + entry["calls"]["cached"] == 4 * 5 + 5


@pytest.mark.slow
def test_a_lone_surrogate_answer_is_replayed_offline(pytester: pytest.Pytester) -> None:
    conftest = CONFTEST.replace(
        "    return text_model(format_sensitive, id=\"scripted-format-sensitive\")",
        "    return text_model(lambda p: format_sensitive(p) + '\\ud800', id='surrogate')",
    )
    write_project(pytester, conftest=conftest)
    first = pytester.runpytest_subprocess("-p", "no:randomly")
    first.assert_outcomes(failed=2)  # the answers do not parse; what matters is the replay
    again = pytester.runpytest_subprocess("-p", "no:randomly", "--reliable-record=none")
    again.assert_outcomes(failed=2)
    assert "CacheMissError" not in again.stdout.str()
    assert "could not store" not in first.stdout.str() + first.stderr.str()


@pytest.mark.parametrize("workers", [pytest.param([], id="one process"),
                                     pytest.param(["-n", "2"], id="xdist -n 2",
                                                  marks=pytest.mark.slow)])
def test_the_budget_is_for_the_whole_run(pytester: pytest.Pytester, workers: list[str]) -> None:
    write_project(pytester)
    result, report = run_json(pytester, "--reliable-budget=7calls", "--reliable-no-cache",
                              *workers)
    made = sum(entry["calls"]["made"] for entry in report["tests"])
    assert made == 7
    spent = "*--reliable-budget 7calls is spent for the whole run: * calls of this evaluation"
    result.stdout.fnmatch_lines([spent + " were not started*"])


@pytest.mark.parametrize("kind", ["directory", "garbage", "foreign"])
def test_a_bad_cache_path_is_a_usage_error(pytester: pytest.Pytester, kind: str) -> None:
    import sqlite3

    write_project(pytester)
    path = pytester.path / "odd"
    if kind == "directory":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(b"\x00garbage" * 512)
    else:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE songs (title TEXT)")
        db.close()
    result = pytester.runpytest_subprocess(f"--reliable-cache={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--reliable-cache: response cache {path}*"])
    assert "Traceback" not in result.stderr.str()


SLOW_CONFTEST = CONFTEST.replace(
    "    return text_model(format_sensitive, id=\"scripted-format-sensitive\")",
    "    import time\n"
    "    print('started', flush=True)\n"
    "    return text_model(lambda p: time.sleep(0.5) or format_sensitive(p), id='slow')",
)


def test_sigterm_stops_the_run_like_ctrl_c(pytester: pytest.Pytester) -> None:
    write_project(pytester, conftest=SLOW_CONFTEST)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-s", "-p", "no:randomly", "--reliable-no-cache"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "started" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output and "signal SIGTERM" in output


def test_a_key_echoed_by_the_server_reaches_no_artefact(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_reliable.testing import Fault, ScriptedServer

    key = "sk-live-ECHOED-4d3c2b1a0f"
    write_project(pytester, conftest="")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    faults = ["403", "500"]

    def echo(n: int, body: dict) -> Fault:
        return Fault(faults[n % 2], echo_key=True)

    with ScriptedServer(faults=echo) as server:
        base_url = server.base_url.replace("http://", f"http://user:{key}@") + f"?api-key={key}"
        xml = pytester.path / "junit.xml"
        result, report = run_json(
            pytester, "--reliable-model=scripted-llm", f"--reliable-base-url={base_url}",
            "--reliable-max-retries=1", f"--junitxml={xml}", "--log-level=DEBUG",
            "-o", "log_cli=true", "-o", "log_cli_level=DEBUG",
        )
    result.assert_outcomes(failed=2)
    output = result.stdout.str() + result.stderr.str()
    assert "scripted 403" in output and "***" in output
    artefacts = {"output": output, "report": json.dumps(report), "junit": xml.read_text(),
                 "summary": summary.read_text()}
    artefacts.update({p.name: p.read_bytes().decode("utf-8", "replace")
                      for p in (pytester.path / ".reliable").glob("*")})
    for name, text in artefacts.items():
        assert key not in text, f"the key leaked into {name}"


ASYNC_TEST = '''
import asyncio

import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})
LOOPS = []


@pytest.fixture
def reliable_model():
    from conftest import format_sensitive

    async def on_the_test_loop(prompt):
        LOOPS.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return format_sensitive(prompt)

    return on_the_test_loop


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.4, decide="estimate")
def test_async_gate(reliable):
    async def body():
        report = await reliable.aevaluate(DATA, MultipleChoice())
        return asyncio.get_running_loop(), report

    loop, report = asyncio.run(body())
    assert report.mean == pytest.approx(0.5)
    assert LOOPS and set(LOOPS) == {{loop}}
'''


def test_aevaluate_runs_the_calls_on_the_test_loop(pytester: pytest.Pytester) -> None:
    write_project(pytester, test_file=ASYNC_TEST)
    result, report = run_json(pytester, "--reliable-no-cache")
    result.assert_outcomes(passed=1)
    assert by_test(report)["test_async_gate"]["calls"]["made"] == 10
