"""Models the session builds and owns, named in user code: `openai_model` and `local_model`.

They are descriptions, not clients: the session turns one into its adapter (one per name, base
URL and key variable), starts the embedded server at most once per process, and closes every
client at the end of the run, so a judge or fixture written at import time leaks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_reliable.models.base import ModelSetupError


@dataclass(frozen=True)
class NamedModel:
    """A model the session builds and owns (started once, closed at the end of the run):
    what `openai_model` and `local_model` return."""

    name: str
    """"local" for the embedded model, else the OpenAI-compatible model name."""
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"


def openai_model(
    name: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY"
) -> NamedModel:
    """The OpenAI-compatible adapter for ``name`` at ``base_url`` (default
    ``--reliable-base-url``), with the API key from the variable ``api_key_env``: usable as a
    judge's model, a ``reliable_model`` or a ``reliable_baseline``."""
    if not isinstance(name, str) or not name or name == "local":
        raise ModelSetupError(f"openai_model({name!r}): give the model's name (for the embedded "
                              "model use local_model())")
    return NamedModel(name, base_url, api_key_env)


def local_model() -> NamedModel:
    """The embedded model (SmolLM2-135M-Instruct under llama.cpp), started once per process."""
    return NamedModel("local")
