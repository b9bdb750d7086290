"""Circular evaluation (SPEC section 12, after the practitioner's template): an instance counts
as right only if the model picks the right option under every cyclic shift of its options.

With ``circular=True`` on the marker, each instance with options is asked once per cyclic shift
of its options, at the canonical variant (its format, temperature and few-shot count; no
demonstrations), through the same runner. The shift by 0 is the canonical prompt itself, so at
temperature 0 it is the canonical pass's answer, from the cache. ``circular`` = {score, low,
high}: the share of instances right under all shifts, with Wilson's interval (one independent
0/1 outcome per instance), decided by ``min_circular`` under the test's policy on the exact
binomial bound (`stats.binomial_bound`: Wilson's one-sided error exceeds its level near 0 and 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_reliable import stats
from pytest_reliable.calls.runner import Runner
from pytest_reliable.contract.thresholds import MeanStatistic
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.evaluate.evaluation import (
    Calls,
    CellResult,
    PlannedCell,
    RenderedCell,
    numbered_cells,
    run_cells,
)
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.plan.data import record_location
from pytest_reliable.plan.render import render
from pytest_reliable.plan.task import Task
from pytest_reliable.space import Space
from pytest_reliable.space.variant import restrict_order

if TYPE_CHECKING:
    from pytest_reliable.schema.entries import CircularEntry

CIRCULAR = -2
"""The resampling index of circular cells (apart from the resamplings and the canonical pass)."""


class CircularUsageError(ReliableConfigError):
    """``circular=True`` on a task without options: a usage error (exit code 4)."""


@dataclass(frozen=True)
class CircularResult:
    """The circular evaluation's frozen result: the summary and the report take it once."""

    values: np.ndarray
    """Per instance: 1 when right under every shift, else 0."""
    bound: stats.MeanBound
    """The exact binomial bound the threshold is decided on."""
    calls: Calls

    @property
    def score(self) -> float:
        return float(self.values.mean()) if self.values.size else float("nan")

    def means(self) -> Mapping[MeanStatistic, tuple[float, stats.MeanBound]]:
        """What the summary takes (``min_circular`` reads it: `contract.thresholds`)."""
        return {"circular": (self.score, self.bound)}


def circular_cells(dataset: Sequence[dict[str, Any]], task: Task, space: Space,
                   max_tokens: int, nodeid: str) -> list[PlannedCell]:
    """Every cyclic shift of each instance's options at the canonical variant."""
    variant = space.canonical_variant()
    params = SamplingParams(temperature=float(variant.temperature), max_tokens=max_tokens)
    rendered: list[RenderedCell] = []
    for i, example in enumerate(dataset):
        options = task.options(example)
        if not options:
            raise CircularUsageError(
                f"circular=True needs a task with options (MultipleChoice, Classification); "
                f"{task!r} has none for {record_location(dataset, i)}")
        shown = restrict_order(variant.order, len(options))
        for shift in range(len(options)):
            shifted = replace(variant, order=shown[shift:] + shown[:shift])
            prompt = render(space, shifted, example, task, [])
            rendered.append((CIRCULAR, i, shifted, prompt, params))
    return numbered_cells(rendered, nodeid)


def check_circular(dataset: Sequence[dict[str, Any]], task: Task) -> None:
    """Before any call: every instance must have options to shift."""
    for i, example in enumerate(dataset):
        if not task.options(example):
            raise CircularUsageError(
                f"circular=True needs a task with options (MultipleChoice, Classification); "
                f"{task!r} has none for {record_location(dataset, i)}")


def circular_entry(result: CircularResult, confidence: float) -> CircularEntry:
    right, instances = int(result.values.sum()), int(result.values.size)
    low, high = stats.wilson_interval(right, instances, confidence) if instances else (0.0, 1.0)
    return {"score": result.score, "low": float(low), "high": float(high),
            "instances": int(result.values.size),
            "calls": {"made": result.calls.made, "cached": result.calls.cached}}


def run_circular(dataset: Sequence[dict[str, Any]], task: Task, space: Space, max_tokens: int,
                 nodeid: str, runner: Runner) -> CircularResult:
    cells = circular_cells(dataset, task, space, max_tokens, nodeid)
    graded, calls = run_cells(cells, [dataset[c.instance] for c in cells], task, runner)
    return CircularResult(*_scored(graded, len(dataset)), calls)


def _scored(graded: Sequence[CellResult], n_instances: int
            ) -> tuple[np.ndarray, stats.MeanBound]:
    right = np.ones(n_instances, dtype=bool)
    for cell in graded:
        right[cell.instance] &= cell.status == "ok" and cell.score == 1.0
    values = right.astype(np.float64)
    return values, stats.binomial_bound(int(values.sum()), n_instances, of="instances")
