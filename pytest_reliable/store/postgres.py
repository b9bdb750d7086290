"""The PostgreSQL store: one database shared by every machine of a sharded gate (SPEC section 10).

psycopg 3 with a connection pool (the extra ``pytest-reliable[postgres]``, imported only here and
only when a ``postgresql://`` store is asked for). Tables carry a ``reliable_`` prefix, so the
store can share a database with other things:

- ``reliable_meta``: the schema version (created on first use; a newer one stops the run).
- ``reliable_answers``: one row per cache key, written once (``ON CONFLICT DO NOTHING``: the first
  writer wins; record mode ``all`` overwrites). Answer texts are UTF-8 bytes (``surrogatepass``):
  PostgreSQL's text type takes neither a NUL nor a lone surrogate, and a model may answer both.
- ``reliable_budget``: one row per run id; a call is granted by one atomic ``UPDATE ... WHERE
  calls < limit RETURNING``, so every host shares one budget.
- ``reliable_nstar``: the n* entries (the records the local JSON files hold).
- claims: session-level advisory locks (``pg_try_advisory_lock``) on one dedicated connection per
  process, so a claim dies with its holder's connection: a killed host never blocks the others.

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

import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pytest_reliable.files import sha256_hex
from pytest_reliable.nstar_store import NStarEntries, NStarKey
from pytest_reliable.redact import redact, register_environment_secrets, register_url_secrets
from pytest_reliable.store.base import (
    AnswerRow,
    Ledger,
    Store,
    StoreUnavailable,
    StoreUsageError,
)
from pytest_reliable.store.claims import Claims

EXTRA = 'pip install "pytest-reliable[postgres]"'
SCHEMA_VERSION = 3
CONNECT_TIMEOUT_S = 10
POOL_WAIT_S = 5.0
"""Mid-run: how long a query waits for a connection before the store counts as lost (for now)."""
POOL_SIZE = 8
ASYNC_COMMIT = "-c synchronous_commit=off"
"""A commit returns once the server has the row, without waiting for its disk flush: durable
against the crash of any process (the client's above all), not against the database host's OS
crashing in the next fraction of a second, the same choice as the local cache's WAL with
``synchronous=NORMAL``. A flush per commit would cost a paid call one disk sync per write."""
CLAIMS_RECONNECT_S = 5.0

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS reliable_answers ("
        " key TEXT PRIMARY KEY, text BYTEA NOT NULL, logprobs TEXT, prompt_tokens INTEGER,"
        " completion_tokens INTEGER, latency_s DOUBLE PRECISION, extra TEXT, model TEXT,"
        " meta TEXT, created DOUBLE PRECISION)",
        "CREATE TABLE IF NOT EXISTS reliable_budget ("
        " run TEXT PRIMARY KEY, calls BIGINT NOT NULL DEFAULT 0, tokens BIGINT NOT NULL DEFAULT 0,"
        " skipped BIGINT NOT NULL DEFAULT 0, created DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS reliable_nstar ("
        " digest TEXT PRIMARY KEY, record TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)",
    ),
    2: (  # SPEC section 13: USD budgets, and the batch a killed run resumes
        "ALTER TABLE reliable_budget ADD COLUMN IF NOT EXISTS usd DOUBLE PRECISION NOT NULL"
        " DEFAULT 0",
        "CREATE TABLE IF NOT EXISTS reliable_batches ("
        " name TEXT PRIMARY KEY, batch_id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)",
    ),
    3: (
        # The report is JSON written with ensure_ascii (no NUL, no lone surrogate reaches TEXT).
        "CREATE TABLE IF NOT EXISTS reliable_reports ("
        " run_id TEXT NOT NULL, part TEXT NOT NULL, created TEXT, model TEXT, git_commit TEXT,"
        " report TEXT NOT NULL, kept DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, part))",
    ),
}
"""Statements that bring the schema from version N-1 to N, applied in order on first use."""
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

    def __init__(self, url: str, record_mode: str = "new", *, pool_size: int = POOL_SIZE,
                 wait_s: float = POOL_WAIT_S) -> None:
        """``wait_s``: how long a query waits for a connection before the store counts as lost
        for a while (mid-run; start-up failures are usage errors at once)."""
        register_store_secrets(url)
        psycopg, psycopg_pool = _modules()
        info = psycopg.conninfo.conninfo_to_dict(url)
        self.host = str(info.get("host") or os.environ.get("PGHOST") or "localhost")
        self.port = str(info.get("port") or os.environ.get("PGPORT") or "5432")
        self.dbname = str(info.get("dbname") or os.environ.get("PGDATABASE") or "")
        self.user = str(info.get("user") or os.environ.get("PGUSER") or "")
        super().__init__(record_mode, redact(url))
        self.url = url
        self._psycopg = psycopg
        self.has_schema = self._prepare()
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=pool_size, open=False, timeout=wait_s,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
                    "options": ASYNC_COMMIT},
            name="pytest-reliable", reconnect_timeout=3600.0,
        )
        self._pool.open(wait=False)
        self.claims: Claims = AdvisoryClaims(self)
        self.nstar: NStarEntries = PostgresNStar(self)

    # -- start-up --------------------------------------------------------------------------------
    def _where(self) -> str:
        return f"the PostgreSQL server at {self.host}:{self.port}"

    def connect(self) -> Any:
        """A new connection of its own (autocommit), for start-up checks and claims."""
        return self._psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)

    def _prepare(self) -> bool:
        """Connect once, then create or check the schema; True when the tables exist."""
        try:
            conn = self.connect()
        except self._psycopg.Error as error:
            raise self._connect_error(error) from None
        try:
            with conn:
                return self._migrate(conn)
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
            conn.execute("CREATE TABLE IF NOT EXISTS reliable_meta "
                         "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            version = self._stored_version(conn)
            self._check_version(version)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO reliable_meta(key, value) VALUES('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
        return True

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
    def _query(self, sql: str, params: Any = None, *, many: bool = False) -> list[tuple[Any, ...]]:
        """One statement on a pooled connection; any failure is `StoreUnavailable`."""
        try:
            with self._pool.connection() as conn:
                if many:
                    with conn.transaction(), conn.cursor() as cursor:
                        cursor.executemany(sql, params)
                    return []
                cursor = conn.execute(sql, params)
                return list(cursor.fetchall()) if cursor.description else []
        except self._psycopg.Error as error:
            raise StoreUnavailable(f"{type(error).__name__}: {_one_line(error)}") from None

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
        return [row_from_postgres(values) for values in found]

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
        self._pool.close(timeout=5.0)

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
            self._query("INSERT INTO reliable_batches(name, batch_id, created) VALUES(%s, %s, %s)"
                        " ON CONFLICT (name) DO UPDATE SET batch_id = EXCLUDED.batch_id",
                        (name, batch_id, time.time()))
        except StoreUnavailable:
            super().keep_batch(name, batch_id)  # this process can still resume it

    def forget_batch(self, name: str) -> None:
        super().forget_batch(name)
        try:
            self._query("DELETE FROM reliable_batches WHERE name = %s", (name,))
        except StoreUnavailable:
            pass

    def rows(self, batch: int = 2000) -> Iterator[list[AnswerRow]]:
        """Every stored row, in key order, in batches (for ``cache export``)."""
        if not self.has_schema:
            return
        last = ""
        while True:
            found = self._query(f"SELECT {COLUMNS} FROM reliable_answers WHERE key > %s "
                                "ORDER BY key LIMIT %s", (last, batch))
            if not found:
                return
            last = found[-1][0]
            yield [row_from_postgres(values) for values in found]

    # -- kept reports (the release history, `store.reports`) ----------------------------------
    def keep_report(self, run_id: str, part: str, created: str | None, model: str | None,
                    git_commit: str | None, report_json: str) -> None:
        """One session's JSON report; `StoreUnavailable` when the database cannot take it."""
        self._query("INSERT INTO reliable_reports(run_id, part, created, model, git_commit, "
                    "report, kept) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id, part)"
                    " DO UPDATE SET report = EXCLUDED.report, kept = EXCLUDED.kept",
                    (run_id, part, created, model, git_commit, report_json, time.time()))

    def kept_reports(self) -> list[str]:
        """Every kept report's JSON text, in the order they were kept."""
        if not self.has_schema or \
                self._query("SELECT to_regclass('reliable_reports')")[0][0] is None:
            return []  # a replay-only reader creates nothing; a version 1 store kept none
        return [str(row[0]) for row in
                self._query("SELECT report FROM reliable_reports ORDER BY kept, run_id, part")]


def row_to_postgres(row: AnswerRow) -> tuple[Any, ...]:
    return (row.key, row.text.encode("utf-8", "surrogatepass"), row.logprobs, row.prompt_tokens,
            row.completion_tokens, row.latency_s, row.extra, row.model, row.meta, row.created)


def row_from_postgres(values: Sequence[Any]) -> AnswerRow:
    key, text, logprobs, pt, ct, latency, extra, model, meta, created = values
    return AnswerRow(key=key, text=bytes(text).decode("utf-8", "surrogatepass"),
                     logprobs=logprobs, prompt_tokens=pt, completion_tokens=ct,
                     latency_s=float(latency or 0.0), extra=extra or "{}", model=model or "",
                     meta=meta or "{}", created=float(created or 0.0))


class PostgresLedger(Ledger):
    """One row of ``reliable_budget`` per run id, shared by every host."""

    def __init__(self, store: PostgresStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._created = False

    def _ensure_row(self) -> None:
        if not self._created:
            self.store._query("INSERT INTO reliable_budget(run, created) VALUES(%s, %s)"
                              " ON CONFLICT (run) DO NOTHING", (self.run_id, time.time()))
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
             "max_usd": max_usd, "usd": float(usd)},
        )
        if not granted:
            self.store._query("UPDATE reliable_budget SET skipped = skipped + 1 WHERE run = %s",
                              (self.run_id,))
        return bool(granted)

    def add_tokens(self, n: int, usd: float = 0.0) -> None:
        self._ensure_row()
        self.store._query("UPDATE reliable_budget SET tokens = tokens + %s, usd = usd + %s"
                          " WHERE run = %s", (int(n), float(usd), self.run_id))

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
        super().__init__(store.claims)
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
            "INSERT INTO reliable_nstar(digest, record, created) VALUES(%s, %s, %s)"
            " ON CONFLICT (digest) DO UPDATE SET record = EXCLUDED.record,"
            " created = EXCLUDED.created", (key.digest(), record, time.time()))

    def _cannot_write_fix(self) -> str:
        return f"check {self.store._where()}"


class AdvisoryClaims(Claims):
    """Session-level advisory locks on one connection of this process's own: the server drops
    them when the connection ends, so a claim dies with its holder."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(f"postgresql://{store.host}:{store.port}/{store.dbname}")
        self.store = store
        self._lock = threading.Lock()
        self._conn: Any = None
        self._retry_at = 0.0

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            if time.monotonic() < self._retry_at:
                raise StoreUnavailable(f"{self.store._where()} is not reachable")
            try:
                self._conn = self.store.connect()
            except self.store._psycopg.Error as error:
                self._retry_at = time.monotonic() + CLAIMS_RECONNECT_S
                raise StoreUnavailable(_one_line(error)) from None
        return self._conn

    def _call(self, sql: str, *params: Any) -> tuple[Any, ...]:
        with self._lock:
            conn = self._connection()
            try:
                return tuple(conn.execute(sql, params).fetchone())
            except self.store._psycopg.Error as error:
                self._drop()
                raise StoreUnavailable(_one_line(error)) from None

    def _acquire(self, name: str) -> bool:
        return bool(self._call("SELECT pg_try_advisory_lock(%s)", advisory_key(name))[0])

    def _acquire_checking(self, name: str) -> tuple[bool, bool | None]:
        """The lock and whether ``name`` is a stored answer's key, in one round trip."""
        if not self.store.has_schema:
            return self._acquire(name), None
        held, stored = self._call(
            "SELECT pg_try_advisory_lock(%s), EXISTS (SELECT 1 FROM reliable_answers "
            "WHERE key = %s)", advisory_key(name), name)
        return bool(held), bool(stored)

    def _release(self, name: str) -> None:
        if self._conn is None or self._conn.closed:
            return  # the server dropped this connection's claims with it
        self._call("SELECT pg_advisory_unlock(%s)", advisory_key(name))

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a dead connection may fail to close
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()


__all__ = ["EXTRA", "SCHEMA_VERSION", "PostgresStore", "advisory_key", "register_store_secrets"]
