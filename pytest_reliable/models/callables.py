"""Adapters from user callables and model objects to the `AsyncModel` protocol.

Text models get the messages rendered as one string: the contents of every message (system
first, as given) joined by blank lines. Chat models get ``list[dict]`` messages.

Identity: the given ``id``; else ``module.qualname@<sha256(source)[:12]>``. When the source is
not available (built-ins, ``exec``-made functions, REPL), the hash is over the function's
bytecode, constants and names instead (``@code-<hash>``), still changing when the body changes.
"""

from __future__ import annotations

import hashlib
import inspect
import typing
from collections.abc import Callable
from typing import Any

from pytest_reliable.files import sha256_hex
from pytest_reliable.models.base import (
    AsyncModel,
    Message,
    ModelResponse,
    ModelSetupError,
    SamplingParams,
    checked_response,
    model_unavailable,
    to_daemon_thread,
)
from pytest_reliable.models.openai_compat import render_text_prompt


def text_model(fn: Callable[..., Any], id: str | None = None) -> AsyncModel:
    """``fn(prompt: str) -> str | ModelResponse`` (sync or async)."""
    return _CallableModel(fn, "text", id)


def chat_model(fn: Callable[..., Any], id: str | None = None) -> AsyncModel:
    """``fn(messages: list[dict]) -> str | ModelResponse`` (sync or async)."""
    return _CallableModel(fn, "chat", id)


def _code_hash(code: Any) -> str:
    h = hashlib.sha256()

    def feed(c: Any) -> None:
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if inspect.iscode(const):
                feed(const)
            else:
                h.update(repr(const).encode())

    feed(code)
    return h.hexdigest()[:12]


def callable_identity(fn: Callable[..., Any]) -> str:
    target = inspect.unwrap(fn) if callable(fn) else fn
    if not (inspect.isfunction(target) or inspect.ismethod(target)) and not inspect.isclass(target):
        target = type(target)  # a callable object: its class
    module = getattr(target, "__module__", None) or "__main__"
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    try:
        source = inspect.getsource(target)
        digest = sha256_hex(source)[:12]
    except (OSError, TypeError):
        code = getattr(getattr(target, "__func__", target), "__code__", None)
        digest = f"code-{_code_hash(code)}" if code is not None else "nosource"
    return f"{module}.{qualname}@{digest}"


def _first_param_kind(fn: Callable[..., Any]) -> str:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "text"
    params = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if not params:
        return "text"
    ann = params[0].annotation
    if ann is inspect.Parameter.empty:
        return "text"
    if isinstance(ann, str):
        try:
            ann = typing.get_type_hints(fn).get(params[0].name, ann)
        except Exception:  # noqa: BLE001
            low = ann.replace(" ", "").lower()
            return "chat" if low.startswith(("list", "sequence", "typing.list")) else "text"
    if ann is str:
        return "text"
    origin = typing.get_origin(ann) or ann
    if origin in (list, tuple) or (isinstance(origin, type) and issubclass(origin, (list,))):
        return "chat"
    import collections.abc as cabc

    if origin in (cabc.Sequence, cabc.Iterable, cabc.MutableSequence):
        return "chat"
    return "text"


class _CallableModel:
    max_concurrency: int | None = None

    def __init__(self, fn: Callable[..., Any], kind: str, id: str | None) -> None:
        if not callable(fn):
            raise ModelSetupError(f"{fn!r} is not callable")
        self.fn = fn
        self.kind = kind
        self.identity = id or callable_identity(fn)
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(type(fn), "__call__", None)  # noqa: B004
        )

    def __repr__(self) -> str:
        return f"<{self.kind} model {self.identity}>"

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        arg: Any = (
            render_text_prompt(messages) if self.kind == "text" else [dict(m) for m in messages]
        )
        if self._is_async:
            value = await self.fn(arg)
        else:
            value = await to_daemon_thread(self.fn, arg, model=self.identity)
            if inspect.isawaitable(value):
                value = await value
        return checked_response(value, self.identity)

    async def aclose(self) -> None:
        """A user callable owns no client of ours."""


class _SyncProtocolModel:
    def __init__(self, obj: Any, id: str | None) -> None:
        self.obj = obj
        self.identity = id or getattr(obj, "identity", None) or callable_identity(obj)
        self.max_concurrency: int | None = getattr(obj, "max_concurrency", None)

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        value = await to_daemon_thread(self.obj.complete, messages, params, model=self.identity)
        return checked_response(value, self.identity)

    async def aclose(self) -> None:
        close = getattr(self.obj, "close", None)
        if callable(close):
            await to_daemon_thread(close)


class _IdentityOverride:
    """A user's async model object under another identity, or lacking part of the protocol."""

    def __init__(self, inner: Any, id: str) -> None:
        self.inner = inner
        self.identity = id
        self.max_concurrency: int | None = getattr(inner, "max_concurrency", None)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if callable(close):
            await close()

    @property
    def unavailable(self) -> str | None:
        return model_unavailable(self.inner)

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        return checked_response(await self.inner.acomplete(messages, params), self.identity)


def as_async_model(obj: Any, *, id: str | None = None) -> AsyncModel:
    """Turn whatever ``reliable_model`` returned into an `AsyncModel`."""
    if isinstance(obj, _CallableModel):
        return obj if id is None else _CallableModel(obj.fn, obj.kind, id)
    if hasattr(obj, "acomplete") and callable(obj.acomplete):
        ident = id or getattr(obj, "identity", None)
        if ident is None:
            return _IdentityOverride(obj, callable_identity(obj))
        if ident == getattr(obj, "identity", None) and isinstance(obj, AsyncModel):
            return obj
        return _IdentityOverride(obj, ident)  # also turns a plain str result into a ModelResponse
    if hasattr(obj, "complete") and callable(obj.complete):
        return _SyncProtocolModel(obj, id)
    if callable(obj):
        return _CallableModel(obj, _first_param_kind(obj), id)
    raise ModelSetupError(
        f"reliable_model returned {type(obj).__name__}: expected a callable on a prompt string or on "
        "chat messages, or an object with acomplete/complete"
    )
