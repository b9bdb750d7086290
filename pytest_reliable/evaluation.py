"""One evaluation, as data: plan x dataset -> prompts -> responses -> the score matrix.

`evaluate` is the core's whole pipeline for one test and needs no pytest: a notebook can call it
with a `Runner` and get the same `ScoreMatrix` the plugin reports on. Every number in every report
is a function of that matrix (see `summary.py`).

Both test kinds share one render-run-grade pipeline: cells are rendered (`plan_cells` for
reliable tests, `greedy_cells` for CheckList tests), then `run_cells` numbers their samples, runs
them through the `Runner`, counts the calls made and cached, lists the calls that did not
complete and grades every answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_reliable.models.base import SamplingParams
from pytest_reliable.render import Prompt, render
from pytest_reliable.runner import CallResult, Request, Runner, number_samples
from pytest_reliable.sampling import Cell as PlanCell
from pytest_reliable.sampling import make_plan
from pytest_reliable.space import Space, Variant
from pytest_reliable.tasks import Task

CANONICAL = -1
"""The resampling index of the canonical pass's cells."""


@dataclass(frozen=True)
class EvaluationSettings:
    """What one `evaluate` call runs: ``n`` resamplings plus a canonical pass of ``k`` samples."""

    n: int
    mode: str = "ilr"
    seed: int = 0
    """The test's own seed (already derived from the session seed and the nodeid)."""
    k: int = 1
    temperature: float | None = None
    """Temperature of the canonical pass; None = the canonical variant's."""
    max_tokens: int = 32
    nodeid: str = ""
    """Scopes sample indexes at temperature > 0 and names the test in cache-miss errors."""


@dataclass
class CellResult:
    """One rendered prompt, its answer and its grade."""

    resampling: int
    instance: int
    sample: int
    variant: Variant
    prompt: Prompt
    params: SamplingParams
    text: str | None = None
    score: float = 0.0
    parsed: bool = False
    prediction: Any = None
    status: str = "ok"
    error: str | None = None


@dataclass
class ScoreMatrix:
    """Scores of ``n`` resamplings x ``N`` instances, the canonical pass, and the cells behind them."""

    scores: np.ndarray
    """(n, N): the score of instance i in resampling r."""
    parsed: np.ndarray
    """(n, N): whether the answer could be parsed."""
    canonical_scores: np.ndarray
    """(k, N): the canonical pass, sample j of instance i."""
    canonical_parsed: np.ndarray
    cells: list[CellResult]
    """Resampling cells in plan order (r-major), then the canonical cells."""
    calls_made: int = 0
    calls_cached: int = 0
    problems: list[str] = field(default_factory=list)
    """Calls that were not run (budget) or failed for good, one line each."""

    @property
    def n_resamplings(self) -> int:
        return int(self.scores.shape[0])

    @property
    def n_instances(self) -> int:
        return int(self.scores.shape[1])

    def resampling_scores(self) -> np.ndarray:
        """One score per resampling (the mean over instances): what moments, ranges and n* use."""
        return np.asarray(self.scores.mean(axis=1), dtype=np.float64)

    def resampling_cells(self) -> list[CellResult]:
        return [c for c in self.cells if c.resampling != CANONICAL]

    def canonical_cells(self) -> list[CellResult]:
        return [c for c in self.cells if c.resampling == CANONICAL]

    def head(self, n: int) -> ScoreMatrix:
        """The first ``n`` resamplings (plans are prefix-consistent), with the same canonical pass.

        Call counts stay those of the whole evaluation: the calls were made.
        """
        return replace(
            self,
            scores=self.scores[:n],
            parsed=self.parsed[:n],
            cells=[c for c in self.cells if c.resampling < n],
        )


@dataclass
class Calls:
    """What running some cells cost: calls made, calls served from the cache, and one line per
    call that did not complete (budget, failure)."""

    made: int = 0
    cached: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, other: Calls) -> None:
        self.made += other.made
        self.cached += other.cached
        self.problems.extend(other.problems)


def evaluate(
    dataset: Sequence[dict[str, Any]],
    task: Task,
    space: Space,
    settings: EvaluationSettings,
    runner: Runner,
) -> ScoreMatrix:
    """Run ``settings.n`` resamplings and the canonical pass of ``dataset`` under ``space``."""
    cells = plan_cells(dataset, task, space, settings)
    calls = run_cells(cells, [dataset[c.instance] for c in cells], task, runner, settings.nodeid)
    return _score_matrix(cells, calls, settings, len(dataset))


def number_cells(cells: Sequence[CellResult], nodeid: str) -> list[Request]:
    """The cells' requests with sample indexes in cell order (`number_samples`), written back
    into the cells: the cache keys."""
    requests = number_samples([(list(c.prompt.messages), c.params) for c in cells], nodeid)
    for cell, request in zip(cells, requests):
        cell.sample = request.sample_index
    return requests


def run_cells(
    cells: Sequence[CellResult],
    examples: Sequence[dict[str, Any]],
    task: Task,
    runner: Runner,
    nodeid: str,
) -> Calls:
    """The pipeline after rendering: number the samples, run them, grade each answer against its
    example (``examples[j]`` is cell j's record)."""
    return grade_results(cells, examples, runner.run(number_cells(cells, nodeid)), task)


def grade_results(
    cells: Sequence[CellResult],
    examples: Sequence[dict[str, Any]],
    results: Sequence[CallResult],
    task: Task,
) -> Calls:
    """Write each call's answer and grade into its cell; a call that did not complete keeps
    score 0, unparsed, and is listed in ``problems`` (never graded as a wrong answer)."""
    calls = Calls()
    for cell, example, result in zip(cells, examples, results):
        cell.status = result.status
        if result.status != "ok" or result.response is None:
            cell.error = result.error or result.status
            calls.problems.append(f"{result.status}: {cell.error}")
            continue
        calls.cached += int(result.cached)
        calls.made += int(not result.cached)
        cell.text = result.response.text
        grade = task.grade(cell.text, example, cell.prompt)
        cell.score, cell.parsed, cell.prediction = (
            float(grade.score),
            bool(grade.parsed),
            grade.prediction,
        )
    return calls


def greedy_cells(
    examples: Sequence[dict[str, Any]], task: Task, space: Space, max_tokens: int
) -> list[CellResult]:
    """One prompt per example at ``space``'s canonical variant, at temperature 0, no
    demonstrations: what a CheckList test asks (cell ``instance`` = the example's position)."""
    variant = space.canonical_variant()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return [
        CellResult(CANONICAL, i, 0, variant, render(space, variant, example, task, []), params)
        for i, example in enumerate(examples)
    ]


def plan_cells(
    dataset: Sequence[dict[str, Any]], task: Task, space: Space, settings: EvaluationSettings
) -> list[CellResult]:
    """Every prompt of the evaluation, in plan order: resamplings r-major, then the canonical pass."""
    plan = make_plan(
        space, dataset, settings.n, mode=settings.mode, seed=settings.seed, task=task
    )
    cells: list[CellResult] = []
    for r in range(settings.n):
        for i, example in enumerate(dataset):
            cells.append(_cell(space, task, dataset, plan.cell(r, i), r, i, example, settings))
    for i, example in enumerate(dataset):
        planned = plan.canonical_cell(i)
        temperature = (
            settings.temperature if settings.temperature is not None else planned.variant.temperature
        )
        for _ in range(settings.k):
            cell = _cell(space, task, dataset, planned, CANONICAL, i, example, settings)
            cell.params = replace(cell.params, temperature=float(temperature))
            cells.append(cell)
    return cells


def _cell(
    space: Space,
    task: Task,
    dataset: Sequence[dict[str, Any]],
    planned: PlanCell,
    r: int,
    i: int,
    example: dict[str, Any],
    settings: EvaluationSettings,
) -> CellResult:
    demos = [dataset[j] for j in planned.demos]
    prompt = render(space, planned.variant, example, task, demos)
    params = SamplingParams(
        temperature=float(planned.variant.temperature), max_tokens=settings.max_tokens
    )
    return CellResult(r, i, 0, planned.variant, prompt, params)


def grade_cells(
    dataset: Sequence[dict[str, Any]],
    task: Task,
    cells: list[CellResult],
    results: Sequence[CallResult],
    settings: EvaluationSettings,
) -> ScoreMatrix:
    """Grade every answer; a call that did not complete scores 0 and is listed in ``problems``."""
    calls = grade_results(cells, [dataset[c.instance] for c in cells], results, task)
    return _score_matrix(cells, calls, settings, len(dataset))


def _score_matrix(
    cells: list[CellResult], calls: Calls, settings: EvaluationSettings, n_instances: int
) -> ScoreMatrix:
    """The graded cells as (resamplings x instances) and (k x instances) matrices."""
    scores = np.zeros((settings.n, n_instances))
    parsed = np.zeros((settings.n, n_instances), dtype=bool)
    canonical_scores = np.zeros((settings.k, n_instances))
    canonical_parsed = np.zeros((settings.k, n_instances), dtype=bool)
    canonical_seen = np.zeros(n_instances, dtype=int)
    for cell in cells:
        if cell.resampling == CANONICAL:
            j = canonical_seen[cell.instance]
            canonical_seen[cell.instance] += 1
            canonical_scores[j, cell.instance] = cell.score
            canonical_parsed[j, cell.instance] = cell.parsed
        else:
            scores[cell.resampling, cell.instance] = cell.score
            parsed[cell.resampling, cell.instance] = cell.parsed
    return ScoreMatrix(
        scores=scores,
        parsed=parsed,
        canonical_scores=canonical_scores,
        canonical_parsed=canonical_parsed,
        cells=cells,
        calls_made=calls.made,
        calls_cached=calls.cached,
        problems=calls.problems,
    )


class StagedEvaluation:
    """One evaluation of ``settings.n`` resamplings, run a range of resamplings at a time.

    Used where how many resamplings to run is decided along the way (a pilot extended to n*, a
    gate that stops early). Every prompt and sample index comes from the whole plan, numbered once
    in plan order, so a staged run calls exactly what one `evaluate` of the same n would call and
    shares its cache entries; a run stopped at m is the prefix of the run of n.
    """

    def __init__(
        self,
        dataset: Sequence[dict[str, Any]],
        task: Task,
        space: Space,
        settings: EvaluationSettings,
        runner: Runner,
    ) -> None:
        self.dataset, self.task, self.settings, self.runner = dataset, task, settings, runner
        self.cells = plan_cells(dataset, task, space, settings)
        self.requests = number_cells(self.cells, settings.nodeid)

    def run(self, start: int, stop: int, *, canonical: bool) -> ScoreMatrix:
        """Resamplings ``start..stop-1`` (rows of the result), plus the canonical pass if asked."""
        chosen = [
            j for j, c in enumerate(self.cells)
            if start <= c.resampling < stop or (canonical and c.resampling == CANONICAL)
        ]
        results = self.runner.run([self.requests[j] for j in chosen])
        settings = replace(self.settings, n=stop)
        matrix = grade_cells(
            self.dataset, self.task, [self.cells[j] for j in chosen], results, settings
        )
        return replace(matrix, scores=matrix.scores[start:], parsed=matrix.parsed[start:])


def append_resamplings(head: ScoreMatrix, tail: ScoreMatrix) -> ScoreMatrix:
    """``head``'s resamplings followed by ``tail``'s (a later range of the same plan, without a
    canonical pass); the canonical pass is ``head``'s. Calls and problems add up."""
    return ScoreMatrix(
        scores=np.vstack([head.scores, tail.scores]),
        parsed=np.vstack([head.parsed, tail.parsed]),
        canonical_scores=head.canonical_scores,
        canonical_parsed=head.canonical_parsed,
        cells=head.resampling_cells() + tail.resampling_cells() + head.canonical_cells(),
        calls_made=head.calls_made + tail.calls_made,
        calls_cached=head.calls_cached + tail.calls_cached,
        problems=head.problems + tail.problems,
    )
