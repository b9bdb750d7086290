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

Its parts, one job each: `postgres_driver` (psycopg, its pool and logs, secrets),
`postgres_schema` (tables and migrations), `postgres_claims` (advisory locks),
`postgres_records` (the budget ledger and n* entries); this module, the store itself: start-up,
answers, pending batches and kept reports.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pytest_reliable.contract.settings import RecordMode
from pytest_reliable.redact import redact
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
from pytest_reliable.store.claims import Claims
from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError
from pytest_reliable.store.nstar import NStarEntries
from pytest_reliable.store.postgres_claims import AdvisoryClaims, advisory_key
from pytest_reliable.store.postgres_driver import (
    CONNECT_TIMEOUT_S,
    EXTRA,
    POOL_NAME,
    driver_modules,
    in_store,
    one_line,
    register_store_secrets,
    route_driver_logs,
)
from pytest_reliable.store.postgres_records import PostgresLedger, PostgresNStar
from pytest_reliable.store.postgres_schema import (
    COLUMNS,
    MIGRATIONS,
    NOW,
    PROBE,
    SCHEMA_LOCK,
    SCHEMA_VERSION,
    TABLE_FIX,
    TABLES,
    column_family,
)
from pytest_reliable.store.waits import ClaimWaits

POOL_WAIT_S = 5.0
"""Mid-run: how long a query waits for a connection before the store counts as lost (for now)."""
POOL_SIZE = 8
DURABLE_COMMIT = "SET synchronous_commit = on"
"""Run on each of the store's connections only when the server's default is ``off``: a paid
answer is stored once its commit is on the server's disk (other durable settings of a server,
``local``, ``remote_apply``..., are kept)."""
LAZY_COMMIT = "SET LOCAL synchronous_commit TO OFF"
REVIVE_EVERY_S = 1.0
REVIVE_CONNECT_S = 3
"""An empty pool is replaced at most this often, once a direct connection (this quick) works."""

KEY_SEPARATOR = "\x1f"
"""Joins the keys of one batch lookup (cache keys are hex digests: it never occurs in one)."""


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
        psycopg, psycopg_pool = driver_modules()
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
                f"({one_line(error)}): run once as the database owner, or GRANT CREATE ON "
                "SCHEMA public to that user"
            ) from None
        except self._psycopg.Error as error:
            raise StoreUsageError(
                f"--reliable-store: {self._where()} failed while preparing the store "
                f"({one_line(error)}): check the database, or drop --reliable-store to use the "
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
                     if column_family(have.get(name)) != column_family(kind)]
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
                        f"({one_line(error)}): GRANT SELECT, INSERT, UPDATE, DELETE ON {table} "
                        "to that user, or use --reliable-record=none to only replay") from None
                except self._psycopg.Error as error:
                    raise StoreUsageError(
                        f"--reliable-store: table {table} in database {self.dbname} at "
                        f"{self.host}:{self.port} does not take the store's rows "
                        f"({one_line(error)}): it is not the store's table. {TABLE_FIX}"
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
        text = one_line(error)
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
        in_store.active = True  # what the driver logs meanwhile is the store's (see below)
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
                                               f"{one_line(error)}") from None
                except self._psycopg_pool.PoolTimeout as error:
                    if last or not self._revive_pool():
                        raise StoreUnavailable(f"{type(error).__name__}: "
                                               f"{one_line(error)}") from None
                except self._psycopg.Error as error:
                    raise StoreUnavailable(f"{type(error).__name__}: {one_line(error)}") from None
            raise AssertionError("unreachable")
        finally:
            in_store.active = False

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
        in_store.active = True
        try:
            with self._pool_lock:
                self._closing = True
                pool = self._pool
            pool.close(timeout=5.0)
        finally:
            in_store.active = False

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


__all__ = ["EXTRA", "SCHEMA_VERSION", "PostgresStore", "advisory_key", "register_store_secrets"]
