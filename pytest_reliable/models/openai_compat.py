"""The built-in OpenAI-compatible adapter (the real ``openai`` client).

Works against OpenAI, vLLM, llama.cpp's server, Ollama, LM Studio. Retries and timeouts belong to
the runner: the client is built with ``max_retries=0`` and no timeout of its own, and every failure
reaches the runner as a `ModelCallError` saying whether to retry (rate limits, 5xx, timeouts,
dropped connections, malformed bodies) and after how long, its text free of the key.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import reprlib
import time
import weakref
from typing import Any
from urllib.parse import urlparse

from pytest_reliable.models.base import (
    Message,
    ModelCallError,
    ModelResponse,
    ModelSetupError,
    SamplingParams,
    request_seed,
)
from pytest_reliable.redact import redact, register_secret, register_url_secrets

DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_DUMMY_KEY = "sk-local-no-key"


def render_text_prompt(messages: list[Message]) -> str:
    """Messages as one text prompt: the contents in order, separated by blank lines."""
    return "\n\n".join(m.get("content", "") for m in messages)


def url_host(base_url: str | None) -> str:
    host = urlparse(base_url or DEFAULT_BASE_URL).hostname or "localhost"
    return host.lower()


def is_loopback(base_url: str | None) -> bool:
    host = url_host(base_url)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def retry_after_seconds(headers: Any) -> float | None:
    """The Retry-After header in seconds (the delta form), if present and readable."""
    try:
        value = headers.get("retry-after")
        return None if value is None else max(0.0, float(value))
    except (ValueError, AttributeError, TypeError):
        return None


class OpenAICompatibleModel:
    """``identity = f"openai:{model}@{host}"`` (never the port, never the key).

    ``send_seed``: send each call's seed (`request_seed`, derived from its cache key) as the
    request's ``seed``, so a server that honours it (llama.cpp, vLLM) draws the same sample for
    the same call in every run. Off by default: not every OpenAI-compatible service accepts the
    field, and one that rejects it would fail every call. The embedded model turns it on.

    ``refused_fix``: what to do when no server listens at the URL (said once, in the error of
    every call: see `_refused_error`).
    """

    max_concurrency: int | None = None
    """A remote server: ``--reliable-concurrency`` or the session's remote default."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        use_completions: bool = False,
        send_seed: bool = False,
        refused_fix: str = "start the server, or fix --reliable-base-url",
    ) -> None:
        try:
            import openai  # noqa: F401
        except ImportError:  # pragma: no cover
            raise ModelSetupError("the openai package is required: pip install openai") from None
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.use_completions = use_completions
        self.send_seed = send_seed
        self.refused_fix = refused_fix
        self.identity = f"openai:{model}@{url_host(base_url)}"
        self.unavailable: str | None = None
        """Set when the server refused a connection: every later call fails at once with it
        (see `models.base.model_unavailable`)."""
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        if not key:
            if is_loopback(base_url):
                key = LOCAL_DUMMY_KEY
            else:
                raise ModelSetupError(
                    f"no API key for model {model!r} at {url_host(base_url)}: set the environment "
                    f"variable {api_key_env} (or name another one with --reliable-api-key-env)"
                )
        register_secret(key)
        register_url_secrets(base_url)
        self._key = _Secret(key)
        del key
        # httpx binds its connection pool to one event loop. Calls run on the run's one loop, so
        # there is one client; an async test's `aevaluate` runs them on the test's loop instead.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def _client(self) -> Any:
        import openai

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._key.value,
                base_url=self.base_url or DEFAULT_BASE_URL,
                max_retries=0,
                timeout=None,
            )
            self._clients[loop] = client
        return client

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel({self.identity!r})"

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        import openai

        if self.unavailable is not None:
            raise ModelCallError(self.unavailable, retryable=False)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
        }
        if params.top_p is not None:
            kwargs["top_p"] = params.top_p
        if params.stop:
            kwargs["stop"] = list(params.stop)
        seed = request_seed.get() if self.send_seed else None
        if seed is not None:
            kwargs["seed"] = seed
        start = time.perf_counter()
        chat = not self.uses_completions(params)
        try:
            # The raw body, so this path and a batch's output line are read by one function.
            if chat:
                raw = await self._client.chat.completions.with_raw_response.create(
                    messages=messages, **kwargs)
            else:
                if params.logprobs is not None:
                    kwargs["logprobs"] = params.logprobs
                raw = await self._client.completions.with_raw_response.create(
                    prompt=render_text_prompt(messages), **kwargs)
            body = json.loads(raw.http_response.content)
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except (openai.APIConnectionError, openai.APIResponseValidationError) as exc:
            if _refused(exc):
                raise self._refused_error() from None
            # APITimeoutError is an APIConnectionError; a malformed body is a glitch like a 5xx.
            raise ModelCallError(_exc_text(exc), retryable=True) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelCallError(_exc_text(exc), retryable=True) from None
        response = response_from_body(body, chat=chat)
        response.latency_s = time.perf_counter() - start
        if seed is not None:
            response.extra["seed"] = seed
        return response

    def uses_completions(self, params: SamplingParams) -> bool:
        """Whether a call with ``params`` goes to the completions endpoint (log-probabilities, or
        ``use_completions``) rather than chat completions."""
        return params.logprobs is not None or self.use_completions

    def _refused_error(self) -> ModelCallError:
        """No server listens at the base URL: said once, and never tried again in this run (a
        dead server used to cost six attempts with backoff per call: 275 s for ten items)."""
        if self.unavailable is None:
            url = redact(self.base_url or DEFAULT_BASE_URL)
            self.unavailable = (
                f"connection refused at {url}: no server is listening there ({self.refused_fix}); "
                "no other call of this run is sent to it"
            )
        return ModelCallError(self.unavailable, retryable=False)

    # -- the batch API (SPEC section 13; `models.base.BatchCapable`, `calls.batch` drives it) -------
    def batch_line(self, custom_id: str, messages: list[Message],
                   params: SamplingParams) -> dict[str, Any]:
        """One request of a batch input file: the body `acomplete` would send."""
        body: dict[str, Any] = {"model": self.model, "temperature": params.temperature,
                                "max_tokens": params.max_tokens}
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop"] = list(params.stop)
        if self.uses_completions(params):
            if params.logprobs is not None:
                body["logprobs"] = params.logprobs
            body["prompt"] = render_text_prompt(messages)
            url = "/v1/completions"
        else:
            body["messages"] = messages
            url = "/v1/chat/completions"
        return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}

    def batch_response(self, body: Any, params: SamplingParams) -> ModelResponse:
        """The answer in a batch output line's body (`response_from_body`, as a direct call's)."""
        return response_from_body(body, chat=not self.uses_completions(params), batch=True)

    @property
    def batch_client(self) -> Any:
        """The client of the running loop (files and batches endpoints)."""
        return self._client

    def _status_error(self, exc: Any) -> ModelCallError:
        status = int(exc.status_code)
        if status == 401:
            return ModelCallError(
                f"AuthenticationError: authentication failed at {url_host(self.base_url)} "
                f"(HTTP 401): check the API key in the environment variable {self.api_key_env}",
                retryable=False,
            )
        retryable = status in (408, 429) or status >= 500
        after = retry_after_seconds(getattr(exc.response, "headers", None))
        return ModelCallError(_exc_text(exc), retryable=retryable, retry_after=after)

    async def aclose(self) -> None:
        """Close every client: the one of the running loop here, those of other live loops
        there; clients of closed loops are dropped."""
        running = asyncio.get_running_loop()
        clients, self._clients = list(self._clients.items()), weakref.WeakKeyDictionary()
        for loop, client in clients:
            if loop is running:
                await client.close()
            elif not loop.is_closed() and loop.is_running():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.close(), loop))


def _refused(exc: BaseException) -> bool:
    """Whether a connection error was a refused connection (somewhere in its chain of causes:
    the client wraps the socket's error in two or three of its own)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ConnectionRefusedError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False

def response_from_body(body: Any, *, chat: bool, batch: bool = False) -> ModelResponse:
    """The answer in a response body of the chat-completions (``chat``) or completions endpoint,
    as the API sent it (JSON): the one reading of a response, for a direct call and for a batch's
    output line alike (``batch``: marked so in ``extra``).

    A body without an answer (not an object, no ``choices``, a choice without a message or text)
    raises a retryable `ModelCallError`, a glitch like a malformed body: never an empty answer,
    which would be graded wrong and stored, so every replay would repeat the wrong grade. A chat
    message with no content but a refusal answers with the refusal (the model's own answer).
    Counts the server got wrong (not an int >= 0) are dropped: the answer is kept, its price is
    then estimated."""
    if not isinstance(body, dict):
        raise _no_answer(f"the response is {type(body).__name__}, not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _no_answer(f"the response has no choices ({_shown(choices)})")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _no_answer(f"its first choice is {_shown(choice)}, not an object")
    logprobs = None
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _no_answer(f"its first choice has no message ({_shown(message)})")
        text = message.get("content")
        if text is None and isinstance(message.get("refusal"), str):
            text = message["refusal"]
        if not isinstance(text, str):
            raise _no_answer(f"its message has no text content ({_shown(text)}, finish_reason "
                             f"{_shown(choice.get('finish_reason'))})")
    else:
        text = choice.get("text")
        if not isinstance(text, str):
            raise _no_answer(f"its first choice has no text ({_shown(text)})")
        logprobs = _logprobs(choice.get("logprobs"))
    usage = _object(body.get("usage"))
    extra: dict[str, Any] = {"batch": True} if batch else {}
    # The provider's prompt cache (priced at cached_input, SPEC section 13).
    cached = _count(_object(usage.get("prompt_tokens_details")).get("cached_tokens"))
    if cached:
        extra["cached_prompt_tokens"] = cached
    return ModelResponse(text=text, logprobs=logprobs,
                         prompt_tokens=_count(usage.get("prompt_tokens")),
                         completion_tokens=_count(usage.get("completion_tokens")), extra=extra)


def _logprobs(lp: Any) -> list[dict[str, Any]] | None:
    """A completions choice's ``logprobs`` as the plugin keeps them (None if absent or odd)."""
    if not isinstance(lp, dict) or not isinstance(lp.get("tokens"), list):
        return None
    tokens: list[Any] = lp["tokens"]
    values = lp.get("token_logprobs")
    tops = lp.get("top_logprobs")
    return [{"token": t, "logprob": lg, "top": top} for t, lg, top in zip(
        tokens, values if isinstance(values, list) else [],
        tops if isinstance(tops, list) else [None] * len(tokens))]


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _shown(value: Any) -> str:
    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = 60
    return shown.repr(value)


def _no_answer(problem: str) -> ModelCallError:
    return ModelCallError(redact(f"malformed response: {problem}"), retryable=True)


def _exc_text(exc: BaseException) -> str:
    """``Type: message``, without secrets (a server may echo the key in its error body)."""
    return redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


class _Secret:
    """Holds the API key; its repr never shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "_Secret(***)"
