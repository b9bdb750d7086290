"""Model adapters: user callables, the OpenAI-compatible client, the embedded local model."""

from pytest_reliable.models.base import (
    AsyncModel,
    Message,
    Model,
    ModelError,
    ModelResponse,
    ModelSetupError,
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
    "ModelWarning",
    "SamplingParams",
]
