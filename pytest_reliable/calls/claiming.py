"""Claims: each answer is paid for once across every process and host using the store (SPEC
section 10), whatever the transport.

The runner (`calls.runner`) hands its transport only the requests whose claims it holds, and
releases a claim only once the answer is stored (`Store.release` waits for an answer kept in
memory to be written). A request another process claimed is waited for, and its answer read from
the store. Two granularities, chosen by the transport's ``together``:

- `claim_each`: a request is claimed in its concurrency slot, right before it is sent, and sent
  alone. A waiter gives the holder the longest its call can take (``patience``); past it the
  claim expires and is taken over under its next generation (`store.waits`), so one waiter
  calls. The run's waiting is bounded (``--reliable-wait-timeout``).
- `claim_together`: the requests are claimed as one set (`claim_batch_keys`: one claiming
  process at a time, so two processes sending the same set never split it in two) and sent in
  one `answer`; those another process holds are waited for while it holds them, and a key let
  go without an answer is claimed and sent here. The whole wait, for other processes' answers
  and for this process's own, ends at one deadline (the transport's ``wait_timeout``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from pytest_reliable.calls.requests import CallResult, ProgressEvent, Request
from pytest_reliable.models.base import ModelResponse
from pytest_reliable.store.base import Store
from pytest_reliable.store.claims import claim_name

if TYPE_CHECKING:
    from pytest_reliable.store.waits import ClaimWait

log = logging.getLogger("pytest_reliable.runner")

Send = Callable[[dict[str, Request]], Awaitable[dict[str, CallResult]]]
"""The runner's: the transport's answers to requests whose claims this process holds."""

CLAIM_POLL_FIRST_S = 0.05
CLAIM_POLL_MAX_S = 1.0
"""How often a process waiting for another's answer looks again (growing from first to max)."""
CLAIM_WRITE_S = 30.0
"""What a claim's patience allows for its holder to store the answer it got."""
TOGETHER_WAIT_FIRST_S = 0.2
TOGETHER_WAIT_MAX_S = 30.0
"""How often a process waiting for answers another process's set (a batch) pays for looks
again."""
SAY_EVERY_S = 60.0
"""How often the log says what that wait waits for."""
CLAIMING_A_BATCH = "pytest-reliable: claiming the keys of a batch"
"""The claim held while a process claims its set's keys: two processes sending the same keys
together (pytest-xdist workers planning the same first round) never split them into two sets."""


async def claim_each(store: Store | None, key: str, request: Request, send: Send,
                     slots: asyncio.Semaphore, patience: float | None,
                     say_waiting: Callable[[str | None], None]) -> CallResult:
    """The answer to a key the lookup missed: the process that holds the key's claim sends it;
    another one waits, outside the concurrency ``slots``, for that answer to reach the store. It
    sends the request itself when the holder let go without an answer (its call failed), or
    when the claim expired (``patience``, see `store.waits`: then under the claim's next
    generation, so one waiter does). The run's waiting time is bounded
    (``--reliable-wait-timeout``): past it the cell is an error naming who holds its claim."""
    if store is None or not store.reads:  # record mode all: every process calls again
        async with slots:
            return (await send({key: request}))[key]
    generation = 0
    waiting: ClaimWait | None = None
    delay = CLAIM_POLL_FIRST_S
    try:
        while True:
            async with slots:
                claim = await asyncio.to_thread(store.claim, key, generation)
                if claim.answer is not None:
                    return CallResult(claim.answer, cached=True)
                if claim.held:
                    if waiting is not None:
                        waiting.end()
                    try:
                        return (await send({key: request}))[key]
                    finally:
                        await asyncio.shield(asyncio.to_thread(store.release, key, generation))
            if waiting is None:
                waiting = store.waits.begin(claim_name(key, generation), "answer", patience)
            state = await asyncio.to_thread(waiting.state)
            if state == "deadline":
                return CallResult(None, False, "error", waiting.deadline_message())
            if state == "expired":
                generation += 1
                await asyncio.to_thread(waiting.take_over, claim_name(key, generation))
                continue
            say_waiting(store.waits.report())
            await asyncio.sleep(delay)
            delay = min(CLAIM_POLL_MAX_S, delay * 1.5)
    finally:
        if waiting is not None:
            waiting.end()


async def claim_together(store: Store | None, todo: dict[str, Request], send: Send, *,
                         deadline: float, wait_timeout: float,
                         on_progress: Callable[[ProgressEvent], None] | None
                         ) -> dict[str, CallResult]:
    """``todo``'s results, sent as sets whose claims this process holds (see the module
    docstring); waiting ends at ``deadline`` (the loop's time, ``wait_timeout`` from the
    start): what is still owed then is an error naming what it waited for."""
    todo = dict(todo)
    if store is None or not store.reads:  # record mode all: every process calls again
        return await send(todo)
    results: dict[str, CallResult] = {}
    loop = asyncio.get_running_loop()
    start = loop.time()
    delay = TOGETHER_WAIT_FIRST_S
    said_at = -math.inf
    while todo:
        mine, answered = await asyncio.to_thread(claim_batch_keys, store, list(todo))
        for key, response in answered.items():
            results[key] = CallResult(response, cached=True)
            del todo[key]
        if mine:
            try:
                results.update(await send({key: todo.pop(key) for key in mine}))
            finally:
                await asyncio.shield(asyncio.to_thread(release_keys, store, mine))
            delay = TOGETHER_WAIT_FIRST_S
            continue
        if not todo:
            break
        now = loop.time()
        waiting = (f"waiting for {len(todo)} answers another process or host is paying for "
                   f"(its batch or its calls); waited {now - start:.0f} s of "
                   f"{wait_timeout:g} s (--reliable-wait-timeout)")
        if on_progress is not None:
            on_progress(ProgressEvent(len(results), len(results) + len(todo), 0, 0, 0, waiting))
        if now - said_at >= SAY_EVERY_S:
            log.info("pytest-reliable: %s", waiting)
            said_at = now
        if now >= deadline:
            why = (f"not answered: another process or host holds this request's claim (its "
                   f"batch or its call) and did not answer it within --reliable-wait-timeout "
                   f"{wait_timeout:g} s; rerun to read its answer from the store once it has "
                   "it (nothing is paid twice), or give more seconds")
            log.warning("pytest-reliable: %d requests %s", len(todo), why)
            results.update({key: CallResult(None, False, "error", why) for key in todo})
            break
        await asyncio.sleep(min(delay, max(0.0, deadline - now)))
        delay = min(TOGETHER_WAIT_MAX_S, delay * 1.5)
    return results


def claim_batch_keys(store: Store,
                     keys: Sequence[str]) -> tuple[list[str], dict[str, ModelResponse]]:
    """(the keys this process now holds the claims of, the answers stored meanwhile). The keys
    are claimed together, one claiming process at a time; the others are another process's to
    answer. Blocking: called off the event loop."""
    found = store.get_many(keys)  # answered: no claim needed (one query per read batch)
    while not store.claims.try_claim(CLAIMING_A_BATCH):
        time.sleep(CLAIM_POLL_FIRST_S)  # another process claims its set's keys: a moment
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


__all__ = ["CLAIM_WRITE_S", "claim_batch_keys", "claim_each", "claim_together", "release_keys"]
