"""One evaluation, as data: plan x dataset -> prompts -> responses -> graded cells -> score matrix.

`evaluate` is the core's whole pipeline for one test and needs no pytest: a notebook can call it
with a `Runner` and get the same `ScoreMatrix` the plugin reports on. Every number in every report
is a function of that matrix (see `summary.py`).

Both test kinds share one render-run-grade pipeline, as values that never change once made:

- planning renders every cell (`plan_cells` for reliable tests, `greedy_cells` for CheckList
  tests) and numbers its samples in plan order: a `PlannedCell` is what to ask, its `Request`
  what the cache key is made of;
- `run_cells` sends the requests through the `Runner`;
- `grade_results` hands the answers that came back to the task's `Grader` (`plan.grading`,
  chosen by `tasks.grading.grader_of`) in one call and turns each into a `CellResult` (the
  planned cell, what came back and its grade); `count_calls` counts the calls made and cached
  and lists those that did not complete. A grader that makes calls of its own (a judge) grades
  the same batch through the runners of the `Judging` and says what its calls were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_reliable.calls.pricing import Spend
from pytest_reliable.calls.requests import CallResult, Request, number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.contract.vocabulary import Mode
from pytest_reliable.models.base import AsyncModel, SamplingParams
from pytest_reliable.plan.grading import Answer, GradingContext
from pytest_reliable.plan.prompt import Prompt
from pytest_reliable.plan.render import render
from pytest_reliable.plan.sampling import Cell as PlanCell
from pytest_reliable.plan.sampling import make_plan
from pytest_reliable.plan.task import Task
from pytest_reliable.space import Space, Variant
from pytest_reliable.tasks.grading import grader_of

CANONICAL = -1
"""The resampling index of the canonical pass's cells."""


@dataclass(frozen=True)
class EvaluationSettings:
    """What one `evaluate` call runs: ``n`` resamplings plus a canonical pass of ``k`` samples."""

    n: int
    mode: Mode = "ilr"
    seed: int = 0
    """The test's own seed (already derived from the session seed and the nodeid)."""
    k: int = 1
    temperature: float | None = None
    """Temperature of the canonical pass; None = the canonical variant's."""
    max_tokens: int = 32
    nodeid: str = ""
    """Scopes sample indexes at temperature > 0 and names the test in cache-miss errors."""


@dataclass(frozen=True)
class PlannedCell:
    """What to ask: one rendered prompt at its place in the plan, and its numbered request."""

    resampling: int
    """The resampling index, or `CANONICAL` for the canonical pass."""
    instance: int
    variant: Variant
    prompt: Prompt
    request: Request
    """Messages, sampling parameters, sample index and scope: what the cache key is made of."""

    @property
    def params(self) -> SamplingParams:
        return self.request.params

    @property
    def sample(self) -> int:
        """The sample index (repeats of one prompt at temperature > 0 count 0, 1, ...)."""
        return self.request.sample_index


@dataclass(frozen=True)
class CellResult:
    """A graded cell: the planned cell, what came back for it, and its grade.

    A call that did not complete (``status`` not "ok") has no text, an ``error``, and the grade
    of nothing: score 0, unparsed.
    """

    planned: PlannedCell
    status: str = "ok"
    text: str | None = None
    error: str | None = None
    score: float = 0.0
    parsed: bool = False
    prediction: Any = None
    votes: tuple[float | None, ...] = ()
    """A judge's votes behind ``score`` (empty when no judge graded the cell)."""
    unread: tuple[str, ...] = ()
    """The judge's replies that came back without a vote (what an unreadable judge's error
    quotes)."""

    @property
    def resampling(self) -> int:
        return self.planned.resampling

    @property
    def instance(self) -> int:
        return self.planned.instance

    @property
    def variant(self) -> Variant:
        return self.planned.variant

    @property
    def prompt(self) -> Prompt:
        return self.planned.prompt

    @property
    def params(self) -> SamplingParams:
        return self.planned.params

    @property
    def sample(self) -> int:
        return self.planned.sample


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
    """The graded cells: resampling cells in plan order (r-major), then the canonical cells."""
    calls_made: int = 0
    calls_cached: int = 0
    problems: list[str] = field(default_factory=list)
    """Calls that were not run (budget) or failed for good, one line each."""
    judge_calls: Calls | None = None
    """A judge's calls (made, cached, problems), counted apart from the model's; None when no
    judge graded the cells."""
    ran: np.ndarray | None = None
    """(n, N): which cells were run, when an adaptive search ran only some cells of a row (a
    cell not run scores 0 here, is in no group and is not counted unparsed); None: every cell."""

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
            ran=None if self.ran is None else self.ran[:n],
        )

    def unparsed(self) -> int:
        """Cells run (and canonical samples) whose answer could not be parsed."""
        missing = ~self.parsed if self.ran is None else (~self.parsed & self.ran)
        return int(missing.sum() + (~self.canonical_parsed).sum())


@dataclass(frozen=True)
class Judging:
    """The runners a judge grades with: its own model's, and for a pairwise judge the
    baseline's (run on the same requests as the candidate: same plan, same cache keys). Kept
    as runners so their calls are paid as the test's (`Evaluator.spend`)."""

    judge: Runner
    baseline: Runner | None = None

    def context(self) -> GradingContext:
        return GradingContext(self.judge, self.baseline)


@dataclass
class Calls:
    """What running some cells cost: calls made, calls served from the cache, and one line per
    call that did not complete (budget, failure)."""

    made: int = 0
    cached: int = 0
    problems: list[str] = field(default_factory=list)
    judge: Calls | None = None
    """The grader's own calls (a judge's) grading the answers, counted apart (None: the
    grader made none)."""

    def add(self, other: Calls) -> None:
        self.made += other.made
        self.cached += other.cached
        self.problems.extend(other.problems)
        if other.judge is not None:
            if self.judge is None:
                self.judge = Calls()
            self.judge.add(other.judge)


def evaluate(
    dataset: Sequence[dict[str, Any]],
    task: Task,
    space: Space,
    settings: EvaluationSettings,
    runner: Runner,
    judging: Judging | None = None,
) -> ScoreMatrix:
    """Run ``settings.n`` resamplings and the canonical pass of ``dataset`` under ``space``
    (``judging``: the runners of the task's judge, when it grades with one)."""
    cells = plan_cells(dataset, task, space, settings)
    graded, calls = run_cells(cells, [dataset[c.instance] for c in cells], task, runner,
                              judging)
    return _score_matrix(graded, calls, settings, len(dataset))


def run_cells(
    cells: Sequence[PlannedCell],
    examples: Sequence[dict[str, Any]],
    task: Task,
    runner: Runner,
    judging: Judging | None = None,
) -> tuple[list[CellResult], Calls]:
    """The pipeline after planning: run the cells' requests, grade each answer against its
    example (``examples[j]`` is cell j's record), count the calls (a judge's apart, in
    ``Calls.judge``)."""
    results = runner.run([cell.request for cell in cells])
    calls = count_calls(results)
    graded = grade_results(cells, examples, results, task, judging, calls)
    return graded, calls


def grade_results(
    cells: Sequence[PlannedCell],
    examples: Sequence[dict[str, Any]],
    results: Sequence[CallResult],
    task: Task,
    judging: Judging | None = None,
    calls: Calls | None = None,
) -> list[CellResult]:
    """Each cell graded on its call's answer against the example and the prompt it answered,
    the whole batch in one call of the task's grader (`grader_of`: its own ``task.grade`` of
    each answer, or its judge, whose calls run through ``judging`` and are added to
    ``calls.judge``). A call that did not complete is not graded as a wrong answer: it scores
    0, unparsed, and `count_calls` lists it among the problems."""
    answered: list[int] = []
    answers: list[Answer] = []
    for j, (cell, example, result) in enumerate(zip(cells, examples, results)):
        if result.status == "ok" and result.response is not None:
            answered.append(j)
            answers.append(Answer(result.response.text, example, cell.prompt, cell.request))
    grades = grader_of(task).grade(
        answers, judging.context() if judging is not None else GradingContext())
    if grades.calls is not None and calls is not None:
        made = grades.calls
        calls.add(Calls(judge=Calls(made.made, made.cached, list(made.problems))))
    graded = [CellResult(cell, result.status, error=result.error or result.status)
              for cell, result in zip(cells, results)]
    for j, answer, grade in zip(answered, answers, grades.each):
        graded[j] = CellResult(cells[j], "ok", answer.text, None, float(grade.score),
                               bool(grade.parsed), grade.prediction, grade.votes, grade.unread)
    return graded


def count_calls(results: Sequence[CallResult]) -> Calls:
    """Calls made, calls served from the cache, and one line per call that did not complete."""
    calls = Calls()
    for result in results:
        if result.status != "ok" or result.response is None:
            calls.problems.append(f"{result.status}: {result.error or result.status}")
            continue
        calls.cached += int(result.cached)
        calls.made += int(not result.cached)
    return calls


def greedy_cells(
    examples: Sequence[dict[str, Any]], task: Task, space: Space, max_tokens: int
) -> list[PlannedCell]:
    """One prompt per example at ``space``'s canonical variant, at temperature 0, no
    demonstrations: what a CheckList test asks (cell ``instance`` = the example's position)."""
    variant = space.canonical_variant()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return numbered_cells(
        [(CANONICAL, i, variant, render(space, variant, example, task, []), params)
         for i, example in enumerate(examples)],
        nodeid="",  # at temperature 0 every sample index is 0 and the key has no scope
    )


def plan_cells(
    dataset: Sequence[dict[str, Any]], task: Task, space: Space, settings: EvaluationSettings
) -> list[PlannedCell]:
    """Every prompt of the evaluation, in plan order: resamplings r-major, then the canonical
    pass (``k`` samples per instance), with sample indexes numbered in that order."""
    plan = make_plan(
        space, dataset, settings.n, mode=settings.mode, seed=settings.seed, task=task
    )
    rendered: list[RenderedCell] = []
    for r in range(settings.n):
        for i, example in enumerate(dataset):
            planned = plan.cell(r, i)
            prompt = _render(space, task, dataset, planned, example)
            params = SamplingParams(temperature=float(planned.variant.temperature),
                                    max_tokens=settings.max_tokens)
            rendered.append((r, i, planned.variant, prompt, params))
    for i, example in enumerate(dataset):
        planned = plan.canonical_cell(i)
        prompt = _render(space, task, dataset, planned, example)
        temperature = (
            settings.temperature if settings.temperature is not None else planned.variant.temperature
        )
        params = SamplingParams(temperature=float(temperature), max_tokens=settings.max_tokens)
        rendered.extend((CANONICAL, i, planned.variant, prompt, params) for _ in range(settings.k))
    return numbered_cells(rendered, settings.nodeid)


RenderedCell = tuple[int, int, Variant, Prompt, SamplingParams]
"""(resampling, instance, variant, prompt, params) of a cell before its samples are numbered."""


def _render(
    space: Space,
    task: Task,
    dataset: Sequence[dict[str, Any]],
    planned: PlanCell,
    example: dict[str, Any],
) -> Prompt:
    return render(space, planned.variant, example, task, [dataset[j] for j in planned.demos])


def numbered_cells(rendered: Sequence[RenderedCell], nodeid: str) -> list[PlannedCell]:
    """The cells with their requests, sample indexes numbered in cell order (`number_samples`):
    the cache keys."""
    requests = number_samples([(prompt.messages, params) for *_, prompt, params in rendered],
                              nodeid)
    return [PlannedCell(r, i, variant, prompt, request)
            for (r, i, variant, prompt, _), request in zip(rendered, requests)]


def grade_cells(
    dataset: Sequence[dict[str, Any]],
    task: Task,
    cells: Sequence[PlannedCell],
    results: Sequence[CallResult],
    settings: EvaluationSettings,
    judging: Judging | None = None,
) -> ScoreMatrix:
    """The score matrix of ``cells`` graded on ``results`` (a call that did not complete scores
    0 and is listed in ``problems``)."""
    calls = count_calls(results)
    graded = grade_results(cells, [dataset[c.instance] for c in cells], results, task,
                           judging, calls)
    return _score_matrix(graded, calls, settings, len(dataset))


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
        problems=calls.problems + [f"judge: {p}" for p in (calls.judge.problems if calls.judge
                                                           else [])],
        judge_calls=calls.judge,
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
        judging: Judging | None = None,
    ) -> None:
        self.dataset, self.task, self.settings, self.runner = dataset, task, settings, runner
        self.judging = judging
        self.cells = plan_cells(dataset, task, space, settings)
        self._rows: dict[int, list[Variant]] | None = None

    def run(self, start: int, stop: int, *, canonical: bool) -> ScoreMatrix:
        """Resamplings ``start..stop-1`` (rows of the result), plus the canonical pass if asked."""
        chosen = [
            c for c in self.cells
            if start <= c.resampling < stop or (canonical and c.resampling == CANONICAL)
        ]
        results = self.runner.run([c.request for c in chosen])
        matrix = grade_cells(self.dataset, self.task, chosen, results,
                             replace(self.settings, n=stop), self.judging)
        return replace(matrix, scores=matrix.scores[start:], parsed=matrix.parsed[start:])

    def run_rows(self, rows: Sequence[int], *, first_row: int) -> ScoreMatrix:
        """The plan's resamplings ``rows`` (any subset, in the order given), without the canonical
        pass, as rows ``first_row, first_row + 1, ...`` of a matrix that continues one whose
        first ``first_row`` rows are known (`append_resamplings`). Each cell keeps its plan
        request (its cache key): only its row number in the matrix changes."""
        where = {r: first_row + j for j, r in enumerate(rows)}
        chosen = [replace(c, resampling=where[c.resampling]) for c in self.cells
                  if c.resampling in where]
        chosen.sort(key=lambda c: c.resampling)  # rows in the order asked, r-major
        results = self.runner.run([c.request for c in chosen])
        stop = first_row + len(rows)
        matrix = grade_cells(self.dataset, self.task, chosen, results,
                             replace(self.settings, n=stop), self.judging)
        return replace(matrix, scores=matrix.scores[first_row:],
                       parsed=matrix.parsed[first_row:])

    def run_cells(self, wanted: Sequence[tuple[int, int]]) -> ScoreMatrix:
        """The plan's cells (resampling, instance) ``wanted``, without the canonical pass, as a
        matrix of the plan's ``n`` rows holding only them (`cells_matrix` puts rounds together).
        Each cell keeps its plan request (its cache key)."""
        chosen_keys = set(wanted)
        chosen = [c for c in self.cells if (c.resampling, c.instance) in chosen_keys]
        results = self.runner.run([c.request for c in chosen])
        return grade_cells(self.dataset, self.task, chosen, results, self.settings,
                           self.judging)

    def row_variants(self, row: int) -> list[Variant]:
        """The variants of every cell of the plan's resampling ``row``."""
        if self._rows is None:
            self._rows = {}
            for c in self.cells:
                self._rows.setdefault(c.resampling, []).append(c.variant)
        return self._rows.get(row, [])


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
        judge_calls=_sum_calls(head.judge_calls, tail.judge_calls),
    )


def cells_matrix(head: ScoreMatrix, parts: Sequence[ScoreMatrix]) -> tuple[ScoreMatrix, list[int]]:
    """``head`` (the plan's first rows, whole, with the canonical pass) and the cells of
    ``parts`` (`StagedEvaluation.run_cells`, rows numbered as the plan's) as one matrix of the
    plan rows that hold a cell, in plan order, with the ``ran`` mask; and the plan row behind
    each of its rows. A cell run twice (asked by two rounds) is kept once."""
    found: dict[tuple[int, int], CellResult] = {}
    for cell in [*head.resampling_cells(), *(c for p in parts for c in p.resampling_cells())]:
        found.setdefault((cell.resampling, cell.instance), cell)
    plan_rows = sorted({r for r, _ in found})
    row_of = {r: j for j, r in enumerate(plan_rows)}
    shape = (len(plan_rows), head.n_instances)
    scores, parsed, ran = np.zeros(shape), np.ones(shape, dtype=bool), np.zeros(shape, dtype=bool)
    cells = []
    for (r, i), cell in sorted(found.items()):
        scores[row_of[r], i], parsed[row_of[r], i], ran[row_of[r], i] = cell.score, cell.parsed, True
        cells.append(replace(cell, planned=replace(cell.planned, resampling=row_of[r])))
    calls = _sum_calls(head.judge_calls, None)
    for part in parts:
        calls = _sum_calls(calls, part.judge_calls)
    matrix = ScoreMatrix(
        scores=scores, parsed=parsed, canonical_scores=head.canonical_scores,
        canonical_parsed=head.canonical_parsed, cells=cells + head.canonical_cells(),
        calls_made=head.calls_made + sum(p.calls_made for p in parts),
        calls_cached=head.calls_cached + sum(p.calls_cached for p in parts),
        problems=head.problems + [x for p in parts for x in p.problems], judge_calls=calls,
        ran=None if ran.all() else ran,
    )
    return matrix, plan_rows


def _sum_calls(a: Calls | None, b: Calls | None) -> Calls | None:
    if a is None and b is None:
        return None
    total = Calls()
    for part in (a, b):
        if part is not None:
            total.add(part)
    return total


class Evaluator:
    """One test's plan, run as a run strategy asks: ``n`` resamplings at once, staged, or
    extended beyond a head; on the model under test or on another (a reference, a baseline).

    ``settings`` is the evaluation without its size (each call says n). Every run gets its own
    runner from ``runner_for`` (the transport: calls, cache, budget), kept for its counts.
    """

    def __init__(
        self,
        dataset: Sequence[dict[str, Any]],
        task: Task,
        space: Space,
        settings: EvaluationSettings,
        model: AsyncModel,
        runner_for: Callable[[AsyncModel], Runner],
        judging_for: Callable[[], Judging] | None = None,
    ) -> None:
        self.dataset, self.task, self.space, self.settings = dataset, task, space, settings
        self.model = model
        self.runner_for = runner_for
        self.judging_for = judging_for
        """The runner of the task's judge (on the judge's own model), when it grades with one."""
        self.runners: list[Runner] = []
        self.judge_runners: list[Runner] = []
        """The judges' (and a pairwise judge's baseline's) runners: their calls are paid too."""

    def run(self, n: int, on: AsyncModel | None = None) -> ScoreMatrix:
        """``n`` resamplings and the canonical pass on ``on`` (default: the model under test)."""
        return evaluate(self.dataset, self.task, self.space, replace(self.settings, n=n),
                        self._runner(on if on is not None else self.model), self._judging())

    def staged(self, n: int) -> StagedEvaluation:
        """The model under test's evaluation of ``n`` resamplings, to run a range at a time."""
        return StagedEvaluation(self.dataset, self.task, self.space,
                                replace(self.settings, n=n), self._runner(self.model),
                                self._judging())

    def extend(self, head: ScoreMatrix, n: int) -> ScoreMatrix:
        """``head`` (the first resamplings of the plan, with its canonical pass) followed by the
        model under test's resamplings ``head.n_resamplings .. n-1``: only those are called."""
        tail = self.staged(n).run(head.n_resamplings, n, canonical=False)
        return append_resamplings(head, tail)

    def prompt_tokens(self) -> dict[str, int]:
        """Prompt tokens sent with the calls made, and those the servers evaluated (not served
        from their prompt cache), over every run so far."""
        return {
            "prompt_tokens_sent": sum(r.stats.prompt_tokens for r in self.runners),
            "prompt_tokens_evaluated": sum(r.stats.prompt_tokens_evaluated for r in self.runners),
        }

    def spend(self) -> Spend:
        """What every run so far cost (SPEC section 13)."""
        return Spend.total(r.stats.spend for r in [*self.runners, *self.judge_runners])

    def _runner(self, on: AsyncModel) -> Runner:
        self.runners.append(self.runner_for(on))
        return self.runners[-1]

    def _judging(self) -> Judging | None:
        """A fresh runner of the judge (its counts stay apart from the model's prompt tokens;
        its spend is the test's all the same)."""
        if self.judging_for is None:
            return None
        judging = self.judging_for()
        self.judge_runners += [r for r in (judging.judge, judging.baseline) if r is not None]
        return judging

