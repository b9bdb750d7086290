"""What every model under test looks like to the rest of the plugin.

A model takes chat messages and sampling parameters and returns a `ModelResponse`. Adapters in
this package turn user callables, the OpenAI-compatible client and the embedded local server into
an `AsyncModel`; the runner only ever sees that protocol.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import math
import reprlib
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

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

    @property
    def identity(self) -> str: ...

    max_concurrency: int | None

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse: ...

    async def aclose(self) -> None: ...


class BatchCapable(AsyncModel, Protocol):
    """A model that also answers through a provider's batch API (``--reliable-batch``; the
    transport is `pytest_reliable.calls.batch.BatchTransport`): the OpenAI-compatible adapter.

    ``batch_client``: the API client of the running loop (its ``files`` and ``batches``
    endpoints, as the ``openai`` package has them); ``batch_line``: one request of the batch's
    input file, under the id ``custom_id``; ``batch_response``: the answer in one output line's
    body, read as a direct call's is (a body without an answer raises a retryable
    `ModelCallError`)."""

    @property
    def batch_client(self) -> Any: ...

    def batch_line(self, custom_id: str, messages: list[Message],
                   params: SamplingParams) -> dict[str, Any]: ...

    def batch_response(self, body: Any, params: SamplingParams) -> ModelResponse: ...


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


class ModelUsageError(ModelSetupError):
    """A model given in a way that cannot work (``chat_model`` on a function of one string, a
    bad ``id=``): a usage error of the run (exit code 4), the message naming the fix."""


class ModelWarning(UserWarning):
    """A model misbehaved in a way the run survived (calls abandoned at the timeout)."""


def model_unavailable(model: object) -> str | None:
    """Why ``model`` can take no more calls in this run, if it says so.

    A model may set an ``unavailable`` attribute (a message; optional, not part of the
    protocol): the OpenAI-compatible adapter does when its server refuses a connection. The
    runner then fails every further call with that message at once, without sending it and
    without taking its share of the budget."""
    why = getattr(model, "unavailable", None)
    return why if isinstance(why, str) and why else None


T = TypeVar("T")


# -- what a model returned -----------------------------------------------------------------------
USAGE_IGNORED = "usage_ignored"
"""`ModelResponse.extra` key: the usage the model reported and the run ignored (not a count)."""
USAGE_FIELDS = ("prompt_tokens", "completion_tokens")
CACHED_PROMPT_TOKENS = "cached_prompt_tokens"
"""`ModelResponse.extra` key: prompt tokens the provider served from its prompt cache."""


def checked_response(value: Any, identity: str) -> ModelResponse:
    """A model's return value as a `ModelResponse`, checked at the boundary: a ``str`` is the
    answer's text; anything else, or a `ModelResponse` whose fields are not what the store keeps
    (``text=None`` above all), is a failed call naming the model and the value, never retried.

    Why not grade ``text=None`` as an empty, unparsed answer: it is an adapter's bug (an API's
    missing content passed on), not the model's answer to the prompt. Graded, it would count as
    a wrong answer in every statistic and be stored, so a replay would repeat the wrong grade
    after the adapter is fixed; failed, it is not stored and the test's verdict is ``error``.

    A bad usage (a negative or non-integer token count) or latency is not the answer: the answer
    is kept (it was paid for), the bad values are dropped (its tokens are then estimated) and
    named in ``extra[USAGE_IGNORED]``, which the runner reports once per model (issue 32).
    """
    if isinstance(value, str):
        return ModelResponse(text=value)
    if not isinstance(value, ModelResponse):
        raise _bad_response(identity, value, "expected str or ModelResponse")
    problem = _response_problem(value)
    if problem is not None:
        raise _bad_response(identity, value, problem)
    return _without_bad_usage(value)


def _is_count(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _without_bad_usage(response: ModelResponse) -> ModelResponse:
    ignored = [f"{name}={getattr(response, name)!r}" for name in USAGE_FIELDS
               if not _is_count(getattr(response, name))]
    cached = response.extra.get(CACHED_PROMPT_TOKENS)
    if not _is_count(cached):
        ignored.append(f"{CACHED_PROMPT_TOKENS}={cached!r}")
    latency = response.latency_s
    bad_latency = (isinstance(latency, bool) or not isinstance(latency, (int, float))
                   or not math.isfinite(latency) or latency < 0)
    if not ignored and not bad_latency:
        return response
    extra = {key: value for key, value in response.extra.items() if key != CACHED_PROMPT_TOKENS
             or _is_count(value)}
    if ignored:
        extra[USAGE_IGNORED] = ", ".join(ignored)[:200]
    return ModelResponse(
        text=response.text, logprobs=response.logprobs,
        prompt_tokens=response.prompt_tokens if _is_count(response.prompt_tokens) else None,
        completion_tokens=(response.completion_tokens if _is_count(response.completion_tokens)
                           else None),
        latency_s=0.0 if bad_latency else float(latency), extra=extra,
    )


def _response_problem(response: ModelResponse) -> str | None:
    if not isinstance(response.text, str):
        return (f"its text must be a str, not {type(response.text).__name__} (return '' for an "
                "empty answer)")
    if response.logprobs is not None and not isinstance(response.logprobs, list):
        return f"its logprobs must be a list or None, not {type(response.logprobs).__name__}"
    if not isinstance(response.extra, dict):
        return f"its extra must be a dict, not {type(response.extra).__name__}"
    return None


def _bad_response(identity: str, value: Any, problem: str) -> ModelCallError:
    from pytest_reliable.redact import redact

    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = 120
    return ModelCallError(
        redact(f"model {identity!r} returned {shown.repr(value)}: {problem}"), retryable=False
    )


# -- sync calls in threads -----------------------------------------------------------------------
ABANDONED_CALLS_MAX = 8
"""At most this many calls of one model, given up at the timeout, may still be running in a
process: past it the runner starts no new call of that model (each says why) until some end. A
sync model's thread that Python cannot stop (blocked in C code, or catching `CallAbandoned`) and
an async model's task that ignores its cancellation each count while they run: abandoned work
must not grow without bound (36 spinning threads kept a run alive long after its summary:
issue 20, item 11)."""


STOP_WAIT_S = 1.0
"""How long a sync call given up on may take to end after it was told to stop: a thread
running Python code ends within a few switch intervals (36 spinning threads: 0.65 s on 2 busy
cores); one still running then cannot be stopped (blocked in C code) and counts."""


class CallAbandoned(BaseException):
    """Raised inside a sync model call's thread when its caller gave up on it (the timeout,
    Ctrl-C): the call ends at its next Python instruction instead of spinning on. A
    `BaseException`, so that a model's own ``except Exception`` does not keep it running."""


class AbandonedCalls:
    """The calls given up on that are still running in this process, per model identity
    (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, set[object]] = {}

    def add(self, model: str, call: object) -> None:
        with self._lock:
            self._running.setdefault(model, set()).add(call)

    def discard(self, model: str, call: object) -> None:
        with self._lock:
            self._running.get(model, set()).discard(call)

    def running(self, model: str) -> int:
        with self._lock:
            return len(self._running.get(model, ()))


abandoned_calls = AbandonedCalls()


def _async_exc_setter() -> Callable[[int, Any], int] | None:
    """CPython's ``PyThreadState_SetAsyncExc`` (``None`` on an interpreter without it): the
    only way to stop another thread, at its next Python instruction."""
    try:
        import ctypes

        api = ctypes.pythonapi
        setter = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
            ("PyThreadState_SetAsyncExc", api))
    except (ImportError, AttributeError, OSError):
        return None
    return cast("Callable[[int, Any], int]", setter)


_set_async_exc = _async_exc_setter()


class _CallThread:
    """One sync call's thread: stoppable with `CallAbandoned` while the call runs, counted in
    `abandoned_calls` (under ``model``) from the moment it is given up on until it ends."""

    def __init__(self, model: str | None) -> None:
        self.model = model
        self.lock = threading.Lock()
        self.ident: int | None = None
        self.running = True
        self.abandoned = False

    def abandon(self) -> bool:
        """Give up on the call: stop it (if it still runs), count it until it ends. True when
        it was still running."""
        with self.lock:
            if not self.running or self.abandoned or self.model is None:
                return False
            self.abandoned = True
            abandoned_calls.add(self.model, self)
            if self.ident is not None and _set_async_exc is not None:
                _set_async_exc(self.ident, id(CallAbandoned))
            return True

    def ended(self) -> None:
        """In the call's own thread, once its function returned or raised."""
        with self.lock:
            self.running = False
            if self.model is not None:
                abandoned_calls.discard(self.model, self)
            if self.abandoned and self.ident is not None and _set_async_exc is not None:
                _set_async_exc(self.ident, None)  # a CallAbandoned not raised yet is dropped


async def to_daemon_thread(fn: Callable[..., T], *args: Any, model: str | None = None) -> T:
    """``await fn(*args)`` run in a daemon thread of its own.

    Unlike `asyncio.to_thread`, a call that never returns does not hold the event loop's
    executor, a timeout abandons the thread, and the process can still exit. ``model`` (a model
    call, by the model's identity): when the awaiting task is cancelled, the thread gets
    `CallAbandoned` at its next Python instruction, the task waits up to `STOP_WAIT_S` for it
    to end, and a thread still running then counts in `abandoned_calls` until it ends.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    finished: asyncio.Future[None] = loop.create_future()
    context = contextvars.copy_context()
    call = _CallThread(model)

    def settle(value: Any, error: BaseException | None) -> None:
        if not finished.done():
            finished.set_result(None)
        if future.done():  # cancelled: the caller timed out and moved on
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        with call.lock:
            call.ident = threading.get_ident()
            given_up = call.abandoned  # before the thread even started
        try:  # from here a CallAbandoned may arrive anywhere until `ended` drops it
            try:
                if given_up:
                    raise CallAbandoned
                value = context.run(fn, *args)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                error = exc
            call.ended()
        except CallAbandoned as late:  # after the call returned, before `ended` dropped it
            error = late
            call.ended()
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits for this answer any more
            pass

    threading.Thread(target=work, name="pytest-reliable-call", daemon=True).start()
    try:
        return await future
    except asyncio.CancelledError:
        if call.abandon():  # stopped at its next Python instruction, unless it is in C code
            await asyncio.wait({finished}, timeout=STOP_WAIT_S)
        raise
