"""Async execution of model calls: cache first, concurrency, retries, timeouts, budget, progress.

A response that was paid for is written to the cache before anything else happens with it; when
the cache cannot store it, it is kept in memory for the run and the failure is reported once.

Every call of a pytest run goes through one event loop: a long-lived loop in a daemon thread
(`call_loop`), or the test's own loop inside `use_loop` (what an async test's ``aevaluate`` does).
Retries (with jittered exponential backoff, honouring a server's Retry-After) come from tenacity;
the adapters classify their failures (`ModelCallError`), the runner knows no transport.

No model can hang or crash the run: each attempt's call runs as a task of its own, cancelled at
the timeout and abandoned (counted, reported) if it ignores that for `CANCEL_GRACE_S`; a model's
``SystemExit`` or own ``CancelledError`` is an errored call naming it, its ``KeyboardInterrupt``
is the user's Ctrl-C (`CallInterrupted`); what it returns is checked before it is stored; and a
model whose server refused a connection, or with too many abandoned calls still running, gets
no further call (`Runner._check_model_available`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.cache import CacheMissError, cache_key, miss_message
from pytest_reliable.calls.loop import CallInterrupted, run_on_call_loop
from pytest_reliable.calls.pricing import Price, call_cost, max_call_usd
from pytest_reliable.calls.requests import CallResult, ProgressEvent, Request, RunStats
from pytest_reliable.models.base import (
    ABANDONED_CALLS_MAX,
    USAGE_IGNORED,
    AsyncModel,
    Message,
    ModelCallError,
    ModelResponse,
    ModelWarning,
    SamplingParams,
    abandoned_calls,
    checked_response,
    model_unavailable,
    request_seed,
    seed_from_key,
)
from pytest_reliable.redact import redact
from pytest_reliable.store.base import AnswerRow, Store
from pytest_reliable.store.claims import claim_name
from pytest_reliable.store.errors import StoreUnavailable, StoreWarning

if TYPE_CHECKING:
    from pytest_reliable.calls.batch import BatchTransport, Waiting
    from pytest_reliable.store.waits import ClaimWait

log = logging.getLogger("pytest_reliable.runner")

RETRY_AFTER_MAX_S = 60.0
"""A server's Retry-After is honoured up to this many seconds."""
CANCEL_GRACE_S = 2.0
"""A call cancelled at the timeout gets this long to end; one that ignores its cancellation
is then abandoned (counted in `abandoned_calls`, reported), so it cannot hold the run."""


class _BudgetSpent(Exception):
    """The budget refused the next attempt of a call (never retried)."""


class _Stopping(Exception):
    """Another call of the evaluation was interrupted: this one does not start (never
    retried)."""


def _classify(exc: BaseException) -> tuple[bool, float | None]:
    """(retry?, Retry-After seconds if the server said): the adapter's verdict, else by type."""
    if isinstance(exc, ModelCallError):
        return exc.retryable, exc.retry_after
    # A user callable's own timeouts, dropped connections and malformed bodies are glitches.
    return isinstance(
        exc, (asyncio.TimeoutError, TimeoutError, ConnectionError, json.JSONDecodeError)
    ), None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not str(exc):
        return "timed out"
    if isinstance(exc, ModelCallError):
        return str(exc)  # written by the adapter, secrets already removed
    text = str(exc) or type(exc).__name__
    return redact(f"{type(exc).__name__}: {text}")


class _Backoff:
    """Full-jitter exponential backoff, at least a server's Retry-After (capped)."""

    def __init__(self, base: float, cap: float) -> None:
        self.base = base
        self.cap = cap

    def __call__(self, state: RetryCallState) -> float:
        delay = random.uniform(0, min(self.cap, self.base * 2 ** (state.attempt_number - 1)))
        error = state.outcome.exception() if state.outcome is not None else None
        after = _classify(error)[1] if error is not None else None
        if after is not None:
            delay = max(delay, min(after, RETRY_AFTER_MAX_S))
        return delay


def _forget_abandoned(model: str) -> Callable[[asyncio.Future[Any]], None]:
    def ended(call: asyncio.Future[Any]) -> None:
        """An abandoned call's task ended at last: it no longer counts, and its outcome is
        read (so asyncio does not log it as never retrieved)."""
        abandoned_calls.discard(model, call)
        if not call.cancelled():
            call.exception()

    return ended


def shared_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


_usage_said: set[str] = set()
"""Models whose bad usage was said (once per process)."""

_last_prompt: dict[str, str] = {}
"""The last prompt sent to each one-slot model (by identity): what its KV cache holds."""


CLAIM_POLL_FIRST_S = 0.05
CLAIM_POLL_MAX_S = 1.0
"""How often a process waiting for another's answer looks again (growing from first to max)."""
CLAIM_WRITE_S = 30.0
"""What a claim's patience allows for its holder to store the answer it got."""
BATCH_WAIT_FIRST_S = 0.2
BATCH_WAIT_MAX_S = 30.0
"""How often a process waiting for answers another process's batch pays for looks again."""
BATCH_SAY_EVERY_S = 60.0
"""How often the log says what that wait waits for."""
CLAIMING_A_BATCH = "pytest-reliable: claiming the keys of a batch"
"""The claim held while a process claims its batch's keys: two processes batching the same keys
(pytest-xdist workers planning the same first round) never split them into two batches."""


def claim_batch_keys(store: Store,
                     keys: Sequence[str]) -> tuple[list[str], dict[str, ModelResponse]]:
    """(the keys this process now holds the claims of, the answers stored meanwhile). The keys
    are claimed together, one batch-claiming process at a time; the others are another
    process's to answer. Blocking: called off the event loop."""
    found = store.get_many(keys)  # answered: no claim needed (one query per read batch)
    while not store.claims.try_claim(CLAIMING_A_BATCH):
        time.sleep(CLAIM_POLL_FIRST_S)  # another process claims its batch's keys: a moment
    mine: list[str] = []
    try:
        for key in keys:
            if key in found:
                continue
            claim = store.claim(key)
            if claim.answer is not None:
                found[key] = claim.answer
            elif claim.held:
                mine.append(key)
    except BaseException:
        release_keys(store, mine)
        raise
    finally:
        store.claims.release(CLAIMING_A_BATCH)
    return mine, found


def release_keys(store: Store, keys: Sequence[str]) -> None:
    for key in keys:
        store.release(key)


class Runner:
    def __init__(
        self,
        model: AsyncModel,
        cache: Store | None,
        *,
        concurrency: int = 4,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        budget: Budget | None = None,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        context: str | None = None,
        prefix_order: bool = False,
        price: Price | None = None,
        transport: BatchTransport | None = None,
    ) -> None:
        """``cache``: the run's store (answers and claims), or None (every call is made).
        ``prefix_order``: dispatch the calls sorted by their messages, so consecutive prompts
        share the longest prefixes (a one-slot server reuses its KV cache for them); results
        stay in plan order. ``price``: what the model's calls cost (None: nothing counted)."""
        self.model = model
        self.price = price
        self.transport = transport
        """``--reliable-batch``: the uncached calls go through the provider's batch API."""
        self.cache = cache
        self.concurrency = max(1, int(concurrency))
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.budget = budget
        self.on_progress = on_progress
        self.context = context
        self.prefix_order = prefix_order
        self.stats = RunStats()
        self._stopping = False
        """A call was interrupted: calls not started yet are not started."""
        self._last_progress = ProgressEvent(0, 0, 0, 0, 0)

    @property
    def claim_patience(self) -> float | None:
        """How long to wait for another process's answer to a key it claimed before the claim
        expires (SPEC section 10: the call timeout x (retries + 1)): the longest the holder's
        call may take, its attempts (timeout and cancellation grace each) and the backoff
        between them (a server's Retry-After included), plus its answer's write; a claim that
        expired sooner would be taken over while its holder still calls, and paid for twice.
        None (no timeout): while the holder holds the claim (and the run's deadline allows)."""
        if not self.timeout:
            return None
        attempts = self.max_retries + 1
        pauses = sum(max(min(self.backoff_max, self.backoff_base * 2.0 ** n), RETRY_AFTER_MAX_S)
                     for n in range(self.max_retries))
        return attempts * (self.timeout + CANCEL_GRACE_S) + pauses + CLAIM_WRITE_S

    def key(self, req: Request) -> str:
        return cache_key(self.model.identity, req.messages, req.params, req.sample_index, req.scope)

    async def arun(self, requests: Sequence[Request]) -> list[CallResult]:
        self._stopping = False
        total = len(requests)
        results: list[CallResult | None] = [None] * total
        keys = [self.key(r) for r in requests]
        counts = {"done": 0, "cached": 0, "made": 0, "failed": 0}
        hits: dict[str, ModelResponse] = {}
        if self.cache is not None and self.cache.reads:
            hits = await asyncio.to_thread(self.cache.get_many, keys)
        sem = asyncio.Semaphore(self.concurrency)
        inflight: dict[str, asyncio.Future[CallResult]] = {}

        def finish(i: int, res: CallResult) -> None:
            results[i] = res
            counts["done"] += 1
            if res.status == "ok":
                counts["cached" if res.cached else "made"] += 1
            else:
                counts["failed"] += 1
            self._last_progress = ProgressEvent(
                counts["done"], total, counts["cached"], counts["made"], counts["failed"])
            if self.on_progress is not None:
                self.on_progress(self._last_progress)

        batched: dict[str, CallResult] = {}

        async def one(i: int) -> None:
            req, key = requests[i], keys[i]
            if key in batched:
                res = batched[key]
                if res.status == "ok":  # the first occurrence made it; the others reuse it
                    del batched[key]
                    assert res.response is not None
                    hits[key] = res.response
                    if res.cached:  # another process's batch (or call) paid for it
                        self._served_cached(req, res.response)
                else:
                    self._count_failure(res.status)
                finish(i, res)
                return
            if key in hits:
                self._served_cached(req, hits[key])
                finish(i, CallResult(hits[key], cached=True))
                return
            if key in inflight:
                first = await asyncio.shield(inflight[key])
                if first.status == "ok":
                    self._served_cached(req, first.response)
                    finish(i, CallResult(first.response, cached=True))
                else:
                    finish(i, CallResult(None, False, first.status, first.error))
                    self._count_failure(first.status)
                return
            fut: asyncio.Future[CallResult] = asyncio.get_running_loop().create_future()
            inflight[key] = fut
            try:
                res = await self._obtain(req, key, sem)
            except BaseException as exc:  # cancellation: unblock waiters
                fut.set_result(CallResult(None, False, "error", _describe(exc)))
                raise
            fut.set_result(res)
            if res.status == "ok":
                hits[key] = res.response  # type: ignore[assignment]
                if res.cached:  # another process paid for it while this one waited
                    self._served_cached(req, res.response)
            else:
                self._count_failure(res.status)
            del inflight[key]
            finish(i, res)

        # Cache hits need no task: answering them here keeps a replay fast.
        pending = []
        for i in range(total):
            if keys[i] in hits:
                finish(i, self._from_store(requests[i], keys[i], hits[keys[i]]))
            else:
                pending.append(i)
        if self.transport is not None and pending and not (
                self.cache is not None and self.cache.replay_only):
            batched.update(await self._answer_by_batch(requests, keys, pending))
        if self.prefix_order:
            pending.sort(key=lambda i: requests[i].messages)
        # Tasks start in list order and the semaphore is fair, so calls are made in that order.
        tasks = [asyncio.ensure_future(one(i)) for i in pending]
        try:
            if tasks:
                await self._drain_on_interrupt(tasks)
            await asyncio.gather(*tasks)
        except BaseException:  # interrupted or cancelled: stop the other calls too
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        done = [r for r in results if r is not None]
        self._explain_budget(done)
        return done

    async def _drain_on_interrupt(self, tasks: Sequence[asyncio.Future[None]]) -> None:
        """Wait for the calls until one is interrupted (`CallInterrupted`, a model's
        ``KeyboardInterrupt``). Then no further call starts, and the calls in flight get
        `CANCEL_GRACE_S` to come back, so the answers other threads return are stored before
        the interruption goes on; what is still running after that is cancelled by the caller.
        Without this, the calls in flight were cancelled at once and answers that had just come
        back were dropped unstored."""
        done, running = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        if running and any(isinstance(task.exception(), CallInterrupted)
                           for task in done if not task.cancelled()):
            self._stopping = True
            await asyncio.wait(running, timeout=CANCEL_GRACE_S)

    def _explain_budget(self, results: list[CallResult]) -> None:
        """One message for every call the budget stopped: the flag, the limit, how many."""
        skipped = [r for r in results if r.status == "not_run"]
        if skipped and self.budget is not None:
            why = (
                f"{self.budget.describe()} is spent for the whole run: {len(skipped)} of "
                f"{len(results)} calls of this evaluation were not started"
            )
            for r in skipped:
                r.error = why

    def _from_store(self, req: Request, key: str, response: ModelResponse) -> CallResult:
        """A stored answer: cached, unless this process paid for it in the run's first round
        (``--reliable-batch``, `pytest_reliable.run.first_round`), which answered it ahead of this
        evaluation: then it is this evaluation's call made, and its price this test's spend."""
        prepaid = self.transport.ahead.paid if self.transport is not None else {}
        if prepaid.pop(key, None) is None:
            self._served_cached(req, response)
            return CallResult(response, cached=True)
        self._count_paid(req, response)
        return CallResult(response, False, "ok", None, 1, 0)

    def _served_cached(self, req: Request, response: ModelResponse | None) -> None:
        """An answer served without a call: it costs nothing now; what it cost when it was paid
        counts as saved."""
        self.stats.cached += 1
        if self.price is not None and response is not None:
            self.stats.spend.save(call_cost(self.price, req.messages, response))

    def _count_failure(self, status: str) -> None:
        if status == "not_run":
            self.stats.not_run += 1
        else:
            self.stats.errors += 1

    async def _attempt(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        """One attempt, within the timeout. The model's coroutine runs as a task of its own: at
        the timeout it is cancelled and given `CANCEL_GRACE_S` to end; one that ignores its
        cancellation is abandoned (counted, reported), so no model holds the run longer than
        timeout + grace per attempt."""
        cancelled_here = False

        async def guarded() -> ModelResponse:
            """The model's call, its non-`Exception` failures made ordinary ones: a
            `KeyboardInterrupt` or `SystemExit` escaping a task would stop the event loop."""
            try:
                return checked_response(await self.model.acomplete(messages, params),
                                        self.model.identity)
            except Exception:
                raise
            except asyncio.CancelledError:
                if cancelled_here:
                    raise
                raise ModelCallError(  # the model's own, not a cancellation of ours
                    f"model {self.model.identity!r} raised CancelledError without being "
                    "cancelled: a model call must return an answer or raise an Exception",
                    retryable=False) from None
            except KeyboardInterrupt as interrupt:
                raise CallInterrupted(interrupt) from None
            except BaseException as exc:  # noqa: BLE001 - SystemExit, GeneratorExit, its own
                raise ModelCallError(
                    redact(f"model {self.model.identity!r} raised {exc!r}: a model call must "
                           "return an answer or raise an Exception"), retryable=False) from None

        call = asyncio.ensure_future(guarded())
        try:
            await asyncio.wait({call}, timeout=self.timeout or None)
        except BaseException:  # this attempt is cancelled (Ctrl-C): so is the model's call
            cancelled_here = True
            call.cancel()
            raise
        if call.done():
            return call.result()
        cancelled_here = True
        call.cancel()
        await asyncio.wait({call}, timeout=CANCEL_GRACE_S)
        if not call.done():
            abandoned_calls.add(self.model.identity, call)
            call.add_done_callback(_forget_abandoned(self.model.identity))
            self.stats.abandoned += 1
            raise ModelCallError(
                f"timed out after {self.timeout:g} s, and the call ignored its cancellation: "
                f"abandoned after {CANCEL_GRACE_S:g} s more (it may still be running)",
                retryable=True)
        if not call.cancelled() and call.exception() is None:
            return call.result()  # it answered as it was cancelled: the answer is paid for
        raise asyncio.TimeoutError

    async def _obtain(self, req: Request, key: str, sem: asyncio.Semaphore) -> CallResult:
        """The answer to a key the lookup missed, paid for once across every process using the
        store: the process that holds the key's claim calls the model; another one waits, outside
        the concurrency limit, for that answer to reach the store. It calls the model itself when
        the holder let go without an answer (its call failed), or when the claim expired (see
        `claim_patience` and `store.waits`: then under the claim's next generation, so one
        waiter does). The run's waiting time is bounded (``--reliable-wait-timeout``): past it
        the cell is an error naming who holds its claim."""
        store = self.cache
        if store is not None and store.replay_only:
            msg = miss_message(req.scope or self.context, req.messages)
            return CallResult(None, False, "error", f"{CacheMissError.__name__}: {msg}")
        if store is None or not store.reads:  # record mode all: every process calls again
            async with sem:
                return await self._call(req, key)
        generation = 0
        waiting: ClaimWait | None = None
        delay = CLAIM_POLL_FIRST_S
        try:
            while True:
                async with sem:
                    claim = await asyncio.to_thread(store.claim, key, generation)
                    if claim.answer is not None:
                        return CallResult(claim.answer, cached=True)
                    if claim.held:
                        if waiting is not None:
                            waiting.end()
                        try:
                            return await self._call(req, key)
                        finally:
                            await asyncio.shield(asyncio.to_thread(store.release, key, generation))
                if waiting is None:
                    waiting = store.waits.begin(claim_name(key, generation), "answer",
                                                self.claim_patience)
                state = await asyncio.to_thread(waiting.state)
                if state == "deadline":
                    return CallResult(None, False, "error", waiting.deadline_message())
                if state == "expired":
                    generation += 1
                    await asyncio.to_thread(waiting.take_over, claim_name(key, generation))
                    continue
                self._say_waiting(store.waits.report())
                await asyncio.sleep(delay)
                delay = min(CLAIM_POLL_MAX_S, delay * 1.5)
        finally:
            if waiting is not None:
                waiting.end()

    def _say_waiting(self, said: str | None) -> None:
        """A long wait for other processes' claims, on the progress line (it is logged too)."""
        if said is None or self.on_progress is None:
            return
        last = self._last_progress
        self.on_progress(ProgressEvent(last.done, last.total, last.cached, last.made, last.failed,
                                       waiting=said))

    def _reservation(self, req: Request, *, batch: bool = False) -> float:
        """The most one attempt of ``req`` may cost (reserved from a USD budget)."""
        if self.price is None or self.budget is None or self.budget.max_usd is None:
            return 0.0
        return max_call_usd(self.price, req.messages, req.params.max_tokens, batch=batch)

    async def _reserve(self, usd: float = 0.0) -> bool:
        """One attempt's share of the budget (the ledger's database is off the event loop).

        A USD reservation refused while this process's calls in flight hold reservations waits
        for them to settle (their real cost is usually far below their reservation) and asks
        again: the budget says no for good only on what was spent."""
        budget = self.budget
        if budget is None:
            return True
        delay = CLAIM_POLL_FIRST_S
        while True:
            if budget.ledger is None:
                granted = budget.try_start(usd)
            else:
                granted = await asyncio.to_thread(budget.try_start, usd)
            if granted or not usd or budget.outstanding_usd <= 1e-12:
                return granted
            await asyncio.sleep(delay)
            delay = min(CLAIM_POLL_MAX_S, delay * 1.5)

    async def _release(self, usd: float) -> None:
        """Give back reservations of attempts that brought no answer (no usage to charge)."""
        if usd and self.budget is not None:
            if self.budget.ledger is None:
                self.budget.add_tokens(0, -usd, usd)
            else:
                await asyncio.to_thread(self.budget.add_tokens, 0, -usd, usd)

    async def _call(self, req: Request, key: str) -> CallResult:
        """Call the model (retrying), then store the answer before anything else happens. Every
        attempt takes its share of the budget first."""
        messages = req.message_dicts()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=_Backoff(self.backoff_base, self.backoff_max),
            retry=retry_if_exception(lambda exc: _classify(exc)[0]),
            before_sleep=self._count_retry,
            reraise=True,
        )
        attempts = 0
        response: Any = None
        reserved = self._reservation(req)
        # Every attempt of this call asks for the same sample (see models.base.request_seed).
        seed_token = request_seed.set(seed_from_key(key))
        try:
            async for attempt in retrying:
                with attempt:
                    if self._stopping:
                        raise _Stopping
                    self._check_model_available()
                    if not await self._reserve(reserved):
                        raise _BudgetSpent
                    attempts += 1
                    response = await self._attempt(messages, req.params)
        except CallInterrupted:
            self._stopping = True  # before this call's slot frees: no call starts in it
            raise
        except _Stopping:
            await self._release(reserved * attempts)
            return CallResult(None, False, "not_run", "not started: the run was interrupted",
                              attempts, max(0, attempts - 1))
        except _BudgetSpent:
            await self._release(reserved * attempts)
            why = ("budget exhausted: call not started" if not attempts else
                   f"budget exhausted after {attempts} attempts: not sent again")
            return CallResult(None, False, "not_run", why, attempts, max(0, attempts - 1))
        except Exception as exc:  # noqa: BLE001 - the cell is an error, the run goes on
            await self._release(reserved * attempts)
            why = _describe(exc)
            if _classify(exc)[0]:
                why = f"{why} (gave up after {attempts} attempts)"
            log.debug("model call failed: %s", why)
            # attempts is 0 when the model could take no call at all (_check_model_available)
            return CallResult(None, False, "error", why, attempts, max(0, attempts - 1))
        finally:
            request_seed.reset(seed_token)
        await self._paid(req, key, response, reserved * attempts)
        return CallResult(response, False, "ok", None, attempts, attempts - 1)

    async def _paid(self, req: Request, key: str, response: ModelResponse,
                    reserved: float, *, stored: bool = False) -> None:
        """Keep a paid answer and count it. Every attempt sent reserved its most possible cost;
        the answer's usage settles them: failed attempts are charged nothing (not knowing their
        usage), this one its real cost. ``stored``: the store has it already (`_store_all`)."""
        cost = call_cost(self.price, req.messages, response) if self.price is not None else None
        settle = (cost.usd if cost is not None else 0.0) - reserved
        if self.cache is not None or (self.budget is not None and self.budget.ledger is not None):
            await asyncio.to_thread(self._keep, key, req, response, settle, reserved, stored)
        else:
            self._keep(key, req, response, settle, reserved, stored)
        self._count_paid(req, response)

    def _count_paid(self, req: Request, response: ModelResponse) -> None:
        """Count a call made: its price, its tokens."""
        if self.price is not None:
            self.stats.spend.pay(call_cost(self.price, req.messages, response))
        self.stats.made += 1
        if USAGE_IGNORED in response.extra and self.stats.usage_ignored is None:
            self.stats.usage_ignored = str(response.extra[USAGE_IGNORED])
        self.stats.prompt_tokens += response.prompt_tokens or 0
        self.stats.prompt_tokens_evaluated += self._evaluated_tokens(req.message_dicts(),
                                                                     response)
        self.stats.completion_tokens += response.completion_tokens or 0

    # -- the batch transport (``--reliable-batch``, `pytest_reliable.calls.batch`) -----------------
    async def _answer_by_batch(self, requests: Sequence[Request], keys: list[str],
                               pending: list[int]) -> dict[str, CallResult]:
        """The pending requests' results through the batch transport, by key, paid for once
        across every process using the store (SPEC section 10): a key goes in this process's
        batch only when it holds the key's claim; a key another process claimed (its batch or
        its call in flight) is waited for while that process holds it, and its answer read from
        the store. A key let go without an answer is claimed and sent here. The whole wait, for
        another process's answers and for this process's batches, ends at one deadline
        (``--reliable-wait-timeout``): what is still owed then is an error naming what it
        waited for."""
        assert self.transport is not None
        transport = self.transport
        failed_ahead = transport.ahead.failed
        todo: dict[str, Request] = {}
        results: dict[str, CallResult] = {}
        for i in pending:
            if keys[i] in failed_ahead:  # the first round could not answer it: not sent again
                results[keys[i]] = CallResult(None, False, "error", failed_ahead[keys[i]], 1, 0)
            else:
                todo.setdefault(keys[i], requests[i])
        deadline = transport.deadline()
        store = self.cache
        if store is None or not store.reads:  # record mode all: every process calls again
            return {**results, **await self._send_batch(todo, deadline)}
        loop = asyncio.get_running_loop()
        start = loop.time()
        delay = BATCH_WAIT_FIRST_S
        said_at = -math.inf
        while todo:
            mine, answered = await asyncio.to_thread(claim_batch_keys, store, list(todo))
            for key, response in answered.items():
                results[key] = CallResult(response, cached=True)
                del todo[key]
            if mine:
                try:
                    results.update(await self._send_batch(
                        {key: todo.pop(key) for key in mine}, deadline))
                finally:
                    await asyncio.shield(asyncio.to_thread(release_keys, store, mine))
                delay = BATCH_WAIT_FIRST_S
                continue
            if not todo:
                break
            now = loop.time()
            waiting = (f"waiting for {len(todo)} answers another process or host is paying for "
                       f"(its batch or its calls); waited {now - start:.0f} s of "
                       f"{transport.wait_timeout:g} s (--reliable-wait-timeout)")
            if self.on_progress is not None:
                self.on_progress(ProgressEvent(len(results), len(results) + len(todo), 0, 0, 0,
                                               waiting))
            if now - said_at >= BATCH_SAY_EVERY_S:
                log.info("pytest-reliable: %s", waiting)
                said_at = now
            if now >= deadline:
                why = (f"not answered: another process or host holds this request's claim (its "
                       f"batch or its call) and did not answer it within --reliable-wait-timeout "
                       f"{transport.wait_timeout:g} s; rerun to read its answer from the store "
                       "once it has it (nothing is paid twice), or give more seconds")
                log.warning("pytest-reliable: %d requests %s", len(todo), why)
                results.update({key: CallResult(None, False, "error", why) for key in todo})
                break
            await asyncio.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(BATCH_WAIT_MAX_S, delay * 1.5)
        return results

    async def _send_batch(self, todo: dict[str, Request],
                          deadline: float) -> dict[str, CallResult]:
        """``todo``'s results through the batch transport: each request reserves its most
        possible cost (at the batch price) first; what the budget refuses is not sent."""
        assert self.transport is not None
        results: dict[str, CallResult] = {}
        granted: dict[str, Request] = {}
        reserved: dict[str, float] = {}
        for key, req in todo.items():
            usd = self._reservation(req, batch=True)
            if await self._reserve_once(usd):
                granted[key], reserved[key] = req, usd
            else:
                results[key] = CallResult(None, False, "not_run",
                                          "budget exhausted: call not started")
        if not granted:
            return results

        def progress(waiting: Waiting) -> None:
            if self.on_progress is not None:
                self.on_progress(ProgressEvent(
                    min(waiting.total, waiting.answered + waiting.failed), waiting.total, 0,
                    waiting.answered, waiting.failed, waiting.describe()))

        async def keep(answers: dict[str, ModelResponse]) -> None:
            """A batch's answers, stored as soon as it is collected (before its follow-up), in
            one write (`_store_all`), then counted."""
            new = [(key, granted[key], response) for key, response in answers.items()
                   if key in granted and key not in results]
            stored = bool(new) and await asyncio.to_thread(self._store_all, new)
            for key, req, response in new:
                await self._paid(req, key, response, reserved[key], stored=stored)
                results[key] = CallResult(response, False, "ok", None, 1, 0)

        answered = await self.transport.answer(granted, progress, deadline=deadline, keep=keep)
        await keep(answered.answers)  # (each is kept once: those of `keep` are in `results`)
        for key in granted:
            if key not in results:
                await self._release(reserved[key])
                results[key] = CallResult(None, False, "error",
                                          answered.failures.get(key, "batch: no answer"), 1, 0)
        return results

    async def _reserve_once(self, usd: float) -> bool:
        """`_reserve` without waiting for calls in flight (a batch's settle only at its end)."""
        if self.budget is None:
            return True
        if self.budget.ledger is None:
            return self.budget.try_start(usd)
        return await asyncio.to_thread(self.budget.try_start, usd)

    def _check_model_available(self) -> None:
        """Fail the call now, before it takes its share of the budget, when the model cannot
        take it: its server refused a connection (see `model_unavailable`), or too many calls
        given up at the timeout still run in this process (`ABANDONED_CALLS_MAX`)."""
        unavailable = model_unavailable(self.model)
        if unavailable is not None:
            raise ModelCallError(unavailable, retryable=False)
        running = abandoned_calls.running(self.model.identity)
        if running >= ABANDONED_CALLS_MAX:
            raise ModelCallError(
                f"not started: {running} calls of model {self.model.identity!r} given up at the "
                f"timeout ({self.timeout:g} s) are still running in this process (at most "
                f"{ABANDONED_CALLS_MAX}: a sync model's thread that Python cannot stop, or an "
                "async model's call that ignores its cancellation). Make the model return or "
                "raise within the timeout, or raise --reliable-timeout", retryable=False)

    def _keep(self, key: str, req: Request, response: ModelResponse, usd: float = 0.0,
              released: float = 0.0, stored: bool = False) -> None:
        """Store a paid answer, then charge its tokens (off the event loop when a database is
        involved: the store may be another machine)."""
        if self.cache is not None and not stored:
            self.cache.put(key, response, meta=self._meta(req))
        if self.budget is not None:
            self.budget.add_tokens(response.total_tokens, usd, released)

    def _meta(self, req: Request) -> dict[str, Any]:
        """What the store keeps about an answer besides the answer."""
        return {"model": self.model.identity, "sample_index": req.sample_index,
                "scope": req.scope, "params": req.params.as_dict()}

    def _store_all(self, answers: Sequence[tuple[str, Request, ModelResponse]]) -> bool:
        """Store a batch's answers in one write, all or none (blocking: off the event loop);
        False when they were not (no store, record mode ``all``, the store failing): then each
        is stored on its own. A run stopped while storing one by one would leave some stored,
        and the next run, asking for the rest only, would not find the batch under that set of
        requests and would pay for the rest again."""
        store = self.cache
        if store is None or store.replay_only or store.record_mode == "all" or len(answers) < 2:
            return False
        try:
            store.write_rows([AnswerRow.of(key, response, self._meta(req))
                              for key, req, response in answers])
        except StoreUnavailable:
            return False
        return True

    def _evaluated_tokens(self, messages: list[Message], response: ModelResponse) -> int:
        """Prompt tokens the server evaluated for this call.

        llama.cpp's server (llama-cpp-python 0.3) reports no cached-token count, so for a
        one-slot model this is an estimate: it keeps the longest common prefix with the previous
        request in its KV cache, so the share of the prompt's characters after that prefix is
        the share of its tokens evaluated. A model serving calls in parallel: all of them.
        """
        sent = response.prompt_tokens or 0
        if getattr(self.model, "max_concurrency", None) != 1 or not sent:
            return sent
        text = "\n\n".join(m["content"] for m in messages)
        previous = _last_prompt.get(self.model.identity, "")
        _last_prompt[self.model.identity] = text
        if not text:
            return sent
        return max(1, round(sent * (1 - shared_prefix(previous, text) / len(text))))

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1

    def run(self, requests: Sequence[Request]) -> list[CallResult]:
        """Synchronous `arun` on the run's event loop (see `call_loop` and `use_loop`)."""
        results: list[CallResult] = run_on_call_loop(self.arun(requests))
        self._report_store_failure()
        self._report_abandoned()
        self._report_usage_ignored()
        return results

    def _report_usage_ignored(self) -> None:
        """A model's bad usage (issue 32), once per model and process: the answers were kept."""
        bad, identity = self.stats.usage_ignored, self.model.identity
        if bad is None or identity in _usage_said:
            return
        _usage_said.add(identity)
        self._warn(ModelWarning(
            f"pytest-reliable: model {identity!r} reported a usage that is not a token count "
            f"({bad}): its answers are kept and their tokens estimated (cost marked estimated)"))

    def _report_abandoned(self) -> None:
        """One warning, at the test, when calls of this evaluation ignored their cancellation."""
        if not self.stats.abandoned:
            return
        self._warn(ModelWarning(
            f"pytest-reliable: {self.stats.abandoned} calls of model {self.model.identity!r} "
            f"ignored their cancellation at the timeout ({self.timeout:g} s) and were abandoned "
            f"after {CANCEL_GRACE_S:g} s more; {abandoned_calls.running(self.model.identity)} "
            f"of its abandoned calls still run in this process (from {ABANDONED_CALLS_MAX} on, "
            "no new call of it starts)."))

    def _report_store_failure(self) -> None:
        """The store's failure (answers kept in memory) and the ledger's, each once per run."""
        failures = [
            self.cache.take_store_failure() if self.cache is not None else None,
            self.budget.take_failure() if self.budget is not None else None,
            self.cache.waits.take_summary() if self.cache is not None else None,
        ]
        for failure in failures:
            if failure is not None:
                self._warn(StoreWarning(failure))

    def _warn(self, warning: Warning) -> None:
        log.warning("%s", warning)
        # Said at the test whose call met it, not at a line of the plugin.
        where = (self.context or "").split("::")[0] or "pytest-reliable"
        warnings.warn_explicit(warning, type(warning), where, 0,
                               module="pytest_reliable.calls.runner")


__all__ = ["Runner", "claim_batch_keys", "release_keys"]
