"""The render-run-grade pipeline as values: planned cells in, graded cells out, nothing mutated."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_reliable.calls.requests import CallResult, number_samples
from pytest_reliable.evaluate.evaluation import (
    CANONICAL,
    CellResult,
    EvaluationSettings,
    PlannedCell,
    count_calls,
    grade_cells,
    grade_results,
    greedy_cells,
    plan_cells,
)
from pytest_reliable.models.base import ModelResponse
from pytest_reliable.space import Space
from pytest_reliable.tasks.builtin import MultipleChoice

DATA = [{"question": f"q{i}", "choices": ["a", "b", "c"], "answer": i % 3} for i in range(5)]
SPACE = Space.from_mapping("warm", {"wrapper": ["({})", "{}."], "temperature": [0.0, 0.7]})
SETTINGS = EvaluationSettings(n=4, mode="ilr", seed=3, k=2, temperature=0.7, nodeid="t.py::t")


def _right(cell: PlannedCell) -> CallResult:
    gold = cell.prompt.gold_position
    assert gold is not None
    return CallResult(ModelResponse(cell.prompt.labels[gold]), cached=cell.instance % 2 == 0)


def test_planned_cells_carry_the_requests_numbered_in_plan_order() -> None:
    cells = plan_cells(DATA, MultipleChoice(), SPACE, SETTINGS)
    assert len(cells) == (SETTINGS.n + SETTINGS.k) * len(DATA)
    assert [c.resampling for c in cells[-SETTINGS.k * len(DATA):]] == [CANONICAL] * 10
    # The cache keys: exactly what numbering the rendered prompts in plan order gives.
    expected = number_samples([(c.prompt.messages, c.params) for c in cells], SETTINGS.nodeid)
    assert [c.request for c in cells] == expected
    # The k canonical samples of an instance at temperature 0.7 are two samples in a row (after
    # any resampling cell that drew the same prompt).
    first = [c for c in cells if c.resampling == CANONICAL and c.instance == 0]
    assert [c.sample for c in first] == [first[0].sample, first[0].sample + 1]
    assert all(c.request.scope == SETTINGS.nodeid for c in first)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cells[0].resampling = 1  # type: ignore[misc]


def test_grading_returns_new_frozen_cells_and_leaves_the_plan_alone() -> None:
    cells = plan_cells(DATA, MultipleChoice(), SPACE, SETTINGS)
    before = list(cells)
    graded = grade_results(cells, [DATA[c.instance] for c in cells], [_right(c) for c in cells],
                           MultipleChoice())
    assert cells == before
    assert all(isinstance(g, CellResult) and g.planned is c for g, c in zip(graded, cells))
    assert all(g.score == 1.0 and g.parsed and g.status == "ok" for g in graded)
    assert [g.prediction for g in graded] == [DATA[c.instance]["answer"] for c in cells]
    # What summary, baseline and the reports read, through the graded cell.
    g, c = graded[7], cells[7]
    assert (g.resampling, g.instance, g.variant, g.prompt, g.params, g.sample) == (
        c.resampling, c.instance, c.variant, c.prompt, c.params, c.sample)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.score = 0.0  # type: ignore[misc]


def test_a_call_that_did_not_complete_is_listed_and_never_graded_as_wrong() -> None:
    cells = plan_cells(DATA, MultipleChoice(), SPACE, SETTINGS)
    results = [_right(c) for c in cells]
    results[3] = CallResult(None, status="not_run", error="budget exhausted")
    results[4] = CallResult(None, status="error")
    matrix = grade_cells(DATA, MultipleChoice(), cells, results, SETTINGS)
    skipped, failed = matrix.cells[3], matrix.cells[4]
    assert (skipped.status, skipped.error, skipped.text) == ("not_run", "budget exhausted", None)
    assert (skipped.score, skipped.parsed, skipped.prediction) == (0.0, False, None)
    assert failed.error == "error"
    assert matrix.problems == ["not_run: budget exhausted", "error: error"]
    calls = count_calls(results)
    assert calls.made + calls.cached == len(cells) - 2
    assert (matrix.calls_made, matrix.calls_cached) == (calls.made, calls.cached)
    assert not matrix.parsed[0, 3] and matrix.scores[0, 3] == 0.0
    assert matrix.scores.sum() == SETTINGS.n * len(DATA) - 2


def test_checklist_cells_are_greedy_and_unscoped() -> None:
    cells = greedy_cells(DATA, MultipleChoice(), SPACE, max_tokens=8)
    assert [c.instance for c in cells] == list(range(len(DATA)))
    assert all(c.params.temperature == 0.0 and c.params.max_tokens == 8 for c in cells)
    assert all(c.sample == 0 and c.request.scope is None for c in cells)
    assert all(c.variant == SPACE.canonical_variant() for c in cells)
