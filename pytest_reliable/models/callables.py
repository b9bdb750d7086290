"""Adapters from user callables and model objects to the `AsyncModel` protocol.

Text models get the messages rendered as one string: the contents of every message (system
first, as given) joined by blank lines. Chat models get ``list[dict]`` messages. A wrapper whose
function's first parameter is annotated for the other kind (``chat_model`` on ``fn(prompt:
str)``) is a `ModelUsageError` naming the right wrapper.

Sampling parameters: a callable receives, as keyword arguments, those of ``temperature``,
``max_tokens``, ``seed`` (the per-sample seed, `models.base.request_seed`), ``top_p`` and
``stop`` it takes by name, or all of them (those that are set) when it takes ``**kwargs``.

What a callable may return (`response_of`): a ``str``; a `ModelResponse`; an object or dict in
the OpenAI shape, whose ``usage`` then prices the call (not estimated):

- an ``openai`` ``ChatCompletion`` or ``Completion`` (``choices[0].message.content`` or
  ``choices[0].text``), or a Responses API ``Response`` (``output_text``), or the same as a dict
  (``resp.model_dump()``, a server's JSON body);
- a dict ``{"text": ..., "usage": {...}}``.

``usage`` holds ``prompt_tokens``/``completion_tokens`` (or ``input_tokens``/``output_tokens``)
and optionally ``prompt_tokens_details.cached_tokens``; counts that are not counts are ignored
(the answer is kept, its tokens estimated: `models.base.checked_response`).

Identity: the given ``id`` (with ``version``: ``id@version``); ``version`` alone:
``module.qualname@version``; neither: `models.identity` (the callable's module and the project
modules it imports, hashed; run-scoped where its source cannot be established).
"""

from __future__ import annotations

import collections.abc as cabc
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pytest_reliable.models.base import (
    CACHED_PROMPT_TOKENS,
    AsyncModel,
    Message,
    ModelResponse,
    ModelUsageError,
    SamplingParams,
    checked_response,
    model_unavailable,
    request_seed,
    to_daemon_thread,
)
from pytest_reliable.models.identity import Identity, ProjectModules, named_target
from pytest_reliable.models.openai_compat import render_text_prompt

SAMPLING_ARGUMENTS = ("temperature", "max_tokens", "seed", "top_p", "stop")
"""What a callable may receive, by name or through ``**kwargs`` (SPEC section 2)."""


def text_model(fn: Callable[..., Any], id: str | None = None, *,
               version: str | int | None = None) -> AsyncModel:
    """``fn(prompt: str, [temperature=, max_tokens=, seed=, ...]) -> str | ModelResponse |
    OpenAI-shaped response`` (sync or async). ``id``/``version``: the identity, as your promise
    that answers cached under it stay valid (else it is derived from the code)."""
    return _CallableModel(fn, "text", id, version, wrapper="text_model")


def chat_model(fn: Callable[..., Any], id: str | None = None, *,
               version: str | int | None = None) -> AsyncModel:
    """``fn(messages: list[dict], [temperature=, ...]) -> ...``: as `text_model`, on chat
    messages."""
    return _CallableModel(fn, "chat", id, version, wrapper="chat_model")


def callable_identity(fn: Callable[..., Any], root: str | None = None) -> str:
    """The identity of an unnamed callable (see `models.identity`)."""
    return ProjectModules(root).identity_of(fn).name


# -- what the callable takes ----------------------------------------------------------------------
def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn, eval_str=True)
    except (TypeError, ValueError):
        return None  # not introspectable (some built-ins)
    except Exception:  # noqa: BLE001, S110 - NameError & co.: an annotation not evaluable
        pass
    try:
        return inspect.signature(fn)  # its string annotations as written
    except (TypeError, ValueError):
        return None


def _positional(sig: inspect.Signature) -> list[inspect.Parameter]:
    return [p for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _annotation_kind(ann: Any) -> str | None:
    """"text" (one string), "chat" (a sequence of messages), or None (either, or unknown)."""
    if ann is inspect.Parameter.empty or ann is Any:
        return None
    if isinstance(ann, str):
        low = ann.replace(" ", "").lower()
        if low in ("str", "builtins.str"):
            return "text"
        if low.startswith(("list", "typing.list", "sequence", "typing.sequence",
                           "collections.abc.sequence", "iterable", "tuple")):
            return "chat"
        return None
    if ann is str:
        return "text"
    origin = typing.get_origin(ann) or ann
    if origin is typing.Union or origin is types.UnionType:
        kinds = {_annotation_kind(arg) for arg in typing.get_args(ann) if arg is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if origin in (list, tuple, cabc.Sequence, cabc.Iterable, cabc.MutableSequence) or (
            isinstance(origin, type) and issubclass(origin, list)):
        return "chat"
    return None


def _first_param_kind(fn: Callable[..., Any]) -> str:
    """What a plain callable takes: "chat" when its first parameter is annotated as a
    sequence, else "text" (unannotated plain callables are text models: SPEC section 2)."""
    sig = _signature(fn)
    params = _positional(sig) if sig is not None else []
    return (_annotation_kind(params[0].annotation) if params else None) or "text"


def _sampling_arguments(sig: inspect.Signature | None) -> frozenset[str]:
    """The sampling parameters a callable takes by name (not its first, the prompt), or all
    through ``**kwargs``."""
    if sig is None:
        return frozenset()
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset(SAMPLING_ARGUMENTS)
    first = _positional(sig)[:1]
    return frozenset(p.name for p in params if p.name in SAMPLING_ARGUMENTS and p not in first
                     and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _check_wrapper(fn: Callable[..., Any], sig: inspect.Signature | None, kind: str,
                   wrapper: str) -> None:
    params = _positional(sig) if sig is not None else []
    if not params:
        return
    found = _annotation_kind(params[0].annotation)
    if found is None or found == kind:
        return
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    shown = f"{params[0].name}: {inspect.formatannotation(params[0].annotation)}"
    if kind == "chat":
        raise ModelUsageError(
            f"chat_model({name}): its first parameter `{shown}` takes the prompt as one string, "
            f"but chat_model passes a list of chat messages: use text_model({name})")
    raise ModelUsageError(
        f"text_model({name}): its first parameter `{shown}` takes chat messages, but text_model "
        f"passes the prompt as one string: use chat_model({name})")


def _declared_identity(fn: Any, id: Any, version: Any, wrapper: str) -> str | None:
    if id is not None and (not isinstance(id, str) or not id.strip()):
        raise ModelUsageError(f"{wrapper}(..., id={id!r}): give the model's identity as a "
                              "non-empty string, or no id (it is then derived from the code)")
    if version is not None and (isinstance(version, bool) or not isinstance(version, str | int)
                                or not str(version).strip()):
        raise ModelUsageError(f"{wrapper}(..., version={version!r}): give a non-empty string "
                              "or an integer (e.g. version='2024-06-01' or version=3)")
    if version is None:
        return id
    if id is None:
        named = named_target(fn)
        module = getattr(named, "__module__", None) or "__main__"
        id = f"{module}.{getattr(named, '__qualname__', type(named).__qualname__)}"
    return f"{id}@{version}"


# -- what the callable returned --------------------------------------------------------------------
def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _text_of(value: Any) -> tuple[bool, Any]:
    """(recognised, text) of an OpenAI-shaped response (the text may be None: no content)."""
    if isinstance(value, Mapping) and "text" in value:
        return True, value["text"]
    output_text = None if isinstance(value, Mapping) else getattr(value, "output_text", None)
    if isinstance(output_text, str):
        return True, output_text
    choices = _field(value, "choices")
    if isinstance(choices, list | tuple):
        if not choices:
            return False, None
        message = _field(choices[0], "message")
        if message is not None:
            return True, _field(message, "content")
        return True, _field(choices[0], "text")
    return False, None


def response_of(value: Any) -> Any:
    """A callable's return value as a `ModelResponse` when it has the OpenAI shape (see the
    module docstring); anything else is returned as it is (for `checked_response` to judge)."""
    if isinstance(value, str | ModelResponse) or value is None:
        return value
    recognised, text = _text_of(value)
    if not recognised:
        return value
    usage = _field(value, "usage")
    prompt = completion = cached = None
    if usage is not None:
        prompt = _field(usage, "prompt_tokens")
        prompt = _field(usage, "input_tokens") if prompt is None else prompt
        completion = _field(usage, "completion_tokens")
        completion = _field(usage, "output_tokens") if completion is None else completion
        details = _field(usage, "prompt_tokens_details") or _field(usage, "input_tokens_details")
        cached = _field(details, "cached_tokens") if details is not None else None
    extra: dict[str, Any] = {}
    if cached:
        extra[CACHED_PROMPT_TOKENS] = cached
    # An API's missing content (a refusal, a tool call) is an empty answer, as the built-in
    # adapter reads it; a text of another type is the callable's bug (checked_response says so).
    return ModelResponse(text="" if text is None else text, prompt_tokens=prompt,
                         completion_tokens=completion, extra=extra)


class _CallableModel:
    """A user's function as a model. Its identity is computed on first use, under the rootdir
    the session gives (`bound`), or the current directory without one."""

    max_concurrency: int | None = None

    def __init__(self, fn: Callable[..., Any], kind: str, id: str | None = None,
                 version: str | int | None = None, *, wrapper: str | None = None,
                 project: ProjectModules | None = None) -> None:
        named = wrapper or "as_async_model"
        if not callable(fn):
            raise ModelUsageError(f"{named}({fn!r}): not callable; give the function that "
                                  "answers a prompt")
        sig = _signature(fn)
        if wrapper is not None:
            _check_wrapper(fn, sig, kind, wrapper)
        self.fn = fn
        self.kind = kind
        self.id = id
        self.version = version
        self.wrapper = wrapper
        declared = _declared_identity(fn, id, version, named)
        self._identity: Identity | None = Identity(declared) if declared is not None else None
        self._project = project
        if self._identity is None and project is not None:
            self._identity = project.identity_of(fn)
        self.sampling_arguments = _sampling_arguments(sig)
        """What it takes of `SAMPLING_ARGUMENTS` (by name or through ``**kwargs``)."""
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(type(fn), "__call__", None)  # noqa: B004
        )

    def _resolved(self) -> Identity:
        if self._identity is None:
            self._identity = ProjectModules().identity_of(self.fn)
        return self._identity

    @property
    def identity(self) -> str:
        return self._resolved().name

    @property
    def run_scoped(self) -> str | None:
        """Why its answers are reused within the run only (None: they are stored)."""
        return self._resolved().run_scoped

    def bound(self, project: ProjectModules, id: str | None = None) -> _CallableModel:
        """This model with its identity computed under ``project``; ``id``: under that
        identity instead, as given (a judge's ``id``)."""
        if id is not None:
            return _CallableModel(self.fn, self.kind, id, wrapper=self.wrapper)
        declared = self.id is not None or self.version is not None
        if declared or self._project is project:
            return self
        return _CallableModel(self.fn, self.kind, wrapper=self.wrapper, project=project)

    def __repr__(self) -> str:
        return f"<{self.kind} model {self.identity}>"

    def _arguments(self, params: SamplingParams) -> dict[str, Any]:
        offered: dict[str, Any] = {"temperature": params.temperature,
                                   "max_tokens": params.max_tokens}
        seed = request_seed.get()
        if seed is not None:
            offered["seed"] = seed
        if params.top_p is not None:
            offered["top_p"] = params.top_p
        if params.stop is not None:
            offered["stop"] = list(params.stop)
        return {name: value for name, value in offered.items()
                if name in self.sampling_arguments}

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        arg: Any = (
            render_text_prompt(messages) if self.kind == "text" else [dict(m) for m in messages]
        )
        kwargs = self._arguments(params)
        if self._is_async:
            value = await self.fn(arg, **kwargs)
        else:
            value = await to_daemon_thread(self._call_sync, arg, kwargs, model=self.identity)
            if inspect.isawaitable(value):
                value = await value
        return checked_response(response_of(value), self.identity)

    def _call_sync(self, arg: Any, kwargs: dict[str, Any]) -> Any:
        return self.fn(arg, **kwargs)

    async def aclose(self) -> None:
        """A user callable owns no client of ours."""


class _SyncProtocolModel:
    def __init__(self, obj: Any, id: str | None, project: ProjectModules | None = None) -> None:
        self.obj = obj
        declared = id or getattr(obj, "identity", None)
        found = Identity(declared) if declared else (project or ProjectModules()).identity_of(obj)
        self.identity = found.name
        self.run_scoped = found.run_scoped
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

    def __init__(self, inner: Any, id: str, run_scoped: str | None = None) -> None:
        self.inner = inner
        self.identity = id
        self.run_scoped = run_scoped
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


def run_scoped(model: Any) -> str | None:
    """Why ``model``'s answers may not outlive the run (None: they are stored as any model's)."""
    why = getattr(model, "run_scoped", None)
    return why if isinstance(why, str) and why else None


def as_async_model(obj: Any, *, id: str | None = None,
                   project: ProjectModules | None = None) -> AsyncModel:
    """Turn whatever ``reliable_model`` returned into an `AsyncModel`. ``project``: the run's
    modules, under which an unnamed callable's identity is computed (default: the current
    directory's)."""
    if isinstance(obj, _CallableModel):
        if project is None and id is None:
            return obj
        return obj.bound(project or ProjectModules(), id)
    if hasattr(obj, "acomplete") and callable(obj.acomplete):
        ident = id or getattr(obj, "identity", None)
        if ident is None:
            found = (project or ProjectModules()).identity_of(obj)
            return _IdentityOverride(obj, found.name, found.run_scoped)
        if ident == getattr(obj, "identity", None) and isinstance(obj, AsyncModel):
            return obj
        return _IdentityOverride(obj, ident)  # also turns a plain str result into a ModelResponse
    if hasattr(obj, "complete") and callable(obj.complete):
        return _SyncProtocolModel(obj, id, project)
    if callable(obj):
        return _CallableModel(obj, _first_param_kind(obj), id, project=project)
    raise ModelUsageError(
        f"reliable_model returned {type(obj).__name__}: expected a callable on a prompt string or "
        "on chat messages, or an object with acomplete/complete"
    )
