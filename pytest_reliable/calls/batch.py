"""``--reliable-batch``: the same planned calls through a provider's batch API (SPEC section 13).

A transport beneath the runner (`calls.transport.Transport`, for a model that is
`models.base.BatchCapable`): the runner hands `BatchTransport.answer` the requests its store does
not hold and whose claims it holds; each reserves its most possible cost at the batch price
first (what the budget refuses is not sent); they go as one JSONL file to ``/v1/files`` and one
job to ``/v1/batches``, the transport polls until the job ends (reporting its progress), reads
the output and error files (`calls.batch_files.read_batch`), and sends the lines that failed (or
that an expired batch left undone) once more in a follow-up batch. What still failed after that
is an error for that cell, like a failed call. Nothing above the runner notices: answers are
stored and counted as calls made, priced at the batch multiplier.

Nothing paid is lost:

- The pending batch's id is kept in the store under the name of its set of requests (their cache
  keys), so a run killed while it waits finds the same batch on the next run and collects it
  instead of paying again. Before the batch is created, the store holds a *sending* mark with a
  fresh tag that the batch carries in its metadata: a run killed between creating the batch and
  learning its id (or whose create call failed in a way that leaves it unknown whether the batch
  exists) lists the provider's batches and finds it by that tag instead of sending it again.
  When the batches cannot be listed, its requests fail and the mark stays for the rerun: an
  error now rather than paying twice.
- Each batch's answers are kept (`calls.transport.Sending.keep`: stored, then paid for) as soon
  as it is collected, before its follow-up batch is sent and before its id is forgotten.
- Waiting has a deadline (``--reliable-wait-timeout``, one for each `BatchTransport.answer`, its
  follow-up batch included, and for the runner's wait for another process's batch before it):
  the wait says what it waits for (batch id, status, counts) on the progress line and in the log;
  past the deadline it ends, and the requests the batch owes fail with an error naming the batch,
  its status and what to do. The batch is left running and its id stays in the store, so a rerun
  collects it: nothing is paid twice. The follow-up batch is only for lines that failed, never for
  requests a batch still owes.

Which requests a process may put in its batch is the runner's business
(`calls.claiming.claim_together`): those whose claims it holds in the store, so two processes or
hosts batching the same requests pay for them once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_reliable.calls.batch_files import (
    API_ATTEMPTS,
    API_BACKOFF_S,
    BatchResult,
    Gone,
    Owed,
    gone,
    read_batch,
    text_of,
    transient,
)
from pytest_reliable.calls.requests import CallResult, ProgressEvent, Request
from pytest_reliable.calls.transport import Keep, Sending
from pytest_reliable.contract.settings import Settings
from pytest_reliable.files import sha256_hex
from pytest_reliable.models.base import BatchCapable, ModelResponse

if TYPE_CHECKING:
    from pytest_reliable.store import Store

log = logging.getLogger("pytest_reliable.batch")

POLL_FIRST_S = 0.2
POLL_MAX_S = 30.0
"""How often a waiting run asks for the batch's status (growing from first to max)."""
SAY_EVERY_S = 60.0
"""How often the log says what a long wait waits for (and whenever the batch's status changes)."""
FINAL = ("completed", "expired", "failed", "cancelled")
COMPLETION_WINDOW = "24h"
WAIT_TIMEOUT_S = Settings.wait_timeout
"""``--reliable-wait-timeout``'s default."""

TAG_NAME = "pytest_reliable_batch"
"""Metadata key of a batch: the store's name of its set of requests (`batch_name`)."""
TAG_SENT = "pytest_reliable_send"
"""Metadata key of a batch: the tag of the one attempt to send it (the store's sending mark)."""
SENDING = "sending:"
"""A pending batch of the store that begins so is a sending mark: ``sending:TAG:UNIX_TIME``."""
LIST_MAX = 2000
LIST_MARGIN_S = 600.0
"""Looking for a batch by its tag reads at most `LIST_MAX` batches, newest first, and none
created more than `LIST_MARGIN_S` before its sending mark (clocks differ)."""


@dataclass(frozen=True)
class Waiting:
    """What a waiting run waits for: the batch, its status and counts, how long so far."""

    batch_id: str
    status: str
    answered: int
    failed: int
    total: int
    waited_s: float
    limit_s: float
    problem: str | None = None
    """Why the last look at the batch failed (a transient error, looked at again)."""

    def describe(self) -> str:
        text = (f"waiting for batch {self.batch_id} ({self.status}): {self.answered}/"
                f"{self.total} answered, {self.failed} failed; waited {_duration(self.waited_s)} "
                f"of {_duration(self.limit_s)} (--reliable-wait-timeout)")
        return text if self.problem is None else f"{text}; last look failed: {self.problem}"


Progress = Callable[[Waiting], None]


def batch_name(keys: Sequence[str], model: str, round_: int) -> str:
    """The store's name of a batch: its model, its requests' cache keys, the round (0: first
    sending, 1: the retry of its failed lines)."""
    return f"{model}:{round_}:{sha256_hex(chr(10).join(sorted(keys)))}"


class _NotSent(Exception):
    """No batch was sent (nothing is owed): the requests may be sent again."""


class _Unlisted(Exception):
    """The provider's batches could not be listed: whether a batch exists is not known."""


class BatchTransport:
    """The batch transport of a `BatchCapable` model (see the module docstring)."""

    together = True
    """Its requests are claimed and sent as one set (`calls.claiming.claim_together`)."""

    def __init__(self, model: BatchCapable, store: Store | None, *,
                 wait_timeout: float = WAIT_TIMEOUT_S,
                 poll_first_s: float = POLL_FIRST_S, poll_max_s: float = POLL_MAX_S) -> None:
        self.model = model
        self.store = store
        self.wait_timeout = wait_timeout
        """``--reliable-wait-timeout``: the longest one `answer` waits for its batches."""
        self.poll_first_s = poll_first_s
        self.poll_max_s = poll_max_s
        self.batches_sent = 0
        self.batches_resumed = 0

    def longest_call_s(self) -> float | None:
        return self.wait_timeout

    def deadline(self) -> float:
        """The event loop's time at which a wait starting now ends."""
        return asyncio.get_running_loop().time() + self.wait_timeout

    async def answer(self, requests: Mapping[str, Request],
                     sending: Sending) -> dict[str, CallResult]:
        """``requests``' results: each reserves its most possible cost (at the batch price)
        first, and what the budget refuses is not sent; then one batch, and one for the lines
        it failed, waiting for both until ``sending.deadline``; each batch's answers go to
        ``sending.keep`` as soon as it is collected."""
        results: dict[str, CallResult] = {}
        granted: dict[str, Request] = {}
        for key, req in requests.items():
            if await sending.meter.reserve(key, req, batch=True, wait=False):
                granted[key] = req
            else:
                results[key] = CallResult(None, False, "not_run",
                                          "budget exhausted: call not started")
        if not granted:
            return results

        def progress(waiting: Waiting) -> None:
            if sending.on_progress is not None:
                sending.on_progress(ProgressEvent(
                    min(waiting.total, waiting.answered + waiting.failed), waiting.total, 0,
                    waiting.answered, waiting.failed, waiting.describe()))

        async def keep(answers: dict[str, ModelResponse]) -> None:
            new = {key: response for key, response in answers.items()
                   if key in granted and key not in results}
            if new:
                await sending.keep(new)
            for key, response in new.items():
                results[key] = CallResult(response, False, "ok", None, 1, 0)

        deadline = sending.deadline if sending.deadline is not None else self.deadline()
        answered = await self._rounds(granted, progress, deadline, keep)
        await keep(answered.answers)  # (each is kept once: those kept already are in results)
        for key in granted:
            if key not in results:
                results[key] = CallResult(None, False, "error",
                                          answered.failures.get(key, "batch: no answer"), 1, 0)
        return results

    async def _rounds(self, requests: dict[str, Request], on_progress: Progress | None,
                      deadline: float, keep: Keep) -> BatchResult:
        """Answers to ``requests`` (by cache key): one batch, then one for the lines it failed,
        waiting for both until ``deadline`` (the loop's time). ``keep`` stores each batch's
        answers as soon as it is collected (before the follow-up batch is sent, before the
        batch's id is forgotten)."""
        first = await self._round(requests, 0, on_progress, deadline, keep)
        retry = {key: requests[key] for key in first.retryable}
        if not retry:
            return first
        log.info("pytest-reliable: %d lines of the batch failed; sending them once more",
                 len(retry))
        second = await self._round(retry, 1, on_progress, deadline, keep)
        return BatchResult({**first.answers, **second.answers},
                           {key: why for key, why in first.failures.items() if key not in retry}
                           | second.failures)

    async def _round(self, requests: dict[str, Request], round_: int,
                     on_progress: Progress | None, deadline: float,
                     keep: Keep) -> BatchResult:
        name = batch_name(list(requests), self.model.identity, round_)
        # A first sending may find the follow-up batch of an earlier run that was stopped
        # after storing the other answers of its first batch: the same requests.
        names = [name] if round_ else [name, batch_name(list(requests), self.model.identity, 1)]
        client = self.model.batch_client
        try:
            for pending in names:
                batch_id = await self._resume(client, pending)
                if batch_id is None:
                    continue
                try:
                    return await self._collect_when_done(client, pending, batch_id, requests,
                                                         on_progress, deadline, keep)
                except Gone as gone:
                    log.warning("pytest-reliable: %s; sending its requests anew", gone)
                    await self._forget(pending)
            batch_id = await self._send(client, name, requests)
        except _NotSent as error:
            return BatchResult({}, {key: f"batch: {error}" for key in requests},
                               frozenset(requests))
        except Owed as owed:  # the batch may exist: sending it again could pay twice
            log.warning("pytest-reliable: %s", owed)
            return BatchResult({}, {key: str(owed) for key in requests})
        try:
            return await self._collect_when_done(client, name, batch_id, requests, on_progress,
                                                 deadline, keep)
        except Gone as gone:  # not sent again: the provider lost a batch it just took
            return BatchResult({}, {key: f"batch: {gone}" for key in requests})

    async def _collect_when_done(self, client: Any, name: str, batch_id: str,
                                 requests: dict[str, Request], on_progress: Progress | None,
                                 deadline: float, keep: Keep) -> BatchResult:
        try:
            batch = await self._wait(client, batch_id, len(requests), on_progress, deadline)
            result = await read_batch(self.model, client, batch, requests)
        except Owed as owed:
            text = f"{owed} {self._what_to_do()}"
            log.warning("pytest-reliable: %s", text)
            return BatchResult({}, {key: text for key in requests})
        await keep(result.answers)
        store = self.store
        # Forgotten only once its answers are in the store: an answer the store could not take
        # yet (kept in memory) would die with the process, and the batch can still give it.
        if store is not None and not await asyncio.to_thread(lambda: store.unstored):
            await self._forget(name)
        return result

    def _what_to_do(self) -> str:
        if self.store is None or getattr(self.store, "path", True) is None:
            return ("Its answers are not lost: the batch goes on at the provider, but this run "
                    "keeps its id nowhere (no persistent store): a rerun sends it again.")
        return ("Its answers are not lost: the batch goes on at the provider and its id is kept "
                "in the store, so a rerun collects them without paying again (give more "
                "seconds with --reliable-wait-timeout to wait longer).")

    # -- the store's pending batches (off the event loop: the store may be another machine) -----
    async def _pending(self, name: str) -> str | None:
        store = self.store
        return await asyncio.to_thread(store.pending_batch, name) if store is not None else None

    async def _keep(self, name: str, value: str) -> None:
        if self.store is not None:
            await asyncio.to_thread(self.store.keep_batch, name, value)

    async def _forget(self, name: str) -> None:
        if self.store is not None:
            await asyncio.to_thread(self.store.forget_batch, name)

    async def _resume(self, client: Any, name: str) -> str | None:
        """The id of the batch an earlier run sent for ``name`` and did not collect, if any: kept
        in the store, or found by its tag when that run was stopped while sending it."""
        pending = await self._pending(name)
        if pending is None:
            return None
        if pending.startswith(SENDING):
            tag, _, since = pending[len(SENDING):].partition(":")
            try:
                found = await self._find(client, tag, _float(since))
            except _Unlisted as error:
                raise Owed(f"an earlier run began sending a batch of these requests and may "
                            f"have created it, and the provider's batches could not be listed "
                            f"to find it by its tag {tag} ({error}). {self._look_again()}") \
                    from None
            if found is None:
                log.info("pytest-reliable: an earlier run began sending this batch, and the "
                         "provider has no batch with its tag %s: sending it", tag)
                return None
            await self._keep(name, found)
            pending = found
        self.batches_resumed += 1
        log.info("pytest-reliable: resuming batch %s (sent by an earlier run)", pending)
        return pending

    async def _find(self, client: Any, tag: str, since: float) -> str | None:
        """The provider's batch carrying the sending ``tag`` (newest first, none created long
        before ``since``), None when there is none (or the provider lists no batches at all);
        `_Unlisted` when the listing failed (after its passing failures were tried again)."""
        import openai

        for attempt in range(1, API_ATTEMPTS + 1):
            try:
                return await self._look_for(client, tag, since)
            except openai.OpenAIError as error:
                if gone(error):  # no listing here: nothing can be found, nor ruled out
                    log.warning("pytest-reliable: the provider lists no batches (%s): the batch "
                                "tagged %s cannot be looked for; sending it, which pays again "
                                "if it was created", text_of(error), tag)
                    return None
                if not transient(error) or attempt == API_ATTEMPTS:
                    raise _Unlisted(text_of(error)) from None
            await asyncio.sleep(API_BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    async def _look_for(client: Any, tag: str, since: float) -> str | None:
        seen = 0
        async for batch in client.batches.list(limit=100):
            metadata = getattr(batch, "metadata", None)
            if isinstance(metadata, dict) and metadata.get(TAG_SENT) == tag:
                log.info("pytest-reliable: found batch %s by its tag %s", batch.id, tag)
                return str(batch.id)
            seen += 1
            if seen >= LIST_MAX or _float(getattr(batch, "created_at", None)) < (
                    since - LIST_MARGIN_S):
                break
        return None

    def _look_again(self) -> str:
        if self.store is None or getattr(self.store, "path", True) is None:
            return "No persistent store keeps its tag: a rerun sends it again."
        return ("Its tag is kept in the store: a rerun looks for it again and collects it, so "
                "nothing is paid twice.")

    # -- sending -----------------------------------------------------------------------------
    async def _send(self, client: Any, name: str, requests: dict[str, Request]) -> str:
        """Upload the requests, create the batch tagged for `_find`, keep its id: the store holds
        the sending mark from just before the batch can exist until its id replaces it."""
        import openai

        lines = [self.model.batch_line(key, request.message_dicts(), request.params)
                 for key, request in requests.items()]
        endpoint = lines[0]["url"]
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        uploaded = await self._api(
            "upload the batch's requests",
            lambda: client.files.create(file=("reliable-batch.jsonl", data), purpose="batch"))
        tag, since = uuid.uuid4().hex, time.time()
        await self._keep(name, f"{SENDING}{tag}:{since:.0f}")
        metadata = {TAG_NAME: name if len(name) <= 512 else sha256_hex(name), TAG_SENT: tag}
        batch_id: str | None = None
        for attempt in range(1, API_ATTEMPTS + 1):
            try:
                batch = await client.batches.create(
                    input_file_id=uploaded.id, endpoint=endpoint,
                    completion_window=COMPLETION_WINDOW, metadata=metadata)
                batch_id = str(batch.id)
                break
            except openai.OpenAIError as error:
                if not transient(error):  # refused: no batch exists
                    await self._forget(name)
                    raise _NotSent(f"could not create the batch: {text_of(error)}") from None
                # The batch may exist all the same (the answer to its creation was lost).
                try:
                    batch_id = await self._find(client, tag, since)
                except _Unlisted as unlisted:
                    raise Owed(f"the batch may have been created: the answer to its creation "
                                f"was lost ({text_of(error)}) and the provider's batches could "
                                f"not be listed to find it by its tag {tag} ({unlisted}). "
                                f"{self._look_again()}") from None
                if batch_id is not None:
                    break
                if attempt == API_ATTEMPTS:  # the sending mark stays: a rerun looks again
                    raise _NotSent(f"could not create the batch: {text_of(error)}") from None
                await asyncio.sleep(API_BACKOFF_S * 2 ** (attempt - 1))
        assert batch_id is not None
        await self._keep(name, batch_id)
        self.batches_sent += 1
        log.info("pytest-reliable: sent batch %s (%d requests)", batch_id, len(lines))
        return batch_id

    async def _api(self, what: str, call: Callable[[], Any]) -> Any:
        """``await call()``, its transient failures tried again (`API_ATTEMPTS`); any other
        failure is `_NotSent`, naming ``what``."""
        import openai

        for attempt in range(1, API_ATTEMPTS + 1):
            try:
                return await call()
            except openai.OpenAIError as error:
                if not transient(error) or attempt == API_ATTEMPTS:
                    raise _NotSent(f"could not {what}: {text_of(error)}") from None
            await asyncio.sleep(API_BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- waiting -------------------------------------------------------------------------------
    async def _wait(self, client: Any, batch_id: str, total: int,
                    on_progress: Progress | None, deadline: float) -> Any:
        """The batch once it has ended; `Owed` at the deadline, or when it cannot be looked
        at (other than a passing failure, looked at again); `Gone` when the provider does
        not know it."""
        import openai

        loop = asyncio.get_running_loop()
        start = loop.time()
        limit = max(0.0, deadline - start)
        delay = self.poll_first_s
        batch: Any = None
        said_at, said_status = -math.inf, None
        while True:
            problem = None
            try:
                batch = await client.batches.retrieve(batch_id)
            except openai.OpenAIError as error:
                if gone(error):
                    raise Gone(f"the provider has no batch {batch_id}") from None
                if not transient(error):
                    raise Owed(f"batch {batch_id} could not be looked at: {text_of(error)}.") \
                        from None
                problem = text_of(error)
            now = loop.time()
            status = str(getattr(batch, "status", None) or "unknown")
            answered, failed, counted = _counts(batch)
            waiting = Waiting(batch_id, status, answered, failed, counted or total,
                              now - start, limit, problem)
            if on_progress is not None:
                on_progress(waiting)
            if batch is not None and status in FINAL:
                return batch
            if status != said_status or now - said_at >= SAY_EVERY_S:
                log.info("pytest-reliable: %s", waiting.describe())
                said_at, said_status = now, status
            if now >= deadline:
                raise Owed(
                    f"batch {batch_id} did not finish within --reliable-wait-timeout "
                    f"{self.wait_timeout:g} s: it is {status}, {answered}/{waiting.total} "
                    f"answered, {failed} failed.")
            await asyncio.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(self.poll_max_s, delay * 1.5)

def _counts(batch: Any) -> tuple[int, int, int]:
    """(answered, failed, total) of a batch's ``request_counts`` (0 where it says none)."""
    counts = getattr(batch, "request_counts", None)

    def read(name: str) -> int:
        value = getattr(counts, name, None)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return read("completed"), read("failed"), read("total")


def _float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


__all__ = ["BatchResult", "BatchTransport", "Waiting", "batch_name"]
