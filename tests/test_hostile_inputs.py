"""Hostile input, one row each: the run stops with a usage error (exit code 4), or the test (its
module, for data loaded at import) fails with a message naming the culprit; never a traceback
from inside the plugin, never an INTERNALERROR, and the model is never called for input that
cannot be right (issue 15.7)."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

# In-process runs import numpy and scipy, which cannot be loaded twice: loaded once here, pytester's
# module snapshot keeps them between runs (the file also passes on its own).
import pytest_reliable.run.session  # noqa: F401
from tests.acceptance.helpers import DATASET, RELIABLE_YAML

# The model leaves a file behind when it is called: input this bad must never reach it.
CONFTEST = r'''
import pathlib

import pytest

from pytest_reliable import text_model


def answer(prompt: str) -> str:
    pathlib.Path("MODEL_CALLED").write_text("yes")
    return "A"


@pytest.fixture
def reliable_model():
    return text_model(answer, id="hostile-inputs")
'''

EVALUATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

@pytest.mark.reliable(space="wrappers", n=2, mode="fixed")
def test_gate(reliable):
    reliable.evaluate(Dataset.from_records({dataset!r}), MultipleChoice())
'''

FROM_FILE = '''
import pytest
from pytest_reliable import Classification, Dataset, MultipleChoice

@pytest.mark.reliable(n=2)
def test_gate(reliable):
    reliable.evaluate({load}, MultipleChoice())
'''

BOMB = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    + ["spaces: {}"]
)

LATIN1 = "spaces:\n  wrappers:\n    wrapper: ['\xe9{}', '({})']\n".encode("latin-1")


@dataclass
class Hostile:
    """One hostile input: the files of the project, the command line, the environment."""

    name: str
    expect: str  # "usage" (exit code 4), "failed" (the test fails), "collect" (collection error)
    fragments: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)
    test: str = EVALUATE


HOSTILE = [
    Hostile("corrupt lock", "usage", ("--reliable-lock", "reliable.lock", "--reliable-lock-update"),
            {"reliable.lock": "{not json"}, ("--reliable-lock",)),
    Hostile("lock of the wrong shape", "usage", ("reliable.lock",),
            {"reliable.lock": json.dumps({"version": 1, "spaces": {
                "wrappers": {"hash": "0", "declaration": "oops"}}})}, ("--reliable-lock",)),
    Hostile("non-UTF-8 reliable.yaml", "usage", ("reliable.yaml", "UTF-8"),
            {"reliable.yaml": LATIN1}),
    Hostile("YAML alias bomb", "usage", ("reliable.yaml", "alias"), {"reliable.yaml": BOMB}),
    Hostile("duplicate key in reliable.yaml", "usage", ("reliable.yaml", "line 4",
                                                          "duplicate key", "wrapper"),
            {"reliable.yaml": "spaces:\n  wrappers:\n    wrapper: ['({})']\n"
                              "    wrapper: ['{}.']\n"}),
    Hostile("400-digit temperature", "usage", ("reliable.yaml", "temperature"),
            {"reliable.yaml": "spaces:\n  wrappers:\n    wrapper: ['({})']\n"
                              f"    temperature: [1{'0' * 400}]\n"}),
    Hostile("timeout nan", "usage", ("--reliable-timeout", "nan"), args=("--reliable-timeout=nan",)),
    Hostile("timeout nan in the environment", "usage", ("RELIABLE_TIMEOUT", "nan"),
            env={"RELIABLE_TIMEOUT": "nan"}),
    Hostile("timeout nan in the ini file", "usage", ("reliable_timeout", "nan"),
            {"pytest.ini": "[pytest]\nreliable_timeout = nan\n"}),
    Hostile("concurrency zero in the ini file", "usage", ("reliable_concurrency", ">= 1"),
            {"pytest.ini": "[pytest]\nreliable_concurrency = 0\n"}),
    Hostile("report under a file", "usage", ("--reliable-report", "conftest.py"),
            args=("--reliable-report=conftest.py/out.json",)),
    Hostile("missing config file", "usage", ("--reliable-config", "nope.yaml"),
            args=("--reliable-config=nope.yaml",)),
    Hostile("base URL that is no URL", "usage", ("--reliable-base-url", "not a url"),
            args=("--reliable-base-url=not a url",)),
    Hostile("remote model without a key", "usage", ("OPENAI_API_KEY", "api.example.com"),
            args=("--reliable-model=gpt-x", "--reliable-base-url=https://api.example.com/v1"),
            env={"OPENAI_API_KEY": None}),
    Hostile("record mode in the environment", "usage", ("RELIABLE_RECORD", "sometimes"),
            env={"RELIABLE_RECORD": "sometimes"}),
    Hostile("null question", "failed", ("record 1", "'question'", "null"),
            test=EVALUATE.replace("{dataset!r}", repr(
                [{"question": None, "choices": ["a", "b"], "answer": 0}]))),
    Hostile("non-UTF-8 JSONL", "failed", ("data.jsonl", "UTF-8"),
            {"data.jsonl": '{"question": "caf\xe9?", "choices": ["a", "b"], "answer": 0}\n'
                           .encode("latin-1")},
            test=FROM_FILE.replace("{load}", 'Dataset.from_file("data.jsonl")')),
    Hostile("non-UTF-8 CSV", "failed", ("data.csv", "UTF-8"),
            {"data.csv": 'question,choices,answer\ncaf\xe9,"[""a"", ""b""]",0\n'.encode("latin-1")},
            test=FROM_FILE.replace("{load}", 'Dataset.from_file("data.csv")')),
    Hostile("non-UTF-8 BBH file", "failed", ("task.json", "UTF-8"),
            {"task.json": '{"examples": [{"input": "caf\xe9", "target": "(A)"}]}'.encode("latin-1")},
            test=FROM_FILE.replace("{load}", 'Dataset.from_bbh("task.json")')),
    Hostile("non-UTF-8 JSONL loaded at import", "collect", ("data.jsonl", "UTF-8"),
            {"data.jsonl": b'{"question": "caf\xe9?", "choices": ["a", "b"], "answer": 0}\n'},
            test='from pytest_reliable import Dataset\nDATA = Dataset.from_file("data.jsonl")\n'
                 "def test_x():\n    pass\n"),
    Hostile("expect=increase on labels", "failed", ("expect='increase'", "Classification",
                                                      "labels"),
            test='''
import pytest
from pytest_reliable import Classification

DATA = [{"text": "good film", "label": "positive"}, {"text": "bad film", "label": "negative"}]

@pytest.mark.directional(perturb=["negation"], expect="increase")
def test_dir(reliable):
    reliable.directional(DATA, Classification(labels=["positive", "negative"]))
'''),
]


def assert_clear(result: pytest.RunResult, case: Hostile) -> None:
    text = result.stdout.str() + result.stderr.str()
    if case.expect == "usage":
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    elif case.expect == "collect":
        assert result.ret == pytest.ExitCode.INTERRUPTED, text
        result.assert_outcomes(errors=1)
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED, text
        result.assert_outcomes(failed=1)
    for fragment in case.fragments:
        assert fragment in text, (fragment, text)
    for leak in ("INTERNALERROR", "Traceback", "pytest_reliable/", "pytest_reliable\\"):
        assert leak not in text, (leak, text)


@pytest.mark.parametrize("case", HOSTILE, ids=[case.name for case in HOSTILE])
def test_hostile_input(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                       case: Hostile) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    for name, content in case.files.items():
        path = pytester.path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    pytester.makepyfile(test_hostile=case.test.replace("{dataset!r}", repr(DATASET)))
    for key, value in case.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    started = time.monotonic()
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *case.args)
    assert time.monotonic() - started < 60, "hostile input must fail fast"
    assert_clear(result, case)
    assert not (pytester.path / "MODEL_CALLED").exists(), "the model was called"


# == The store: issue 20 items 7, 9, 14 and 20 (the cache, the budget ledger, the n* store) =====
# Each drives pytest as a user does; a locked file names the process holding it and never advises
# deleting the response cache; an n* store that cannot be read or written never costs a verdict;
# the budget counts every attempt sent.
import os  # noqa: E402
import signal  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

LEAKS = ("INTERNALERROR", "Traceback", "pytest_reliable/", "pytest_reliable\\")


def assert_no_leak(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, (leak, text)


HOLD_LOCK = r'''
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode=EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(120)
'''


@contextlib.contextmanager
def locked_by_another_process(path: Path) -> Iterator[subprocess.Popen[str]]:
    """``path`` (an sqlite file) locked by a process that holds the lock until it is killed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not sqlite at all " * 100)


def _directory(path: Path) -> None:
    path.mkdir()


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE songs (title TEXT)")
    db.close()


@pytest.mark.parametrize("make,fragments", [
    (_garbage, ("not an sqlite database", "remove it (pytest-reliable makes it again)")),
    (_directory, ("is a directory", "move the directory away")),
    (_foreign, ("something else (tables: songs)", "no answers")),
], ids=["garbage", "directory", "foreign table"])
def test_a_budget_ledger_that_cannot_serve_is_a_usage_error_at_start(
    pytester: pytest.Pytester, make: Callable[[Path], None], fragments: tuple[str, ...]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=EVALUATE.replace("{dataset!r}", repr(DATASET)))
    (pytester.path / ".reliable").mkdir()
    ledger = pytester.path / ".reliable" / "budget.sqlite"
    make(ledger)
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-budget=10calls")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert str(ledger) in text and "budget ledger" in text, text
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert "--reliable-cache in another directory" in text
    assert_no_leak(text)
    assert not (pytester.path / "MODEL_CALLED").exists()


@pytest.mark.parametrize("name,option", [
    ("budget.sqlite", "--reliable-budget=10calls"),
    ("cache.sqlite", "--reliable-record=new"),
])
def test_a_file_locked_by_another_process_names_it_and_says_wait(
    pytester: pytest.Pytester, name: str, option: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=EVALUATE.replace("{dataset!r}", repr(DATASET)))
    pytester.runpytest("-p", "no:cacheprovider", "--reliable-budget=100calls")  # makes both files
    (pytester.path / "MODEL_CALLED").unlink()
    path = pytester.path / ".reliable" / name
    answers = path.with_name("cache.sqlite").read_bytes()
    with locked_by_another_process(path) as holder:
        started = time.monotonic()
        result = pytester.runpytest("-p", "no:cacheprovider", option)
        took = time.monotonic() - started
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert took < 30, "a lock held by another process must be said at start, not after minutes"
    assert str(path) in text and "locked by another process" in text and "wait" in text, text
    if Path("/proc/locks").exists():
        assert f"pid {holder.pid}" in text, text
    assert "delete" not in text.lower(), text
    assert_no_leak(text)
    assert not (pytester.path / "MODEL_CALLED").exists()
    assert path.with_name("cache.sqlite").read_bytes() == answers  # the paid answers are intact


AUTO_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

@pytest.mark.reliable(space="wrappers", mode="fixed")
def test_gate(reliable):
    reliable.evaluate(Dataset.from_records({dataset!r}), MultipleChoice())
'''
AUTO = ("-p", "no:cacheprovider", "-W", "always", "--reliable-n=auto", "--reliable-pilot-n=4",
        "--reliable-report=report.json")


def _auto_run(pytester: pytest.Pytester) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(*AUTO)
    report = json.loads((pytester.path / "report.json").read_text())
    return result, report["tests"][0]


def _auto_project(pytester: pytest.Pytester) -> Path:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=AUTO_TEST.replace("{dataset!r}", repr(DATASET)))
    result, entry = _auto_run(pytester)
    result.assert_outcomes(passed=1)
    assert _n_star_source(entry) == "pilot"
    return pytester.path / ".reliable" / "n_star"


def _n_star_source(entry: dict[str, Any]) -> Any:
    return entry.get("n_star_source")


def test_an_n_star_entry_that_is_not_utf8_warns_and_runs_the_pilot_again(
    pytester: pytest.Pytester,
) -> None:
    store = _auto_project(pytester)
    (entry_file,) = store.glob("*.json")
    entry_file.write_bytes(b'{"key": "caf\xe9", "n_star": \xff\xfe}')
    result, entry = _auto_run(pytester)
    text = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    assert "not a valid entry" in text and "the pilot runs again" in text, text
    assert _n_star_source(entry) == "pilot"
    assert_no_leak(text)
    assert json.loads(entry_file.read_text(encoding="utf-8"))["n_star"] >= 1  # rewritten


@pytest.mark.parametrize("break_store", ["n_star is a file", "entry cannot be written"])
def test_an_n_star_store_that_cannot_be_written_keeps_the_verdict(
    pytester: pytest.Pytester, break_store: str
) -> None:
    store = _auto_project(pytester)
    (entry_file,) = store.glob("*.json")
    if break_store == "n_star is a file":
        entry_file.unlink()
        store.rmdir()
        store.write_text("not a directory")
    else:  # the entry's own path is a directory: nothing can be written there, even as root
        entry_file.unlink()
        entry_file.mkdir()
    result, entry = _auto_run(pytester)
    text = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    assert entry["verdict"] == "passed"
    assert _n_star_source(entry) == "pilot"
    assert "could not be written" in text and "this run gates on the n* =" in text, text
    assert str(store) in text
    assert_no_leak(text)


SLOW_EVERY_OTHER = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", n=6, mode="fixed")
def test_one(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="wrappers", n=6, mode="fixed", temperature=0.7)
def test_two(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


# Seen once in a full run on a loaded machine: an xdist worker whose abandoned calls were still
# in flight at its exit was interrupted by execnet, and openai's client finalizers printed
# tracebacks. The run's end now waits for, cancels and closes what runs on its loop
# (`runner.stop_call_loop`, tested in test_runner.py); the reruns stay as a guard for the 0.3 s
# timeouts this test runs on, which a loaded machine can stretch.
@pytest.mark.flaky(reruns=2)
def test_the_budget_counts_every_attempt_sent_also_those_abandoned_at_the_timeout(
    pytester: pytest.Pytester,
) -> None:
    from pytest_reliable.testing import Fault, ScriptedServer

    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_budget=SLOW_EVERY_OTHER.replace("{dataset!r}", repr(DATASET)))

    def every_other_is_slow(n: int, body: dict[str, Any]) -> Fault | None:
        return Fault("slow", delay=1.0) if n % 2 else None  # completed (and billed) after 1 s

    with ScriptedServer(lambda messages, params: "A", faults=every_other_is_slow) as server:
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-n", "2", "--reliable-model=scripted",
            f"--reliable-base-url={server.base_url}", "--reliable-timeout=0.3",
            "--reliable-budget=12calls", "--reliable-max-retries=3")
        time.sleep(1.2)  # the last abandoned attempts complete
        sent = server.requests
    text = result.stdout.str() + result.stderr.str()
    assert 0 < sent <= 12, (sent, text)
    assert "--reliable-budget 12calls is spent for the whole run" in text, text
    assert_no_leak(text)


# == Output paths: issue 20 items 1 and 2 ========================================================
# An output never replaces a device, a directory or a link, and never lands on another output, an
# input or a file of the plugin's: the run stops at start with a usage error naming both.
def _gate_project(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=EVALUATE.replace("{dataset!r}", repr(DATASET)))


def _usage_error(result: pytest.RunResult, *fragments: str) -> str:
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert_no_leak(text)
    return text


def test_a_report_over_the_cache_is_refused_and_the_paid_answers_stay(
    pytester: pytest.Pytester,
) -> None:
    _gate_project(pytester)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    cache = pytester.path / ".reliable" / "cache.sqlite"
    answers = cache.read_bytes()
    (pytester.path / "MODEL_CALLED").unlink()
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-record=none",
                                "--reliable-report=.reliable/cache.sqlite")
    _usage_error(result, "--reliable-report=", "--reliable-cache", "paid answers")
    assert cache.read_bytes() == answers
    assert not (pytester.path / "MODEL_CALLED").exists()


@pytest.mark.parametrize(("args", "fragments"), [
    (("--reliable-report=out.json", "--reliable-html=out.json"),
     ("--reliable-report=", "--reliable-html=", "same file")),
    (("--reliable-report=out.xml", "--junitxml=out.xml"),
     ("--reliable-report=", "--junitxml=", "same file")),
    (("--reliable-html=sub/../page.html", "--junitxml=page.html"),
     ("--reliable-html=", "--junitxml=", "same file")),
    (("--reliable-baseline-report=base.json", "--reliable-report=base.json"),
     ("--reliable-report=", "--reliable-baseline-report")),
    (("--reliable-report=reliable.yaml",), ("--reliable-report=", "--reliable-config")),
    (("--reliable-html=reliable.lock",), ("--reliable-html=", "reliable.lock")),
    (("--reliable-report=.reliable/budget.sqlite",), ("--reliable-report=", "budget ledger")),
    (("--reliable-html=.reliable/n_star/page.html",), ("--reliable-html=", "n* store")),
    (("--reliable-cache=answers.db", "--reliable-report=answers.db-wal"),
     ("--reliable-report=", "--reliable-cache")),
], ids=["report=html", "report=junitxml", "html=junitxml via ..", "report=baseline report",
        "report=reliable.yaml", "html=reliable.lock", "report=budget ledger",
        "html in the n* store", "report=cache's WAL"])
def test_outputs_over_each_other_or_the_plugins_files_are_usage_errors(
    pytester: pytest.Pytester, args: tuple[str, ...], fragments: tuple[str, ...],
) -> None:
    _gate_project(pytester)
    (pytester.path / "base.json").write_text("{}")
    before = {p: p.read_bytes() for p in pytester.path.rglob("*") if p.is_file()}
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    _usage_error(result, *fragments)
    assert not (pytester.path / "MODEL_CALLED").exists()
    assert {p: p.read_bytes() for p in before} == before  # nothing was overwritten


def test_outputs_over_the_step_summary_are_usage_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _gate_project(pytester)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-report=summary.md")
    _usage_error(result, "--reliable-report=", "$GITHUB_STEP_SUMMARY")


@pytest.mark.parametrize("target", ["device", "fifo", "link to a directory", "link to a device",
                                    "link loop"])
def test_outputs_that_are_no_regular_file_are_refused(
    pytester: pytest.Pytester, target: str,
) -> None:
    _gate_project(pytester)
    path = pytester.path / "out.json"
    if target == "device":
        path = Path(os.devnull)
    elif target == "fifo":
        os.mkfifo(path)
    elif target == "link to a directory":
        (pytester.path / "reports").mkdir()
        path.symlink_to(pytester.path / "reports")
    elif target == "link to a device":
        path.symlink_to(os.devnull)
    else:
        path.symlink_to(pytester.path / "loop.json")
        (pytester.path / "loop.json").symlink_to(path)
    for flag in ("--reliable-report", "--reliable-html"):
        result = pytester.runpytest("-p", "no:cacheprovider", f"{flag}={path}")
        _usage_error(result, f"{flag}={path}")
    assert not (pytester.path / "MODEL_CALLED").exists()
    assert Path(os.devnull).is_char_device()
    if target.startswith("link"):
        assert path.is_symlink()


def test_a_link_to_a_regular_file_is_written_through_and_stays_a_link(
    pytester: pytest.Pytester,
) -> None:
    _gate_project(pytester)
    (pytester.path / "reports").mkdir()
    real = pytester.path / "reports" / "latest.json"
    real.write_text("old")
    link = pytester.path / "report.json"
    link.symlink_to(real)
    pytester.runpytest("-p", "no:cacheprovider",
                       "--reliable-report=report.json").assert_outcomes(passed=1)
    assert link.is_symlink() and link.resolve() == real
    assert json.loads(real.read_text())["tests"][0]["verdict"] == "passed"


# == A tampered or malformed stored baseline: issue 20 items 5 and 6 =============================
# Every stored score is a number in [0, 1], every test is stored once, every row has the shape a
# run writes; otherwise the run stops at start naming the file, the test and the field.
# decide="estimate": these tests are about reading the stored baseline, and a handful of
# instances shows no regression bound on evidence (the bound of identical models is wide there).
BASELINE_TEST = EVALUATE.replace('mode="fixed")',
                                 'mode="fixed", max_regression=0.1, decide="estimate")')
NODEID = "test_hostile.py::test_gate"


def _stored_baseline(pytester: pytest.Pytester) -> dict[str, Any]:
    """The production run's report (the same scripted model), as the baseline for the next."""
    _gate_project(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--reliable-report=prod.json").assert_outcomes(
        passed=1)
    pytester.makepyfile(test_hostile=BASELINE_TEST.replace("{dataset!r}", repr(DATASET)))
    report: dict[str, Any] = json.loads((pytester.path / "prod.json").read_text())
    return report


def _deep(depth: int) -> str:
    return '{"schema_version": 1, "tests": ' + "[" * depth + "]" * depth + "}"


def _row(report: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = report["tests"][0]["per_instance"][0]
    return row


TAMPERED: dict[str, tuple[Callable[[dict[str, Any]], Any], tuple[str, ...]]] = {
    "negative scores": (lambda r: [row.update(scores=[-3.0] * len(row["scores"]))
                                   for row in r["tests"][0]["per_instance"]],
                        ("per_instance[0].scores[0]", "-3.0", "[0, 1]")),
    "score above one": (lambda r: _row(r).update(scores=[5.0] * len(_row(r)["scores"])),
                        ("per_instance[0].scores[0]", "5.0")),
    "score as a string": (lambda r: _row(r)["canonical"].__setitem__(0, "1"),
                          ("per_instance[0].canonical[0]", '"1"')),
    "score as true": (lambda r: _row(r)["scores"].__setitem__(0, True),
                      ("per_instance[0].scores[0]", "true")),
    "mean not a score": (lambda r: _row(r).update(mean=None), ("per_instance[0].mean", "null")),
    "duplicated test": (lambda r: r["tests"].append(dict(r["tests"][0])),
                        ("nodeid", "stored twice")),
    "row without scores": (lambda r: _row(r).pop("scores"), ("per_instance[0].scores", "null")),
    "rows of other lengths": (lambda r: _row(r)["scores"].append(1.0),
                              ("per_instance[1].scores", "where per_instance[0].scores has 3")),
    "per_instance a string": (lambda r: r["tests"][0].update(per_instance="oops"),
                              ("per_instance", '"oops"', "not a list")),
    "row not an object": (lambda r: r["tests"][0]["per_instance"].__setitem__(0, 7),
                          ("per_instance[0]", "not an object")),
    "nodeid a number": (lambda r: r["tests"][0].update(nodeid=3), ("tests[0]", "nodeid")),
    "tests not a list": (lambda r: r.update(tests={"a": 1}), ("'tests'", "not a list")),
}


# Each case runs pytest twice (over 5 s): two stay in the fast loop, the rest are slow (CI runs all).
FAST_TAMPERED = ("negative scores", "duplicated test")


@pytest.mark.parametrize("tamper", [
    pytest.param(name, marks=() if name in FAST_TAMPERED else pytest.mark.slow)
    for name in TAMPERED])
def test_a_tampered_stored_baseline_is_a_usage_error_naming_file_test_and_field(
    pytester: pytest.Pytester, tamper: str,
) -> None:
    report = _stored_baseline(pytester)
    change, fragments = TAMPERED[tamper]
    change(report)
    (pytester.path / "prod.json").write_text(json.dumps(report))
    (pytester.path / "MODEL_CALLED").unlink()
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-baseline-report=prod.json")
    named_test = () if tamper in ("nodeid a number", "tests not a list") else (NODEID,)
    _usage_error(result, "--reliable-baseline-report", "prod.json", *named_test, *fragments)
    assert not (pytester.path / "MODEL_CALLED").exists()


@pytest.mark.slow
def test_an_untampered_stored_baseline_pairs_and_a_deep_one_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    report = _stored_baseline(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-baseline-report=prod.json",
                                "--reliable-report=candidate.json")
    result.assert_outcomes(passed=1)
    entry = json.loads((pytester.path / "candidate.json").read_text())["tests"][0]
    assert entry["baseline"]["source"] == "report"
    assert entry["baseline"]["difference"]["estimate"] == pytest.approx(0.0)
    assert report["tests"][0]["per_instance"]
    (pytester.path / "prod.json").write_text(_deep(100_000))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-baseline-report=prod.json")
    _usage_error(result, "--reliable-baseline-report", "prod.json", "deep")


# == A test whose calls did not complete carries every field, null: issue 20 item 21 ==============
# SPEC section 8: every field present; a missing answer is not a wrong one, so no statistic is
# reported for it (canonical.score is null, not absent; an MFT's rate is null, not 0.0).
ERROR_TESTS = EVALUATE + '''

@pytest.mark.mft(min_pass=0.5)
def test_mft(reliable):
    from pytest_reliable import Classification
    reliable.mft([{"text": "good", "label": "positive"}],
                 Classification(labels=["positive", "negative"]))


@pytest.mark.reliable(n=2)
def test_raises(reliable):
    raise RuntimeError("boom in the test body")
'''


def test_a_test_whose_calls_did_not_complete_has_every_field_null(
    pytester: pytest.Pytester,
) -> None:
    from typing import get_type_hints

    from pytest_reliable.schema.entries import ChecklistEntry, ReliableEntry

    _gate_project(pytester)
    pytester.makepyfile(test_hostile=ERROR_TESTS.replace("{dataset!r}", repr(DATASET)))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-record=none",
                                "--reliable-report=r.json")
    result.assert_outcomes(failed=3)
    assert not (pytester.path / "MODEL_CALLED").exists()
    entries = {e["nodeid"].split("::")[1]: e
               for e in json.loads((pytester.path / "r.json").read_text())["tests"]}
    for name in ("test_gate", "test_raises"):
        entry = entries[name]
        assert entry["verdict"] == "error"
        assert set(get_type_hints(ReliableEntry)) <= set(entry), name
        assert entry["canonical"] == {"score": None, "wilson_low": None, "wilson_high": None,
                                      "n": None, "interval_method": None}
        for statistic in ("mean", "std", "pass_at_1", "pass_hat_k", "dimensions"):
            assert entry[statistic] is None, (name, statistic)
        for grouping in ("formats", "orders"):
            assert {entry[grouping][k] for k in ("min", "median", "max")} == {None}
    assert entries["test_gate"]["formats"]["grouping"] == "formats"
    assert "boom in the test body" in entries["test_raises"]["message"]
    mft = entries["test_mft"]
    assert set(get_type_hints(ChecklistEntry)) <= set(mft)
    assert mft["verdict"] == "error" and mft["rate"] is None and mft["interval"] == [None, None]
    assert [t["observed"] for t in mft["thresholds"]] == [None]


# == The reports agree with pytest's outcome: issue 20 item 23 =====================================
# A strict xfail is expected (exit code 0): the page, the step summary and the table say so; a test
# whose own assert fails after its gate passed blocks, as pytest counts it.
OUTCOME_TESTS = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.25)
def test_passes(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.xfail(strict=True, reason="the format <b>sensitivity</b> is known")
@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_worst=0.5)
def test_known_weakness(reliable):
    reliable.evaluate(DATA, MultipleChoice())
{extra}'''
OWN_ASSERT = '''

@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.25)
def test_own_assert(reliable):
    report = reliable.evaluate(DATA, MultipleChoice())
    assert report.mean > 0.9, "the user's own check"
'''


@pytest.mark.parametrize("own_assert", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["xfail only", "with a failing assert"])
def test_the_reports_agree_with_pytests_outcome(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, own_assert: bool,
) -> None:
    from tests.acceptance.helpers import CONFTEST as FORMAT_SENSITIVE

    pytester.makeconftest(FORMAT_SENSITIVE)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_outcome=OUTCOME_TESTS.replace("{dataset!r}", repr(DATASET)).replace(
        "{extra}", OWN_ASSERT if own_assert else ""))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-report=r.json",
                                "--reliable-html=page.html")
    text = result.stdout.str()
    entries = {e["nodeid"].split("::")[1]: e
               for e in json.loads((pytester.path / "r.json").read_text())["tests"]}
    page = (pytester.path / "page.html").read_text()
    summary = (pytester.path / "summary.md").read_text()
    known = entries["test_known_weakness"]
    assert (known["verdict"], known["outcome"]) == ("failed", "xfailed")
    assert known["xfail_reason"] == "the format <b>sensitivity</b> is known"
    assert entries["test_passes"]["outcome"] == "passed"
    assert "failed (expected failure)" in text, text
    assert "expected failure" in page and "(xfail: the format &lt;b&gt;sensitivity" in page
    assert "<b>sensitivity</b>" not in page
    assert "Release not blocked" not in summary or not own_assert
    if own_assert:
        result.assert_outcomes(passed=1, xfailed=1, failed=1)
        own = entries["test_own_assert"]
        assert (own["verdict"], own["outcome"]) == ("failed", "failed")
        assert "Release blocked: 1 of 3 tests did not pass." in page
        assert "**Release blocked**: 1 of 3 tests did not pass." in summary
    else:
        result.assert_outcomes(passed=1, xfailed=1)
        assert result.ret == pytest.ExitCode.OK
        assert "Release blocked" not in page
        assert "Release not blocked: 1 of 2 tests passed, 1 failed as expected (xfail)." in page
        assert "**Release not blocked**" in summary and "1 failed as expected (xfail)" in summary
        assert "test_known_weakness (expected failure: the format &lt;b&gt;" in summary


# == The page's summary row shows min / median / max over formats: issue 20 item 24 ================
def test_the_pages_summary_row_shows_the_three_release_gate_numbers(
    pytester: pytest.Pytester,
) -> None:
    from tests.acceptance.helpers import CONFTEST as FORMAT_SENSITIVE

    pytester.makeconftest(FORMAT_SENSITIVE)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_outcome=OUTCOME_TESTS.replace("{dataset!r}", repr(DATASET)).replace(
        "{extra}", ""))
    pytester.runpytest("-p", "no:cacheprovider", "--reliable-html=page.html",
                       "--reliable-report=r.json").assert_outcomes(passed=1, xfailed=1)
    page = (pytester.path / "page.html").read_text()
    summary = page.split("<h2>Summary</h2>", 1)[1].split("<h2>Tests</h2>", 1)[0]
    formats = json.loads((pytester.path / "r.json").read_text())["tests"][0]["formats"]
    shown = " / ".join(f"{formats[k]:.3f}" for k in ("min", "median", "max"))
    assert shown == "0.000 / 0.500 / 1.000"  # the model is right only under "({})"
    assert summary.count(f"formats min / median / max {shown}") == 2, summary


# == The key never leaves the process, however it is echoed: issue 20 item 4 ======================
# A server that answers (HTTP 200) with the key, its base64, the base64 of its Authorization
# header and the key without its last characters: none of them reaches the report, the page, the
# JUnit file, the step summary, the DEBUG log or the terminal. The cache keeps the answer as paid.
KEY = "sk-hostile-0123456789abcdefXYZ"


def _echoes(key: str) -> list[str]:
    import base64

    return [key, base64.b64encode(key.encode()).decode().rstrip("="),
            base64.b64encode(f"Authorization: Bearer {key}".encode()).decode().rstrip("="),
            key[:-7]]


@pytest.mark.slow  # a pytest subprocess against a scripted server
def test_a_key_echoed_in_an_answer_is_redacted_in_every_output(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_reliable.testing import ScriptedServer

    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_key=EVALUATE.replace("{dataset!r}", repr(DATASET)).replace(
        'mode="fixed")', 'mode="fixed", min_score=0.99)'))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    answer = "B. " + " | ".join(_echoes(KEY))
    with ScriptedServer(lambda messages, params: answer) as server:
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--reliable-model=scripted",
            f"--reliable-base-url={server.base_url}", "--reliable-report=r.json",
            "--reliable-html=page.html", "--junitxml=junit.xml", "--log-level=DEBUG",
            "--log-file=debug.log", "--log-file-level=DEBUG", "-rA", "--reliable-full-text")
    result.assert_outcomes(failed=1)
    outputs = {"terminal": result.stdout.str() + result.stderr.str()}
    outputs |= {name: (pytester.path / name).read_text(encoding="utf-8")
                for name in ("r.json", "page.html", "junit.xml", "summary.md", "debug.log")}
    assert "***" in outputs["r.json"] and "***" in outputs["terminal"]
    for name, text in outputs.items():
        for echo in _echoes(KEY):
            assert echo not in text, (name, echo)
    import sqlite3

    with contextlib.closing(sqlite3.connect(pytester.path / ".reliable" / "cache.sqlite")) as db:
        cached = " ".join(str(row) for row in db.execute("SELECT * FROM responses"))
    assert KEY in cached  # the paid answer as it came back: the cache is the project's own file


def test_a_url_password_never_shows_in_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--reliable-base-url=ftp://user:PW-hostile-4242@host/v1")
    text = _usage_error(result, "--reliable-base-url", "ftp://***@host/v1")
    assert "PW-hostile-4242" not in text


# == Base URLs are checked at start, the baseline's too: issue 20 item 17 ===========================
@pytest.mark.parametrize(("option", "url", "fragment"), [
    ("--reliable-base-url", "http://h:99999/v1", "port"),
    ("--reliable-base-url", "http://h:0/v1", "port 0"),
    ("--reliable-base-url", "http://h:eighty/v1", "port"),
    ("--reliable-base-url", "http:///v1", "host"),
    ("--reliable-baseline-base-url", "http://h:99999/v1", "port"),
    ("--reliable-baseline-base-url", "ftp://h/v1", "http(s) URL"),
    ("--reliable-baseline-base-url", "not a url", "http(s) URL"),
])
def test_base_urls_are_checked_at_start(
    pytester: pytest.Pytester, option: str, url: str, fragment: str,
) -> None:
    _gate_project(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", f"{option}={url}")
    _usage_error(result, option, fragment)
    assert not (pytester.path / "MODEL_CALLED").exists()


# == An unwritable $GITHUB_STEP_SUMMARY warns once and keeps the exit code: issue 20 item 8 ========
@pytest.mark.parametrize("summary", [pytest.param("a directory", marks=pytest.mark.slow),
                                     "a full disk"])
def test_an_unwritable_step_summary_warns_once_and_keeps_the_exit_code(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, summary: str,
) -> None:
    _gate_project(pytester)
    target = pytester.mkdir("summary_dir") if summary == "a directory" else Path("/dev/full")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-report=r.json")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, text
    result.assert_outcomes(passed=1)
    assert text.count("could not append to $GITHUB_STEP_SUMMARY") == 1, text
    assert str(target) in text
    assert_no_leak(text)
    assert json.loads((pytester.path / "r.json").read_text())["tests"][0]["verdict"] == "passed"


# == A deeply nested reliable.yaml is a usage error naming the file: issue 20 item 10 =============
@pytest.mark.parametrize("depth", [pytest.param(60, marks=pytest.mark.slow), 3_000,
                                   pytest.param(100_000, marks=pytest.mark.slow)])
def test_a_deeply_nested_reliable_yaml_is_a_usage_error(
    pytester: pytest.Pytester, depth: int,
) -> None:
    _gate_project(pytester)
    (pytester.path / "reliable.yaml").write_text(
        "spaces:\n  wrappers:\n    wrapper: " + "[" * depth + "x" + "]" * depth + "\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    _usage_error(result, "reliable.yaml", "nest more than 50 deep")
    assert not (pytester.path / "MODEL_CALLED").exists()


# == Labels that look identical are the same label: issue 20 item 16 ===============================
# NFC "café" (one code point) and NFD "café" (e + combining accent) are one label; a label that
# only looks the same (full-width letters) is refused with a hint showing the characters.
NFC_CAFE = "caf\u00e9"
NFD_CAFE = "cafe\u0301"
UNICODE_TEST = '''
import pytest
from pytest_reliable import Classification, text_model

DATA = [{{"text": "order {{i}}", "label": {label!r}}} for i in range(6)]


@pytest.fixture
def reliable_model():
    return text_model(lambda prompt: {answer!r}, id="unicode")


@pytest.mark.mft(min_pass=0.5)
def test_mft(reliable):
    reliable.mft(DATA, Classification(labels=[{nfc!r}, "tea"]))
'''


@pytest.mark.parametrize(("label", "answer"), [
    (NFD_CAFE, NFC_CAFE), pytest.param(NFC_CAFE, NFD_CAFE, marks=pytest.mark.slow),
    pytest.param(NFD_CAFE, NFD_CAFE.upper() + ".", marks=pytest.mark.slow)],
                         ids=["NFD label", "NFD answer", "NFD answer in capitals"])
def test_labels_are_compared_after_unicode_normalization(
    pytester: pytest.Pytester, label: str, answer: str,
) -> None:
    pytester.makepyfile(test_unicode=UNICODE_TEST.format(label=label, answer=answer, nfc=NFC_CAFE))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-report=r.json")
    result.assert_outcomes(passed=1)
    entry = json.loads((pytester.path / "r.json").read_text())["tests"][0]
    assert entry["rate"] == 1.0 and entry["failures"] == []


def test_a_label_that_only_looks_the_same_is_refused_with_a_hint(
    pytester: pytest.Pytester,
) -> None:
    full_width = "\uff43\uff41\uff46\u00e9"
    pytester.makepyfile(test_unicode=UNICODE_TEST.format(label=full_width, answer=NFC_CAFE,
                                                         nfc=NFC_CAFE))
    result = pytester.runpytest("-p", "no:cacheprovider")
    text = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "looks like 'café' but differs in its Unicode characters" in text, text
    assert "'\\uff43\\uff41\\uff46\\xe9' vs 'caf\\xe9'" in text, text
    assert_no_leak(text)


# == Hostile models: issue 20 items 3, 11, 12, 15, 18 and 19 (the runner and the adapters) =======
# A model that exits, interrupts, spins, returns nonsense, cancels itself or is not there: each
# run ends promptly with a verdict naming the model (or stops as on Ctrl-C), keeps every answer
# that came back, and leaves no process behind.
# The runs that wait out timeouts and grace periods in a subprocess (over 5 s each) are marked
# slow: the fast loop (-m "not slow") keeps items 3, 12 and 15's errored calls; CI runs them all.
# A hang (each of these cases hung the run before) is caught by the subprocess's timeout, not by
# a wall-clock bound that would only measure the machine's load.
MANY_CALLS = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", n=2, mode="fixed")
def test_gate(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''

# Each answer the model gives back is a line of ANSWERED (before the runner sees it).
MISBEHAVING_CALLABLE = r'''
import asyncio, itertools, pathlib, threading

import pytest

from pytest_reliable import ModelResponse, text_model

CALLS = itertools.count(1)
LOCK = threading.Lock()


def answered(text):
    with LOCK, open("ANSWERED", "a") as out:
        out.write("answer\n")
    return text


def misbehave():
    {misbehave}


def answer(prompt: str):
    with LOCK:
        n = next(CALLS)
    if n == {bad_call}:
        misbehave()
    return answered("A")


@pytest.fixture
def reliable_model():
    return text_model(answer, id="misbehaving")
'''


def _stored_answers(project: Path) -> int:
    with sqlite3.connect(project / ".reliable" / "cache.sqlite") as db:
        return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])


def _answered(project: Path) -> int:
    path = project / "ANSWERED"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _misbehaving_project(pytester: pytest.Pytester, misbehave: str, bad_call: int = 6,
                         conftest: str = MISBEHAVING_CALLABLE) -> None:
    pytester.makeconftest(conftest.replace("{misbehave}", misbehave)
                          .replace("{bad_call}", str(bad_call)))
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=MANY_CALLS.replace("{dataset!r}", repr(DATASET)))


# -- item 3: a sync callable raising SystemExit or KeyboardInterrupt ------------------------------
def test_a_model_raising_system_exit_is_an_errored_call_naming_it(
    pytester: pytest.Pytester,
) -> None:
    _misbehaving_project(pytester, "raise SystemExit(3)")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "--reliable-report=report.json", timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1)
    assert "model 'misbehaving' raised SystemExit(3)" in text, text
    assert_no_leak(text)
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert entry["verdict"] == "error"
    assert _answered(pytester.path) >= 5
    assert _stored_answers(pytester.path) == _answered(pytester.path)  # every answer kept


def test_a_model_raising_keyboard_interrupt_stops_the_run_as_ctrl_c_does(
    pytester: pytest.Pytester,
) -> None:
    _misbehaving_project(pytester, "raise KeyboardInterrupt")
    # One call at a time: every answer before the interrupt has come back (none is in flight).
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "--reliable-concurrency=1", timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, text
    # pytest's own Ctrl-C report, pointing at the model's line, not at the plugin
    assert "KeyboardInterrupt" in text and "conftest.py:" in text, text
    assert_no_leak(text)
    assert _answered(pytester.path) == 5
    assert _stored_answers(pytester.path) == 5  # what came back before the interrupt is stored


# -- item 11: a sync callable that spins the CPU (or blocks in C code) past the timeout ------------
# At exit (the latest atexit hook), wait up to 2 s for the model's threads, then count them.
THREADS_AT_EXIT = r'''

import atexit, sys, time


def _count_call_threads():
    deadline = time.monotonic() + 2
    alive = lambda: [t for t in threading.enumerate() if t.name == "pytest-reliable-call"]
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    pathlib.Path("THREADS_AT_EXIT").write_text(str(len(alive())))


atexit.register(_count_call_threads)
'''


@pytest.mark.slow
def test_a_model_spinning_past_the_timeout_is_stopped_and_the_run_ends(
    pytester: pytest.Pytester,
) -> None:
    # Every call spins for ever: each is given up at the timeout, and its thread stopped.
    _misbehaving_project(pytester, "while True:\n        pass", bad_call=0,
                         conftest=MISBEHAVING_CALLABLE.replace(
                             "    if n == {bad_call}:", "    if n != {bad_call}:")
                         + THREADS_AT_EXIT)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--reliable-timeout=0.3",
        "--reliable-max-retries=0", "--reliable-concurrency=4", timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "not evaluated: error: timed out" in text, text
    assert_no_leak(text)
    # Before the fix the spinning threads outlived the summary (36 of them: over 90 s).
    assert (pytester.path / "THREADS_AT_EXIT").read_text() == "0"


@pytest.mark.slow
def test_calls_that_cannot_be_stopped_are_capped_with_a_clear_message(
    pytester: pytest.Pytester,
) -> None:
    from pytest_reliable.models.base import ABANDONED_CALLS_MAX

    # Every call blocks in C code (a lock): Python cannot stop its thread, so each counts.
    blocked = MISBEHAVING_CALLABLE.replace("    if n == {bad_call}:", "    if n != {bad_call}:")
    blocked = blocked.replace(
        "def answer(prompt: str):",
        "def answer(prompt: str):\n    with LOCK:\n        STARTED.append(1)\n"
        "        pathlib.Path('STARTED').write_text(str(len(STARTED)))")
    blocked = blocked.replace("CALLS = itertools.count(1)", "CALLS = itertools.count(1)\nSTARTED = []")
    _misbehaving_project(pytester, "threading.Event().wait()", bad_call=0, conftest=blocked)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--reliable-timeout=0.3",
        "--reliable-max-retries=0", "--reliable-concurrency=4", timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert (f"calls of model 'misbehaving' given up at the timeout (0.3 s) are still running in "
            f"this process (at most {ABANDONED_CALLS_MAX}") in text, text
    assert "--reliable-timeout" in text, text
    assert_no_leak(text)
    # 15 calls were planned; new ones stopped once the cap was reached (4 more at most in flight)
    calls_started = int((pytester.path / "STARTED").read_text())
    assert ABANDONED_CALLS_MAX <= calls_started < ABANDONED_CALLS_MAX + 4, calls_started


# -- item 12: a model object returning ModelResponse(text=None) ----------------------------------
NONE_TEXT_MODEL = r'''
import itertools, threading

import pytest

from pytest_reliable import ModelResponse

CALLS = itertools.count(1)
LOCK = threading.Lock()
VALID = []


class NoneSometimes:
    identity = "none-sometimes"

    def complete(self, messages, params):
        with LOCK:
            n = next(CALLS)
        if n % 4 == 0:
            return ModelResponse(text=None)
        with LOCK:
            VALID.append(n)
            open("ANSWERED", "a").write("answer\n")
        return ModelResponse(text="A")


@pytest.fixture
def reliable_model():
    return NoneSometimes()
'''


def test_a_response_without_text_is_an_errored_call_and_the_valid_answers_are_kept(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(NONE_TEXT_MODEL)
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=MANY_CALLS.replace("{dataset!r}", repr(DATASET)))
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider",
                                "--reliable-report=report.json")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1)
    assert "model 'none-sometimes' returned ModelResponse(text=None" in text, text
    assert "its text must be a str, not NoneType" in text, text
    assert "AttributeError" not in text and "TypeError" not in text, text
    assert_no_leak(text)
    (entry,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert entry["verdict"] == "error"
    assert _answered(pytester.path) >= 3
    assert _stored_answers(pytester.path) == _answered(pytester.path)  # every valid answer kept


# -- item 15: an async callable that raises CancelledError, or swallows its cancellation -----------
CANCELLING_MODEL = r'''
import asyncio, itertools

import pytest

from pytest_reliable import text_model

CALLS = itertools.count(1)


async def answer(prompt: str) -> str:
    n = next(CALLS)
    {misbehave}
    return "A"


@pytest.fixture
def reliable_model():
    return text_model(answer, id="cancelling")
'''


def test_a_model_raising_cancelled_error_is_an_errored_call_naming_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CANCELLING_MODEL.replace(
        "{misbehave}", "if n == 6:\n        raise asyncio.CancelledError"))
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=MANY_CALLS.replace("{dataset!r}", repr(DATASET)))
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1)
    assert "model 'cancelling' raised CancelledError without being cancelled" in text, text
    assert_no_leak(text)


@pytest.mark.slow
def test_a_model_ignoring_its_cancellation_is_abandoned_counted_and_reported(
    pytester: pytest.Pytester,
) -> None:
    from pytest_reliable.calls.runner import CANCEL_GRACE_S
    from pytest_reliable.models.base import ABANDONED_CALLS_MAX

    swallow = ("while True:\n        try:\n            await asyncio.sleep(3600)\n"
               "        except asyncio.CancelledError:\n            pass")
    pytester.makeconftest(CANCELLING_MODEL.replace("{misbehave}", swallow))
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_hostile=MANY_CALLS.replace("{dataset!r}", repr(DATASET)))
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-W", "always", "--reliable-timeout=0.5",
        "--reliable-max-retries=0", f"--reliable-concurrency={ABANDONED_CALLS_MAX}", timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1)
    assert (f"the call ignored its cancellation: abandoned after {CANCEL_GRACE_S:g} s more"
            in text), text
    # counted and reported once, at the test
    assert (f"{ABANDONED_CALLS_MAX} calls of model 'cancelling' ignored their cancellation at "
            "the timeout (0.5 s)") in text, text
    # the cap reached, the remaining calls are not started (instead of hanging one by one)
    assert "not started: 8 calls of model 'cancelling' given up at the timeout" in text, text
    assert_no_leak(text)


# -- item 18: a forked child must not keep the embedded server alive ------------------------------
FORKING_TEST = r'''
import multiprocessing, os, pathlib, time

from pytest_reliable import Classification, Dataset

DATA = Dataset.from_records([{"text": "A fine film.", "label": "positive"}])


def test_forks_a_child_then_hangs(reliable):
    reliable.evaluate(DATA, Classification(labels=["positive", "negative"]), n=1)
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,))
    child.start()
    pathlib.Path("CHILD").write_text(str(child.pid))
    time.sleep(120)
'''


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the server through /proc")
def test_a_forked_child_does_not_keep_the_embedded_server_alive(
    pytester: pytest.Pytester,
) -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip('llama_cpp is not importable: pip install "pytest-reliable[local]"')
    from tests.test_local_model import _alive, _servers_of

    pytester.makepyfile(test_fork=FORKING_TEST)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "--reliable-no-cache", "-q"],
        cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child_file = pytester.path / "CHILD"
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not child_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert child_file.exists(), "the test never forked its child"
        servers = _servers_of(proc.pid)
        assert servers, "the embedded server is not running"
        proc.kill()  # SIGKILL: no cleanup in pytest; only the watchdog's pipe can end the server
        proc.wait(30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in servers), "a forked child kept the server alive"
    finally:
        if proc.poll() is None:
            proc.kill()
        if child_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child_file.read_text()), signal.SIGKILL)
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- item 19: a dead server: refused at the first call, never tried again -------------------------
TEN_ITEMS = [{"question": f"Question {i}?", "choices": ["yes", "no"], "answer": 0}
             for i in range(10)]
TWO_GATES = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", n=2, mode="fixed")
def test_one(reliable):
    reliable.evaluate(DATA, MultipleChoice())

@pytest.mark.reliable(space="wrappers", n=2, mode="fixed", temperature=0.7)
def test_two(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def _closed_port() -> int:
    """A port of 127.0.0.1 where nobody listens (it was free a moment ago)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_refused_connection_fails_every_test_at_once_naming_the_url(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_dead=TWO_GATES.replace("{dataset!r}", repr(TEN_ITEMS)))
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    # One call at a time and a budget of one attempt: any attempt sent after the first refusal
    # (a retry, another call, the second test) would be refused by the budget, and say so.
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--reliable-model=m",
        f"--reliable-base-url={url}", "--reliable-concurrency=1", "--reliable-budget=1calls",
        "--reliable-report=report.json", timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=2)
    refused = f"connection refused at {url}: no server is listening there"
    # Counted in the failure sections only: under CI=true pytest prints each failure's whole
    # message again in the short summary instead of cutting it to the terminal's width.
    failures = text.split("short test summary info")[0]
    assert failures.count(f"not evaluated: error: {refused}") == 2, text
    assert "budget" not in text and "gave up after" not in text, text
    assert_no_leak(text)
    entries = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [entry["verdict"] for entry in entries] == ["error", "error"]
