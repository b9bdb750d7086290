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


# -- item 11: a sync callable that spins the CPU (or blocks in C code) past the timeout -------------
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
    from pytest_reliable.models.base import ABANDONED_CALLS_MAX
    from pytest_reliable.runner import CANCEL_GRACE_S

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
    assert text.count(f"not evaluated: error: {refused}") == 2, text
    assert "budget" not in text and "gave up after" not in text, text
    assert_no_leak(text)
    entries = json.loads((pytester.path / "report.json").read_text())["tests"]
    assert [entry["verdict"] for entry in entries] == ["error", "error"]
