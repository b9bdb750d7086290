"""End to end with the embedded real model (SmolLM2-135M under llama.cpp's server)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.calls.requests import number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.local import LOCAL_MODEL_NAME, LocalModelServer, find_gguf

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason='llama_cpp is not importable: pip install "pytest-reliable[local]"',
    ),
]

QUESTIONS = [
    "What is 2 + 2?",
    "Name a colour.",
    "What is the capital of France?",
    "Say hello.",
    "Is water wet? Answer yes or no.",
    "Name an animal.",
    "What is 10 - 3?",
    "Name a fruit.",
    "What day comes after Monday?",
    "Spell the word cat.",
]


def test_embedded_model_runner_cache_and_clean_stop(tmp_path: Path) -> None:
    gguf = find_gguf()
    assert gguf.suffix == ".gguf" and "Q4_1" in gguf.name
    server = LocalModelServer()
    try:
        server.start()
        assert (
            server.identity.startswith(f"local:{LOCAL_MODEL_NAME}:")
            and len(server.identity.split(":")[-1]) == 12
        )
        assert server.base_url.startswith("http://127.0.0.1:")
        model = server.model()
        assert model.identity == server.identity
        params = SamplingParams(temperature=0.0, max_tokens=16)
        requests = number_samples(
            [
                (
                    [
                        {"role": "system", "content": "Answer briefly."},
                        {"role": "user", "content": q},
                    ],
                    params,
                )
                for q in QUESTIONS
            ],
            "tests/test_local_model.py::e2e",
        )
        path = tmp_path / "cache.sqlite"
        cache = ResponseCache.open(path)
        first = Runner(model, cache, concurrency=1, timeout=60).run(requests)
        assert [r.status for r in first] == ["ok"] * 10, [r.error for r in first]
        assert not any(r.cached for r in first)
        assert all(r.response.text.strip() for r in first)
        assert all((r.response.completion_tokens or 0) > 0 for r in first)
        replay = Runner(model, cache, concurrency=1).run(requests)
        assert all(r.cached for r in replay)
        assert [r.response.text for r in replay] == [r.response.text for r in first]
        assert cache.count() == 10
        cache.close()
        proc = server.proc
        assert proc is not None and proc.poll() is None
        pid = proc.pid
    finally:
        server.stop()
    assert proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failed_start_reports_the_server_output(tmp_path: Path) -> None:
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"not a gguf file")
    server = LocalModelServer(bogus, startup_timeout=60)
    with pytest.raises(Exception) as info:
        server.start()
    assert type(info.value).__name__ == "ModelSetupError"
    assert "last output" in str(info.value)
    assert server.proc is None


SLOW_GATE = """
import pytest
from pytest_reliable import Classification, Dataset

DATA = Dataset.from_records(
    [{"text": f"Review number {i}: it was fine, I suppose.", "label": "positive"} for i in range(40)]
)


@pytest.mark.reliable(n=20)
def test_long_gate(reliable):
    reliable.evaluate(DATA, Classification(labels=["positive", "negative"]))
"""


def _servers_of(parent: int) -> list[int]:
    """pids of llama.cpp servers whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"llama_cpp.server" in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the server through /proc")
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_the_server_dies_with_its_pytest(pytester: pytest.Pytester, sig: str) -> None:
    import signal
    import subprocess
    import sys
    import time

    pytester.makepyfile(test_long=SLOW_GATE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "--reliable-no-cache", "-q"],
        cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        servers: list[int] = []
        while not servers and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            servers = _servers_of(proc.pid)
        assert servers, "the embedded server never started"
        time.sleep(3)  # let it answer a few calls
        proc.send_signal(getattr(signal, sig))
        proc.wait(30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in servers), f"the server outlived pytest ({sig})"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _servers_of(proc.pid):
            os.kill(pid, 9)


# -- a fresh run reproduces its answers ----------------------------------------------------------
GATE_RECORDS = """
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records([
    {"question": "Which sentence has the correct adjective order?",
     "choices": ["a lovely little old rectangular green French silver whittling boat",
                 "a French little lovely whittling silver old green rectangular boat"],
     "answer": 0},
    {"question": "Which is a fruit?", "choices": ["carrot", "apple", "potato"], "answer": 1},
    {"question": "What is 3 + 4?", "choices": ["7", "8", "12"], "answer": 0},
    {"question": "Which animal can fly?", "choices": ["dog", "cow", "eagle"], "answer": 2},
    {"question": "Is ice colder than steam?", "choices": ["yes", "no"], "answer": 0},
    {"question": "Which city is in France?", "choices": ["Berlin", "Lyon", "Madrid"], "answer": 1},
])
TASK = MultipleChoice()
"""

GATE_AT_ZERO = """
import pytest
from gate_data import DATA, TASK


@pytest.mark.reliable(n=2)
def test_formats(reliable):
    reliable.evaluate(DATA, TASK)
"""

GATE_SAMPLED = """
import pytest
from gate_data import DATA, TASK


@pytest.mark.reliable(n=1, temperature=0.7, k=2)
def test_sampled(reliable):
    reliable.evaluate(DATA, TASK)
"""


def _answers(cache: Path) -> dict[str, tuple[str, str]]:
    import sqlite3

    with sqlite3.connect(cache) as db:
        return {key: (text, extra) for key, text, extra in
                db.execute("SELECT key, text, extra FROM responses")}


def test_a_fresh_run_reproduces_every_answer(pytester: pytest.Pytester) -> None:
    """The same small gate, twice, each from an empty cache with a server of its own, the tests
    in opposite orders: every call gets the same answer (issue 20). Temperature 0 needs no help
    (llama.cpp's greedy answers do not depend on the order of the calls, hence not on which KV
    prefix is reused); at 0.7 each call sends a seed derived from its cache key."""
    import json

    pytester.makepyfile(gate_data=GATE_RECORDS, test_zero=GATE_AT_ZERO, test_sampled=GATE_SAMPLED)
    runs = []
    for name, order in (("one", ["test_zero.py", "test_sampled.py"]),
                        ("two", ["test_sampled.py", "test_zero.py"])):
        result = pytester.runpytest_subprocess(
            *order, "-p", "no:randomly", "-p", "no:cacheprovider",
            f"--reliable-cache={name}.sqlite", f"--reliable-report={name}.json",
        )
        result.assert_outcomes(passed=2)
        report = json.loads((pytester.path / f"{name}.json").read_text())
        runs.append((_answers(pytester.path / f"{name}.sqlite"),
                     {t["nodeid"]: t for t in report["tests"]}))
    (first, first_report), (second, second_report) = runs
    # 6 instances x (2 resamplings + the canonical pass) at 0 (a resampling may repeat the
    # canonical prompt: one call), 6 x 1 + 6 x 2 samples at 0.7
    assert 24 <= len(first) <= 36
    assert first == second
    sampled = [extra for text, extra in first.values() if json.loads(extra).get("seed") is not None]
    assert len(set(sampled)) == len(sampled) == len(first)  # every call had its own seed
    for nodeid, entry in first_report.items():
        again = second_report[nodeid]
        for field in ("mean", "canonical", "pass_at_1", "pass_at_k", "pass_hat_k"):
            assert entry[field] == again[field], (nodeid, field)
        # (calls.prompt_tokens_evaluated differs: it estimates the KV prefix reused, which
        # follows the order of the calls)
        assert entry["calls"]["made"] == again["calls"]["made"]
    assert first_report["test_sampled.py::test_sampled"]["k"] == 2
