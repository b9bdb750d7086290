"""The sqlite response cache: keys, record modes, concurrent writers."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from pytest_reliable.calls.cache import CacheMissError, ResponseCache, cache_key, miss_message
from pytest_reliable.models.base import ModelResponse, SamplingParams

MSG = [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}]


def test_key_is_canonical_and_covers_every_part() -> None:
    p = SamplingParams()
    k = cache_key("m", MSG, p, 0, None)
    assert k == cache_key("m", [("system", "s"), ("user", "hello")], p, 0, None)
    assert len(k) == 64
    others = {
        cache_key("m2", MSG, p, 0, None),
        cache_key("m", MSG[1:], p, 0, None),
        cache_key("m", MSG, SamplingParams(temperature=0.5), 0, None),
        cache_key("m", MSG, p, 1, None),
        cache_key("m", MSG, p, 0, "t::a"),
    }
    assert k not in others and len(others) == 5


def test_roundtrip_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.sqlite"
    c = ResponseCache.open(path)
    r = ModelResponse(
        "B",
        logprobs=[{"token": "B", "logprob": -0.1}],
        prompt_tokens=3,
        completion_tokens=1,
        latency_s=0.2,
        extra={"x": 1},
    )
    c.put("k1", r, meta={"model": "m"})
    assert c.get("k1") == r and c.get("nope") is None
    assert c.get_many(["k1", "nope", "k1"]) == {"k1": r}
    c.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("1",)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT model FROM responses").fetchone() == ("m",)


def test_record_none_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "never" / "c.sqlite"
    c = ResponseCache.open(path, "none")
    assert c.get("k") is None and c.get_many(["k"]) == {}
    c.put("k", ModelResponse("x"))
    c.close()
    assert not path.exists() and not path.parent.exists()


def test_memory_cache() -> None:
    c = ResponseCache.memory()
    c.put("k", ModelResponse("x"))
    assert c.get("k") == ModelResponse("x") and c.count() == 1


def test_miss_message_names_test_and_prompt() -> None:
    msg = miss_message(
        "tests/test_a.py::test_b", [{"role": "user", "content": "What is " + "x" * 300}]
    )
    assert "tests/test_a.py::test_b" in msg and "What is" in msg and "..." in msg
    assert (
        "--reliable-record none replays only; run once with --reliable-record new to record it"
        in msg
    )
    assert issubclass(CacheMissError, Exception)


def _writer(path: str, worker: int, n: int, q: mp.Queue[str]) -> None:
    try:
        c = ResponseCache.open(path)
        for i in range(n):
            # keys 0..99 are shared by every worker, the rest are its own
            key = f"shared-{i}" if i < 100 else f"w{worker}-{i}"
            c.put(key, ModelResponse(f"{worker}:{i}"), meta={"model": "m"})
        c.close()
        q.put("ok")
    except Exception as exc:  # noqa: BLE001
        q.put(f"{type(exc).__name__}: {exc}")


def test_four_processes_write_one_cache(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    ctx = mp.get_context("spawn")
    q: mp.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, 500, q)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcomes = [q.get(timeout=5) for _ in procs]
    assert outcomes == ["ok"] * 4, outcomes
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 100 + 4 * 400
        assert db.execute("SELECT COUNT(DISTINCT key) FROM responses").fetchone()[0] == 1700
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# -- a store that fails, a text sqlite cannot encode, a file that is not a cache ----------------
def test_lone_surrogate_is_stored_losslessly(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    text = "A\ud800 and \udfff"
    c = ResponseCache.open(path)
    c.put("k", ModelResponse(text), meta={"model": "m\ud800"})
    assert c.take_store_failure() is None and c.unstored == 0
    c.close()
    replay = ResponseCache.open(path, "none")
    assert replay.get("k") == ModelResponse(text)
    replay.close()
    key = cache_key("m", [{"role": "user", "content": "x\ud800"}], SamplingParams(), 0, None)
    assert len(key) == 64


def test_failing_store_keeps_answers_in_memory_and_reports_once(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    c = ResponseCache.open(path)
    c.put("stored", ModelResponse("s"))
    assert c._conn is not None
    c._conn.execute("PRAGMA query_only=ON")  # every write now fails like a full disk
    for i in range(3):
        c.put(f"k{i}", ModelResponse(f"paid {i}"))
    assert c.unstored == 3 and c.count() == 4
    assert c.get_many(["stored", "k0", "k2"]) == {
        "stored": ModelResponse("s"), "k0": ModelResponse("paid 0"), "k2": ModelResponse("paid 2")
    }
    message = c.take_store_failure()
    assert message is not None and str(path) in message and "kept in memory" in message
    assert c.take_store_failure() is None  # once
    c.close()


@pytest.mark.parametrize("kind", ["directory", "garbage", "truncated", "foreign", "old schema"])
def test_a_file_that_is_not_a_cache_is_named_with_the_fix(tmp_path: Path, kind: str) -> None:
    from pytest_reliable.calls.cache import CacheFileError, check_cache_path

    path = tmp_path / "c.sqlite"
    if kind == "directory":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(b"this is not sqlite at all" * 100)
    elif kind == "truncated":
        good = ResponseCache.open(path)
        for i in range(200):
            good.put(f"k{i}", ModelResponse("x" * 200))
        good.close()
        path.write_bytes(path.read_bytes()[:5000])
    else:
        with sqlite3.connect(path) as db:
            if kind == "foreign":
                db.execute("CREATE TABLE songs (title TEXT)")
            else:
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute("CREATE TABLE responses (key TEXT)")
                db.execute("INSERT INTO meta VALUES('schema_version', '0')")
        db.close()
    for check in (lambda: check_cache_path(path, "new"), lambda: ResponseCache.open(path)):
        with pytest.raises(CacheFileError) as info:
            check()
        message = str(info.value)
        assert str(path) in message and ("--reliable-cache" in message or "directory" in message)


def test_an_unwritable_place_is_refused_before_any_call(tmp_path: Path) -> None:
    import os

    from pytest_reliable.calls.cache import CacheFileError, check_cache_path

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: every directory is writable")
        with pytest.raises(CacheFileError, match="writable"):
            check_cache_path(locked / "sub" / "c.sqlite", "new")
        check_cache_path(locked / "sub" / "c.sqlite", "none")  # replay only writes nothing
    finally:
        locked.chmod(0o700)


def test_budget_ledger_is_one_count_for_every_process(tmp_path: Path) -> None:
    from pytest_reliable.calls.cache import BudgetLedger

    path = tmp_path / "budget.sqlite"
    workers = [BudgetLedger(path, "run-1") for _ in range(4)]
    granted = sum(w.reserve(10, None) for _ in range(6) for w in workers)
    assert granted == 10
    assert workers[0].totals() == (10, 0, 14)
    assert BudgetLedger(path, "run-2").reserve(10, None)  # another run has its own count
    workers[1].add_tokens(50)
    assert not workers[2].reserve(None, 50)  # the token limit is shared too
    for w in workers:
        w.close()
