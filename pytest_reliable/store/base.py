"""The store interface: what outlives a run, whatever the backend (SPEC section 10).

A `Store` holds the paid answers (write-once per cache key, read in batches), hands out the budget
`Ledger` of a run id, the n* entries and the `Claims` that make a call single-flight across every
process using the store, and the runs' reports kept for the release history (`keep_report`,
`kept_reports`). Backends implement a few primitives (`_read`, `_write`, `_count`, `_close`,
`ledger`, the kept reports); the promises callers rely on live here, once for every backend:

- ``put`` never raises and never loses a paid answer: it returns once the answer is committed
  durably (answers that arrive together from several threads share one commit: a group commit),
  and meanwhile the answer is served from memory; when the database refuses it (disk full, server
  lost) it stays in memory, the write is retried with backoff, and the failure is reported once
  (`take_store_failure`).
- a claim on a key whose answer is still only in memory is let go only once the answer is
  written: another process that claims the key next finds the answer, never pays for it again.
- a read that fails is a miss (the run pays again rather than stopping); reads pause with the
  same backoff, so a lost server costs one timeout, not one per batch.
- record modes mean the same everywhere: ``new`` inserts if absent (the first writer wins),
  ``all`` replaces, ``none`` never writes.
- rows read back are checked (`answer_row`): one that is not an answer (text missing or not
  UTF-8, log-probabilities or extras that are not JSON) is a miss, never a crash or an empty
  answer; numbers that are not numbers are read as unknown.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, get_args

from pytest_reliable.contract.settings import RecordMode
from pytest_reliable.models.base import ModelResponse
from pytest_reliable.store.claims import claim_name
from pytest_reliable.store.errors import StoreUnavailable
from pytest_reliable.store.reports import report_text

if TYPE_CHECKING:
    from pytest_reliable.store.claims import Claims
    from pytest_reliable.store.nstar import NStarEntries
    from pytest_reliable.store.waits import ClaimWaits

log = logging.getLogger("pytest_reliable.store")

RECORD_MODES: tuple[RecordMode, ...] = get_args(RecordMode)
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0
"""Backoff of writes (and reads) after the database failed: doubling from the first to the max."""
WRITE_GROUP = 256
"""Answers written in one transaction at most (a group commit, or the backlog of a lost store)."""
CHUNK_BYTES = 4 * 1024 * 1024
"""``rows`` yields chunks of about this many bytes of answers (at least one row): a copy of a
store of large answers holds a few chunks in memory, never the store."""
CHUNK_ROWS = 500


@dataclass(frozen=True)
class AnswerRow:
    """One stored answer, as every backend keeps it (JSON fields as text)."""

    key: str
    text: str
    logprobs: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    extra: str
    model: str
    meta: str
    created: float

    @classmethod
    def of(cls, key: str, response: ModelResponse, meta: dict[str, Any]) -> AnswerRow:
        if not isinstance(response.text, str):
            raise TypeError(f"a model answer's text must be a string, not "
                            f"{type(response.text).__name__}")
        return cls(
            key=key,
            text=response.text,
            logprobs=json.dumps(response.logprobs) if response.logprobs is not None else None,
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            latency_s=float(response.latency_s or 0.0),
            extra=json.dumps(response.extra or {}, default=str),
            model=printable(str(meta.get("model", ""))),
            meta=json.dumps(meta, default=str),
            created=time.time(),
        )

    def response(self) -> ModelResponse:
        return ModelResponse(
            text=self.text,
            logprobs=json.loads(self.logprobs) if self.logprobs else None,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_s=float(self.latency_s or 0.0),
            # most answers carry no extra: a replay of many cells skips parsing "{}" each time
            extra=json.loads(self.extra) if self.extra and self.extra != "{}" else {},
        )

    def same_answer(self, other: AnswerRow) -> bool:
        """The same answer (text and log-probabilities), whatever its latency or meta."""
        return (self.text, self.logprobs) == (other.text, other.logprobs)

    def size(self) -> int:
        """About how many bytes the row holds (for chunking copies)."""
        return (len(self.key) + len(self.text) + len(self.logprobs or "") + len(self.extra)
                + len(self.meta) + len(self.model) + 64)


class BadRow(ValueError):
    """A stored row that is not an answer (written by something else, or damaged): a miss."""


def _text_of(value: Any, field: str) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise BadRow(f"its {field} is not UTF-8") from None
    if isinstance(value, str):
        return value
    raise BadRow(f"its {field} is {'NULL' if value is None else type(value).__name__}")


def checked(row: AnswerRow) -> AnswerRow:
    """``row`` if it can be replayed (its JSON fields parse), else `BadRow`."""
    try:
        row.response()
    except ValueError:
        raise BadRow("its log-probabilities or extras are not JSON") from None
    return row


def _label(value: Any) -> str:
    """A descriptive field (model, meta): any text will do, damaged bytes are replaced."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def _text_or_none(value: Any, field: str) -> str | None:
    return None if value is None else _text_of(value, field)


def _count_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None  # unknown rather than wrong: a token count that is not a count


def _seconds(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    return 0.0


def answer_row(key: Any, text: Any, logprobs: Any, prompt_tokens: Any, completion_tokens: Any,
               latency_s: Any, extra: Any, model: Any, meta: Any, created: Any) -> AnswerRow:
    """An `AnswerRow` from a database's values, checked: `BadRow` (saying why) when its text is
    missing or not UTF-8; token counts, latency and dates that are not numbers are read as unknown
    (None, 0). Its JSON fields are checked where they are parsed (`checked`, `Store.get_many`)."""
    key = _text_of(key, "key")
    if not key:
        raise BadRow("its key is empty")
    return AnswerRow(
        key=key,
        text=_text_of(text, "text"),
        logprobs=_text_or_none(logprobs, "logprobs"),
        prompt_tokens=_count_or_none(prompt_tokens),
        completion_tokens=_count_or_none(completion_tokens),
        latency_s=_seconds(latency_s),
        extra=_text_or_none(extra, "extra") or "{}",
        model=_label(model),
        meta=_label(meta) or "{}",
        created=_seconds(created),
    )


def printable(text: str) -> str:
    """``text`` as every database takes it: no NUL, no lone surrogate (for labels, not answers)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


class Ledger(ABC):
    """The budget of one run id, shared by every process and host using the store.

    ``reserve`` grants one model call (one attempt sent) atomically if the limits allow it, else
    counts it as skipped; with a USD limit it also reserves ``usd`` (the call's most possible
    cost) and grants only if it fits under ``max_usd``; ``add_tokens`` charges what a call used
    (``usd``: its real cost less its reservation, may be negative). Backends raise
    `StoreUnavailable` when the database cannot be used; `runner.Budget` then counts locally.
    """

    run_id: str

    @abstractmethod
    def reserve(self, max_calls: int | None, max_tokens: int | None,
                max_usd: float | None = None, usd: float = 0.0) -> bool: ...

    @abstractmethod
    def add_tokens(self, n: int, usd: float = 0.0) -> None: ...

    @abstractmethod
    def spent_usd(self) -> float:
        """USD spent (and reserved by calls in flight) by the run so far, every process included."""

    @abstractmethod
    def totals(self) -> tuple[int, int, int]:
        """(calls, tokens, skipped) of the run so far, every process included."""

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True)
class Claim:
    """What `Store.claim` found: ``held`` (this process calls, then `Store.release`), or the
    ``answer`` stored meanwhile, or neither (another process holds the claim: wait)."""

    held: bool
    answer: ModelResponse | None = None


class Store(ABC):
    """Answers, budget ledgers, n* entries and claims of one store (see the module docstring).

    ``location`` names the store in messages (never with a password). ``reads``: hits are served
    (not in record mode ``all``); ``replay_only``: record mode ``none``. ``wait_timeout``: the
    run's deadline for waiting on other processes' claims (`waits`, ``--reliable-wait-timeout``).
    """

    kind: ClassVar[str]
    """"sqlite" or "postgresql"."""
    schema_version: ClassVar[int]
    read_batch: ClassVar[int] = 500
    """Keys per read query: a replay reads one query per batch, never one per cell."""
    close_trying_s: ClassVar[float] = 10.0
    """At close, answers still unwritten get last tries (with backoff) for this long: a server
    restarting takes seconds."""

    claims: Claims
    nstar: NStarEntries
    waits: ClaimWaits
    """This run's waits on other processes' claims (one deadline for the whole run)."""

    def __init__(self, record_mode: RecordMode, location: str, *,
                 wait_timeout: float | None = None) -> None:
        self.record_mode = record_mode
        self.location = location
        self.wait_timeout = wait_timeout
        self.read_queries = 0
        """Read queries sent so far (one per `read_batch` keys)."""
        self.commits = 0
        """Write transactions committed so far (a group commit writes many answers in one)."""
        self._lock = threading.Lock()
        self._writer = threading.Condition(self._lock)
        """Signalled when a write ends: the threads whose answers it carried return."""
        self._writing = False
        self._write_failures = 0
        self._pending: dict[str, AnswerRow] = {}
        """Answers not (yet) in the database: served from here, written when it takes them."""
        self._release_when_written: dict[str, list[str]] = {}
        """Answer key -> claims let go by their holder, held on until the answer is written."""
        self._write_retry_at = 0.0
        self._write_delay = RETRY_FIRST_S
        self._read_retry_at = 0.0
        self._read_delay = RETRY_FIRST_S
        self._failure: str | None = None
        self._failure_taken = False
        self.bad_rows: list[tuple[str, str]] = []
        """(key, why) of the stored rows that are not answers, met by `rows` or a read."""

    # -- backend primitives ----------------------------------------------------------------------
    @abstractmethod
    def _read(self, keys: Sequence[str]) -> list[AnswerRow]:
        """The stored rows among ``keys`` (at most `read_batch` of them), in one query; rows that
        are not answers (`BadRow`) left out."""

    @abstractmethod
    def _write(self, rows: Sequence[AnswerRow], *, replace: bool) -> None:
        """Insert ``rows`` (if absent; ``replace``: overwrite) in one transaction, committed
        durably before returning."""

    @abstractmethod
    def _count(self) -> int: ...

    @abstractmethod
    def _close(self) -> None: ...

    @abstractmethod
    def ledger(self, run_id: str) -> Ledger:
        """The budget ledger of ``run_id`` (created on first use)."""

    def _mean_completion_tokens(self, model: str) -> float | None:
        """The mean completion tokens of ``model``'s stored answers that report them (None: no
        such answer). Backends answer it in one query."""
        return None

    def mean_completion_tokens(self, model: str) -> float | None:
        """What ``--reliable-plan`` expects an answer of ``model`` to cost in output tokens (SPEC
        13); a store that cannot be read knows none."""
        try:
            return self._mean_completion_tokens(model)
        except StoreUnavailable:
            return None

    def _failure_fix(self) -> str:
        """What to do when writes fail (the end of the one report)."""
        return "check the store"

    # -- record modes -----------------------------------------------------------------------------
    @property
    def replay_only(self) -> bool:
        return self.record_mode == "none"

    @property
    def reads(self) -> bool:
        """Whether hits are served (not in record mode ``all``)."""
        return self.record_mode != "all"

    # -- answers ----------------------------------------------------------------------------------
    def get(self, key: str) -> ModelResponse | None:
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, ModelResponse]:
        """The hits among ``keys``: one read query per `read_batch` keys, plus the answers kept in
        memory. A store that cannot be read gives misses (and one report), never an error."""
        unique = list(dict.fromkeys(keys))
        rows: list[AnswerRow] = []
        if time.monotonic() >= self._read_retry_at:
            try:
                for start in range(0, len(unique), self.read_batch):
                    self.read_queries += 1
                    rows += self._read(unique[start : start + self.read_batch])
                self._read_delay = RETRY_FIRST_S
                self.database_back()
            except StoreUnavailable as error:
                with self._lock:
                    self._read_retry_at = time.monotonic() + self._read_delay
                    self._read_delay = min(RETRY_MAX_S, self._read_delay * 2)
                    self._note_failure("read", error)
        found: dict[str, ModelResponse] = {}
        for row in rows:
            try:
                found[row.key] = row.response()
            except ValueError:  # JSON a backend could not tell from text: not an answer, a miss
                log.debug("stored row %s is not an answer: a miss", row.key)
        with self._lock:
            found.update((k, self._pending[k].response()) for k in unique if k in self._pending)
        self._flush_due()
        return found

    def database_back(self) -> None:
        """The database answered again: the answers kept in memory are written at the next
        chance, without waiting out the backoff (their claims are held until then)."""
        with self._lock:
            if self._pending and self._write_retry_at > time.monotonic():
                self._write_retry_at = 0.0
                self._write_delay = RETRY_FIRST_S

    def put(self, key: str, response: ModelResponse, *, meta: dict[str, Any] | None = None) -> bool:
        """Store one answer: True once it is committed durably (answers put by several threads
        at once share one commit). Never raises for a storage failure: False, the answer is kept
        in memory, served for the rest of the run and written when the database takes it. No-op
        (False) in record mode ``none``."""
        if self.replay_only:
            return False
        row = AnswerRow.of(key, response, dict(meta or {}))
        with self._lock:
            self._pending[key] = row
            failures = self._write_failures
            waiting = time.monotonic() < self._write_retry_at
        if not waiting:  # else the database failed a moment ago: the answer waits for a retry
            self._write_pending(until=(row, failures))
            self._flush_due()
        with self._lock:
            return self._pending.get(key) is not row

    def flush(self) -> int:
        """Try now to write the answers kept in memory; returns how many are still unwritten."""
        with self._lock:
            failures = self._write_failures
        self._write_pending(until=(None, failures))
        return self.unstored

    def _flush_due(self) -> None:
        """Retry the kept answers once their backoff has passed (unless a write is under way)."""
        with self._lock:
            due = (bool(self._pending) and not self._writing
                   and time.monotonic() >= self._write_retry_at)
            failures = self._write_failures
        if due:
            self._write_pending(until=(None, failures))

    def _write_pending(self, until: tuple[AnswerRow | None, int]) -> None:
        """Write the answers kept in memory, `WRITE_GROUP` per transaction, one writer at a time:
        a thread whose answer another thread's transaction carried returns without writing (a
        group commit). ``until``: (this thread's row, or None for all of them; the failures
        counted when it began): stop once it is written, or once a write failed since."""
        mine, failures = until
        while True:
            with self._writer:
                while self._writing and not self._settled(mine, failures):
                    self._writer.wait()
                if self._settled(mine, failures):
                    return
                self._writing = True
                rows = list(self._pending.values())[:WRITE_GROUP]
            try:
                self._write_rows(rows)
            finally:
                with self._writer:
                    self._writing = False
                    self._writer.notify_all()

    def _settled(self, mine: AnswerRow | None, failures: int) -> bool:
        """(Lock held.) Nothing left to do for a writer waiting on ``mine`` (None: all)."""
        if self._write_failures != failures:
            return True  # kept in memory; retried after the backoff
        if mine is None:
            return not self._pending
        return self._pending.get(mine.key) is not mine

    def _write_rows(self, rows: list[AnswerRow]) -> None:
        try:
            self._write(rows, replace=self.record_mode == "all")
        except StoreUnavailable as error:
            with self._lock:
                self._write_failures += 1
                self._write_retry_at = time.monotonic() + self._write_delay
                self._write_delay = min(RETRY_MAX_S, self._write_delay * 2)
                self._note_failure("write", error)
            return
        releases: list[str] = []
        with self._lock:
            self.commits += 1
            self._write_delay = RETRY_FIRST_S
            for row in rows:
                if self._pending.get(row.key) is row:
                    del self._pending[row.key]
                    releases += self._release_when_written.pop(row.key, [])
        for name in releases:  # the answers are in the database: their claims may go now
            self.claims.release(name)

    def _note_failure(self, what: str, error: StoreUnavailable) -> None:
        """Keep the first failure's message for the one report (called with the lock held)."""
        log.debug("store %s failed to %s: %s", self.location, what, error)
        if self._failure is not None:
            return
        doing = "could not store an answer" if what == "write" else "could not be read"
        self._failure = (
            f"pytest-reliable: the {self._noun()} {self.location} {doing} ({error}). Answers "
            "paid for in this run are kept in memory and count for this run; writing them is "
            "retried with backoff, and any still unwritten at the end cannot be replayed by the "
            f"next run: {self._failure_fix()}."
        )

    def _noun(self) -> str:
        return "store"

    def take_store_failure(self) -> str | None:
        """The first failure's message, once per store (None before one, and after)."""
        with self._lock:
            if self._failure is None or self._failure_taken:
                return None
            self._failure_taken = True
            return self._failure

    @property
    def unstored(self) -> int:
        """How many answers live only in memory because the database did not take them (yet)."""
        with self._lock:
            return len(self._pending)

    def count(self) -> int:
        """Answers stored, plus those kept in memory."""
        try:
            stored = self._count()
        except StoreUnavailable:
            stored = 0
        with self._lock:
            return stored + len(self._pending)

    # -- pending batches (SPEC section 13): a killed run resumes its batch ------------------------
    def _batch_ids(self) -> dict[str, str]:
        """Where a backend without a table keeps them: this process's memory."""
        if not hasattr(self, "_memory_batches"):
            self._memory_batches: dict[str, str] = {}
        return self._memory_batches

    def pending_batch(self, name: str) -> str | None:
        """The provider's id of the batch sent for ``name`` (a set of requests) and not yet
        collected, if one was sent."""
        return self._batch_ids().get(name)

    def keep_batch(self, name: str, batch_id: str) -> None:
        self._batch_ids()[name] = batch_id

    def forget_batch(self, name: str) -> None:
        self._batch_ids().pop(name, None)

    # -- kept reports (the release history, SPEC section 10; `store.reports`) --------------------
    @abstractmethod
    def keep_report(self, run_id: str, part: str, created: str | None, model: str | None,
                    git_commit: str | None, report_json: str) -> bool:
        """Keep one session's JSON report (``report_json``, a kept report's text) for the
        release history where every host using this store reads it; False when this backend
        keeps none (the local files: one machine's history is its ``--reliable-history``
        directory). `StoreUnavailable` when the store cannot take it."""

    @abstractmethod
    def kept_reports(self) -> list[str]:
        """Every kept report's JSON text, in the order they were kept (unchecked: the history
        checks each)."""

    def keep_run_report(self, kept: Mapping[str, Any]) -> bool:
        """`keep_report` of a report as the history keeps it (`reports.kept_report`)."""
        created, model, commit = (kept.get(name) for name in ("created", "model", "git_commit"))
        return self.keep_report(str(kept["run_id"]), str(kept["part"]),
                                created if isinstance(created, str) else None,
                                model if isinstance(model, str) else None,
                                commit if isinstance(commit, str) else None, report_text(kept))

    # -- claims (single-flight) --------------------------------------------------------------------
    def claim(self, key: str, generation: int = 0) -> Claim:
        """Try to become the one process that calls the model for ``key`` (never waits);
        ``generation`` > 0: take over a claim that expired (`store.waits`).

        The answer is looked for after the claim is tried, whatever its outcome: an answer
        another process stored meanwhile is returned (and a claim just taken given back), so a
        waiter sees the answer as soon as it is stored. A backend that tells in the claim's
        own round trip saves the look when nothing is stored."""
        if self.reads:
            with self._lock:
                kept = self._pending.get(key)
            if kept is not None:
                return Claim(held=False, answer=kept.response())
        name = claim_name(key, generation)
        held, stored = self.claims.try_claim_checking(name, key)
        if not self.reads:
            return Claim(held=held)
        found = None
        if stored is not False:
            found = self.get_many([key]).get(key)
        if found is None and stored:
            # The claim's look saw it stored, but reads pause after a failure (get_many gave a
            # miss): read it now. Paying for a stored answer is never the fallback; waiting is.
            try:
                rows = self._read([key])
            except StoreUnavailable:
                if held:
                    self.claims.release(name)
                return Claim(held=False)
            try:
                found = rows[0].response() if rows else None
            except ValueError:
                found = None  # stored, but not an answer (another program's row): pay for it
        if found is not None:
            if held:
                self.claims.release(name)
            return Claim(held=False, answer=found)
        return Claim(held=held)

    def release(self, key: str, generation: int = 0) -> None:
        """Let go of ``key``'s claim: at once, or, when its answer is still only in memory (the
        database did not take it yet), once the answer is written: until then another process
        that claimed the key would not find the answer and would pay for it again."""
        name = claim_name(key, generation)
        with self._lock:
            if key in self._pending:
                self._release_when_written.setdefault(key, []).append(name)
                return
        self.claims.release(name)

    # -- bulk (``cache merge|export|import``): no memory keeping, a failure raises ---------------
    @abstractmethod
    def rows(self, max_bytes: int = CHUNK_BYTES) -> Iterator[list[AnswerRow]]:
        """Every stored answer, in chunks of about ``max_bytes`` (and at most `CHUNK_ROWS` rows);
        rows that are not answers are left out and counted in `bad_rows`."""

    def read_rows(self, keys: Sequence[str]) -> list[AnswerRow]:
        """The stored rows among ``keys`` (one query per `read_batch`); `StoreUnavailable`."""
        found: list[AnswerRow] = []
        for start in range(0, len(keys), self.read_batch):
            found += self._read(keys[start : start + self.read_batch])
        return found

    def write_rows(self, rows: Sequence[AnswerRow]) -> None:
        """Insert ``rows`` where their key is absent, now; `StoreUnavailable` when it cannot."""
        if rows:
            self._write(rows, replace=False)

    # -- life --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Last tries for the answers kept in memory, then release everything."""
        deadline = time.monotonic() + self.close_trying_s
        delay = RETRY_FIRST_S
        while self.unstored and self.flush() and time.monotonic() < deadline:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay *= 2
        if self.unstored:
            log.warning("pytest-reliable: %d answers paid for in this run could not be written to "
                        "%s; the next run calls the model for them again.",
                        self.unstored, self.location)
        with self._lock:
            held_on = [name for names in self._release_when_written.values() for name in names]
            self._release_when_written.clear()
        for name in held_on:
            self.claims.release(name)
        self.claims.close()
        self._close()

    def __enter__(self) -> Store:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "CHUNK_BYTES",
    "RECORD_MODES",
    "AnswerRow",
    "BadRow",
    "Claim",
    "Ledger",
    "Store",
    "answer_row",
    "checked",
    "printable",
]
