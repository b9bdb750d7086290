"""The PostgreSQL store: one database shared by every machine of a sharded gate (SPEC section 10).

psycopg 3 with a connection pool (the extra ``pytest-reliable[postgres]``, imported only here and
only when a ``postgresql://`` store is asked for). Tables carry a ``reliable_`` prefix, so the
store can share a database with other things:

- ``reliable_meta``: the schema version (created on first use; a newer one stops the run).
- ``reliable_answers``: one row per cache key, written once (``ON CONFLICT DO NOTHING``: the first
  writer wins; record mode ``all`` overwrites). Answer texts are UTF-8 bytes (``surrogatepass``):
  PostgreSQL's text type takes neither a NUL nor a lone surrogate, and a model may answer both.
  Answers are committed synchronously (``synchronous_commit`` on, whatever the server's default):
  an answer the plugin counts as stored survives the database crashing right after; answers that
  arrive together share one commit (`base.Store.put`). So do n* entries, pending batch ids and
  kept reports; only the budget ledger's counts commit without waiting for the disk
  (`PostgresLedger`).
- ``reliable_budget``: one row per run id; a call is granted by one atomic ``UPDATE ... WHERE
  calls < limit RETURNING``, so every host shares one budget.
- ``reliable_nstar``: the n* entries (the records the local JSON files hold).
- claims: session-level advisory locks (``pg_try_advisory_lock``) on one dedicated connection per
  process, so a claim dies with its holder's connection: a killed host never blocks the others.
  The connection's ``application_name`` names the host and pid, so a waiter can say who holds a
  claim (``pg_locks`` joined with ``pg_stat_activity``). The look for a stored answer runs as a
  statement of its own after the lock (same round trip, pipelined): its snapshot sees every
  answer committed before the holder let go.

Times that order or expire rows (a budget row's, a kept report's) are the server's clock, never a
client's. At start-up the tables are checked against the columns the store writes, and a write is
tried (and rolled back): a table of the same name that is not the store's, or a user who may not
write, is a usage error then, not a run that pays for every call and stores none.

Schema version 2 (SPEC section 13) adds ``reliable_budget.usd`` and ``reliable_batches`` (the
pending batch of a run, by name). Schema version 3 adds:
- ``reliable_reports`` (schema version 3): the kept JSON reports of the release history
  (``--reliable-history`` with a store), one row per pytest session: the run id, a part id (the
  shards of one run each keep their own), the date, model and git commit (`store.reports`).

Faults: at start-up every failure to connect is a `StoreUsageError` naming host, port and the fix
(unreachable, wrong password, missing database, missing privilege, missing extra); mid-run a
failure is `StoreUnavailable`, which the `Store` turns into answers kept in memory, retried writes
and one report. The password (URL, ``PGPASSWORD``) is registered for redaction before anything is
said about the store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pytest_reliable.contract.settings import RecordMode
from pytest_reliable.files import sha256_hex
from pytest_reliable.redact import redact, register_environment_secrets, register_url_secrets
from pytest_reliable.store.base import (
    CHUNK_BYTES,
    CHUNK_ROWS,
    AnswerRow,
    BadRow,
    Ledger,
    Store,
    answer_row,
    checked,
)
from pytest_reliable.store.claims import Claims, Holder, this_host
from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError
from pytest_reliable.store.nstar import NStarEntries, NStarKey
from pytest_reliable.store.waits import ClaimWaits

log = logging.getLogger("pytest_reliable.store")
driver_log = logging.getLogger("pytest_reliable.store.driver")

EXTRA = 'pip install "pytest-reliable[postgres]"'
SCHEMA_VERSION = 3
CONNECT_TIMEOUT_S = 10
POOL_WAIT_S = 5.0
"""Mid-run: how long a query waits for a connection before the store counts as lost (for now)."""
POOL_SIZE = 8
POOL_NAME = "pytest-reliable"
DURABLE_COMMIT = "SET synchronous_commit = on"
"""Run on each of the store's connections only when the server's default is ``off``: a paid
answer is stored once its commit is on the server's disk (other durable settings of a server,
``local``, ``remote_apply``..., are kept)."""
LAZY_COMMIT = "SET LOCAL synchronous_commit TO OFF"
REVIVE_EVERY_S = 1.0
REVIVE_CONNECT_S = 3
"""An empty pool is replaced at most this often, once a direct connection (this quick) works."""
CLAIMS_RECONNECT_S = 1.0
"""A lost claims connection is tried again at most this often."""
SETTLE_S = 3.0
"""After the claims connection came back, new claims wait this long: other processes take back
what they held when the server went away (each reconnects within `CLAIMS_RECONNECT_S` of its
next claim) before this one may take it as free."""

NOW = "EXTRACT(EPOCH FROM clock_timestamp())"
"""The server's clock: the hosts' clocks may disagree."""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        ("CREATE TABLE IF NOT EXISTS reliable_answers ("
        " key TEXT PRIMARY KEY, text BYTEA NOT NULL, logprobs TEXT, prompt_tokens INTEGER,"
        " completion_tokens INTEGER, latency_s DOUBLE PRECISION, extra TEXT, model TEXT,"
        " meta TEXT, created DOUBLE PRECISION)"),
        ("CREATE TABLE IF NOT EXISTS reliable_budget ("
        " run TEXT PRIMARY KEY, calls BIGINT NOT NULL DEFAULT 0, tokens BIGINT NOT NULL DEFAULT 0,"
        " skipped BIGINT NOT NULL DEFAULT 0, created DOUBLE PRECISION NOT NULL)"),
        ("CREATE TABLE IF NOT EXISTS reliable_nstar ("
        " digest TEXT PRIMARY KEY, record TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)"),
    ),
    2: (  # SPEC section 13: USD budgets, and the batch a killed run resumes
        ("ALTER TABLE reliable_budget ADD COLUMN IF NOT EXISTS usd DOUBLE PRECISION NOT NULL"
        " DEFAULT 0"),
        ("CREATE TABLE IF NOT EXISTS reliable_batches ("
        " name TEXT PRIMARY KEY, batch_id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)"),
    ),
    3: (
        # The report is JSON written with ensure_ascii (no NUL, no lone surrogate reaches TEXT).
        ("CREATE TABLE IF NOT EXISTS reliable_reports ("
        " run_id TEXT NOT NULL, part TEXT NOT NULL, created TEXT, model TEXT, git_commit TEXT,"
        " report TEXT NOT NULL, kept DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, part))"),
    ),
}
"""Statements that bring the schema from version N-1 to N, applied in order on first use."""
TABLES: dict[str, dict[str, str]] = {
    "reliable_meta": {"key": "text", "value": "text"},
    "reliable_answers": {
        "key": "text", "text": "bytea", "logprobs": "text", "prompt_tokens": "integer",
        "completion_tokens": "integer", "latency_s": "double precision", "extra": "text",
        "model": "text", "meta": "text", "created": "double precision"},
    "reliable_budget": {"run": "text", "calls": "bigint", "tokens": "bigint", "skipped": "bigint",
                        "created": "double precision", "usd": "double precision"},
    "reliable_nstar": {"digest": "text", "record": "text", "created": "double precision"},
    "reliable_batches": {"name": "text", "batch_id": "text", "created": "double precision"},
    "reliable_reports": {"run_id": "text", "part": "text", "created": "text", "model": "text",
                         "git_commit": "text", "report": "text", "kept": "double precision"},
}
"""The columns the store reads and writes, by table (what `_check_tables` checks at start-up)."""
TABLE_FIX = ("Give the store a database of its own (or a schema of its own: add "
             "?options=-csearch_path%3Dreliable to the URL after CREATE SCHEMA reliable), or move "
             "that table away")
PROBE = "pytest-reliable: start-up write probe"


def _family(kind: str | None) -> str | None:
    """Types the store's reads and writes treat alike."""
    if kind is None:
        return None
    if kind in ("text", "character varying") or kind.startswith("character varying("):
        return "text"
    if kind in ("integer", "bigint", "smallint"):
        return "integer"
    if kind in ("double precision", "real") or kind.startswith("numeric"):
        return "number"
    return kind


SCHEMA_LOCK = int(sha256_hex("pytest-reliable schema")[:15], 16)
"""Advisory lock held while the schema is created, so hosts starting together take turns."""
KEY_SEPARATOR = "\x1f"
"""Joins the keys of one batch lookup (cache keys are hex digests: it never occurs in one)."""
COLUMNS = ("key, text, logprobs, prompt_tokens, completion_tokens, latency_s, extra, model, meta,"
           " created")


def _modules() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as error:
        raise StoreUsageError(
            f"--reliable-store with a postgresql:// URL needs psycopg 3 and psycopg-pool, which "
            f"are not installed here ({error.name or error}): {EXTRA}"
        ) from None
    return psycopg, psycopg_pool


_in_store = threading.local()
"""``active`` while this thread runs a store query: what the driver logs then is the store's."""
_routing_lock = threading.Lock()


class _DriverLogs(logging.Filter):
    """Takes the driver's records about the store's connections (the pool's threads, a store
    query's thread) off their logger and says them at DEBUG on `driver_log`: a store lost mid-run
    is reported once by the store (`Store.take_store_failure`), never as raw lines of the pool's
    reconnection attempts, which would otherwise print after pytest's summary."""

    def filter(self, record: logging.LogRecord) -> bool:
        ours = (record.threadName or "").startswith(POOL_NAME) or \
            getattr(_in_store, "active", False)
        if not ours:
            try:
                ours = f"'{POOL_NAME}'" in record.getMessage()
            except Exception:  # noqa: BLE001 - a record that cannot be formatted is not ours
                return True
        if ours:
            driver_log.debug("%s: %s", record.name, redact(record.getMessage()))
        return not ours


def route_driver_logs() -> None:
    """Install `_DriverLogs` on psycopg's loggers (once per process)."""
    with _routing_lock:
        for name in ("psycopg", "psycopg.pool"):
            logger = logging.getLogger(name)
            if not any(isinstance(f, _DriverLogs) for f in logger.filters):
                logger.addFilter(_DriverLogs())


def register_store_secrets(url: str) -> None:
    """The URL's password and ``PGPASSWORD`` never appear in anything the plugin prints."""
    register_url_secrets(url)
    register_environment_secrets("PGPASSWORD")


def _one_line(error: BaseException) -> str:
    return redact(" ".join(str(error).split()))


def advisory_key(name: str) -> int:
    """A signed 64-bit advisory lock key from ``name``."""
    value = int(sha256_hex(name)[:16], 16)
    return value - (1 << 64) if value >= (1 << 63) else value


class PostgresStore(Store):
    kind = "postgresql"
    schema_version = SCHEMA_VERSION
    read_batch = 1000

    def __init__(self, url: str, record_mode: RecordMode = "new", *, pool_size: int = POOL_SIZE,
                 wait_s: float = POOL_WAIT_S, wait_timeout: float | None = None) -> None:
        """``wait_s``: how long a query waits for a connection before the store counts as lost
        for a while (mid-run; start-up failures are usage errors at once). ``wait_timeout``:
        the run's deadline for waiting on other processes' claims (`Store.waits`)."""
        register_store_secrets(url)
        psycopg, psycopg_pool = _modules()
        route_driver_logs()
        info = psycopg.conninfo.conninfo_to_dict(url)
        self.host = str(info.get("host") or os.environ.get("PGHOST") or "localhost")
        self.port = str(info.get("port") or os.environ.get("PGPORT") or "5432")
        self.dbname = str(info.get("dbname") or os.environ.get("PGDATABASE") or "")
        self.user = str(info.get("user") or os.environ.get("PGUSER") or "")
        super().__init__(record_mode, redact(url), wait_timeout=wait_timeout)
        self.url = url
        self._psycopg = psycopg
        self.durable = False
        """Whether the store's connections must ask for synchronous commits themselves."""
        self.has_schema = self._prepare()
        self._psycopg_pool = psycopg_pool
        self._pool_size = pool_size
        self._wait_s = wait_s
        self._pool_lock = threading.Lock()
        self._revived_at = float("-inf")
        self._closing = False
        self._pool = self._new_pool()
        self.claims: Claims = AdvisoryClaims(self)
        self.waits = ClaimWaits(self.claims, wait_timeout)
        self.nstar: NStarEntries = PostgresNStar(self)

    # -- start-up --------------------------------------------------------------------------------
    def _where(self) -> str:
        return f"the PostgreSQL server at {self.host}:{self.port}"

    def _new_pool(self) -> Any:
        pool = self._psycopg_pool.ConnectionPool(
            self.url, min_size=1, max_size=self._pool_size, open=False, timeout=self._wait_s,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            configure=self._configure if self.durable else None,
            name=POOL_NAME, reconnect_timeout=3600.0,
        )
        pool.open(wait=False)
        return pool

    def _revive_pool(self) -> bool:
        """Replace an empty pool by a fresh one once the server takes connections again: the
        pool waits ever longer between its own attempts (its delay doubles without bound), so
        after a restart it could stay empty for minutes while the server is back. True when
        replaced (at most once a second)."""
        with self._pool_lock:
            if self._closing or time.monotonic() - self._revived_at < REVIVE_EVERY_S:
                return False
            self._revived_at = time.monotonic()
            try:
                self._psycopg.connect(self.url, autocommit=True,
                                      connect_timeout=REVIVE_CONNECT_S).close()
            except self._psycopg.Error:
                return False  # still away
            old, self._pool = self._pool, self._new_pool()
        old.close(timeout=0)
        return True

    @staticmethod
    def _configure(conn: Any) -> None:
        """A new pooled connection of a server whose default is asynchronous commits."""
        conn.execute(DURABLE_COMMIT)

    def connect(self) -> Any:
        """A new connection of its own (autocommit), for start-up checks."""
        return self._psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)

    def _prepare(self) -> bool:
        """Connect once, then create or check the schema; True when the tables exist."""
        try:
            conn = self.connect()
        except self._psycopg.Error as error:
            raise self._connect_error(error) from None
        try:
            with conn:
                exists = self._migrate(conn)
                if exists:
                    self._check_tables(conn)
                    if not self.replay_only:
                        self._probe_writes(conn)
                self.durable = str(conn.execute("SHOW synchronous_commit").fetchone()[0]) == "off"
                return exists
        except StoreUsageError:
            raise
        except self._psycopg.errors.InsufficientPrivilege as error:
            raise StoreUsageError(
                f"--reliable-store: user {self.user or '(default)'} may not create the store's "
                f"tables in database {self.dbname} at {self.host}:{self.port} "
                f"({_one_line(error)}): run once as the database owner, or GRANT CREATE ON "
                "SCHEMA public to that user"
            ) from None
        except self._psycopg.Error as error:
            raise StoreUsageError(
                f"--reliable-store: {self._where()} failed while preparing the store "
                f"({_one_line(error)}): check the database, or drop --reliable-store to use the "
                "local sqlite files"
            ) from None

    def _migrate(self, conn: Any) -> bool:
        if self.replay_only:  # replay only: read what is there, create nothing
            exists = conn.execute("SELECT to_regclass('reliable_meta')").fetchone()[0]
            if exists is None:
                return False
            self._check_version(self._stored_version(conn))
            return True
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            if conn.execute("SELECT to_regclass('reliable_meta')").fetchone()[0] is None:
                conn.execute("CREATE TABLE reliable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            version = self._stored_version(conn)
            self._check_version(version)
            missing = [table for table in TABLES if conn.execute(
                "SELECT to_regclass(%s)", (table,)).fetchone()[0] is None]
            if version == SCHEMA_VERSION and not missing:
                return True  # nothing to create: a user who may only write rows is enough
            # the statements are idempotent: a table dropped by hand is made again
            for step in range(1 if missing else version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO reliable_meta(key, value) VALUES('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
        return True

    def _check_tables(self, conn: Any) -> None:
        """Every table the store uses has the columns it writes, of their types (a table of the
        same name that something else made would take no answer)."""
        for table, columns in TABLES.items():
            found = conn.execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
                "ORDER BY a.attnum", (table,)).fetchall()
            if not found:
                continue  # absent: created by the migration, or a reader's older store
            have = {str(name): str(kind) for name, kind in found}
            wrong = [f"{name} {kind}" for name, kind in columns.items()
                     if _family(have.get(name)) != _family(kind)]
            if wrong:
                raise StoreUsageError(
                    f"--reliable-store: table {table} in database {self.dbname} at "
                    f"{self.host}:{self.port} is not the store's: the store writes "
                    f"{', '.join(wrong)}, and it has "
                    f"{', '.join(f'{n} {k}' for n, k in have.items())}. {TABLE_FIX}")

    def _probe_writes(self, conn: Any) -> None:
        """Write one row of each kind the store writes, then roll back: a table that takes none
        (a constraint, a trigger, a missing privilege) is a usage error now."""
        answer = (f"INSERT INTO reliable_answers({COLUMNS}) VALUES (%s, %s, NULL, 1, 1, 0, '{{}}',"
                  " 'probe', '{}', 0) ON CONFLICT (key) DO NOTHING")
        budget = ("INSERT INTO reliable_budget(run, created) VALUES (%s, 0) ON CONFLICT (run) "
                  "DO UPDATE SET calls = reliable_budget.calls + 1")
        nstar = ("INSERT INTO reliable_nstar(digest, record, created) VALUES (%s, '{}', 0) "
                 "ON CONFLICT (digest) DO UPDATE SET record = EXCLUDED.record")
        batch = ("INSERT INTO reliable_batches(name, batch_id, created) VALUES (%s, 'probe', 0) "
                 "ON CONFLICT (name) DO UPDATE SET batch_id = EXCLUDED.batch_id")
        report = ("INSERT INTO reliable_reports(run_id, part, report, kept) VALUES "
                  "(%s, 'probe', '{}', 0) ON CONFLICT (run_id, part) DO UPDATE SET "
                  "report = EXCLUDED.report")
        probes: list[tuple[str, str, tuple[Any, ...]]] = [
            ("reliable_answers", answer, (PROBE, b"probe")), ("reliable_budget", budget, (PROBE,)),
            ("reliable_nstar", nstar, (PROBE,)), ("reliable_batches", batch, (PROBE,)),
            ("reliable_reports", report, (PROBE,)),
        ]
        conn.execute("BEGIN")
        try:
            for table, sql, params in probes:
                try:
                    conn.execute(sql, params)
                except self._psycopg.errors.InsufficientPrivilege as error:
                    raise StoreUsageError(
                        f"--reliable-store: user {self.user or '(default)'} may not write table "
                        f"{table} in database {self.dbname} at {self.host}:{self.port} "
                        f"({_one_line(error)}): GRANT SELECT, INSERT, UPDATE, DELETE ON {table} "
                        "to that user, or use --reliable-record=none to only replay") from None
                except self._psycopg.Error as error:
                    raise StoreUsageError(
                        f"--reliable-store: table {table} in database {self.dbname} at "
                        f"{self.host}:{self.port} does not take the store's rows "
                        f"({_one_line(error)}): it is not the store's table. {TABLE_FIX}"
                    ) from None
        finally:
            conn.execute("ROLLBACK")

    @staticmethod
    def _stored_version(conn: Any) -> int:
        row = conn.execute("SELECT value FROM reliable_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row and str(row[0]).isdigit() else 0

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreUsageError(
                f"--reliable-store: database {self.dbname} at {self.host}:{self.port} was written "
                f"by a newer pytest-reliable (store schema version {version}; this one knows "
                f"version {SCHEMA_VERSION}): upgrade pytest-reliable (pip install -U "
                "\"pytest-reliable[postgres]\") on every machine that uses the store"
            )

    def _connect_error(self, error: BaseException) -> StoreUsageError:
        text = _one_line(error)
        where = self._where()
        user = self.user or "(default user)"
        if "password authentication failed" in text:
            why = (f"refused the password of user {user} ({text}): give the right password in "
                   "the URL, in PGPASSWORD or in ~/.pgpass")
        elif "no password supplied" in text:
            why = (f"asks for a password for user {user} and none was given: put it in the URL, "
                   "in PGPASSWORD or in ~/.pgpass")
        elif "does not exist" in text and "database" in text:
            why = (f"has no database {self.dbname!r} ({text}): create it (createdb -h {self.host} "
                   f"-p {self.port} -U {user} {self.dbname}) or name an existing one in the URL")
        elif "role" in text and "does not exist" in text:
            why = f"has no user {user} ({text}): create it, or name an existing one in the URL"
        elif "pg_hba.conf" in text:
            why = (f"does not let user {user} in from here ({text}): add a line for this host to "
                   "the server's pg_hba.conf")
        else:
            why = (f"cannot be reached ({text}): start it, or check host and port in the URL "
                   "(a CI service container needs its port mapped and a health check), or drop "
                   "--reliable-store to use the local sqlite files")
        return StoreUsageError(f"--reliable-store {self.location}: {where} {why}")

    # -- primitives ------------------------------------------------------------------------------
    def _query(self, sql: str, params: Any = None, *, many: bool = False,
               binary: bool = False, lazy: bool = False) -> list[tuple[Any, ...]]:
        """One statement on a pooled connection (``many``: one per row of ``params``, in one
        transaction; ``binary``: results in binary, so answers come as they are stored, not
        hex-encoded at twice their size; ``lazy``: committed without waiting for the disk, see
        `PostgresLedger`); any failure is `StoreUnavailable`."""
        _in_store.active = True  # what the driver logs meanwhile is the store's (see below)
        try:
            # A query on a pooled connection the server dropped (a restart) is tried again on
            # another: each of the pool's stale connections would otherwise cost a failure, and
            # a longer pause of the store's reads and writes.
            tries = self._pool_size + 2
            for attempt in range(tries):
                last = attempt + 1 == tries
                try:
                    with self._pool.connection() as conn:
                        try:
                            if many:
                                with conn.transaction(), conn.cursor() as cursor:
                                    cursor.executemany(sql, params)
                                return []
                            if lazy:  # one round trip: BEGIN, SET LOCAL, the statement, COMMIT
                                with conn.pipeline(), conn.transaction():
                                    conn.execute(LAZY_COMMIT)
                                    cursor = conn.execute(sql, params)
                            else:
                                cursor = conn.execute(sql, params, binary=binary)
                            return list(cursor.fetchall()) if cursor.description else []
                        except self._psycopg.Error:
                            if not (conn.broken or conn.closed) or last:
                                raise
                    # a connection the server dropped (a restart): the pool makes a new one
                except self._psycopg_pool.PoolClosed as error:
                    if last or self._closing:  # else another thread replaced it: the new one
                        raise StoreUnavailable(f"{type(error).__name__}: "
                                               f"{_one_line(error)}") from None
                except self._psycopg_pool.PoolTimeout as error:
                    if last or not self._revive_pool():
                        raise StoreUnavailable(f"{type(error).__name__}: "
                                               f"{_one_line(error)}") from None
                except self._psycopg.Error as error:
                    raise StoreUnavailable(f"{type(error).__name__}: {_one_line(error)}") from None
            raise AssertionError("unreachable")
        finally:
            _in_store.active = False

    def _read(self, keys: Sequence[str]) -> list[AnswerRow]:
        if not self.has_schema:
            return []
        if len(keys) == 1:  # a claim's look: an equality plans and binds faster than an array
            found = self._query(f"SELECT {COLUMNS} FROM reliable_answers WHERE key = %s",
                                (keys[0],))
        elif any(KEY_SEPARATOR in key for key in keys):
            found = self._query(f"SELECT {COLUMNS} FROM reliable_answers WHERE key = ANY(%s)",
                                (list(keys),))
        else:  # one text parameter split by the server: binding a list costs more per key
            found = self._query(f"SELECT {COLUMNS} FROM reliable_answers WHERE key = ANY("
                                "string_to_array(%s, chr(31)))", (KEY_SEPARATOR.join(keys),))
        rows = []
        for values in found:
            try:
                rows.append(row_from_postgres(values))
            except BadRow as error:
                self.bad_rows.append((str(values[0]), str(error)))
        return rows

    def _write(self, rows: Sequence[AnswerRow], *, replace: bool) -> None:
        names = COLUMNS.replace(" ", "").split(",")
        on_conflict = ("DO UPDATE SET " + ", ".join(f"{n} = EXCLUDED.{n}" for n in names[1:])
                       if replace else "DO NOTHING")
        sql = (f"INSERT INTO reliable_answers({COLUMNS}) VALUES "
               f"({', '.join(['%s'] * len(names))}) ON CONFLICT (key) {on_conflict}")
        values = [row_to_postgres(row) for row in rows]
        if len(values) == 1:
            self._query(sql, values[0])
        else:
            self._query(sql, values, many=True)

    def _mean_completion_tokens(self, model: str) -> float | None:
        if not self.has_schema:
            return None
        found = self._query("SELECT AVG(completion_tokens) FROM reliable_answers WHERE model = %s"
                            " AND completion_tokens IS NOT NULL", (model,))
        return None if not found or found[0][0] is None else float(found[0][0])

    def _count(self) -> int:
        if not self.has_schema:
            return 0
        return int(self._query("SELECT COUNT(*) FROM reliable_answers")[0][0])

    def _close(self) -> None:
        _in_store.active = True
        try:
            with self._pool_lock:
                self._closing = True
                pool = self._pool
            pool.close(timeout=5.0)
        finally:
            _in_store.active = False

    def _failure_fix(self) -> str:
        return (f"check {self._where()} (the run goes on; its verdicts do not depend on the "
                "store)")

    def ledger(self, run_id: str) -> Ledger:
        return PostgresLedger(self, run_id)

    def pending_batch(self, name: str) -> str | None:
        try:
            found = self._query("SELECT batch_id FROM reliable_batches WHERE name = %s", (name,))
        except StoreUnavailable:
            return None
        return str(found[0][0]) if found else None

    def keep_batch(self, name: str, batch_id: str) -> None:
        try:
            self._query("INSERT INTO reliable_batches(name, batch_id, created) VALUES"
                        f"(%s, %s, {NOW}) ON CONFLICT (name) DO UPDATE SET"
                        " batch_id = EXCLUDED.batch_id", (name, batch_id))
        except StoreUnavailable:
            super().keep_batch(name, batch_id)  # this process can still resume it

    def forget_batch(self, name: str) -> None:
        super().forget_batch(name)
        try:
            self._query("DELETE FROM reliable_batches WHERE name = %s", (name,))
        except StoreUnavailable:
            pass

    def rows(self, max_bytes: int = CHUNK_BYTES) -> Iterator[list[AnswerRow]]:
        """Every stored answer, in key order, in chunks of about ``max_bytes`` (for ``cache
        export``): the sizes are read first (without the answers), then one chunk at a time."""
        if not self.has_schema:
            return
        last = ""
        while True:
            sizes = self._query(
                "SELECT key, octet_length(text) + coalesce(octet_length(logprobs), 0)"
                " + coalesce(octet_length(extra), 0) + coalesce(octet_length(meta), 0)"
                " FROM reliable_answers WHERE key > %s ORDER BY key LIMIT %s",
                (last, CHUNK_ROWS))
            if not sizes:
                return
            total, upto = 0, sizes[-1][0]
            for key, size in sizes:
                total += int(size or 0)
                if total >= max_bytes:
                    upto = key
                    break
            found = self._query(f"SELECT {COLUMNS} FROM reliable_answers WHERE key > %s AND "
                                "key <= %s ORDER BY key", (last, upto), binary=True)
            last = upto
            chunk = []
            for values in found:
                try:
                    chunk.append(checked(row_from_postgres(values)))
                except BadRow as error:
                    self.bad_rows.append((str(values[0]), str(error)))
            if chunk:
                yield chunk

    # -- kept reports (the release history, `store.reports`) ----------------------------------
    def keep_report(self, run_id: str, part: str, created: str | None, model: str | None,
                    git_commit: str | None, report_json: str) -> bool:
        """One session's JSON report, in ``reliable_reports`` (another part of one run id is
        another row; the same part again replaces its row)."""
        self._query("INSERT INTO reliable_reports(run_id, part, created, model, git_commit, "
                    f"report, kept) VALUES (%s, %s, %s, %s, %s, %s, {NOW}) ON CONFLICT (run_id,"
                    " part) DO UPDATE SET report = EXCLUDED.report, kept = EXCLUDED.kept",
                    (run_id, part, created, model, git_commit, report_json))
        return True

    def kept_reports(self) -> list[str]:
        if not self.has_schema or \
                self._query("SELECT to_regclass('reliable_reports')")[0][0] is None:
            return []  # a replay-only reader creates nothing; a version 1 store kept none
        return [str(row[0]) for row in
                self._query("SELECT report FROM reliable_reports ORDER BY kept, run_id, part")]


def row_to_postgres(row: AnswerRow) -> tuple[Any, ...]:
    return (row.key, row.text.encode("utf-8", "surrogatepass"), row.logprobs, row.prompt_tokens,
            row.completion_tokens, row.latency_s, row.extra, row.model, row.meta, row.created)


def row_from_postgres(values: Sequence[Any]) -> AnswerRow:
    """The answer of a stored row (its text stored as UTF-8 bytes); `BadRow` if it is none."""
    return answer_row(*values)


class PostgresLedger(Ledger):
    """One row of ``reliable_budget`` per run id, shared by every host.

    Its counts commit without waiting for the server's disk (two of a paid call's three commits:
    a disk flush each would triple what the store adds to a call). A database crash may forget
    the counts of its last fraction of a second, so a run may pass its budget by the calls of
    that moment; no answer is lost (they commit durably)."""

    def __init__(self, store: PostgresStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._created = False

    def _ensure_row(self) -> None:
        if not self._created:
            self.store._query(f"INSERT INTO reliable_budget(run, created) VALUES(%s, {NOW})"
                              " ON CONFLICT (run) DO NOTHING", (self.run_id,), lazy=True)
            self._created = True

    def reserve(self, max_calls: int | None, max_tokens: int | None,
                max_usd: float | None = None, usd: float = 0.0) -> bool:
        self._ensure_row()
        granted = self.store._query(
            "UPDATE reliable_budget SET calls = calls + 1, usd = usd + %(usd)s WHERE run = %(run)s"
            " AND (%(calls)s::bigint IS NULL OR calls < %(calls)s)"
            " AND (%(tokens)s::bigint IS NULL OR tokens < %(tokens)s)"
            " AND (%(max_usd)s::double precision IS NULL OR usd + %(usd)s <= %(max_usd)s + 1e-12)"
            " RETURNING calls",
            {"run": self.run_id, "calls": max_calls, "tokens": max_tokens,
             "max_usd": max_usd, "usd": float(usd)}, lazy=True,
        )
        if not granted:
            self.store._query("UPDATE reliable_budget SET skipped = skipped + 1 WHERE run = %s",
                              (self.run_id,), lazy=True)
        return bool(granted)

    def add_tokens(self, n: int, usd: float = 0.0) -> None:
        self._ensure_row()
        self.store._query("UPDATE reliable_budget SET tokens = tokens + %s, usd = usd + %s"
                          " WHERE run = %s", (int(n), float(usd), self.run_id), lazy=True)

    def spent_usd(self) -> float:
        found = self.store._query("SELECT usd FROM reliable_budget WHERE run = %s",
                                  (self.run_id,))
        return float(found[0][0]) if found else 0.0

    def totals(self) -> tuple[int, int, int]:
        found = self.store._query("SELECT calls, tokens, skipped FROM reliable_budget "
                                  "WHERE run = %s", (self.run_id,))
        return (int(found[0][0]), int(found[0][1]), int(found[0][2])) if found else (0, 0, 0)

    def close(self) -> None:
        pass  # the store's pool is closed with the store


class PostgresNStar(NStarEntries):
    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store.claims, store.waits)
        self.store = store

    def where(self, key: NStarKey) -> str:
        return f"{key.digest()} in {self.store.location}"

    def _load(self, key: NStarKey) -> str | None:
        if not self.store.has_schema:
            return None
        found = self.store._query("SELECT record FROM reliable_nstar WHERE digest = %s",
                                  (key.digest(),))
        return str(found[0][0]) if found else None

    def _save(self, key: NStarKey, record: str) -> None:
        self.store._query(
            f"INSERT INTO reliable_nstar(digest, record, created) VALUES(%s, %s, {NOW})"
            " ON CONFLICT (digest) DO UPDATE SET record = EXCLUDED.record,"
            " created = EXCLUDED.created", (key.digest(), record))

    def _cannot_write_fix(self) -> str:
        return f"check {self.store._where()}"


class AdvisoryClaims(Claims):
    """Session-level advisory locks on one connection of this process's own: the server drops
    them when the connection ends, so a claim dies with its holder.

    The connection's ``application_name`` names this host and pid (for waiters' messages). When
    it is lost (a network glitch, a server restart), the server dropped its locks with it: the
    new connection takes back the claims still held here (one another process took meanwhile is
    said once: that key may be paid for twice)."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(f"postgresql://{store.host}:{store.port}/{store.dbname}")
        self.store = store
        self._lock = threading.Lock()
        self._conn: Any = None
        self._retry_at = 0.0
        self._mine: set[str] = set()
        """Names locked on the current connection (the lock held to read or change it)."""
        self._orphans: set[str] = set()
        """Names locked on a connection that was lost (taken back on the next one)."""
        self._ever_connected = False
        self._settle_until = 0.0

    def _connection(self) -> Any:
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._drop()  # closed under us (the server ended it): its locks went with it
        if self._conn is None:
            if time.monotonic() < self._retry_at:
                raise StoreUnavailable(f"{self.store._where()} is not reachable")
            try:
                conn = self.store._psycopg.connect(
                    self.store.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                    application_name=application_name())
                # the look after a lock must take a snapshot of its own (see _acquire_checking)
                conn.execute("SET default_transaction_isolation = 'read committed'")
            except self.store._psycopg.Error as error:
                self._retry_at = time.monotonic() + CLAIMS_RECONNECT_S
                raise StoreUnavailable(_one_line(error)) from None
            reconnected = self._ever_connected
            self._conn = conn
            self._ever_connected = True
            self._take_back(conn)
            if reconnected:
                # The server is back: other processes' claims that died with it are taken back
                # by their holders as they reconnect; new claims here wait a moment for that.
                self._settle_until = time.monotonic() + SETTLE_S
                self.store.database_back()
        return self._conn

    def _take_back(self, conn: Any) -> None:
        """The claims this process still holds that were locked on a connection since lost, or
        taken while the database was away, locked on the new connection."""
        lost = []
        orphans, self._orphans = self._orphans | self.take_unshared(), set()
        for name in self.held_here(orphans):
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (advisory_key(name),)).fetchone()
            if row[0]:
                self._mine.add(name)
            else:
                lost.append(name)
        if lost:
            self._mine.difference_update(lost)
            log.warning("pytest-reliable: the claims connection to %s was lost, and %d claims "
                        "this process held were taken by another process meanwhile: those calls "
                        "may be paid for twice", self.store._where(), len(lost))

    def _run(self, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
        """The first row of each statement, sent together (one round trip); the lock held."""
        conn = self._connection()
        try:
            if len(statements) == 1:
                sql, params = statements[0]
                return [tuple(conn.execute(sql, params).fetchone())]
            with conn.pipeline():
                cursors = [conn.execute(sql, params) for sql, params in statements]
            return [tuple(cursor.fetchone()) for cursor in cursors]
        except self.store._psycopg.Error as error:
            if conn.closed or conn.broken:
                self._drop()  # its locks died with it: a new connection takes them back
            raise StoreUnavailable(_one_line(error)) from None

    def _acquire(self, name: str) -> bool:
        return self._lock_and_look(name, None)[0]

    def _acquire_checking(self, name: str, key: str) -> tuple[bool, bool | None]:
        """The lock, then whether ``key`` is a stored answer's key, in one round trip: two
        statements, so the look's snapshot is taken after the lock was granted (one statement
        would take it before: an answer stored and its claim let go in between would be
        missed, and paid for again)."""
        return self._lock_and_look(name, key if self.store.has_schema else None)

    def _lock_and_look(self, name: str, key: str | None) -> tuple[bool, bool | None]:
        with self._lock:
            statements: list[tuple[str, tuple[Any, ...]]] = []
            self._connection()
            # Locked on this connection already (a new connection took back what this process
            # holds, this name included): a lock taken twice by a session needs two unlocks.
            retaken = name in self._mine
            settling = not retaken and time.monotonic() < self._settle_until
            if not (retaken or settling):
                statements.append(("SELECT pg_try_advisory_lock(%s)", (advisory_key(name),)))
            if key is not None:
                statements.append((
                    "SELECT EXISTS (SELECT 1 FROM reliable_answers WHERE key = %s)", (key,)))
            rows = self._run(statements) if statements else []
            held = retaken or (not settling and bool(rows[0][0]))
            stored = bool(rows[-1][0]) if key is not None else None
            if held:
                self._mine.add(name)
            return held, stored

    def _release(self, name: str) -> None:
        with self._lock:
            if name not in self._mine:
                return  # not locked on this connection: it died with an earlier one
            self._mine.discard(name)
            if self._conn is None or self._conn.closed:
                return  # the server dropped this connection's claims with it
            self._run([("SELECT pg_advisory_unlock(%s)", (advisory_key(name),))])

    def _holders(self, names: Sequence[str]) -> dict[str, Holder]:
        """From ``pg_locks`` (every session sees it) and ``pg_stat_activity`` (its host, pid
        and idle time: visible for sessions of the same user, or with pg_read_all_stats)."""
        wanted = {}
        for name in names:
            unsigned = advisory_key(name) & 0xFFFFFFFFFFFFFFFF
            wanted[(unsigned >> 32, unsigned & 0xFFFFFFFF)] = name
        found = self.store._query(
            "SELECT l.classid::bigint, l.objid::bigint, l.pid, a.application_name,"
            " host(a.client_addr), EXTRACT(EPOCH FROM a.backend_start),"
            " CASE WHEN a.state = 'idle' THEN EXTRACT(EPOCH FROM clock_timestamp()"
            " - a.state_change) END"
            " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")
        holders = {}
        for classid, objid, pid, app, client, started, idle in found:
            held = wanted.get((int(classid), int(objid)))
            if held is None:
                continue
            ident = f"pg:{pid}:{started}"
            named = APPLICATION.fullmatch(str(app or ""))
            label = (f"host {named.group(1)} pid {named.group(2)}" if named else
                     f"PostgreSQL backend {pid}" + (f" (from {client})" if client else ""))
            holders[held] = Holder(ident, label, float(idle) if idle is not None else None)
        return holders

    def _drop(self) -> None:
        self._orphans |= self._mine  # the server dropped them with the connection
        self._mine.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a dead connection may fail to close
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._drop()
            self._orphans.clear()


APPLICATION = re.compile(r"pytest-reliable (\S+) pid (\d+)")


def application_name() -> str:
    """``pytest-reliable HOST pid PID`` (PostgreSQL keeps 63 bytes of it)."""
    return f"pytest-reliable {this_host()[:32]} pid {os.getpid()}"


__all__ = ["EXTRA", "SCHEMA_VERSION", "PostgresStore", "advisory_key", "register_store_secrets"]
