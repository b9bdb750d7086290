"""The response cache: one sqlite code path (a file, or an in-memory database for
``--reliable-no-cache``), record modes, key hashing, and the run's shared budget ledger.

Keys are the sha256 of a canonical JSON of (model identity, messages, sampling params, sample
index, scope); an API key is never part of a key nor of a stored row. The sqlite file uses WAL and
a 30 s busy timeout (set once, on the connection) so several pytest-xdist workers can write it at
once; every `put` commits immediately, so a response that was paid for survives a crash of the run
right after it. A `put` that fails (disk full, a broken file) keeps the answer in memory for the
rest of the run and is reported once (`take_store_failure`); it never loses a paid answer.
Answer texts that are not valid UTF-8 (a lone surrogate) are stored as UTF-8 bytes with
``surrogatepass``, so a replay gives back the same string.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_reliable.errors import ReliableError
from pytest_reliable.files import content_hash
from pytest_reliable.models.base import Message, ModelResponse, SamplingParams

RECORD_MODES: tuple[str, ...] = ("new", "none", "all")
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0


class CacheMissError(ReliableError):
    """Record mode ``none`` met a call that is not in the cache."""


class CacheFileError(ReliableError):
    """``--reliable-cache`` names something that cannot be the response cache."""


class StoreWarning(UserWarning):
    """The response cache could not store answers; they are kept in memory for this run."""


FIX = "delete or move it, or give another --reliable-cache (or --reliable-no-cache)"


def _cache_file_error(path: Path, error: BaseException) -> CacheFileError:
    text = str(error)
    if path.is_dir():
        why = "is a directory; give the path of a file, e.g. .reliable/cache.sqlite"
    elif "not a database" in text or "malformed" in text:
        why = f"is not a pytest-reliable response cache (sqlite: {text}): {FIX}"
    elif "readonly" in text or "unable to open" in text or isinstance(error, PermissionError):
        why = f"cannot be opened for writing ({text}): make it writable, or {FIX}"
    else:
        why = f"cannot be used ({type(error).__name__}: {text}): {FIX}"
    return CacheFileError(f"response cache {path} {why}")


def check_cache_path(path: Path, record_mode: str) -> None:
    """Raise `CacheFileError` if ``path`` cannot serve as the cache; creates nothing."""
    if path.is_dir():
        raise _cache_file_error(path, IsADirectoryError(str(path)))
    if path.exists():
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                _check_schema(conn, path)
            finally:
                conn.close()
        except sqlite3.Error as error:
            raise _cache_file_error(path, error) from None
        if record_mode != "none" and not os.access(path, os.W_OK):
            raise _cache_file_error(path, PermissionError("the file is read-only"))
        return
    if record_mode == "none":
        return  # replay only: a missing file is a miss for every call, reported per test
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise _cache_file_error(
            path, PermissionError(f"{parent} is not a writable directory")
        )


def _check_schema(conn: sqlite3.Connection, path: Path) -> None:
    """A file with tables must be ours, at our schema version (sqlite.Error if unreadable)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return
    if "meta" not in tables or "responses" not in tables:
        raise CacheFileError(
            f"response cache {path} is an sqlite file of something else (tables: "
            f"{', '.join(sorted(tables))}): {FIX}"
        )
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is None or str(row[0]) != str(SCHEMA_VERSION):
        raise CacheFileError(
            f"response cache {path} has schema version {row[0] if row else 'none'}, this "
            f"pytest-reliable writes version {SCHEMA_VERSION}: {FIX}"
        )


def canonical_messages(messages: Iterable[Message] | Iterable[tuple[str, str]]) -> list[list[str]]:
    """Messages as ``[[role, content], ...]``: the same for dicts and tuples."""
    out: list[list[str]] = []
    for m in messages:
        if isinstance(m, dict):
            out.append([str(m.get("role", "user")), str(m.get("content", ""))])
        else:
            role, content = m
            out.append([str(role), str(content)])
    return out


def cache_key(
    model_identity: str,
    messages: Iterable[Message] | Iterable[tuple[str, str]],
    params: SamplingParams,
    sample_index: int,
    scope: str | None,
) -> str:
    """sha256 of the canonical JSON of everything that determines one sample."""
    payload = {
        "v": SCHEMA_VERSION,
        "model": model_identity,
        "messages": canonical_messages(messages),
        "params": params.as_dict(),
        "sample_index": int(sample_index),
        "scope": scope,
    }
    return content_hash(payload)


def prompt_excerpt(
    messages: Sequence[Message] | Sequence[tuple[str, str]], limit: int = 120
) -> str:
    """The last user message, on one line, truncated: for error messages."""
    canon = canonical_messages(messages)
    users = [c for r, c in canon if r == "user"] or [c for _, c in canon] or [""]
    text = " ".join(users[-1].split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def miss_message(
    context: str | None, messages: Sequence[Message] | Sequence[tuple[str, str]]
) -> str:
    where = f" for {context}" if context else ""
    return (
        f"no cached response{where} (prompt: {prompt_excerpt(messages)!r}): "
        "--reliable-record none replays only; run once with --reliable-record new to record it"
    )


def _storable(text: str) -> str | bytes:
    """``text`` as sqlite can store it: bytes (utf-8, surrogatepass) when it is not valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _loaded(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def _response_to_row(
    response: ModelResponse,
) -> tuple[str | bytes, str | None, int | None, int | None, float, str]:
    return (
        _storable(response.text),
        json.dumps(response.logprobs) if response.logprobs is not None else None,
        response.prompt_tokens,
        response.completion_tokens,
        float(response.latency_s),
        json.dumps(response.extra or {}),
    )


def _row_to_response(row: Sequence[Any]) -> ModelResponse:
    text, logprobs, pt, ct, latency, extra = row
    return ModelResponse(
        text=_loaded(text),
        logprobs=json.loads(logprobs) if logprobs else None,
        prompt_tokens=pt,
        completion_tokens=ct,
        latency_s=float(latency or 0.0),
        extra=json.loads(extra) if extra else {},
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
_ROW = "text, logprobs, prompt_tokens, completion_tokens, latency_s, extra"


def _use_wal(conn: sqlite3.Connection) -> None:
    """WAL lets readers and one writer share the file. Switching to it needs an exclusive lock that
    sqlite's busy timeout does not wait for: when another process (an xdist worker) is switching
    the same new file at this moment, "database is locked" means it is being done; correctness
    does not depend on the journal mode, only speed."""
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError:
        pass


class ResponseCache:
    """Cache of model responses. Use `ResponseCache.open(path, mode)` or `ResponseCache.memory()`.

    ``record_mode``: ``new`` replays hits and records misses; ``none`` replays only (`get` misses
    are the caller's `CacheMissError`; no file is ever created); ``all`` ignores hits (the runner
    always calls) and overwrites. ``path`` None is an in-memory database with the same code.
    """

    def __init__(self, path: Path | None, record_mode: str = "new") -> None:
        if record_mode not in RECORD_MODES:
            raise ValueError(f"record mode {record_mode!r}: allowed are {', '.join(RECORD_MODES)}")
        self.path = path
        self.record_mode: str = record_mode
        self._lock = threading.Lock()
        self._unstored: dict[str, ModelResponse] = {}
        """Answers the database refused (disk full, broken file): served for the rest of the run."""
        self._store_failure: str | None = None
        self._store_failure_taken = False
        self._conn: sqlite3.Connection | None = self._connect()

    def _connect(self) -> sqlite3.Connection:
        path = self.path
        try:
            if path is None or (self.replay_only and not path.exists()):
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            elif self.replay_only:
                conn = sqlite3.connect(
                    f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                    isolation_level=None, check_same_thread=False,
                )
            else:
                if path.is_dir():
                    raise IsADirectoryError(str(path))
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                    check_same_thread=False,
                )
                _use_wal(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
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

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, record_mode: str = "new") -> ResponseCache:
        return cls(Path(path), record_mode)

    @classmethod
    def memory(cls) -> ResponseCache:
        """An in-process cache (``--reliable-no-cache``): reuse within the run only."""
        return cls(None, "new")

    @property
    def replay_only(self) -> bool:
        return self.record_mode == "none"

    @property
    def reads(self) -> bool:
        """Whether hits are served (not in record mode ``all``)."""
        return self.record_mode != "all"

    # -- lookups -----------------------------------------------------------------------------
    def get(self, key: str) -> ModelResponse | None:
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, ModelResponse]:
        """Batch lookup: the hits among ``keys``."""
        out: dict[str, ModelResponse] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            conn = self._conn
            if conn is not None:
                for i in range(0, len(unique), 500):
                    chunk = unique[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    for row in conn.execute(
                        f"SELECT key, {_ROW} FROM responses WHERE key IN ({marks})", chunk
                    ):
                        out[row[0]] = _row_to_response(row[1:])
            out.update((k, self._unstored[k]) for k in unique if k in self._unstored)
        return out

    def put(self, key: str, response: ModelResponse, *, meta: dict[str, Any] | None = None) -> None:
        """Store one response (INSERT OR REPLACE, committed at once). No-op in record mode none.

        Never raises for a storage failure: the answer is kept in memory instead (see
        `take_store_failure`)."""
        if self.replay_only:
            return
        meta = dict(meta or {})
        model = _storable(str(meta.get("model", "")))
        with self._lock:
            if self._conn is None:
                self._unstored[key] = response
                return
            try:
                row = (key, *_response_to_row(response), model, json.dumps(meta, default=str),
                       time.time())
                self._conn.execute(
                    "INSERT OR REPLACE INTO responses(key, text, logprobs, prompt_tokens,"
                    " completion_tokens, latency_s, extra, model, meta, created)"
                    " VALUES(?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
            except (sqlite3.Error, OSError, ValueError) as error:
                self._unstored[key] = response
                if self._store_failure is None:
                    where = self.path if self.path is not None else "(in memory)"
                    self._store_failure = (
                        f"pytest-reliable: the response cache {where} could not store an answer "
                        f"({type(error).__name__}: {error}). Answers paid for in this run are "
                        "kept in memory and count for this run, but the next run cannot replay "
                        "them: free disk space or fix the file, or give another --reliable-cache."
                    )

    def take_store_failure(self) -> str | None:
        """The first store failure's message, once per cache (None before one, and after)."""
        with self._lock:
            if self._store_failure is None or self._store_failure_taken:
                return None
            self._store_failure_taken = True
            return self._store_failure

    @property
    def unstored(self) -> int:
        """How many answers live only in memory because the database refused them."""
        return len(self._unstored)

    def count(self) -> int:
        with self._lock:
            conn = self._conn
            stored = 0 if conn is None else int(
                conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            )
            return stored + len(self._unstored)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> ResponseCache:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BudgetLedger:
    """The run's call and token counts in a small sqlite file every xdist worker opens.

    A call is granted by one atomic ``UPDATE ... WHERE calls < limit``, so the total stays within
    the limit whatever the number of workers. Rows are per run id (the controller's, sent to the
    workers); rows older than a day are dropped.
    """

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                check_same_thread=False,
            )
            _use_wal(conn)
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS budget (run TEXT PRIMARY KEY, calls INTEGER NOT NULL,"
                    " tokens INTEGER NOT NULL, skipped INTEGER NOT NULL, created REAL NOT NULL)"
                )
                conn.execute("DELETE FROM budget WHERE created < ?", (time.time() - 86400,))
                conn.execute(
                    "INSERT OR IGNORE INTO budget VALUES(?, 0, 0, 0, ?)", (self.run_id, time.time())
                )
            self._conn = conn
        return self._conn

    def reserve(self, max_calls: int | None, max_tokens: int | None) -> bool:
        """Count one call if both limits allow it; else count it as skipped and say no."""
        with self._lock:
            conn = self._connection()
            granted = conn.execute(
                "UPDATE budget SET calls = calls + 1 WHERE run = ?"
                " AND (? IS NULL OR calls < ?) AND (? IS NULL OR tokens < ?)",
                (self.run_id, max_calls, max_calls, max_tokens, max_tokens),
            ).rowcount == 1
            if not granted:
                conn.execute("UPDATE budget SET skipped = skipped + 1 WHERE run = ?",
                             (self.run_id,))
            return granted

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self._connection().execute(
                "UPDATE budget SET tokens = tokens + ? WHERE run = ?", (int(n), self.run_id)
            )

    def totals(self) -> tuple[int, int, int]:
        """(calls, tokens, skipped) of the run so far, every worker included."""
        with self._lock:
            row = self._connection().execute(
                "SELECT calls, tokens, skipped FROM budget WHERE run = ?", (self.run_id,)
            ).fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
