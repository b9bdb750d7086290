"""The store's promises, once for each backend (local sqlite files, a real PostgreSQL server):
write-once answers, record modes, replay in batches, one atomic budget per run id, n* entries,
claims that die with their holder, answers kept through a failing database, versioned schema."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.calls.requests import ProgressEvent, Request
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import ModelResponse, SamplingParams
from pytest_reliable.store import Claim, LocalStore, Store, StoreUsageError, StoreWarning
from pytest_reliable.store.nstar import NStarEntry, NStarKey
from pytest_reliable.testing.postgres import PASSWORD, TemporaryPostgres

KEY = NStarKey("t.py::test_a", "s" * 64, "d" * 64, "local:x", "ilr", 0.01, 0.1, 0, 100)
ENTRY = NStarEntry(n_star=12, reliable=True, achievable_eps=0.004, n_star_paper=9)
ODD = "A\ud800 and a NUL \x00 and caf\u00e9"
"""A model may answer a lone surrogate or a NUL: both must come back as they went in."""


@dataclass
class Backend:
    kind: str
    where: str
    """The sqlite file or the PostgreSQL URL (with its password)."""
    server: TemporaryPostgres | None = None
    handles: list[Store] = field(default_factory=list)

    def open(self, record_mode: str = "new", wait_timeout: float | None = None) -> Store:
        if self.kind == "sqlite":
            store: Store = LocalStore(Path(self.where), record_mode, wait_timeout=wait_timeout)
        else:
            from pytest_reliable.store.postgres import PostgresStore

            store = PostgresStore(self.where, record_mode, wait_s=1.0, wait_timeout=wait_timeout)
        self.handles.append(store)
        return store

    def break_writes(self, store: Store) -> None:
        """Make the database refuse writes (a full disk; a server gone)."""
        if self.kind == "sqlite":
            assert isinstance(store, LocalStore) and store._conn is not None
            store._conn.execute("PRAGMA query_only=ON")
        else:
            assert self.server is not None
            self.server.stop_server()

    def heal(self, store: Store) -> None:
        if self.kind == "sqlite":
            assert isinstance(store, LocalStore) and store._conn is not None
            store._conn.execute("PRAGMA query_only=OFF")
        else:
            assert self.server is not None
            self.server.start()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        found = Backend("sqlite", str(tmp_path / "cache.sqlite"))
    else:
        server = request.getfixturevalue("postgres_server")
        found = Backend("postgresql", request.getfixturevalue("postgres_url"), server)
    yield found
    for store in found.handles:
        store.close()


def answer(text: str, **more: Any) -> ModelResponse:
    return ModelResponse(text, **more)


# -- answers ---------------------------------------------------------------------------------------
def test_an_answer_comes_back_exactly_as_it_went_in(backend: Backend) -> None:
    stored = answer(ODD, logprobs=[{"token": "A", "logprob": -0.1}], prompt_tokens=3,
                    completion_tokens=1, latency_s=0.25, extra={"x": [1, "\u00e9"]})
    writer = backend.open()
    writer.put("k", stored, meta={"model": "m\x00\ud800"})
    assert writer.take_store_failure() is None and writer.unstored == 0
    reader = backend.open()
    assert reader.get("k") == stored and reader.get("absent") is None
    assert reader.get_many(["k", "absent", "k"]) == {"k": stored}
    assert reader.count() == 1


def test_the_first_writer_wins_and_record_all_replaces(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    first.put("k", answer("first"))
    second.put("k", answer("second"))
    assert first.get("k") == second.get("k") == answer("first")
    backend.open("all").put("k", answer("again"))
    assert backend.open().get("k") == answer("again")


def test_record_none_writes_nothing_and_creates_nothing(backend: Backend) -> None:
    replay = backend.open("none")
    assert replay.get_many(["k"]) == {}
    replay.put("k", answer("x"))
    assert replay.get("k") is None and replay.count() == 0
    if backend.kind == "sqlite":
        assert not Path(backend.where).exists()
    else:
        assert backend.server is not None
        dbname = backend.where.rsplit("/", 1)[1]
        assert backend.server.execute(dbname, "SELECT to_regclass('reliable_meta')") == [(None,)]
    backend.open().put("k", answer("recorded"))
    assert backend.open("none").get("k") == answer("recorded")


class NeverCalled:
    """A model that must not be called: the replay comes from the store."""

    identity = "never-called"
    max_concurrency = None

    async def acomplete(self, messages: Any, params: SamplingParams) -> ModelResponse:
        raise AssertionError("a replay called the model")

    async def aclose(self) -> None:
        pass


def test_a_replay_reads_one_query_per_batch_not_one_per_cell(backend: Backend) -> None:
    requests = [Request.of([("user", f"question {i}")], SamplingParams()) for i in range(1200)]
    writer = backend.open()
    runner = Runner(NeverCalled(), writer)
    for request in requests:
        writer.put(runner.key(request), answer(f"answer {request.messages[0][1]}"))
    replay = backend.open("none")
    results = Runner(NeverCalled(), replay).run(requests)
    assert all(r.status == "ok" and r.cached for r in results)
    assert [r.response.text for r in results if r.response] == [
        f"answer question {i}" for i in range(1200)]
    assert replay.read_queries == math.ceil(1200 / replay.read_batch)


def test_answers_the_database_refuses_are_kept_retried_and_reported_once(
    backend: Backend,
) -> None:
    store = backend.open()
    store.put("before", answer("stored"))
    backend.break_writes(store)
    try:
        for i in range(3):
            store.put(f"k{i}", answer(f"paid {i}"))
        assert store.unstored == 3
        assert store.get_many(["k0", "k2"]) == {"k0": answer("paid 0"), "k2": answer("paid 2")}
        message = store.take_store_failure()
        assert message is not None and "kept in memory" in message and "retried" in message
        assert store.location in message
        assert store.take_store_failure() is None  # once
    finally:
        backend.heal(store)
    # written once the database takes them again (a pool may need a moment to reconnect)
    assert eventually(lambda: store.flush() == 0, 15)
    assert backend.open().get_many(["before", "k0", "k1", "k2"]) == {
        "before": answer("stored"), **{f"k{i}": answer(f"paid {i}") for i in range(3)}}


def test_answers_still_unwritten_get_last_tries_at_close(backend: Backend) -> None:
    store = backend.open()
    backend.break_writes(store)
    try:
        store.put("k", answer("paid"))
        assert store.unstored == 1
    finally:
        backend.heal(store)
    store.close()
    assert backend.open().get("k") == answer("paid")


# -- the budget ledger -----------------------------------------------------------------------------
RESERVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    kind, where = sys.argv[1], sys.argv[2]
    if kind == "sqlite":
        from pytest_reliable.store import LocalStore
        store = LocalStore(Path(where))
    else:
        from pytest_reliable.store.postgres import PostgresStore
        store = PostgresStore(where)
    ledger = store.ledger("run-1")
    print(sum(ledger.reserve(30, None) for _ in range(20)), flush=True)
    store.close()
""")


def test_one_budget_per_run_id_whatever_the_number_of_processes(backend: Backend) -> None:
    backend.open().close()  # created once, as a run's start-up does
    children = [subprocess.Popen([sys.executable, "-c", RESERVER, backend.kind, backend.where],
                                 stdout=subprocess.PIPE, text=True) for _ in range(4)]
    granted = [int(child.communicate(timeout=120)[0]) for child in children]
    assert sum(granted) == 30
    store = backend.open()
    assert store.ledger("run-1").totals() == (30, 0, 50)
    other = store.ledger("run-2")
    assert other.reserve(30, None) and other.totals() == (1, 0, 0)
    other.add_tokens(50)
    assert not store.ledger("run-2").reserve(None, 50)  # the token limit is shared too


# -- n* entries ------------------------------------------------------------------------------------
def test_nstar_entries_round_trip_per_key(backend: Backend) -> None:
    store = backend.open()
    assert store.nstar.get(KEY) is None
    assert store.nstar.put(KEY, ENTRY)
    again = backend.open()
    assert again.nstar.get(KEY) == ENTRY
    assert again.nstar.get(NStarKey(**{**KEY.__dict__, "seed": 1})) is None


def test_a_pilot_runs_once_while_another_holder_waits(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    started = threading.Event()
    found: list[NStarEntry | None] = []

    def pilot() -> None:
        with first.nstar.pilot(KEY) as stored:
            assert stored is None
            started.set()
            time.sleep(0.5)
            first.nstar.put(KEY, ENTRY)

    thread = threading.Thread(target=pilot)
    thread.start()
    started.wait(10)
    began = time.monotonic()
    with second.nstar.pilot(KEY) as stored:
        found.append(stored)
    thread.join(10)
    assert found == [ENTRY]  # the waiter got the holder's entry: no second pilot
    assert time.monotonic() - began > 0.2


# -- claims ----------------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    kind, where = sys.argv[1], sys.argv[2]
    if kind == "sqlite":
        from pytest_reliable.store import LocalStore
        store = LocalStore(Path(where))
    else:
        from pytest_reliable.store.postgres import PostgresStore
        store = PostgresStore(where)
    assert store.claim("key").held
    print("held", flush=True)
    time.sleep(120)
""")


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_a_claim_excludes_every_other_holder_and_dies_with_its_process(backend: Backend) -> None:
    store = backend.open()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, backend.kind, backend.where],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert store.claim("key") == store.claim("key") and not store.claim("key").held
        assert store.claim("other").held
        store.release("other")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    # the holder died without a word: its claim died with it
    assert eventually(lambda: store.claim("key").held)
    store.release("key")


def test_a_claim_gives_the_answer_stored_meanwhile(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    assert first.claim("key").held
    assert not second.claim("key").held  # another handle in this process waits as a host does
    first.put("key", answer("paid once"))
    first.release("key")
    claim = second.claim("key")
    assert not claim.held and claim.answer == answer("paid once")
    assert second.claim("key").answer == answer("paid once")  # and nothing stays held


# -- schema ----------------------------------------------------------------------------------------
def test_a_store_written_by_a_newer_plugin_is_refused(backend: Backend) -> None:
    backend.open().close()
    if backend.kind == "sqlite":
        import sqlite3

        with sqlite3.connect(backend.where) as db:
            db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
        db.close()
    else:
        assert backend.server is not None
        backend.server.execute(backend.where.rsplit("/", 1)[1],
                               "UPDATE reliable_meta SET value='99' WHERE key='schema_version'")
    for mode in ("new", "none"):
        with pytest.raises(StoreUsageError, match="newer pytest-reliable") as info:
            backend.open(mode)
        assert "upgrade pytest-reliable" in str(info.value)


# -- naming the run and the store -----------------------------------------------------------------
def test_the_run_id_comes_from_the_ci_else_one_per_session() -> None:
    from pytest_reliable.store import default_run_id

    assert default_run_id({"GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "2"}) == "github-123-2"
    assert default_run_id({"GITHUB_RUN_ID": "123"}) == "github-123-1"
    assert default_run_id({"CI_PIPELINE_ID": "9"}) == "gitlab-9"
    assert default_run_id({"BUILDKITE_BUILD_ID": "b-1"}) == "buildkite-b-1"
    assert default_run_id({"CIRCLE_WORKFLOW_ID": "w"}) == "circleci-w"
    assert default_run_id({}) != default_run_id({})  # a fresh id per session


def test_a_store_url_is_postgresql_and_its_secrets_never_print() -> None:
    from pytest_reliable.redact import redact, register_environment_secrets
    from pytest_reliable.store import parse_store_url

    url = "postgresql://gate:url-pass-31337@db.example.com:5432/reliable"
    assert parse_store_url(f" {url} ") == url
    assert "url-pass-31337" not in redact(f"error at {url} (user gate)")
    with pytest.raises(ValueError, match="postgresql://HOST:PORT/DATABASE") as info:
        parse_store_url("mysql://gate:other-pass-42@db/reliable")
    assert "other-pass-42" not in str(info.value)
    os.environ["PGPASSWORD_FOR_TEST"] = "env-pass-271828"
    try:
        register_environment_secrets("PGPASSWORD_FOR_TEST")
        assert redact("echo env-pass-271828") == "echo ***"
    finally:
        del os.environ["PGPASSWORD_FOR_TEST"]
    assert redact("host=h port=5 password=kw-pass user=u") == "host=h port=5 password=*** user=u"
    assert redact("PGPASSWORD=shell-pass psql") == "PGPASSWORD=*** psql"


def test_the_ledger_reserves_and_settles_us_dollars(backend: Backend) -> None:
    """SPEC 13: a call is granted only if its reservation fits under the USD limit with what was
    spent and reserved; settling replaces the reservation by the real cost."""
    ledger = backend.open().ledger("run-usd")
    assert ledger.reserve(None, None, 1.0, 0.4) and ledger.reserve(None, None, 1.0, 0.4)
    assert not ledger.reserve(None, None, 1.0, 0.4)  # 1.2 would pass the limit
    ledger.add_tokens(30, 0.1 - 0.4)  # the first call cost 0.10, not its 0.40 reserved
    assert ledger.spent_usd() == pytest.approx(0.5)
    assert ledger.reserve(None, None, 1.0, 0.4)  # 0.9 fits now
    assert ledger.totals() == (3, 30, 1)
    # every process of the run id sees one count
    assert backend.open().ledger("run-usd").spent_usd() == pytest.approx(0.9)
    assert backend.open().ledger("run-other").spent_usd() == 0.0


def test_a_budget_ledger_from_before_usd_budgets_is_upgraded(tmp_path: Path) -> None:
    import sqlite3

    from pytest_reliable.store import SqliteLedger, check_budget_path

    path = tmp_path / "budget.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE budget (run TEXT PRIMARY KEY, calls INTEGER NOT NULL,"
                   " tokens INTEGER NOT NULL, skipped INTEGER NOT NULL, created REAL NOT NULL)")
        db.execute("INSERT INTO budget VALUES('old', 3, 10, 0, 9e9)")
    db.close()
    check_budget_path(path)  # not "an sqlite file of something else"
    ledger = SqliteLedger(path, "old")
    assert ledger.reserve(None, None, 0.5, 0.25) and ledger.totals() == (4, 10, 0)
    assert ledger.spent_usd() == pytest.approx(0.25)
    ledger.close()


def test_a_pending_batch_id_outlives_the_process_that_sent_it(backend: Backend) -> None:
    """SPEC 13: a run killed while its batch runs finds the batch's id on the next run."""
    backend.open().keep_batch("model:0:abc", "batch-7")
    later = backend.open()  # another process, the next run
    assert later.pending_batch("model:0:abc") == "batch-7"
    assert later.pending_batch("model:1:abc") is None
    later.keep_batch("model:0:abc", "batch-8")  # sent again (the provider lost it): replaced
    assert backend.open().pending_batch("model:0:abc") == "batch-8"
    later.forget_batch("model:0:abc")
    assert backend.open().pending_batch("model:0:abc") is None


# -- durability: an answer counted as stored survives a crash right after -------------------------
PUTTER = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from pytest_reliable.models.base import ModelResponse
    kind, where = sys.argv[1], sys.argv[2]
    if kind == "sqlite":
        from pytest_reliable.store import LocalStore
        store = LocalStore(Path(where))
    else:
        from pytest_reliable.store.postgres import PostgresStore
        store = PostgresStore(where)
    said = threading.Lock()

    def put(thread):
        for i in range(10**6):
            key = f"t{thread}-{i}"
            if store.put(key, ModelResponse(f"answer {key}")):
                with said:  # acknowledged: the plugin counts it as stored now
                    print(key, flush=True)

    for thread in range(4):
        threading.Thread(target=put, args=(thread,), daemon=True).start()
    threading.Event().wait()
""")


def acknowledged_then_crash(backend: Backend, crash: Callable[[subprocess.Popen[str]], None],
                            count: int = 300) -> set[str]:
    """Start a process that puts answers from 4 threads and says each one once `put` returned;
    crash (``crash(process)``) once ``count`` were said; the keys said."""
    putter = subprocess.Popen([sys.executable, "-c", PUTTER, backend.kind, backend.where],
                              stdout=subprocess.PIPE, text=True)
    assert putter.stdout is not None
    said = set()
    try:
        for line in putter.stdout:
            said.add(line.strip())
            if len(said) >= count:
                break
        crash(putter)
    finally:
        putter.kill()
        putter.wait(30)
    return said | {line.strip() for line in putter.stdout.read().splitlines() if line.strip()}


def test_answers_acknowledged_survive_the_database_crashing_right_after(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    """``pg_ctl stop -m immediate`` (a crash: no checkpoint, no flush of what the server holds in
    memory) the moment answers were acknowledged: after the restart none is missing."""
    backend = Backend("postgresql", postgres_url, postgres_server)
    backend.open().close()  # the schema, as a run's start-up makes it

    def crash(putter: subprocess.Popen[str]) -> None:
        postgres_server.stop_server("immediate")
        putter.kill()

    try:
        said = acknowledged_then_crash(backend, crash)
    finally:
        postgres_server.start()
    stored = {row[0] for row in postgres_server.execute(
        postgres_url.rsplit("/", 1)[1], "SELECT key FROM reliable_answers")}
    assert len(said) >= 300
    assert said - stored == set(), f"{len(said - stored)} acknowledged answers were lost"


def test_answers_acknowledged_survive_the_process_killed_right_after(tmp_path: Path) -> None:
    backend = Backend("sqlite", str(tmp_path / "cache.sqlite"))
    backend.open().close()
    said = acknowledged_then_crash(backend, lambda putter: os.kill(putter.pid, signal.SIGKILL))
    stored = {row.key for batch in backend.open("none").rows() for row in batch}
    assert len(said) >= 300 and said - stored == set()


def test_answers_put_together_share_one_commit(backend: Backend) -> None:
    """A group commit: answers that arrive at once from several threads are written in fewer
    transactions than answers, each thread returning once its own answer is committed."""
    store = backend.open()
    barrier = threading.Barrier(8)

    def put(thread: int) -> None:
        barrier.wait()
        for i in range(25):
            store.put(f"k{thread}-{i}", answer(f"{thread} {i}"))
            assert store.get_many([f"k{thread}-{i}"])  # served, and written by now:
            assert store.unstored == 0 or f"k{thread}-{i}" not in store._pending

    threads = [threading.Thread(target=put, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert store.unstored == 0
    assert backend.open().count() == 200
    assert store.commits < 200


# -- paid for once: the claim protocol's races -----------------------------------------------------
def test_a_claim_is_held_until_its_answer_is_written(backend: Backend) -> None:
    """The holder's database refused its answer (kept in memory): letting go of the claim then
    would make the next claimer find nothing and pay again. The claim goes once it is written."""
    from pytest_reliable.store import StoreUnavailable

    holder, other = backend.open(), backend.open()
    assert holder.claim("key").held

    def refuse(rows: Any, *, replace: bool) -> None:
        raise StoreUnavailable("disk full")

    holder._write = refuse  # type: ignore[method-assign]
    holder.put("key", answer("paid"))
    assert holder.unstored == 1
    holder.release("key")
    claim = other.claim("key")
    assert not claim.held and claim.answer is None  # still the holder's: the other one waits
    del holder._write  # the database takes answers again
    assert holder.flush() == 0
    assert other.claim("key") == Claim(held=False, answer=answer("paid"))
    assert eventually(lambda: other.claims.try_claim("key"))  # and the claim was let go
    other.claims.release("key")


def test_an_answer_stored_while_a_claim_is_taken_is_found(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    """The look for a stored answer must see an answer stored just before the claim was granted.
    Here granting it takes 0.6 s on the server (a slowed pg_try_advisory_lock, found first on
    the waiter's search path), and meanwhile the holder stores its answer and lets go: a look
    whose snapshot predates the lock (one statement with it) misses it, and pays again."""
    from pytest_reliable.store.postgres import PostgresStore

    PostgresStore(postgres_url).close()  # the schema
    dbname = database_of(postgres_url)
    postgres_server.execute(dbname, "CREATE SCHEMA slow")
    postgres_server.execute(
        dbname, "CREATE FUNCTION slow.pg_try_advisory_lock(key bigint) RETURNS boolean "
        "LANGUAGE plpgsql VOLATILE AS $$ BEGIN PERFORM pg_sleep(0.6); "
        "RETURN pg_catalog.pg_try_advisory_lock(key); END $$")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THEN_PAY, postgres_url],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    waiter = PostgresStore(f"{postgres_url}?options=-csearch_path%3Dpublic,slow,pg_catalog")
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        holder.stdin.write("go\n")
        holder.stdin.flush()  # it stores its answer and lets go 0.2 s from now
        claim = waiter.claim("key")
        assert holder.stdout.readline().strip() == "paid"
        assert claim == Claim(held=False, answer=answer("paid once"))
    finally:
        holder.kill()
        holder.wait(10)
        waiter.close()


HOLD_THEN_PAY = textwrap.dedent("""
    import sys, time
    from pytest_reliable.models.base import ModelResponse
    from pytest_reliable.store.postgres import PostgresStore
    store = PostgresStore(sys.argv[1])
    assert store.claim("key").held
    print("held", flush=True)
    sys.stdin.readline()
    time.sleep(0.2)
    store.put("key", ModelResponse("paid once"))
    assert store.unstored == 0
    store.release("key")
    print("paid", flush=True)
    time.sleep(60)
""")


def database_of(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?")[0]


class Flaky:
    """A model whose first ``failures`` attempts per prompt are refused with a Retry-After: its
    calls take long with every attempt quick (the pauses are the server's)."""

    identity = "flaky"
    max_concurrency = None

    def __init__(self, failures: int, retry_after: float = 1.0) -> None:
        self.failures = failures
        self.retry_after = retry_after
        self.attempts: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self.lock = threading.Lock()
        self.started = threading.Event()

    async def acomplete(self, messages: Any, params: SamplingParams) -> ModelResponse:
        from pytest_reliable.models.base import ModelCallError

        prompt = messages[-1]["content"]
        with self.lock:
            self.attempts[prompt] = self.attempts.get(prompt, 0) + 1
            refused = self.attempts[prompt] <= self.failures
            if not refused:
                self.answered[prompt] = self.answered.get(prompt, 0) + 1
        self.started.set()
        if refused:
            raise ModelCallError("429 slow down", retryable=True, retry_after=self.retry_after)
        return ModelResponse(f"answer to {prompt}")

    async def aclose(self) -> None:
        pass


def test_a_claim_does_not_expire_while_its_holder_waits_out_a_retry(tmp_path: Path) -> None:
    """The holder's call takes 2 s (two Retry-After pauses of 1 s) with a 0.2 s timeout and two
    retries: a claim that expired after timeout x (retries + 1) = 0.6 s would be taken over by
    the waiter while the holder still calls, and the key paid twice."""
    backend = Backend("sqlite", str(tmp_path / "cache.sqlite"))
    model = Flaky(failures=2)
    request = [Request.of([("user", "the key")], SamplingParams())]
    results: dict[str, Any] = {}

    def run(name: str) -> None:
        runner = Runner(model, backend.open(), timeout=0.2, max_retries=2, backoff_base=0.01,
                        backoff_max=0.05)
        results[name] = runner.run(request)[0]

    holder = threading.Thread(target=run, args=("holder",))
    holder.start()
    assert model.started.wait(10)
    run("waiter")
    holder.join(30)
    assert model.answered == {"the key": 1}
    assert results["holder"].status == "ok" and not results["holder"].cached
    assert results["waiter"].status == "ok" and results["waiter"].cached
    for store in backend.handles:
        store.close()


# -- waiting for other processes' claims: one deadline for the run, said while it lasts -----------
HOLD_KEYS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    kind, where, *names = sys.argv[1:]
    if kind == "sqlite":
        from pytest_reliable.store import LocalStore
        store = LocalStore(Path(where))
    else:
        from pytest_reliable.store.postgres import PostgresStore
        store = PostgresStore(where)
    assert all(store.claims.try_claim(name) for name in names)
    print("held", flush=True)
    time.sleep(120)  # alive, holding, never answering: a frozen host, as its waiters see it
""")


@contextlib.contextmanager
def frozen_holder(backend: Backend, names: list[str]) -> Iterator[int]:
    """A process holding the claims ``names`` and doing nothing more; its pid."""
    backend.open().close()  # the schema first
    holder = subprocess.Popen([sys.executable, "-c", HOLD_KEYS, backend.kind, backend.where,
                               *names], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait(10)


class Counted:
    """A model that answers at once and counts its answers per prompt."""

    identity = "counted"
    max_concurrency = None

    def __init__(self) -> None:
        self.answered: dict[str, int] = {}
        self.lock = threading.Lock()

    async def acomplete(self, messages: Any, params: SamplingParams) -> ModelResponse:
        prompt = messages[-1]["content"]
        with self.lock:
            self.answered[prompt] = self.answered.get(prompt, 0) + 1
        return ModelResponse(f"answer to {prompt}")

    async def aclose(self) -> None:
        pass


def questions(count: int) -> list[Request]:
    return [Request.of([("user", f"question {i}")], SamplingParams()) for i in range(count)]


def test_a_frozen_holder_costs_one_patience_not_one_per_claim(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder that never answers: its first claim a waiter meets expires after the patience
    (2 s here) and is taken over, by one waiter of two; every other claim it holds expires at
    once, so four tests waiting on it one after the other cost one patience, not four."""
    monkeypatch.setattr(Runner, "claim_patience", property(lambda self: 2.0))
    model = Counted()
    requests = questions(4)
    keys = [Runner(model, None).key(r) for r in requests]
    with frozen_holder(backend, keys) as pid, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        store, other = backend.open(), backend.open()
        began = time.monotonic()
        both = [threading.Thread(target=lambda s=s: Runner(model, s).run(requests[:1]))
                for s in (store, other)]
        for thread in both:
            thread.start()
        for thread in both:
            thread.join(30)
        results = [Runner(model, store).run([r])[0] for r in requests[1:]]
        took = time.monotonic() - began
    assert model.answered == {f"question {i}": 1 for i in range(4)}  # the takeover: one waiter
    assert all(r.status == "ok" for r in results)
    assert 2.0 <= took < 7.0, took  # one patience (2 s) and a few looks, not 4 x 2 s
    summaries = [str(w.message) for w in said if "expired without an answer" in str(w.message)]
    assert summaries and all(f"pid {pid}" in text for text in summaries), summaries


def test_the_run_waits_for_claims_until_its_deadline_then_says_who_holds_them(
    backend: Backend,
) -> None:
    model = Counted()
    requests = questions(2)
    keys = [Runner(model, None).key(r) for r in requests]
    with frozen_holder(backend, keys) as pid:
        store = backend.open(wait_timeout=1.5)
        began = time.monotonic()
        first = Runner(model, store).run(requests[:1])[0]
        waited = time.monotonic() - began
        second = Runner(model, store).run(requests[1:])[0]
        after = time.monotonic() - began - waited
    assert model.answered == {}  # nothing paid: the holder may still answer them
    assert 1.5 <= waited < 5.0 and after < 1.0  # the deadline is the run's, not each key's
    for result in (first, second):
        assert result.status == "error" and result.error is not None
        assert "--reliable-wait-timeout 1.5 s for the whole run" in result.error
    assert f"pid {pid}" in (first.error or "")


def test_a_pilot_waits_within_the_runs_deadline(backend: Backend) -> None:
    from pytest_reliable.store.waits import ClaimWaitTimeout

    with frozen_holder(backend, [f"n*:{KEY.digest()}"]) as pid:
        store = backend.open(wait_timeout=1.0)
        with pytest.raises(ClaimWaitTimeout, match="n\\* pilot of t.py::test_a") as info, \
                store.nstar.pilot(KEY):
            pytest.fail("no pilot may run while another process holds its claim")
    assert "--reliable-wait-timeout 1 s" in str(info.value) and f"pid {pid}" in str(info.value)


def test_a_long_wait_says_what_it_waits_for_and_who_holds_it(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_reliable.store import waits
    from pytest_reliable.store.claims import this_host

    monkeypatch.setattr(waits, "FIRST_REPORT_S", 0.3)
    monkeypatch.setattr(waits, "HOLDERS_EVERY_S", 0.2)
    events: list[ProgressEvent] = []
    model = Counted()
    requests = questions(3)
    keys = [Runner(model, None).key(r) for r in requests]
    with frozen_holder(backend, keys) as pid:
        store = backend.open(wait_timeout=2.0)
        Runner(model, store, on_progress=events.append).run(requests)
    said = [event.waiting for event in events if event.waiting]
    assert len(said) == 1, said  # once per minute at most
    assert "waiting for 3 answers other processes claimed" in said[0]
    holder = f"host {this_host()} pid {pid}" if backend.kind == "postgresql" else f"pid {pid}"
    assert f"{holder}" in said[0] and " holds 3" in said[0], said[0]
    assert "--reliable-wait-timeout 2 s" in said[0]


# -- start-up: the schema the store writes, checked ------------------------------------------------
def test_a_table_of_the_same_name_that_is_not_the_stores_stops_the_run(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    """Else the run passes its start-up check, then pays for every call and stores none."""
    from pytest_reliable.store.postgres import PostgresStore

    dbname = database_of(postgres_url)
    postgres_server.execute(dbname, "CREATE TABLE reliable_answers (key TEXT PRIMARY KEY, "
                                    "value TEXT)")
    for mode in ("new", "none"):
        with pytest.raises(StoreUsageError) as info:
            PostgresStore(postgres_url, mode).close()
        message = str(info.value)
        assert "table reliable_answers in database" in message and "is not the store's" in message
        assert "text bytea" in message and "key text, value text" in message
        assert "a database of its own" in message and PASSWORD not in message
    # all the store's columns, and one more it does not fill: found by the write tried at start-up
    postgres_server.execute(dbname, "DROP TABLE reliable_answers")
    PostgresStore(postgres_url).close()
    postgres_server.execute(dbname, "ALTER TABLE reliable_answers ADD COLUMN owner TEXT NOT NULL")
    with pytest.raises(StoreUsageError, match="table reliable_answers .* does not take the "
                                              "store's rows .*owner"):
        PostgresStore(postgres_url).close()


def test_a_user_who_may_not_write_the_store_is_told_at_start_up(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    from pytest_reliable.store.postgres import PostgresStore

    PostgresStore(postgres_url).close()  # made by its owner
    dbname = database_of(postgres_url)
    postgres_server.execute(dbname, "DROP ROLE IF EXISTS reader")
    postgres_server.execute(dbname, "CREATE ROLE reader LOGIN PASSWORD 'reader-pw-5521'")
    postgres_server.execute(dbname, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    url = postgres_url.replace(f"{postgres_server.user}:{PASSWORD}", "reader:reader-pw-5521")
    with pytest.raises(StoreUsageError) as info:
        PostgresStore(url).close()
    message = str(info.value)
    assert "user reader may not write table reliable_answers" in message, message
    assert "GRANT SELECT, INSERT, UPDATE, DELETE ON reliable_answers" in message
    assert "reader-pw-5521" not in message
    PostgresStore(url, "none").close()  # replaying needs only SELECT
    postgres_server.execute(dbname, "GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
                                    "public TO reader")
    store = PostgresStore(url)
    assert store.put("k", answer("stored by a user who may write rows, not tables"))
    store.close()


def test_a_local_cache_whose_responses_table_is_not_ours_is_refused(tmp_path: Path) -> None:
    import sqlite3

    from pytest_reliable.store import check_cache_path

    path = tmp_path / "cache.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, body TEXT)")
    db.close()
    for mode in ("new", "none"):
        with pytest.raises(StoreUsageError, match="text, logprobs, .* missing; it has key, body"):
            check_cache_path(path, mode)


# -- clocks: a host whose clock is wrong changes nothing -------------------------------------------
def test_a_worker_whose_clock_is_ahead_keeps_the_runs_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker two days ahead opening the local ledger used to drop the rows it thought older
    than a day, the run's own included: the budget started again from zero."""
    from pytest_reliable.store import SqliteLedger, local

    path = tmp_path / "budget.sqlite"
    first = SqliteLedger(path, "run-1")
    assert sum(first.reserve(10, None) for _ in range(6)) == 6
    ahead = time.time() + 2 * 86400
    monkeypatch.setattr(time, "time", lambda: ahead)
    second = SqliteLedger(path, "run-1")  # another xdist worker of the run, its clock ahead
    assert sum(second.reserve(10, None) for _ in range(6)) == 4  # 10 calls for the run, not 16
    assert first.totals() == second.totals() == (10, 0, 2)
    for ledger in (first, second):
        ledger.close()
    # only the oldest runs beyond the newest LEDGER_ROWS_KEPT go, by insertion order
    monkeypatch.setattr(local, "LEDGER_ROWS_KEPT", 10)
    for i in range(15):
        later = SqliteLedger(path, f"later-{i}")
        assert later.totals() == (0, 0, 0)
        later.close()
    import sqlite3

    with sqlite3.connect(path) as db:
        kept = [row[0] for row in db.execute("SELECT run FROM budget ORDER BY rowid")]
    db.close()
    assert kept == [f"later-{i}" for i in range(5, 15)]


def test_kept_reports_are_in_the_order_the_server_kept_them(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history orders runs by when the store kept them: by the server's clock, so a host
    whose clock is a day ahead does not put its run after the next ones."""
    from pytest_reliable.store.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 86400)
    store.keep_report("run-1", "a", None, "m", None, '{"n": 1}')
    monkeypatch.setattr(time, "time", real)
    store.keep_report("run-2", "a", None, "m", None, '{"n": 2}')
    assert store.kept_reports() == ['{"n": 1}', '{"n": 2}']
    store.close()


def test_every_backend_answers_for_kept_reports(backend: Backend) -> None:
    """Kept reports are part of the `Store` interface: the shared store keeps them for every
    host, the local files keep none (a machine's history is its --reliable-history directory)."""
    store = backend.open()
    kept = {"schema_version": 1, "tests": [], "created": "2026-01-01", "model": "m",
            "run_id": "r1", "part": "p1", "git_commit": None}
    shared = backend.kind == "postgresql"
    assert store.keep_run_report(kept) is shared
    texts = store.kept_reports()
    assert [json.loads(text)["run_id"] for text in texts] == (["r1"] if shared else [])


# -- a database restart: claims wait for it, are taken back, and the store writes again at once ----
def test_claims_wait_for_a_database_that_restarts_and_are_taken_back(
    postgres_server: TemporaryPostgres, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_reliable.store import claims, postgres_claims

    monkeypatch.setattr(claims, "LOST_GRACE_S", 1.0)
    monkeypatch.setattr(postgres_claims, "SETTLE_S", 1.0)
    backend = Backend("postgresql", postgres_url, postgres_server)
    store = backend.open()
    assert store.claim("mine").held
    postgres_server.stop_server()
    try:
        # for a moment the claim waits (a restart takes seconds), instead of going local
        assert store.claim("during") == Claim(held=False)
        time.sleep(1.1)
        assert store.claim("later").held  # then local to this process, said once
        assert store.claims.degraded is not None
    finally:
        postgres_server.start()
    # reconnected: the claims this process holds are taken back at once, and new ones wait a
    # moment (other processes take back theirs), then are taken
    assert store.claim("after") == Claim(held=False)
    time.sleep(1.1)
    assert store.claim("after").held
    holder = subprocess.Popen([sys.executable, "-c", HOLD_KEYS, "postgresql", postgres_url,
                               "mine", "later"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() != "held", "another host got claims this process still holds"
    finally:
        holder.kill()
        holder.wait(10)


def test_the_store_writes_again_as_soon_as_a_restarted_database_is_back(
    postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    """The driver's pool waits ever longer between its reconnection attempts: without a fresh
    pool the answers of the seconds after a restart stay in memory, and other hosts pay."""
    backend = Backend("postgresql", postgres_url, postgres_server)
    store = backend.open()
    assert store.put("before", answer("stored"))
    postgres_server.stop_server()
    try:
        time.sleep(4.0)  # the pool's attempts: after 1, 2 and 4 s...
    finally:
        postgres_server.start()
    began = time.monotonic()
    assert store.put("after", answer("stored at once")), store.take_store_failure()
    assert time.monotonic() - began < 3.0
    assert backend.open().get_many(["before", "after"]) == {
        "before": answer("stored"), "after": answer("stored at once")}


def test_a_pilot_claimed_by_a_holder_found_frozen_is_taken_over(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pilot has no patience of its own (it takes as long as it takes), but a holder one of
    whose answer claims expired is unresponsive: its pilot is taken over at once."""
    monkeypatch.setattr(Runner, "claim_patience", property(lambda self: 1.0))
    model = Counted()
    request = questions(1)
    with frozen_holder(backend, [Runner(model, None).key(request[0]),
                                 f"n*:{KEY.digest()}"]):
        store = backend.open(wait_timeout=30.0)
        with pytest.warns(StoreWarning, match="1 claim of other processes expired"):
            assert Runner(model, store).run(request)[0].status == "ok"  # taken over
        began = time.monotonic()
        with store.nstar.pilot(KEY) as stored:
            assert stored is None  # this process runs the pilot
            store.nstar.put(KEY, ENTRY)
        assert time.monotonic() - began < 5.0
    assert backend.open().nstar.get(KEY) == ENTRY
