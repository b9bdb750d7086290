"""The embedded default store: local sqlite files under ``.reliable/`` (today's files, unchanged).

- answers: ``cache.sqlite`` (``--reliable-cache``), or an in-memory database with the same code
  for ``--reliable-no-cache``. WAL and a 30 s busy timeout let several pytest-xdist workers write
  it at once; every write commits at once with ``synchronous=FULL`` (the WAL is synced to disk
  before the commit returns), so an answer paid for survives the process killed right after, and
  the machine losing power too. Answers put by several threads at once share one commit.
  Answer texts that are not valid UTF-8 (a lone surrogate) are stored as UTF-8 bytes with
  ``surrogatepass``, so a replay gives back the same string.
- the budget ledger: ``budget.sqlite`` next to the cache, one row per run id; only the oldest
  rows beyond `LEDGER_ROWS_KEPT` are dropped (by insertion order, never by a clock, never the
  run's own).
- n* entries: JSON files in ``.reliable/n_star/`` (`pytest_reliable.store.nstar.NStarStore`).
- claims: byte-range locks on ``cache.sqlite.claims`` (`pytest_reliable.store.claims`).

A file that cannot serve (a directory, not sqlite, another program's tables, a newer schema, a
lock another process holds) is found at start-up (`check_cache_path`, `check_budget_path`) and
named with the fix; no message ever advises deleting a response cache.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_reliable.contract.settings import RecordMode
from pytest_reliable.files import sha256_hex, write_atomic
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
from pytest_reliable.store.claims import Claims, ProcessClaims, file_claims
from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError
from pytest_reliable.store.holders import who_holds
from pytest_reliable.store.nstar import NStarEntries, NStarKey, NStarStore
from pytest_reliable.store.waits import ClaimWaits

SCHEMA_VERSION = 1
"""Of ``cache.sqlite``: a file of another version is refused at start-up."""
BUSY_TIMEOUT_S = 30.0
START_WAIT_S = 5.0
"""How long the start-up check waits for a lock another process holds before it says so."""


class CacheFileError(StoreUsageError):
    """``--reliable-cache`` (or the budget ledger next to it) cannot serve."""


MOVE_ASIDE = ("move it aside (keep it if it holds answers you paid for), or give another "
              "--reliable-cache (or --reliable-no-cache)")


def connect_read_only(path: Path, **options: Any) -> sqlite3.Connection:
    """A connection to the sqlite file ``path`` that can neither write nor create it."""
    conn: sqlite3.Connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                               **options)
    return conn


def _is_locked(error: BaseException) -> bool:
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


def _cache_file_error(path: Path, error: BaseException) -> CacheFileError:
    text = str(error)
    if path.is_dir():
        why = "is a directory; give the path of a file, e.g. .reliable/cache.sqlite"
    elif _is_locked(error):
        why = (f"is locked by {who_holds(path)}: wait for it to finish, or give another "
               "--reliable-cache for this run")
    elif "not a database" in text or "malformed" in text:
        why = f"is not a pytest-reliable response cache (sqlite: {text}): {MOVE_ASIDE}"
    elif "readonly" in text or "unable to open" in text or isinstance(error, PermissionError):
        why = (f"cannot be opened for writing ({text}): make it writable, or give another "
               "--reliable-cache")
    else:
        why = f"cannot be used ({type(error).__name__}: {text}): {MOVE_ASIDE}"
    return CacheFileError(f"response cache {path} {why}")


def _writable_place(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a writable directory."""
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return parent
    return None


PROBE_KEY = "pytest-reliable: start-up write probe"


def _probe_write_lock(path: Path, *, answers: bool = False) -> None:
    """Raise sqlite3.OperationalError("database is locked") when another process keeps the write
    lock for longer than `START_WAIT_S` (an xdist worker's write takes milliseconds).
    ``answers``: write an answer too (rolled back), so a table that takes none (a constraint,
    a trigger) is found now, not by every call of the run paid and not stored."""
    conn = sqlite3.connect(str(path), timeout=START_WAIT_S, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if answers and conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                                        "name='responses'").fetchone():
                conn.execute(f"INSERT OR REPLACE INTO responses({COLUMNS}) VALUES"
                             "(?,?,?,?,?,?,?,?,?,?)",
                             (PROBE_KEY, "probe", None, 1, 1, 0.0, "{}", "probe", "{}", 0.0))
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def check_cache_path(path: Path, record_mode: RecordMode) -> None:
    """Raise `CacheFileError` if ``path`` cannot serve as the cache; creates nothing."""
    if path.is_dir():
        raise _cache_file_error(path, IsADirectoryError(str(path)))
    if path.exists():
        try:
            conn = connect_read_only(path, timeout=START_WAIT_S)
            try:
                _check_schema(conn, path)
            finally:
                conn.close()
            if record_mode != "none":
                if not os.access(path, os.W_OK):
                    raise _cache_file_error(path, PermissionError("the file is read-only"))
                try:
                    _probe_write_lock(path, answers=True)
                except sqlite3.IntegrityError as error:
                    raise CacheFileError(
                        f"response cache {path} does not take answers ({error}): its responses "
                        f"table was not written by pytest-reliable: {MOVE_ASIDE}") from None
        except sqlite3.Error as error:
            raise _cache_file_error(path, error) from None
        return
    if record_mode == "none":
        return  # replay only: a missing file is a miss for every call, reported per test
    blocked = _writable_place(path)
    if blocked is not None:
        raise _cache_file_error(path, PermissionError(f"{blocked} is not a writable directory"))


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    """A file with tables must be ours, at our schema version (sqlite.Error if unreadable)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return
    if "meta" not in tables or "responses" not in tables:
        raise CacheFileError(
            f"response cache {path} is an sqlite file of something else (tables: "
            f"{', '.join(sorted(tables))}): {MOVE_ASIDE}"
        )
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    found = str(row[0]) if row else "none"
    if found == str(SCHEMA_VERSION):
        _check_columns(conn, path)
        return
    if found.isdigit() and int(found) > SCHEMA_VERSION:
        raise CacheFileError(
            f"response cache {path} was written by a newer pytest-reliable (schema version "
            f"{found}; this one reads version {SCHEMA_VERSION}): upgrade pytest-reliable "
            "(pip install -U pytest-reliable), or give another --reliable-cache"
        )
    raise CacheFileError(
        f"response cache {path} has schema version {found}, this pytest-reliable writes version "
        f"{SCHEMA_VERSION}: {MOVE_ASIDE}"
    )


def _check_columns(conn: sqlite3.Connection, path: Path) -> None:
    """The ``responses`` table has every column the store writes (another program's table of
    that name would take no answer, and every call would be paid again)."""
    have = [row[1] for row in conn.execute("PRAGMA table_info(responses)")]
    missing = [name for name in COLUMN_NAMES if name not in have]
    if missing:
        raise CacheFileError(
            f"response cache {path} has a responses table without the columns the cache writes "
            f"({', '.join(missing)} missing; it has {', '.join(have)}): it was not written by "
            f"pytest-reliable: {MOVE_ASIDE}"
        )


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    (
        "CREATE TABLE IF NOT EXISTS responses ("
        " key TEXT PRIMARY KEY, text TEXT NOT NULL, logprobs TEXT,"
        " prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL,"
        " extra TEXT, model TEXT, meta TEXT, created REAL)"
    ),
    "INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', ?)",
)
COLUMNS = ("key, text, logprobs, prompt_tokens, completion_tokens, latency_s, extra, model, meta,"
           " created")
COLUMN_NAMES = tuple(COLUMNS.replace(" ", "").split(","))


def _storable(text: str) -> str | bytes:
    """``text`` as sqlite can store it: bytes (utf-8, surrogatepass) when it is not valid UTF-8."""
    if text.isascii():  # most answers: no copy made to find out
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def row_to_sqlite(row: AnswerRow) -> tuple[Any, ...]:
    return (row.key, _storable(row.text), row.logprobs, row.prompt_tokens, row.completion_tokens,
            row.latency_s, row.extra, _storable(row.model), row.meta, row.created)


def row_from_sqlite(values: Sequence[Any]) -> AnswerRow:
    """The answer of a stored row (texts stored as bytes are decoded); `BadRow` if it is none."""
    return answer_row(*values)


def _undecodable(error: sqlite3.Error) -> bool:
    """sqlite's error for a TEXT value that is not UTF-8 (written by another program)."""
    return "Could not decode" in str(error)


def _use_wal(conn: sqlite3.Connection) -> None:
    """WAL lets readers and one writer share the file. Switching to it needs an exclusive lock that
    sqlite's busy timeout does not wait for: when another process (an xdist worker) is switching
    the same new file at this moment, "database is locked" means it is being done; correctness
    does not depend on the journal mode, only speed."""
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError:
        pass


def _unavailable(error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"{type(error).__name__}: {error}")


class LocalStore(Store):
    """The local store. ``path`` None: answers in memory (``--reliable-no-cache``).

    ``budget_path`` (default ``budget.sqlite`` next to ``path``) and ``nstar_dir`` (default
    ``n_star/`` next to ``path``) may be given apart, as the session does; None without a
    ``path`` keeps them in memory too.
    """

    kind = "sqlite"
    schema_version = SCHEMA_VERSION
    close_trying_s = 2.0  # a full disk or a broken file rarely heals in seconds

    def __init__(
        self,
        path: Path | None,
        record_mode: RecordMode = "new",
        *,
        budget_path: Path | None = None,
        nstar_dir: Path | None = None,
        wait_timeout: float | None = None,
    ) -> None:
        super().__init__(record_mode, str(path) if path is not None else "(in memory)",
                         wait_timeout=wait_timeout)
        self.path = path
        self.budget_path = budget_path or (path.parent / "budget.sqlite" if path else None)
        self._conn_lock = threading.Lock()
        self._conn: sqlite3.Connection | None = self._connect()
        self.claims: Claims = (
            file_claims(Path(f"{path}.claims")) if path is not None
            else ProcessClaims(f"memory:{id(self)}")
        )
        self.waits = ClaimWaits(self.claims, wait_timeout)
        directory = nstar_dir or (path.parent / "n_star" if path else None)
        self.nstar: NStarEntries = (
            NStarStore(directory, self.claims, self.waits) if directory is not None
            else MemoryNStar(self.claims, self.waits)
        )

    # -- kept reports: none here (a machine's history is its --reliable-history directory) ---
    def keep_report(self, run_id: str, part: str, created: str | None, model: str | None,
                    git_commit: str | None, report_json: str) -> bool:
        return False

    def kept_reports(self) -> list[str]:
        return []

    # -- pending batches: one small file each, next to the n* entries ---------------------------
    def _batch_file(self, name: str) -> Path | None:
        directory = getattr(self.nstar, "directory", None)
        if not isinstance(directory, Path):
            return None
        return directory.parent / "batches" / f"{sha256_hex(name)[:32]}.json"

    def pending_batch(self, name: str) -> str | None:
        path = self._batch_file(name)
        if path is None:
            return super().pending_batch(name)
        try:
            return str(json.loads(path.read_text())["batch_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def keep_batch(self, name: str, batch_id: str) -> None:
        path = self._batch_file(name)
        if path is None:
            super().keep_batch(name, batch_id)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"name": name, "batch_id": batch_id}))

    def forget_batch(self, name: str) -> None:
        path = self._batch_file(name)
        if path is None:
            super().forget_batch(name)
            return
        path.unlink(missing_ok=True)

    @classmethod
    def open(cls, path: str | Path, record_mode: RecordMode = "new") -> LocalStore:
        return cls(Path(path), record_mode)

    @classmethod
    def memory(cls) -> LocalStore:
        """An in-process cache (``--reliable-no-cache``): reuse within the run only."""
        return cls(None, "new")

    def _noun(self) -> str:
        return "response cache"

    def _failure_fix(self) -> str:
        return "free disk space or fix the file, or give another --reliable-cache"

    def _connect(self) -> sqlite3.Connection:
        path = self.path
        try:
            if path is None or (self.replay_only and not path.exists()):
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            elif self.replay_only:
                conn = connect_read_only(path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                         check_same_thread=False)
            else:
                if path.is_dir():
                    raise IsADirectoryError(str(path))
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                    check_same_thread=False,
                )
                _use_wal(conn)
                # A paid answer is on disk when its commit returns (the WAL synced): it outlives
                # a power loss, not only the process. Concurrent answers share a commit.
                conn.execute("PRAGMA synchronous=FULL")
            if path is not None:
                _check_schema(conn, path)
            if not (self.replay_only and path is not None and path.exists()):
                with conn:  # one transaction; the busy timeout covers concurrent creators
                    conn.execute("BEGIN IMMEDIATE")
                    for statement in SCHEMA:
                        conn.execute(statement, (str(SCHEMA_VERSION),) if "?" in statement else ())
        except (sqlite3.Error, OSError) as error:
            raise _cache_file_error(path or Path(":memory:"), error) from None
        return conn

    # -- primitives ----------------------------------------------------------------------------
    def _read(self, keys: Sequence[str]) -> list[AnswerRow]:
        sql = f"SELECT {COLUMNS} FROM responses WHERE key IN ({','.join('?' * len(keys))})"
        return self._rows_of(self._select(sql, list(keys)))

    def _select(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """All rows of ``sql``. A text that is not UTF-8 (another program wrote it) fails the
        query: it is run again reading texts as bytes, and such rows are left out."""
        with self._conn_lock:
            if self._conn is None:
                return []
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as error:
                if not _undecodable(error):
                    raise _unavailable(error) from None
            except (sqlite3.Error, OSError) as error:
                raise _unavailable(error) from None
            self._conn.text_factory = bytes
            try:
                return self._conn.execute(sql, params).fetchall()
            except (sqlite3.Error, OSError) as error:
                raise _unavailable(error) from None
            finally:
                self._conn.text_factory = str

    def _rows_of(self, found: list[Any]) -> list[AnswerRow]:
        rows = []
        for values in found:
            try:
                rows.append(row_from_sqlite(values))
            except BadRow as error:
                self.bad_rows.append((_key_text(values[0]), str(error)))
        return rows

    def _write(self, rows: Sequence[AnswerRow], *, replace: bool) -> None:
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        statement = f"{verb} INTO responses({COLUMNS}) VALUES(?,?,?,?,?,?,?,?,?,?)"
        with self._conn_lock:
            if self._conn is None:
                raise StoreUnavailable("the response cache is closed")
            try:
                if len(rows) == 1:
                    self._conn.execute(statement, row_to_sqlite(rows[0]))
                else:
                    with self._conn:
                        self._conn.execute("BEGIN IMMEDIATE")
                        self._conn.executemany(statement, [row_to_sqlite(r) for r in rows])
            except (sqlite3.Error, OSError, ValueError) as error:
                raise _unavailable(error) from None

    def _mean_completion_tokens(self, model: str) -> float | None:
        with self._conn_lock:
            if self._conn is None:
                return None
            try:
                found = self._conn.execute(
                    "SELECT AVG(completion_tokens) FROM responses WHERE model = ? AND"
                    " completion_tokens IS NOT NULL", (model,)).fetchone()
            except sqlite3.Error as error:
                raise _unavailable(error) from None
        return None if found is None or found[0] is None else float(found[0])

    def _count(self) -> int:
        with self._conn_lock:
            if self._conn is None:
                return 0
            try:
                return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            except sqlite3.Error as error:
                raise _unavailable(error) from None

    def _close(self) -> None:
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def ledger(self, run_id: str) -> Ledger:
        return SqliteLedger(self.budget_path, run_id)

    def rows(self, max_bytes: int = CHUNK_BYTES) -> Iterator[list[AnswerRow]]:
        """Every stored answer, in insertion order, in chunks of about ``max_bytes`` (for ``cache
        merge|export``): rows are stepped through one by one, never all read at once."""
        last = 0
        while True:
            stepped = self._step(last, max_bytes)
            if not stepped:
                return
            last = stepped[-1][0]
            chunk: list[AnswerRow] = []
            for _, values in stepped:
                try:
                    chunk.append(checked(row_from_sqlite(values)))
                except BadRow as error:
                    self.bad_rows.append((_key_text(values[0]), str(error)))
            if chunk:
                yield chunk

    def _step(self, after: int, max_bytes: int) -> list[tuple[int, tuple[Any, ...]]]:
        """The rows after rowid ``after``, up to about ``max_bytes`` (at least one, at most
        `CHUNK_ROWS`); texts that are not UTF-8 make it read them as bytes."""
        sql = (f"SELECT rowid, {COLUMNS} FROM responses WHERE rowid > ? ORDER BY rowid "
               f"LIMIT {CHUNK_ROWS}")
        with self._conn_lock:
            if self._conn is None:
                return []
            for factory in (str, bytes):
                self._conn.text_factory = factory
                try:
                    taken: list[tuple[int, tuple[Any, ...]]] = []
                    size = 0
                    cursor = self._conn.execute(sql, (after,))
                    try:
                        for values in cursor:
                            taken.append((int(values[0]), tuple(values[1:])))
                            size += sum(len(v) for v in values[1:] if isinstance(v, str | bytes))
                            if size >= max_bytes:
                                break
                    finally:
                        cursor.close()
                    return taken
                except sqlite3.OperationalError as error:
                    if factory is bytes or not _undecodable(error):
                        raise _unavailable(error) from None
                except sqlite3.Error as error:
                    raise _unavailable(error) from None
                finally:
                    self._conn.text_factory = str
        return []


def _key_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class MemoryNStar(NStarEntries):
    """n* entries kept for this process only (a store opened without any directory)."""

    def __init__(self, claims: Claims | None = None, waits: ClaimWaits | None = None) -> None:
        super().__init__(claims, waits)
        self._records: dict[str, str] = {}

    def where(self, key: NStarKey) -> str:
        return f"(in memory) {key.digest()}"

    def _load(self, key: NStarKey) -> str | None:
        return self._records.get(key.digest())

    def _save(self, key: NStarKey, record: str) -> None:
        self._records[key.digest()] = record


# -- the budget ledger ----------------------------------------------------------------------------
LEDGER_ROWS_KEPT = 1000
"""Runs whose budget rows the local ledger keeps (a row is a few dozen bytes)."""
BUDGET_COLUMNS = ("run", "calls", "tokens", "skipped", "created", "usd")
"""``usd`` came with SPEC section 13: a ledger without it gets it on first use."""
BUDGET_FIX = ("it holds only the budget counts of recent runs, no answers: remove it "
              "(pytest-reliable makes it again), or give --reliable-cache in another directory "
              "(the ledger lives next to the cache)")


def _budget_error(path: Path, error: BaseException) -> CacheFileError:
    text = str(error)
    if _is_locked(error):
        why = (f"is locked by {who_holds(path)}: wait for it to finish, or give --reliable-cache "
               "in another directory for this run (the ledger lives next to the cache)")
    elif "not a database" in text or "malformed" in text:
        why = f"is not an sqlite database ({text}): {BUDGET_FIX}"
    else:
        why = f"cannot be used ({type(error).__name__}: {text}): {BUDGET_FIX}"
    return CacheFileError(f"budget ledger {path} {why}")


def _check_budget_tables(conn: sqlite3.Connection, path: Path) -> None:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(budget)"))
    if tables - {"budget"} or (tables and columns not in (BUDGET_COLUMNS, BUDGET_COLUMNS[:-1])):
        raise CacheFileError(
            f"budget ledger {path} is an sqlite file of something else (tables: "
            f"{', '.join(sorted(tables))}): {BUDGET_FIX}"
        )


def check_budget_path(path: Path) -> None:
    """Raise `CacheFileError` if ``path`` cannot hold the budget ledger; creates nothing."""
    if path.is_dir():
        raise CacheFileError(
            f"budget ledger {path} is a directory: pytest-reliable keeps the run's shared budget "
            "in this file (no answers): move the directory away, or give --reliable-cache in "
            "another directory (the ledger lives next to the cache)"
        )
    if not path.exists():
        blocked = _writable_place(path)
        if blocked is not None:
            raise CacheFileError(f"budget ledger {path} cannot be made: {blocked} is not a "
                                 "writable directory; give --reliable-cache in one")
        return
    try:
        conn = connect_read_only(path, timeout=START_WAIT_S)
        try:
            _check_budget_tables(conn, path)
        finally:
            conn.close()
        _probe_write_lock(path)
    except sqlite3.Error as error:
        raise _budget_error(path, error) from None


class SqliteLedger(Ledger):
    """The run's call and token counts in a small sqlite file every xdist worker opens.

    A call is granted by one atomic ``UPDATE ... WHERE calls < limit``, so the total stays within
    the limit whatever the number of workers. Rows are per run id; beyond the newest
    `LEDGER_ROWS_KEPT` runs the oldest are dropped, by insertion order: a worker whose clock is
    wrong drops nothing it should not, and a run never drops its own row. ``path`` None: a ledger
    of this process only.
    """

    def __init__(self, path: Path | None, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path) if self.path is not None else ":memory:", timeout=BUSY_TIMEOUT_S,
                isolation_level=None, check_same_thread=False,
            )
            _use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")  # counts need no disk sync per call
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS budget (run TEXT PRIMARY KEY, calls INTEGER NOT NULL,"
                    " tokens INTEGER NOT NULL, skipped INTEGER NOT NULL, created REAL NOT NULL,"
                    " usd REAL NOT NULL DEFAULT 0)"
                )
                if "usd" not in {row[1] for row in conn.execute("PRAGMA table_info(budget)")}:
                    conn.execute("ALTER TABLE budget ADD COLUMN usd REAL NOT NULL DEFAULT 0")
                conn.execute(
                    "INSERT OR IGNORE INTO budget(run, calls, tokens, skipped, created)"
                    " VALUES(?, 0, 0, 0, ?)", (self.run_id, time.time())
                )
                conn.execute("DELETE FROM budget WHERE run != ? AND rowid <= "
                             "(SELECT MAX(rowid) FROM budget) - ?",
                             (self.run_id, LEDGER_ROWS_KEPT))
            self._conn = conn
        return self._conn

    def _execute(self, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return self._connection().execute(sql, args)
        except (sqlite3.Error, OSError) as error:
            raise _unavailable(error) from None

    def reserve(self, max_calls: int | None, max_tokens: int | None,
                max_usd: float | None = None, usd: float = 0.0) -> bool:
        """Count one call (and reserve ``usd``) if every limit allows it; else count it as
        skipped and say no."""
        with self._lock:
            granted = self._execute(
                "UPDATE budget SET calls = calls + 1, usd = usd + ? WHERE run = ?"
                " AND (? IS NULL OR calls < ?) AND (? IS NULL OR tokens < ?)"
                " AND (? IS NULL OR usd + ? <= ? + 1e-12)",
                (float(usd), self.run_id, max_calls, max_calls, max_tokens, max_tokens,
                 max_usd, float(usd), max_usd),
            ).rowcount == 1
            if not granted:
                self._execute("UPDATE budget SET skipped = skipped + 1 WHERE run = ?",
                              (self.run_id,))
            return granted

    def add_tokens(self, n: int, usd: float = 0.0) -> None:
        with self._lock:
            self._execute("UPDATE budget SET tokens = tokens + ?, usd = usd + ? WHERE run = ?",
                          (int(n), float(usd), self.run_id))

    def spent_usd(self) -> float:
        with self._lock:
            row = self._execute("SELECT usd FROM budget WHERE run = ?", (self.run_id,)).fetchone()
        return float(row[0]) if row else 0.0

    def totals(self) -> tuple[int, int, int]:
        with self._lock:
            row = self._execute("SELECT calls, tokens, skipped FROM budget WHERE run = ?",
                                (self.run_id,)).fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


__all__ = [
    "BUSY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "CacheFileError",
    "LocalStore",
    "MemoryNStar",
    "SqliteLedger",
    "check_budget_path",
    "check_cache_path",
]
