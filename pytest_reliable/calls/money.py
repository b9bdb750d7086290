"""Money as a step of its own (SPEC section 13): one call is priced where it is reserved and where
it is paid, nowhere else.

`Meter` owns a runner's reservations, settlements and counts. A transport asks it for each
attempt's share of the budget before sending (`Meter.reserve`: the most the attempt may cost,
held under the call's cache key); once the answer is stored the runner settles it
(`Meter.pay`: priced once from its usage, its real cost replaces every reservation its attempts
held, its tokens and dollars go to the budget's ledger and to the runner's `RunStats`); what brought
no answer gives its reservations back (`Meter.release`). An answer served without a call costs
nothing now: what it cost when it was paid counts as saved (`Meter.save`). An answer the run's
first round paid for ahead of a test (`AnsweredAhead`) is counted as that test's call with the
cost priced when it was paid (`Meter.count_ahead`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.pricing import CallCost, Price, call_cost, max_call_usd
from pytest_reliable.calls.requests import Request, RunStats
from pytest_reliable.models.base import USAGE_IGNORED, Message, ModelResponse

RESERVE_POLL_FIRST_S = 0.05
RESERVE_POLL_MAX_S = 1.0
"""How often a refused USD reservation asks again while this process's calls in flight hold
reservations (growing from first to max)."""

_last_prompt: dict[str, str] = {}
"""The last prompt sent to each one-slot model (by identity): what its KV cache holds."""


class Meter:
    """Reservations, settlements and counts of one runner's calls (see the module docstring).

    ``price``: what the model's calls cost (None: no dollars counted); ``budget``: the run's
    (None: nothing refused); ``stats``: the runner's counts; ``one_slot``: the identity of a
    model serving one call at a time (its evaluated prompt tokens are estimated, see
    `evaluated_tokens`), else None."""

    def __init__(self, price: Price | None, budget: Budget | None, stats: RunStats, *,
                 one_slot: str | None = None) -> None:
        self.price = price
        self.budget = budget
        self.stats = stats
        self.one_slot = one_slot
        self._held: dict[str, float] = {}
        """USD reserved by the attempts of each call (by cache key) not settled yet."""

    # -- before sending -------------------------------------------------------------------------
    async def reserve(self, key: str, request: Request, *, batch: bool = False,
                      wait: bool = True) -> bool:
        """One attempt's share of the budget: one call and the most it may cost (at the batch
        price through a batch API); False when the budget refuses it. ``wait``: a USD
        reservation refused while this process's calls in flight hold reservations waits for
        them to settle (their real cost is usually far below their reservation) and asks again,
        so the budget says no for good only on what was spent (a batch does not wait: its
        reservations settle only at its end)."""
        budget = self.budget
        if budget is None:
            return True
        usd = 0.0
        if self.price is not None and budget.max_usd is not None:
            usd = max_call_usd(self.price, request.messages, request.params.max_tokens,
                               batch=batch)
        delay = RESERVE_POLL_FIRST_S
        while True:
            granted = await self._off_loop(budget.try_start, usd)
            if granted:
                self._held[key] = self._held.get(key, 0.0) + usd
                return True
            if not wait or not usd or budget.outstanding_usd <= 1e-12:
                return False
            await asyncio.sleep(delay)
            delay = min(RESERVE_POLL_MAX_S, delay * 1.5)

    async def release(self, key: str) -> None:
        """Give back the reservations of a call that brought no answer (no usage to charge)."""
        usd = self._held.pop(key, 0.0)
        if usd and self.budget is not None:
            await self._off_loop(self.budget.add_tokens, 0, -usd, usd)

    # -- once the answer is stored --------------------------------------------------------------
    async def pay(self, key: str, request: Request, response: ModelResponse) -> CallCost | None:
        """Settle a paid (and stored) answer: failed attempts are charged nothing (their usage is
        not known), this one its real cost, which replaces every reservation of the call; then
        count it. Its cost (None without a price) is returned."""
        cost = call_cost(self.price, request.messages, response) \
            if self.price is not None else None
        reserved = self._held.pop(key, 0.0)
        if self.budget is not None:
            settle = (cost.usd if cost is not None else 0.0) - reserved
            await self._off_loop(self.budget.add_tokens, response.total_tokens, settle,
                                 reserved)
        self.count(request, response, cost)
        return cost

    def count(self, request: Request, response: ModelResponse, cost: CallCost | None) -> None:
        """Count a call made: its price, its tokens."""
        stats = self.stats
        if cost is not None:
            stats.spend.pay(cost)
        stats.made += 1
        if USAGE_IGNORED in response.extra and stats.usage_ignored is None:
            stats.usage_ignored = str(response.extra[USAGE_IGNORED])
        stats.prompt_tokens += response.prompt_tokens or 0
        stats.prompt_tokens_evaluated += evaluated_tokens(self.one_slot, request.message_dicts(),
                                                          response)
        stats.completion_tokens += response.completion_tokens or 0

    def count_ahead(self, request: Request, response: ModelResponse,
                    cost: CallCost | None) -> None:
        """An answer the run's first round paid for (and settled) ahead of this evaluation: this
        evaluation's call made, at the cost priced when it was paid."""
        self.count(request, response, cost if self.price is not None else None)

    def save(self, request: Request, response: ModelResponse | None) -> None:
        """An answer served without a call: it costs nothing now; what it cost when it was paid
        counts as saved."""
        self.stats.cached += 1
        if self.price is not None and response is not None:
            self.stats.spend.save(call_cost(self.price, request.messages, response))

    async def _off_loop(self, fn: Callable[..., object], *args: float) -> bool:
        """``fn(*args)``: off the event loop when the budget's ledger is a database (the store
        may be another machine)."""
        assert self.budget is not None
        if self.budget.ledger is None:
            return bool(fn(*args))
        return bool(await asyncio.to_thread(fn, *args))


def evaluated_tokens(one_slot: str | None, messages: Sequence[Message],
                     response: ModelResponse) -> int:
    """Prompt tokens the server evaluated for this call.

    llama.cpp's server (llama-cpp-python 0.3) reports no cached-token count, so for a one-slot
    model (``one_slot``: its identity) this is an estimate: it keeps the longest common prefix
    with the previous request in its KV cache, so the share of the prompt's characters after
    that prefix is the share of its tokens evaluated. A model serving calls in parallel: all of
    them."""
    sent = response.prompt_tokens or 0
    if one_slot is None or not sent:
        return sent
    text = "\n\n".join(m["content"] for m in messages)
    previous = _last_prompt.get(one_slot, "")
    _last_prompt[one_slot] = text
    if not text:
        return sent
    return max(1, round(sent * (1 - shared_prefix(previous, text) / len(text))))


def shared_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


__all__ = ["Meter", "evaluated_tokens", "shared_prefix"]
