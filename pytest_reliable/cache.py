"""The response cache: sqlite on disk (or a dict in memory), record modes, key hashing.

Keys are the sha256 of a canonical JSON of (model identity, messages, sampling params, sample
index, scope); an API key is never part of a key nor of a stored row. The sqlite file uses WAL and
a 30 s busy timeout so several pytest-xdist workers can write it at once; every `put` commits
immediately, so a response that was paid for survives a crash of the run right after it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pytest_reliable.errors import ReliableError
from pytest_reliable.models.base import Message, ModelResponse, SamplingParams

RecordMode = Literal["new", "none", "all"]
RECORD_MODES: tuple[str, ...] = ("new", "none", "all")
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0


class CacheMissError(ReliableError):
    """Record mode ``none`` met a call that is not in the cache."""


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
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def _response_to_row(
    response: ModelResponse,
) -> tuple[str, str | None, int | None, int | None, float, str]:
    return (
        response.text,
        json.dumps(response.logprobs) if response.logprobs is not None else None,
        response.prompt_tokens,
        response.completion_tokens,
        float(response.latency_s),
        json.dumps(response.extra or {}),
    )


def _row_to_response(row: Sequence[Any]) -> ModelResponse:
    text, logprobs, pt, ct, latency, extra = row
    return ModelResponse(
        text=text,
        logprobs=json.loads(logprobs) if logprobs else None,
        prompt_tokens=pt,
        completion_tokens=ct,
        latency_s=float(latency or 0.0),
        extra=json.loads(extra) if extra else {},
    )


class ResponseCache:
    """Cache of model responses. Use `ResponseCache.open(path, mode)` or `ResponseCache.memory()`.

    ``record_mode``: ``new`` replays hits and records misses; ``none`` replays only (`get` misses
    are the caller's `CacheMissError`; no file is ever created); ``all`` ignores hits (the runner
    always calls) and overwrites.
    """

    def __init__(self, path: Path | None, record_mode: str = "new") -> None:
        if record_mode not in RECORD_MODES:
            raise ValueError(f"record mode {record_mode!r}: allowed are {', '.join(RECORD_MODES)}")
        self.path = path
        self.record_mode: str = record_mode
        self._memory: dict[str, ModelResponse] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        self._file_ok = path is not None and (record_mode != "none" or path.exists())
        if path is not None and self._file_ok:
            if record_mode != "none":
                path.parent.mkdir(parents=True, exist_ok=True)
            self._init_schema()

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, record_mode: str = "new") -> ResponseCache:
        return cls(Path(path), record_mode)

    @classmethod
    def memory(cls) -> ResponseCache:
        """An in-process cache (``--reliable-no-cache``): reuse within the run only."""
        return cls(None, "new")

    @property
    def is_memory(self) -> bool:
        return self.path is None

    @property
    def replay_only(self) -> bool:
        return self.record_mode == "none"

    @property
    def reads(self) -> bool:
        """Whether hits are served (not in record mode ``all``)."""
        return self.record_mode != "all"

    # -- sqlite ------------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection | None:
        if self.path is None or not self._file_ok or self._closed:
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                str(self.path),
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            if self.record_mode != "none":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _init_schema(self) -> None:
        conn = self._conn()
        assert conn is not None
        if self.record_mode == "none":
            return
        for attempt in range(50):
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS responses ("
                    " key TEXT PRIMARY KEY, text TEXT NOT NULL, logprobs TEXT,"
                    " prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL,"
                    " extra TEXT, model TEXT, meta TEXT, created REAL)"
                )
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO meta(key, value) VALUES('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
                elif int(row[0]) != SCHEMA_VERSION:
                    conn.execute("ROLLBACK")
                    raise ReliableError(
                        f"response cache {self.path} has schema version {row[0]}, this pytest-reliable "
                        f"writes version {SCHEMA_VERSION}: delete the file or give another --reliable-cache"
                    )
                conn.execute("COMMIT")
                return
            except sqlite3.OperationalError:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                time.sleep(0.05 * (attempt + 1))
        raise ReliableError(f"could not initialise the response cache {self.path} (locked)")

    # -- lookups -----------------------------------------------------------------------------
    def get(self, key: str) -> ModelResponse | None:
        if self.path is None:
            with self._lock:
                return self._memory.get(key)
        conn = self._conn()
        if conn is None:
            return None
        row = conn.execute(
            "SELECT text, logprobs, prompt_tokens, completion_tokens, latency_s, extra"
            " FROM responses WHERE key=?",
            (key,),
        ).fetchone()
        return None if row is None else _row_to_response(row)

    def get_many(self, keys: Sequence[str]) -> dict[str, ModelResponse]:
        """Batch lookup: the hits among ``keys``."""
        if self.path is None:
            with self._lock:
                return {k: self._memory[k] for k in keys if k in self._memory}
        conn = self._conn()
        if conn is None:
            return {}
        out: dict[str, ModelResponse] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                "SELECT key, text, logprobs, prompt_tokens, completion_tokens, latency_s, extra"
                f" FROM responses WHERE key IN ({marks})",
                chunk,
            ):
                out[row[0]] = _row_to_response(row[1:])
        return out

    def put(self, key: str, response: ModelResponse, *, meta: dict[str, Any] | None = None) -> None:
        """Store one response (INSERT OR REPLACE, committed at once). No-op in record mode none."""
        if self.path is None:
            with self._lock:
                self._memory[key] = response
            return
        if self.record_mode == "none":
            return
        conn = self._conn()
        if conn is None:
            return
        meta = dict(meta or {})
        model = str(meta.get("model", ""))
        row = (key, *_response_to_row(response), model, json.dumps(meta, default=str), time.time())
        for attempt in range(20):
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO responses(key, text, logprobs, prompt_tokens,"
                    " completion_tokens, latency_s, extra, model, meta, created)"
                    " VALUES(?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise ReliableError(f"response cache {self.path} stayed locked for too long")

    def count(self) -> int:
        if self.path is None:
            return len(self._memory)
        conn = self._conn()
        if conn is None:
            return 0
        return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> ResponseCache:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
