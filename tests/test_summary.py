"""Summary numbers (SPEC sections 8, 11): pre-registered groupings, paired ranges, noise floors."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_reliable.evaluation import CellResult
from pytest_reliable.summary import ScoreRangeError, check_scores, summarize
from pytest_reliable.tasks import MultipleChoice
from tests.test_gate import simulated

GOLD_FIRST = [{"question": f"q{i}", "choices": ["a", "b", "c", "d"], "answer": 0}
              for i in range(40)]


def _position_biased(cell: CellResult) -> float:
    """Right far more often when the correct option is shown first; formats do not matter."""
    return 0.9 if cell.prompt.gold_position == 0 else 0.4


def test_fixed_formats_do_not_absorb_order_effects() -> None:
    # Every gold is option 0: one permutation per resampling puts it at one position for every
    # instance, so raw format means differ by the position effect (0.9 vs 0.4).
    matrix, space = simulated(12, "fixed", _position_biased, seed=0, data=GOLD_FIRST)
    raw = matrix.scores.mean(axis=1)
    assert raw.max() - raw.min() > 0.35
    summary = summarize(matrix, space, mode="fixed", eps=0.01, delta=0.1)
    formats = summary.formats
    assert formats.grouping == "formats"
    assert formats.spread is not None and formats.noise_floor is not None
    # What is left is noise: about what permuted labels show, far below the raw 0.5.
    assert formats.spread < min(0.25, 2 * formats.noise_floor)
    # The order range sees the position effect.
    assert summary.orders.grouping == "gold_position"
    assert summary.orders.maximum - summary.orders.minimum > 0.35


@pytest.mark.parametrize("n", [3, 30])
def test_the_grouping_does_not_depend_on_counts(n: int) -> None:
    matrix, space = simulated(n, "ilr", lambda cell: 0.7, seed=1)
    summary = summarize(matrix, space, mode="ilr", eps=0.01, delta=0.1)
    assert summary.formats.grouping == "dimensions"
    listed = summarize(matrix, space, mode="ilr", eps=0.01, delta=0.1, group_by=("wrapper",),
                       min_cells=10**6)
    assert listed.formats.grouping == "dimensions:wrapper"
    assert all(g.thin for g in listed.formats.groups.values())
    assert {k.split("=")[0] for k in listed.formats.groups} == {"wrapper"}


def test_a_robust_model_does_not_look_format_sensitive_in_ilr() -> None:
    matrix, space = simulated(30, "ilr", lambda cell: 0.7, seed=2)
    summary = summarize(matrix, space, mode="ilr", eps=0.01, delta=0.1)
    formats = summary.formats
    assert formats.spread is not None and formats.noise_floor is not None
    assert formats.spread < 2.5 * formats.noise_floor
    for group in formats.groups.values():
        assert group.low is not None and group.high is not None
        assert group.low <= group.score <= group.high


def test_non_binary_scores_and_pass_at_1() -> None:
    matrix, space = simulated(3, "ilr", lambda cell: 1.0, seed=3)
    matrix.scores[:] = 0.5
    matrix.canonical_scores[:] = 0.5
    summary = summarize(matrix, space, mode="ilr", eps=0.01, delta=0.1)
    assert summary.pass_at_1 == summary.canonical_score == 0.5
    assert summary.wilson_low < 0.5 < summary.wilson_high
    assert summary.interval_method.startswith("clustered")


def test_scores_outside_the_unit_interval_name_task_and_instance() -> None:
    matrix, _ = simulated(2, "ilr", lambda cell: 1.0, seed=4)
    matrix.cells[5] = dataclasses.replace(matrix.cells[5], score=3.7)
    with pytest.raises(ScoreRangeError, match=r"MultipleChoice.*3\.7 for instance 5"):
        check_scores(matrix, MultipleChoice())
