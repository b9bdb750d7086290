"""pytest-reliable: release-gate robustness testing of LLMs.

The core (space, sampling, stats, models, cache) works without pytest. Every public name loads
lazily on first access, so ``import pytest_reliable`` stays cheap (about 8 ms; importing the
modules behind the names costs 0.15 s to 2 s: numpy, scipy, statsmodels) and does not import
pytest. Type checkers see the real names through the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_reliable.checklist.judge_task import JudgeTask
    from pytest_reliable.checklist.report import ChecklistReport
    from pytest_reliable.models.base import ModelResponse, SamplingParams
    from pytest_reliable.models.callables import chat_model, text_model
    from pytest_reliable.models.named import local_model, openai_model
    from pytest_reliable.plan.data import Dataset
    from pytest_reliable.plan.task import Grade, Task
    from pytest_reliable.plugin.fixture import ReliableFixture
    from pytest_reliable.plugin.markers import directional, invariance, mft, reliable
    from pytest_reliable.space import Space, Variant
    from pytest_reliable.tasks.builtin import Classification, Generation, MultipleChoice
    from pytest_reliable.tasks.judge import Judge
    from pytest_reliable.verdict.results import ReliableReport

__version__ = "0.1.0"

# name -> module that defines it; imported on first attribute access. Keep in step with the
# TYPE_CHECKING imports above (tests/test_typing.py checks that they agree).
_LAZY: dict[str, str] = {
    "reliable": "pytest_reliable.plugin.markers",
    "invariance": "pytest_reliable.plugin.markers",
    "directional": "pytest_reliable.plugin.markers",
    "mft": "pytest_reliable.plugin.markers",
    "ReliableFixture": "pytest_reliable.plugin.fixture",
    "ReliableReport": "pytest_reliable.verdict.results",
    "ChecklistReport": "pytest_reliable.checklist.report",
    "text_model": "pytest_reliable.models.callables",
    "chat_model": "pytest_reliable.models.callables",
    "Space": "pytest_reliable.space",
    "Variant": "pytest_reliable.space",
    "Dataset": "pytest_reliable.plan.data",
    "MultipleChoice": "pytest_reliable.tasks.builtin",
    "Classification": "pytest_reliable.tasks.builtin",
    "Generation": "pytest_reliable.tasks.builtin",
    "Task": "pytest_reliable.plan.task",
    "Grade": "pytest_reliable.plan.task",
    "SamplingParams": "pytest_reliable.models.base",
    "ModelResponse": "pytest_reliable.models.base",
    "Judge": "pytest_reliable.tasks.judge",
    "JudgeTask": "pytest_reliable.checklist.judge_task",
    "openai_model": "pytest_reliable.models.named",
    "local_model": "pytest_reliable.models.named",
}

__all__ = [
    "ChecklistReport",
    "Classification",
    "Dataset",
    "Generation",
    "Grade",
    "Judge",
    "JudgeTask",
    "ModelResponse",
    "MultipleChoice",
    "ReliableFixture",
    "ReliableReport",
    "SamplingParams",
    "Space",
    "Task",
    "Variant",
    "__version__",
    "chat_model",
    "directional",
    "invariance",
    "local_model",
    "mft",
    "openai_model",
    "reliable",
    "text_model",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'pytest_reliable' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
