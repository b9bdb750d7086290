"""``--reliable-batch``: the same planned calls through a provider's batch API (SPEC section 13).

A transport beneath the runner: the runner asks `BatchTransport.answer` for the requests its
cache does not hold; they go as one JSONL file to ``/v1/files`` and one job to ``/v1/batches``,
the transport polls until the job ends (reporting its progress), reads the output file, and sends
the lines that failed (or that an expired batch left undone) once more in a follow-up batch. What
still failed after that is an error for that cell, like a failed call. Nothing above the runner
notices: answers are stored and counted as calls made, priced at the batch multiplier.

Nothing paid is lost:

- The pending batch's id is kept in the store under the name of its set of requests (their cache
  keys), so a run killed while it waits finds the same batch on the next run and collects it
  instead of paying again. Before the batch is created, the store holds a *sending* mark with a
  fresh tag that the batch carries in its metadata: a run killed between creating the batch and
  learning its id (or whose create call failed in a way that leaves it unknown whether the batch
  exists) lists the provider's batches and finds it by that tag instead of sending it again.
  When the batches cannot be listed, its requests fail and the mark stays for the rerun: an
  error now rather than paying twice.
- The output is read line by line: a line that cannot be read (not JSON, not an object, a
  non-numeric status, a body without an answer) is that request's failure, every good line is
  kept. A body is read by the adapter's one reading of a response
  (`models.openai_compat.response_from_body`), as a direct call's is.
- Waiting has a deadline (``--reliable-wait-timeout``, one for each `BatchTransport.answer`, its
  follow-up batch included, and for the runner's wait for another process's batch before it):
  the wait says what it waits for (batch id, status, counts) on the progress line and in the log;
  past the deadline it ends, and the requests the batch owes fail with an error naming the batch,
  its status and what to do. The batch is left running and its id stays in the store, so a rerun
  collects it: nothing is paid twice. The follow-up batch is only for lines that failed, never for
  requests a batch still owes.

Which requests a process may put in its batch is the runner's business
(`runner.claim_batch_keys`): those whose claims it holds in the store, so two processes or hosts
batching the same requests pay for them once.

With ``--reliable-batch`` the run's first round (`pytest_reliable.run.first_round`) goes through
this transport before the tests run; what it did for them (`AnsweredAhead`) is shared by every
transport of the run, so the tests count the answers it paid for as their own calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_reliable.contract.settings import Settings
from pytest_reliable.files import sha256_hex
from pytest_reliable.models.base import ModelCallError, ModelResponse
from pytest_reliable.models.openai_compat import response_from_body
from pytest_reliable.redact import redact

if TYPE_CHECKING:
    from pytest_reliable.calls.requests import Request
    from pytest_reliable.models.openai_compat import OpenAICompatibleModel
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
API_ATTEMPTS = 4
"""Attempts of a file upload, a batch creation or an output download (transient failures)."""
API_BACKOFF_S = 0.5


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
Keep = Callable[[dict[str, ModelResponse]], Awaitable[None]]
"""Stores a batch's answers (by cache key) and counts them: awaited before the batch is
forgotten, so a run stopped in between collects the batch again instead of paying again."""


@dataclass(frozen=True)
class BatchResult:
    """What a batch brought: answers by cache key, and why each other key has none."""

    answers: dict[str, ModelResponse]
    failures: dict[str, str]
    retryable: frozenset[str] = frozenset()
    """The failed keys worth sending once more (their line failed, or no batch was sent); not
    those a batch still owes (sending them again would pay twice)."""


@dataclass
class AnsweredAhead:
    """What the run's first round did in this process, by cache key, for the tests to come."""

    paid: dict[str, ModelResponse] = field(default_factory=dict)
    """Answers it paid for and no test has counted yet: the runner that serves one from the
    store counts it as its own call made (its price is that test's spend)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Requests the first round could not answer (their line failed twice, or the batch that
    owes them did not finish in time): an error for the cell, not sent again in this run."""


def batch_name(keys: Sequence[str], model: str, round_: int) -> str:
    """The store's name of a batch: its model, its requests' cache keys, the round (0: first
    sending, 1: the retry of its failed lines)."""
    return f"{model}:{round_}:{sha256_hex(chr(10).join(sorted(keys)))}"


class _NotSent(Exception):
    """No batch was sent (nothing is owed): the requests may be sent again."""


class _Owed(Exception):
    """A batch was sent (or may have been) and its answers cannot be collected now: its id (or
    sending mark) stays in the store, and its requests are not sent again in this run."""


class _Gone(Exception):
    """The provider does not know the batch (or its output) any more: forget it."""


class _Unlisted(Exception):
    """The provider's batches could not be listed: whether a batch exists is not known."""


class BatchTransport:
    def __init__(self, model: OpenAICompatibleModel, store: Store | None, *,
                 wait_timeout: float = WAIT_TIMEOUT_S,
                 poll_first_s: float = POLL_FIRST_S, poll_max_s: float = POLL_MAX_S,
                 ahead: AnsweredAhead | None = None) -> None:
        self.model = model
        self.store = store
        self.wait_timeout = wait_timeout
        """``--reliable-wait-timeout``: the longest one `answer` waits for its batches."""
        self.ahead = ahead if ahead is not None else AnsweredAhead()
        """What the run's first round (`pytest_reliable.run.first_round`) did for the tests."""
        self.poll_first_s = poll_first_s
        self.poll_max_s = poll_max_s
        self.batches_sent = 0
        self.batches_resumed = 0

    def deadline(self) -> float:
        """The event loop's time at which a wait starting now ends."""
        return asyncio.get_running_loop().time() + self.wait_timeout

    async def answer(self, requests: dict[str, Request], on_progress: Progress | None = None,
                     *, deadline: float | None = None, keep: Keep | None = None) -> BatchResult:
        """Answers to ``requests`` (by cache key): one batch, then one for the lines it failed,
        waiting for both until ``deadline`` (the loop's time; default: `wait_timeout` from
        now). ``keep`` stores each batch's answers as soon as it is collected (before the
        follow-up batch is sent, before the batch's id is forgotten)."""
        if deadline is None:
            deadline = self.deadline()
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
                     keep: Keep | None) -> BatchResult:
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
                except _Gone as gone:
                    log.warning("pytest-reliable: %s; sending its requests anew", gone)
                    await self._forget(pending)
            batch_id = await self._send(client, name, requests)
        except _NotSent as error:
            return BatchResult({}, {key: f"batch: {error}" for key in requests},
                               frozenset(requests))
        except _Owed as owed:  # the batch may exist: sending it again could pay twice
            log.warning("pytest-reliable: %s", owed)
            return BatchResult({}, {key: str(owed) for key in requests})
        try:
            return await self._collect_when_done(client, name, batch_id, requests, on_progress,
                                                 deadline, keep)
        except _Gone as gone:  # not sent again: the provider lost a batch it just took
            return BatchResult({}, {key: f"batch: {gone}" for key in requests})

    async def _collect_when_done(self, client: Any, name: str, batch_id: str,
                                 requests: dict[str, Request], on_progress: Progress | None,
                                 deadline: float, keep: Keep | None) -> BatchResult:
        try:
            batch = await self._wait(client, batch_id, len(requests), on_progress, deadline)
            result = await self._collect(client, batch, requests)
        except _Owed as owed:
            text = f"{owed} {self._what_to_do()}"
            log.warning("pytest-reliable: %s", text)
            return BatchResult({}, {key: text for key in requests})
        if keep is not None:
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
                raise _Owed(f"an earlier run began sending a batch of these requests and may "
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
                if _gone(error):  # no listing here: nothing can be found, nor ruled out
                    log.warning("pytest-reliable: the provider lists no batches (%s): the batch "
                                "tagged %s cannot be looked for; sending it, which pays again "
                                "if it was created", _text(error), tag)
                    return None
                if not _transient(error) or attempt == API_ATTEMPTS:
                    raise _Unlisted(_text(error)) from None
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
                if not _transient(error):  # refused: no batch exists
                    await self._forget(name)
                    raise _NotSent(f"could not create the batch: {_text(error)}") from None
                # The batch may exist all the same (the answer to its creation was lost).
                try:
                    batch_id = await self._find(client, tag, since)
                except _Unlisted as unlisted:
                    raise _Owed(f"the batch may have been created: the answer to its creation "
                                f"was lost ({_text(error)}) and the provider's batches could "
                                f"not be listed to find it by its tag {tag} ({unlisted}). "
                                f"{self._look_again()}") from None
                if batch_id is not None:
                    break
                if attempt == API_ATTEMPTS:  # the sending mark stays: a rerun looks again
                    raise _NotSent(f"could not create the batch: {_text(error)}") from None
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
                if not _transient(error) or attempt == API_ATTEMPTS:
                    raise _NotSent(f"could not {what}: {_text(error)}") from None
            await asyncio.sleep(API_BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- waiting -------------------------------------------------------------------------------
    async def _wait(self, client: Any, batch_id: str, total: int,
                    on_progress: Progress | None, deadline: float) -> Any:
        """The batch once it has ended; `_Owed` at the deadline, or when it cannot be looked
        at (other than a passing failure, looked at again); `_Gone` when the provider does
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
                if _gone(error):
                    raise _Gone(f"the provider has no batch {batch_id}") from None
                if not _transient(error):
                    raise _Owed(f"batch {batch_id} could not be looked at: {_text(error)}.") \
                        from None
                problem = _text(error)
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
                raise _Owed(
                    f"batch {batch_id} did not finish within --reliable-wait-timeout "
                    f"{self.wait_timeout:g} s: it is {status}, {answered}/{waiting.total} "
                    f"answered, {failed} failed.")
            await asyncio.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(self.poll_max_s, delay * 1.5)

    # -- collecting ----------------------------------------------------------------------------
    async def _collect(self, client: Any, batch: Any,
                       requests: dict[str, Request]) -> BatchResult:
        """Every readable line's answer or failure; a line that cannot be read fails its request
        (if it can be told) and no other."""
        batch_id, status = str(batch.id), str(getattr(batch, "status", None) or "unknown")
        answers: dict[str, ModelResponse] = {}
        failures: dict[str, str] = {}
        unreadable = 0
        for number, text in await self._lines(client, batch, "output_file_id"):
            row, problem = _row(text)
            key = row.get("custom_id") if row is not None else _custom_id_in(text)
            if not isinstance(key, str):  # whose line it is cannot be told
                unreadable += 1
                continue
            if key not in requests:
                continue
            if key in answers:  # a line repeated: its first answer stands
                continue
            where = f"batch {batch_id}, line {number} of its output"
            if row is None:
                failures[key] = f"{where} {problem}"
                continue
            response = row.get("response")
            code = _status_code(response)
            if code == 200:
                chat = not self.model.uses_completions(requests[key].params)
                try:
                    answers[key] = response_from_body(
                        response.get("body") if isinstance(response, dict) else None,
                        chat=chat, batch=True)
                except ModelCallError as error:
                    failures[key] = f"{where}: {error}"
                else:
                    failures.pop(key, None)
            elif code is None:
                shown = response.get("status_code") if isinstance(response, dict) else response
                failures[key] = f"{where} has no numeric status_code (got {_short(shown)})"
            else:
                failures[key] = f"batch line failed (HTTP {code})"
        for number, text in await self._lines(client, batch, "error_file_id"):
            row, problem = _row(text)
            key = row.get("custom_id") if row is not None else _custom_id_in(text)
            if not isinstance(key, str):  # whose line it is cannot be told
                unreadable += 1
                continue
            if key not in requests:
                continue
            if key in answers:
                continue
            if row is None:
                failures[key] = f"batch {batch_id}, line {number} of its error file {problem}"
                continue
            said = _object(row.get("error"))
            why = said.get("code") or f"HTTP {_status_code(row.get('response'))}"
            failures[key] = f"batch line failed: {why} {said.get('message') or ''}".rstrip()
        whole = _batch_errors(batch)
        for key in requests:
            if key not in answers and key not in failures:
                why = f"batch {batch_id} ended {status} without this request"
                if whole:
                    why += f": {whole}"
                if unreadable:
                    why += f" ({unreadable} lines of its files could not be read)"
                failures[key] = why
        if unreadable:
            log.warning("pytest-reliable: %d lines of batch %s's files could not be read: their "
                        "requests are sent once more", unreadable, batch_id)
        return BatchResult(answers, failures, frozenset(failures))

    async def _lines(self, client: Any, batch: Any, which: str) -> list[tuple[int, str]]:
        """The non-blank lines of the batch's output or error file, numbered from 1."""
        import openai

        file_id = getattr(batch, which, None)
        if not file_id:
            return []
        for attempt in range(1, API_ATTEMPTS + 1):
            try:
                content = await client.files.content(file_id)
                break
            except openai.OpenAIError as error:
                if _gone(error):
                    raise _Gone(f"the provider has no file {file_id} (the {which[:-8]} file of "
                                f"batch {batch.id}) any more") from None
                if not _transient(error) or attempt == API_ATTEMPTS:
                    raise _Owed(f"batch {batch.id} ended, and its {which[:-8]} file "
                                f"{file_id} could not be read: {_text(error)}.") from None
            await asyncio.sleep(API_BACKOFF_S * 2 ** (attempt - 1))
        # Split on newlines only: str.splitlines() also splits inside a JSON string at U+2028.
        return [(number, line) for number, line in enumerate(content.text.split("\n"), 1)
                if line.strip()]


def _row(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """A JSONL line as an object, or why it is none."""
    try:
        row = json.loads(text)
    except ValueError:  # JSONDecodeError, and numbers Python cannot make
        return None, "is not valid JSON"
    if not isinstance(row, dict):
        return None, f"is not a JSON object (got {_short(row)})"
    return row, None


_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"([^"\\]*)"')


def _custom_id_in(text: str) -> str | None:
    """The request id written in a line that is not a JSON object, if it can be read."""
    found = _CUSTOM_ID.search(text)
    return found.group(1) if found else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _status_code(response: Any) -> int | None:
    """A batch line's HTTP status, None when it has none that is a number."""
    code = response.get("status_code") if isinstance(response, dict) else None
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, str) and code.strip().isdigit():
        return int(code.strip())
    return None


def _batch_errors(batch: Any) -> str:
    """What the provider said about a batch that failed as a whole (e.g. its input refused)."""
    errors = getattr(getattr(batch, "errors", None), "data", None)
    said = [str(getattr(error, "message", None) or getattr(error, "code", None) or "")
            for error in errors or []] if isinstance(errors, list) else []
    return redact("; ".join(text for text in said[:3] if text))


def _counts(batch: Any) -> tuple[int, int, int]:
    """(answered, failed, total) of a batch's ``request_counts`` (0 where it says none)."""
    counts = getattr(batch, "request_counts", None)

    def read(name: str) -> int:
        value = getattr(counts, name, None)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return read("completed"), read("failed"), read("total")


def _transient(error: BaseException) -> bool:
    """A failure worth trying again: a dropped connection, a timeout, a rate limit, a 5xx."""
    import openai

    if isinstance(error, openai.APIStatusError):
        return error.status_code in (408, 409, 429) or error.status_code >= 500
    return isinstance(error, (openai.APIConnectionError, openai.APIResponseValidationError))


def _gone(error: BaseException) -> bool:
    import openai

    return isinstance(error, openai.APIStatusError) and error.status_code == 404


def _text(error: BaseException) -> str:
    return redact(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


__all__ = ["AnsweredAhead", "BatchResult", "BatchTransport", "Waiting", "batch_name"]
