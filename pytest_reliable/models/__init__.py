"""Model adapters: user callables, the OpenAI-compatible client, the embedded local model; and
`identity`, what an unnamed callable's cache identity covers (its module and the project modules
it imports)."""

from pytest_reliable.models.base import (
    AsyncModel,
    Message,
    Model,
    ModelError,
    ModelResponse,
    ModelSetupError,
    ModelUsageError,
    ModelWarning,
    SamplingParams,
)

__all__ = [
    "AsyncModel",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "ModelSetupError",
    "ModelUsageError",
    "ModelWarning",
    "SamplingParams",
]
