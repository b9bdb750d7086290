"""Running model calls: one path, cache first, then claims, then a transport (SPEC section 10).

For the requests of one evaluation, `Runner.arun`:

1. looks their answers up in the store (one read for all); a hit is served, its price counted as
   saved (`calls.money.Meter.save`), unless the run's first round paid for it ahead of this
   evaluation (`AnsweredAhead`): then it counts as this evaluation's call;
2. takes the claims of the others (`calls.claiming`: each in its concurrency slot, or as one set,
   as the transport says), so each answer is paid for once across every process and host;
3. hands the requests it holds to its transport (`calls.transport.Transport.answer`: direct calls
   by default, ``--reliable-batch``'s batch API when the session gives one), which reserves each
   attempt's share of the budget first;
4. keeps each answer as soon as it is in: stored first (a set's answers in one write), then paid
   for (`Meter.pay`), then its claim released; what brought no answer gives its reservations
   back (`Meter.release`).

A response that was paid for is written to the store before anything else happens with it; when
the store cannot take it, it is kept in memory for the run and the failure is reported once. A
model's ``KeyboardInterrupt`` (`CallInterrupted`) starts no further call, and the calls in flight
get `CANCEL_GRACE_S` to come back and be stored before the interruption goes on.

Every call of a pytest run goes through one event loop: a long-lived loop in a daemon thread
(`call_loop`), or the test's own loop inside `use_loop` (what an async test's ``aevaluate`` does).
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.cache import CacheMissError, cache_key, miss_message
from pytest_reliable.calls.claiming import CLAIM_WRITE_S, claim_each, claim_together
from pytest_reliable.calls.direct import CANCEL_GRACE_S, DirectTransport
from pytest_reliable.calls.loop import CallInterrupted, run_on_call_loop
from pytest_reliable.calls.money import Meter
from pytest_reliable.calls.pricing import CallCost, Price
from pytest_reliable.calls.requests import (
    AnsweredAhead,
    CallResult,
    ProgressEvent,
    Request,
    RunStats,
)
from pytest_reliable.calls.transport import Sending, Transport
from pytest_reliable.models.base import (
    ABANDONED_CALLS_MAX,
    AsyncModel,
    ModelResponse,
    ModelWarning,
    abandoned_calls,
)
from pytest_reliable.store.base import AnswerRow, Store
from pytest_reliable.store.errors import StoreUnavailable, StoreWarning

log = logging.getLogger("pytest_reliable.runner")

_usage_said: set[str] = set()
"""Models whose bad usage was said (once per process)."""


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
        transport: Transport | None = None,
        ahead: AnsweredAhead | None = None,
    ) -> None:
        """``cache``: the run's store (answers and claims), or None (every call is made).
        ``prefix_order``: dispatch the calls sorted by their messages, so consecutive prompts
        share the longest prefixes (a one-slot server reuses its KV cache for them); results
        stay in plan order. ``price``: what the model's calls cost (None: nothing counted).
        ``transport``: how the calls are sent (default: a `DirectTransport` with ``timeout``,
        ``max_retries`` and the backoff). ``ahead``: what the run's first round answered."""
        self.model = model
        self.cache = cache
        self.concurrency = max(1, int(concurrency))
        self.timeout = timeout
        self.budget = budget
        self.on_progress = on_progress
        self.context = context
        self.prefix_order = prefix_order
        self.stats = RunStats()
        self.transport: Transport = transport if transport is not None else DirectTransport(
            model, self.stats, timeout=timeout, max_retries=max_retries,
            backoff_base=backoff_base, backoff_max=backoff_max)
        self.ahead = ahead if ahead is not None else AnsweredAhead()
        one_slot = model.identity if getattr(model, "max_concurrency", None) == 1 else None
        self.meter = Meter(price, budget, self.stats, one_slot=one_slot)
        """Money: reservations (by the transport), settlements and counts (by the runner)."""
        self._costs: dict[str, CallCost | None] = {}
        """What the calls this runner paid for cost, by cache key, until their result says so."""
        self._last_progress = ProgressEvent(0, 0, 0, 0, 0)

    @property
    def claim_patience(self) -> float | None:
        """How long to wait for another process's answer to a key it claimed before the claim
        expires (SPEC section 10: the call timeout x (retries + 1)): the longest the holder's
        call may take, its attempts (timeout and cancellation grace each) and the backoff
        between them (a server's Retry-After included), plus its answer's write; a claim that
        expired sooner would be taken over while its holder still calls, and paid for twice.
        None (no timeout): while the holder holds the claim (and the run's deadline allows)."""
        longest = self.transport.longest_call_s()
        return None if longest is None else longest + CLAIM_WRITE_S

    def key(self, req: Request) -> str:
        return cache_key(self.model.identity, req.messages, req.params, req.sample_index, req.scope)

    async def arun(self, requests: Sequence[Request]) -> list[CallResult]:
        total = len(requests)
        results: list[CallResult | None] = [None] * total
        keys = [self.key(r) for r in requests]
        counts = {"done": 0, "cached": 0, "made": 0, "failed": 0}
        hits: dict[str, ModelResponse] = {}
        if self.cache is not None and self.cache.reads:
            hits = await asyncio.to_thread(self.cache.get_many, keys)

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

        # 1. the store: hits need no task (answering them here keeps a replay fast)
        todo: dict[str, Request] = {}
        where: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            if key in hits:
                finish(i, self._from_store(requests[i], key, hits[key]))
            else:
                todo.setdefault(key, requests[i])
                where.setdefault(key, []).append(i)

        def settle(key: str, res: CallResult) -> None:
            """A key's result, for each of its requests: the first made it (or found it
            answered by another process meanwhile); the others reuse it."""
            first, *others = where[key]
            if res.status == "ok":
                if res.cached:
                    self.meter.save(requests[first], res.response)
                else:
                    res.cost = self._costs.pop(key, None)
            else:
                self._count_failure(res.status)
            finish(first, res)
            for i in others:
                if res.status == "ok":
                    self.meter.save(requests[i], res.response)
                    finish(i, CallResult(res.response, cached=True))
                else:
                    self._count_failure(res.status)
                    finish(i, CallResult(None, False, res.status, res.error))

        for key in list(todo):
            unsent = self._not_sent(todo[key], key)
            if unsent is not None:
                del todo[key]
                settle(key, unsent)
        # 2-4. claims, then the transport (answers kept as they come)
        sending = Sending(self.meter, lambda answers: self._keep(todo, answers),
                          self.on_progress)
        tasks = [asyncio.ensure_future(work) for work in self._claims(todo, settle, sending)]
        try:
            if tasks:
                await self._drain_on_interrupt(tasks, sending)
            await asyncio.gather(*tasks)
        except BaseException:  # interrupted or cancelled: stop the other calls too
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        done = [r for r in results if r is not None]
        self._explain_budget(done)
        return done

    def _not_sent(self, req: Request, key: str) -> CallResult | None:
        """A request that is not sent: replaying (record mode none) misses it, or the run's
        first round could not answer it (it is not sent again in this run)."""
        if self.cache is not None and self.cache.replay_only:
            msg = miss_message(req.scope or self.context, req.messages)
            return CallResult(None, False, "error", f"{CacheMissError.__name__}: {msg}")
        if key in self.ahead.failed:
            return CallResult(None, False, "error", self.ahead.failed[key], 1, 0)
        return None

    def _claims(self, todo: dict[str, Request], settle: Callable[[str, CallResult], None],
                sending: Sending) -> list[Coroutine[Any, Any, None]]:
        """The work of answering ``todo``: its claims, each in a concurrency slot or all as
        one set (the transport's ``together``), and what the transport answers for them."""
        if not todo:
            return []

        async def send(held: dict[str, Request]) -> dict[str, CallResult]:
            return await self._send(held, sending)

        if self.transport.together:
            async def together() -> None:
                wait_timeout = self.transport.wait_timeout
                sending.deadline = asyncio.get_running_loop().time() + wait_timeout
                answered = await claim_together(self.cache, todo, send,
                                                deadline=sending.deadline,
                                                wait_timeout=wait_timeout,
                                                on_progress=self.on_progress)
                for key in todo:
                    settle(key, answered[key])
            return [together()]

        slots = asyncio.Semaphore(self.concurrency)
        patience = self.claim_patience

        async def each(key: str) -> None:
            settle(key, await claim_each(self.cache, key, todo[key], send, slots, patience,
                                         self._say_waiting))

        order = list(todo)
        if self.prefix_order:
            order.sort(key=lambda key: todo[key].messages)
        # Tasks start in list order and the semaphore is fair, so calls are made in that order.
        return [each(key) for key in order]

    async def _send(self, held: dict[str, Request], sending: Sending) -> dict[str, CallResult]:
        """The transport's results for requests whose claims this process holds; what brought
        no answer gives its reservations back."""
        if sending.stopping:
            return {key: CallResult(None, False, "not_run", "not started: the run was "
                                    "interrupted") for key in held}
        try:
            results = await self.transport.answer(held, sending)
        except CallInterrupted:
            sending.stopping = True  # before this call's slot frees: no call starts in it
            raise
        for key in held:
            if results[key].status != "ok":
                await self.meter.release(key)
        return results

    async def _keep(self, todo: dict[str, Request], answers: dict[str, ModelResponse]) -> None:
        """Paid answers: stored first (a set of them in one write, `_store_all`), then paid for
        (`Meter.pay`: the budget settled, the call counted). Off the event loop where a database
        is involved: the store may be another machine."""
        rows = [(key, todo[key], response) for key, response in answers.items()]
        stored = len(rows) > 1 and await asyncio.to_thread(self._store_all, rows)
        for key, req, response in rows:
            if self.cache is not None and not stored:
                await asyncio.to_thread(self.cache.put, key, response, meta=self._meta(req))
            self._costs[key] = await self.meter.pay(key, req, response)

    async def _drain_on_interrupt(self, tasks: Sequence[asyncio.Future[None]],
                                  sending: Sending) -> None:
        """Wait for the calls until one is interrupted (`CallInterrupted`, a model's
        ``KeyboardInterrupt``). Then no further call starts, and the calls in flight get
        `CANCEL_GRACE_S` to come back, so the answers other threads return are stored before
        the interruption goes on; what is still running after that is cancelled by the caller.
        Without this, the calls in flight were cancelled at once and answers that had just come
        back were dropped unstored."""
        done, running = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        if running and any(isinstance(task.exception(), CallInterrupted)
                           for task in done if not task.cancelled()):
            sending.stopping = True
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
        prepaid = self.ahead.paid.pop(key, None)
        if prepaid is None:
            self.meter.save(req, response)
            return CallResult(response, cached=True)
        self.meter.count_ahead(req, response, prepaid.cost)
        return CallResult(response, False, "ok", None, 1, 0, prepaid.cost)

    def _count_failure(self, status: str) -> None:
        if status == "not_run":
            self.stats.not_run += 1
        else:
            self.stats.errors += 1

    def _say_waiting(self, said: str | None) -> None:
        """A long wait for other processes' claims, on the progress line (it is logged too)."""
        if said is None or self.on_progress is None:
            return
        last = self._last_progress
        self.on_progress(ProgressEvent(last.done, last.total, last.cached, last.made, last.failed,
                                       waiting=said))

    def _meta(self, req: Request) -> dict[str, Any]:
        """What the store keeps about an answer besides the answer."""
        return {"model": self.model.identity, "sample_index": req.sample_index,
                "scope": req.scope, "params": req.params.as_dict()}

    def _store_all(self, answers: Sequence[tuple[str, Request, ModelResponse]]) -> bool:
        """Store a set of answers in one write, all or none (blocking: off the event loop);
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


__all__ = ["CANCEL_GRACE_S", "Runner"]
