"""The direct transport: each request is a call of its own to the model (`DirectTransport`).

Retries (with jittered exponential backoff, honouring a server's Retry-After) come from tenacity;
the adapters classify their failures (`ModelCallError`), this transport knows no wire format.
Every attempt takes its share of the budget first (`calls.money.Meter.reserve`), and every
attempt of one call asks for the same sample (`models.base.request_seed`).

No model can hang or crash the run: each attempt's call runs as a task of its own, cancelled at
the timeout and abandoned (counted, reported) if it ignores that for `CANCEL_GRACE_S`; a model's
``SystemExit`` or own ``CancelledError`` is an errored call naming it, its ``KeyboardInterrupt``
is the user's Ctrl-C (`CallInterrupted`); what it returns is checked before it is kept; and a
model whose server refused a connection, or with too many abandoned calls still running, gets
no further call (`DirectTransport._check_model_available`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from pytest_reliable.calls.loop import CallInterrupted
from pytest_reliable.calls.requests import CallResult, Request, RunStats
from pytest_reliable.calls.transport import Sending
from pytest_reliable.models.base import (
    ABANDONED_CALLS_MAX,
    AsyncModel,
    Message,
    ModelCallError,
    ModelResponse,
    SamplingParams,
    abandoned_calls,
    checked_response,
    model_unavailable,
    request_seed,
    seed_from_key,
)
from pytest_reliable.redact import redact

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


def describe_failure(exc: BaseException) -> str:
    """A failed call's error, as a cell shows it (secrets removed)."""
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


class DirectTransport:
    """Each request a call of the model, retried on its glitches, within a timeout per attempt.
    ``stats``: the runner's counts (retries, abandoned calls)."""

    together = False
    wait_timeout = math.inf

    def __init__(self, model: AsyncModel, stats: RunStats, *, timeout: float = 60.0,
                 max_retries: int = 5, backoff_base: float = 0.5,
                 backoff_max: float = 30.0) -> None:
        self.model = model
        self.stats = stats
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max

    def longest_call_s(self) -> float | None:
        """The longest one call may take: its attempts (timeout and cancellation grace each)
        and the backoff between them (a server's Retry-After included). None: no timeout."""
        if not self.timeout:
            return None
        attempts = self.max_retries + 1
        pauses = sum(max(min(self.backoff_max, self.backoff_base * 2.0 ** n), RETRY_AFTER_MAX_S)
                     for n in range(self.max_retries))
        return attempts * (self.timeout + CANCEL_GRACE_S) + pauses

    async def answer(self, requests: Mapping[str, Request],
                     sending: Sending) -> dict[str, CallResult]:
        keys = list(requests)
        results = await asyncio.gather(*(self._call(key, requests[key], sending)
                                          for key in keys))
        return dict(zip(keys, results))

    async def _call(self, key: str, req: Request, sending: Sending) -> CallResult:
        """Call the model (retrying), then keep the answer before anything else happens. Every
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
        # Every attempt of this call asks for the same sample (see models.base.request_seed).
        seed_token = request_seed.set(seed_from_key(key))
        try:
            async for attempt in retrying:
                with attempt:
                    if sending.stopping:
                        raise _Stopping
                    self._check_model_available()
                    if not await sending.meter.reserve(key, req):
                        raise _BudgetSpent
                    attempts += 1
                    response = await self._attempt(messages, req.params)
        except CallInterrupted:
            sending.stopping = True  # before this call's slot frees: no call starts in it
            raise
        except _Stopping:
            return CallResult(None, False, "not_run", "not started: the run was interrupted",
                              attempts, max(0, attempts - 1))
        except _BudgetSpent:
            why = ("budget exhausted: call not started" if not attempts else
                   f"budget exhausted after {attempts} attempts: not sent again")
            return CallResult(None, False, "not_run", why, attempts, max(0, attempts - 1))
        except Exception as exc:  # noqa: BLE001 - the cell is an error, the run goes on
            why = describe_failure(exc)
            if _classify(exc)[0]:
                why = f"{why} (gave up after {attempts} attempts)"
            log.debug("model call failed: %s", why)
            # attempts is 0 when the model could take no call at all (_check_model_available)
            return CallResult(None, False, "error", why, attempts, max(0, attempts - 1))
        finally:
            request_seed.reset(seed_token)
        await sending.keep({key: response})
        return CallResult(response, False, "ok", None, attempts, attempts - 1)

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1

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


__all__ = ["CANCEL_GRACE_S", "RETRY_AFTER_MAX_S", "DirectTransport", "describe_failure"]
