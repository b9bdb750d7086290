"""What every model under test looks like to the rest of the plugin.

A model takes chat messages and sampling parameters and returns a `ModelResponse`. Adapters in
this package turn user callables, the OpenAI-compatible client and the embedded local server into
an `AsyncModel`; the runner only ever sees that protocol.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from pytest_reliable.errors import ReliableError

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters of one call; every field is part of the cache key."""

    temperature: float = 0.0
    max_tokens: int = 32
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    logprobs: int | None = None
    """Ask for this many top log-probabilities per token (completions endpoint)."""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["stop"] is not None:
            data["stop"] = list(data["stop"])
        return data


@dataclass
class ModelResponse:
    """One completed call. Everything here is stored in the response cache."""

    text: str
    logprobs: list[dict[str, Any]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


@runtime_checkable
class AsyncModel(Protocol):
    """The model protocol the runner drives. ``identity`` keys the cache and names the model.

    ``max_concurrency``: the most calls the model serves well at once (None: no limit of its
    own; ``--reliable-concurrency`` or the remote default applies). ``aclose()`` releases its
    clients; the session calls it once, at the end of the run, on the run's event loop.
    Failures the runner may retry are raised as `ModelCallError` with ``retryable=True``.
    """

    identity: str
    max_concurrency: int | None

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Model(Protocol):
    """The synchronous form of the protocol; adapters wrap it into an `AsyncModel`."""

    identity: str

    def complete(self, messages: list[Message], params: SamplingParams) -> ModelResponse: ...


request_seed: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "pytest_reliable_request_seed", default=None
)
"""The sampling seed of the call being made, set by the runner around each call.

It is derived from the call's cache key (`seed_from_key`: model, messages, parameters, sample
index, scope), so a fresh run asks for the same samples whatever the order of its calls, and the
seed is never part of the key. An adapter whose server honours a per-request seed sends it (the
embedded model does: llama.cpp then draws the same sample for the same prompt and seed)."""


def seed_from_key(key: str) -> int:
    """A 31-bit seed from a cache key: llama.cpp reads 0xFFFFFFFF as "random", and some
    servers take the seed as a signed 32-bit integer."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


class ModelError(ReliableError):
    """A model call failed for good (after retries, or with an error that is not retried)."""


class ModelCallError(ModelError):
    """One failed attempt of a call, classified by the adapter that knows the transport.

    ``retryable``: a rate limit, a 5xx, a timeout or a dropped connection; ``retry_after``: the
    seconds the server asked to wait, if it said. The message is already free of secrets.
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class ModelSetupError(ReliableError):
    """A model could not be configured or started; the message says how to fix it."""


T = TypeVar("T")


async def to_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``await fn(*args)`` run in a daemon thread of its own.

    Unlike `asyncio.to_thread`, a call that never returns does not hold the event loop's
    executor, a timeout abandons the thread, and the process can still exit.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled: the caller timed out and moved on
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits for this answer any more
            pass

    threading.Thread(target=work, name="pytest-reliable-call", daemon=True).start()
    return await future
