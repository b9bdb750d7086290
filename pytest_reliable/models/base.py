"""What every model under test looks like to the rest of the plugin.

A model takes chat messages and sampling parameters and returns a `ModelResponse`. Adapters in
this package turn user callables, the OpenAI-compatible client and the embedded local server into
an `AsyncModel`; the runner only ever sees that protocol.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

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
    """The model protocol the runner drives. ``identity`` keys the cache and names the model."""

    identity: str

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse: ...


@runtime_checkable
class Model(Protocol):
    """The synchronous form of the protocol; adapters wrap it into an `AsyncModel`."""

    identity: str

    def complete(self, messages: list[Message], params: SamplingParams) -> ModelResponse: ...


class ModelError(ReliableError):
    """A model call failed for good (after retries, or with an error that is not retried)."""


class ModelSetupError(ReliableError):
    """A model could not be configured or started; the message says how to fix it."""
