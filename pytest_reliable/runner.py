"""Async execution of model calls: cache first, concurrency, retries, timeouts, budget, progress.

A response that was paid for is written to the cache before anything else happens with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pytest_reliable.cache import CacheMissError, ResponseCache, cache_key, miss_message
from pytest_reliable.models.base import (
    AsyncModel,
    Message,
    ModelError,
    ModelResponse,
    SamplingParams,
)

log = logging.getLogger("pytest_reliable.runner")

Status = Literal["ok", "not_run", "error"]
RETRY_AFTER_MAX_S = 60.0
"""A server's Retry-After is honoured up to this many seconds."""


@dataclass(frozen=True)
class Request:
    """One call: messages as a tuple of (role, content) pairs (hashable, canonical)."""

    messages: tuple[tuple[str, str], ...]
    params: SamplingParams
    sample_index: int = 0
    scope: str | None = None

    @classmethod
    def of(
        cls,
        messages: Sequence[Message] | Sequence[tuple[str, str]],
        params: SamplingParams,
        sample_index: int = 0,
        scope: str | None = None,
    ) -> Request:
        canon = tuple(
            (str(m["role"]), str(m["content"])) if isinstance(m, dict) else (str(m[0]), str(m[1]))
            for m in messages
        )
        return cls(canon, params, sample_index, scope)

    def message_dicts(self) -> list[Message]:
        return [{"role": r, "content": c} for r, c in self.messages]


def number_samples(
    items: Sequence[tuple[Sequence[Message], SamplingParams]], nodeid: str
) -> list[Request]:
    """Sample indexes in plan order: occurrence number at temperature > 0 (scoped to the nodeid),
    index 0 and no scope at temperature 0."""
    seen: dict[tuple[Any, ...], int] = {}
    out: list[Request] = []
    for messages, params in items:
        req = Request.of(messages, params)
        if params.temperature > 0:
            k = (req.messages, params)
            idx = seen.get(k, 0)
            seen[k] = idx + 1
            out.append(Request(req.messages, params, idx, nodeid))
        else:
            out.append(req)
    return out


@dataclass
class CallResult:
    response: ModelResponse | None
    cached: bool = False
    status: Status = "ok"
    error: str | None = None
    attempts: int = 0
    retries: int = 0


@dataclass(frozen=True)
class ProgressEvent:
    done: int
    total: int
    cached: int
    made: int
    failed: int


@dataclass
class RunStats:
    made: int = 0
    cached: int = 0
    retries: int = 0
    not_run: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Budget:
    """Call/token budget shared by every runner of a session (thread-safe)."""

    def __init__(self, max_calls: int | None = None, max_tokens: int | None = None) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.tokens = 0
        self._lock = threading.Lock()

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return self._exhausted()

    def _exhausted(self) -> bool:
        return (self.max_calls is not None and self.calls >= self.max_calls) or (
            self.max_tokens is not None and self.tokens >= self.max_tokens
        )

    def try_start(self) -> bool:
        """Reserve one call; False when the budget is spent."""
        with self._lock:
            if self._exhausted():
                return False
            self.calls += 1
            return True

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens += n


def _retryable(exc: BaseException) -> tuple[bool, float | None]:
    """(retry?, Retry-After seconds if the server said)."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError, json.JSONDecodeError)):
        return True, None  # a malformed body is a server glitch like a 5xx
    try:
        import openai
    except ImportError:  # pragma: no cover
        return False, None
    if isinstance(
        exc, (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError)
    ):
        return True, None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429 or status >= 500 or status == 408:
            after: float | None = None
            try:
                value = exc.response.headers.get("retry-after")
                if value is not None:
                    after = float(value)
            except (ValueError, AttributeError):
                after = None
            return True, after
        return False, None
    return False, None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


class Runner:
    def __init__(
        self,
        model: AsyncModel,
        cache: ResponseCache | None,
        *,
        concurrency: int = 4,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        budget: Budget | None = None,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        context: str | None = None,
    ) -> None:
        self.model = model
        self.cache = cache
        self.concurrency = max(1, int(concurrency))
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.budget = budget
        self.on_progress = on_progress
        self.context = context
        self.stats = RunStats()

    def key(self, req: Request) -> str:
        return cache_key(self.model.identity, req.messages, req.params, req.sample_index, req.scope)

    async def arun(self, requests: Sequence[Request]) -> list[CallResult]:
        total = len(requests)
        results: list[CallResult | None] = [None] * total
        keys = [self.key(r) for r in requests]
        counts = {"done": 0, "cached": 0, "made": 0, "failed": 0}
        hits: dict[str, ModelResponse] = {}
        if self.cache is not None and self.cache.reads:
            hits = self.cache.get_many(keys)
        sem = asyncio.Semaphore(self.concurrency)
        inflight: dict[str, asyncio.Future[CallResult]] = {}

        def finish(i: int, res: CallResult) -> None:
            results[i] = res
            counts["done"] += 1
            if res.status == "ok":
                counts["cached" if res.cached else "made"] += 1
            else:
                counts["failed"] += 1
            if self.on_progress is not None:
                self.on_progress(
                    ProgressEvent(
                        counts["done"], total, counts["cached"], counts["made"], counts["failed"]
                    )
                )

        async def one(i: int) -> None:
            req, key = requests[i], keys[i]
            if key in hits:
                self.stats.cached += 1
                finish(i, CallResult(hits[key], cached=True))
                return
            if key in inflight:
                first = await asyncio.shield(inflight[key])
                if first.status == "ok":
                    self.stats.cached += 1
                    finish(i, CallResult(first.response, cached=True))
                else:
                    finish(i, CallResult(None, False, first.status, first.error))
                    self._count_failure(first.status)
                return
            fut: asyncio.Future[CallResult] = asyncio.get_running_loop().create_future()
            inflight[key] = fut
            try:
                res = await self._call(req, key, sem)
            except BaseException as exc:  # cancellation: unblock waiters
                fut.set_result(CallResult(None, False, "error", _describe(exc)))
                raise
            fut.set_result(res)
            if res.status == "ok":
                hits[key] = res.response  # type: ignore[assignment]
            else:
                self._count_failure(res.status)
            del inflight[key]
            finish(i, res)

        # Cache hits need no task: answering them here keeps a replay fast.
        pending = []
        for i in range(total):
            if keys[i] in hits:
                self.stats.cached += 1
                finish(i, CallResult(hits[keys[i]], cached=True))
            else:
                pending.append(i)
        await asyncio.gather(*(one(i) for i in pending))
        return [r for r in results if r is not None]

    def _count_failure(self, status: str) -> None:
        if status == "not_run":
            self.stats.not_run += 1
        else:
            self.stats.errors += 1

    async def _call(self, req: Request, key: str, sem: asyncio.Semaphore) -> CallResult:
        if self.cache is not None and self.cache.replay_only:
            msg = miss_message(req.scope or self.context, req.messages)
            return CallResult(None, False, "error", f"{CacheMissError.__name__}: {msg}")
        async with sem:
            if self.budget is not None and not self.budget.try_start():
                return CallResult(None, False, "not_run", "budget exhausted: call not started")
            messages = req.message_dicts()
            attempts = 0
            response: Any = None
            while True:
                attempts += 1
                try:
                    if self.timeout:
                        response = await asyncio.wait_for(
                            self.model.acomplete(messages, req.params), self.timeout
                        )
                    else:
                        response = await self.model.acomplete(messages, req.params)
                except Exception as exc:  # noqa: BLE001 - classified just below
                    retry, after = _retryable(exc)
                    if not retry or attempts > self.max_retries:
                        why = _describe(exc)
                        if retry:
                            why = f"{why} (gave up after {attempts} attempts)"
                        log.debug("model call failed: %s", why)
                        return CallResult(None, False, "error", why, attempts, attempts - 1)
                    self.stats.retries += 1
                    cap = min(self.backoff_max, self.backoff_base * (2 ** (attempts - 1)))
                    delay = random.uniform(0, cap)
                    if after is not None:
                        delay = max(delay, min(after, RETRY_AFTER_MAX_S))
                    await asyncio.sleep(delay)
                    continue
                break
        if not isinstance(response, ModelResponse):
            response = ModelResponse(text=str(response))
        if self.cache is not None:
            self.cache.put(
                key,
                response,
                meta={
                    "model": self.model.identity,
                    "sample_index": req.sample_index,
                    "scope": req.scope,
                    "params": req.params.as_dict(),
                },
            )
        self.stats.made += 1
        self.stats.prompt_tokens += response.prompt_tokens or 0
        self.stats.completion_tokens += response.completion_tokens or 0
        if self.budget is not None:
            self.budget.add_tokens(response.total_tokens)
        return CallResult(response, False, "ok", None, attempts, attempts - 1)

    async def _arun_and_close(self, requests: Sequence[Request]) -> list[CallResult]:
        """`arun` in a loop of our own: release the model's per-loop resources before it closes."""
        try:
            return await self.arun(requests)
        finally:
            aclose = getattr(self.model, "release_loop_resources", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    log.debug("closing the model's client failed", exc_info=True)

    def run(self, requests: Sequence[Request]) -> list[CallResult]:
        """Synchronous `arun`; from inside a running event loop it runs in a worker thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun_and_close(requests))
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["r"] = asyncio.run(self._arun_and_close(requests))
            except BaseException as exc:  # noqa: BLE001
                box["e"] = exc

        t = threading.Thread(target=work, name="pytest-reliable-runner")
        t.start()
        t.join()
        if "e" in box:
            raise box["e"]
        return box["r"]


__all__ = [
    "Budget",
    "CacheMissError",
    "CallResult",
    "ModelError",
    "ProgressEvent",
    "Request",
    "RunStats",
    "Runner",
    "number_samples",
]
