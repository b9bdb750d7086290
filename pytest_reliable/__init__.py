"""pytest-reliable: release-gate robustness testing of LLMs.

The core (space, sampling, stats, models, cache) works without pytest. The pytest-facing names
(`reliable`, `invariance`, `directional`, `mft`) are the plugin's markers and load lazily, so
``import pytest_reliable`` does not import pytest.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# name -> module that defines it; imported on first attribute access.
_LAZY: dict[str, str] = {
    "reliable": "pytest_reliable.plugin",
    "invariance": "pytest_reliable.plugin",
    "directional": "pytest_reliable.plugin",
    "mft": "pytest_reliable.plugin",
    "text_model": "pytest_reliable.models.callables",
    "chat_model": "pytest_reliable.models.callables",
    "Space": "pytest_reliable.space",
    "Variant": "pytest_reliable.space",
    "Dataset": "pytest_reliable.data",
    "MultipleChoice": "pytest_reliable.tasks",
    "Classification": "pytest_reliable.tasks",
    "Generation": "pytest_reliable.tasks",
    "SamplingParams": "pytest_reliable.models.base",
    "ModelResponse": "pytest_reliable.models.base",
}

__all__ = ["__version__", *_LAZY]  # noqa: PLE0604 - the lazy names are the public API


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'pytest_reliable' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
