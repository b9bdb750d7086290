"""The threshold table (`contract.thresholds`) and the side evaluations' frozen results
(`verdict.sides`): every threshold has one row, the gate and early stopping read the rows, and a
summary and a report take the side results once, at construction."""

from __future__ import annotations

import dataclasses
from typing import get_args

import numpy as np
import pytest

from pytest_reliable import stats
from pytest_reliable.contract import markers
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.contract.thresholds import (
    MEANS,
    THRESHOLD_TABLE,
    EvidenceKind,
    adaptive,
    settled_by,
)
from pytest_reliable.contract.vocabulary import RELIABLE_THRESHOLDS
from pytest_reliable.evaluate import cell_rounds
from pytest_reliable.evaluate import adaptive as adaptive_search
from pytest_reliable.evaluate import stopping
from pytest_reliable.evaluate.circular import CircularResult
from pytest_reliable.evaluate.evaluation import Calls, ScoreMatrix
from pytest_reliable.verdict import gate
from pytest_reliable.verdict.gate import reliable_thresholds
from pytest_reliable.verdict.results import ReliableReport
from pytest_reliable.verdict.sides import MajorityAtK, SideResults, from_matrix, maj_at_k
from pytest_reliable.verdict.summary import SideMeans, Summary, summarize
from tests.test_gate import simulated


def test_every_reliable_threshold_has_one_row_in_report_order() -> None:
    assert list(THRESHOLD_TABLE) == list(RELIABLE_THRESHOLDS)
    for name, row in THRESHOLD_TABLE.items():
        assert row.name == name
        assert row.direction == RELIABLE_THRESHOLDS[name]


def test_every_kind_of_evidence_has_one_builder_and_means_read_means() -> None:
    assert set(gate.EVIDENCE) == set(get_args(EvidenceKind))
    for row in THRESHOLD_TABLE.values():
        assert (row.evidence == "mean") == (row.reads in MEANS), row


def test_early_stopping_reads_the_table() -> None:
    # The sets early stopping used to list by hand, now the table's `stopping` column.
    assert stopping.RESAMPLING_MEAN == {"min_score", "min_win_rate"} == settled_by("sequence")
    assert stopping.CANONICAL_ONLY == {"min_lower_ci", "min_pass_at_k", "min_pass_hat_k",
                                       "min_maj_at_k", "min_circular"} == settled_by("canonical")
    never = settled_by("never")
    assert never == {"min_median", "min_worst", "max_spread", "max_std"}
    check = stopping.check({"max_std": ("max", 0.1), "min_score": ("min", 0.5)},
                           np.full((12, 30), 0.9), decide="pass-on-evidence", confidence=0.95)
    assert not check.stop and check.reason == "not covered by anytime-valid bounds: max_std"


def test_the_adaptive_column_says_what_adaptive_search_does() -> None:
    # `evaluate.adaptive` and the marker check keep their own names for now: they must agree.
    assert adaptive("sequence") == stopping.RESAMPLING_MEAN
    assert adaptive("canonical") == stopping.CANONICAL_ONLY
    assert adaptive("claims") | adaptive("cells") == adaptive_search.RANGE_THRESHOLDS
    assert adaptive("cells") == cell_rounds.BY_CELLS == {"min_worst"}
    assert adaptive("claims") == {"max_spread"}
    assert adaptive("refused") == set(adaptive_search.REFUSED) == set(markers.ADAPTIVE_REFUSED)
    assert adaptive("plan order") == {"min_median"}


def _summary(*sides: SideMeans) -> tuple[ScoreMatrix, Summary]:
    matrix, space = simulated(4, "ilr", lambda cell: 0.8, seed=5)
    return matrix, summarize(matrix, space, mode="ilr", eps=0.01, delta=0.1, sides=sides)


def test_a_side_evaluation_that_did_not_run_decides_nothing() -> None:
    matrix, summary = _summary()
    spec = ReliableSpec(n=4, min_circular=0.5, min_maj_at_k=0.5, circular=True)
    assert "circular" not in summary.means()
    assert [c.name for c in reliable_thresholds(spec, summary, "estimate")] == []

    circular = CircularResult(np.ones(30), stats.binomial_bound(30, 30, of="instances"), Calls())
    majority = maj_at_k(matrix)
    _, with_sides = _summary(majority, circular)
    checks = reliable_thresholds(spec, with_sides, "estimate")
    assert [c.name for c in checks] == ["min_maj_at_k", "min_circular"]
    assert checks[1].observed == 1.0 and checks[1].passed
    assert checks[0].observed == with_sides.maj_at_k == majority.score
    assert [type(side) for side in from_matrix(matrix)] == [MajorityAtK]


def test_side_results_summary_and_report_are_frozen() -> None:
    matrix, summary = _summary()
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.mean = 1.0  # type: ignore[misc]
    majority = maj_at_k(matrix)
    with pytest.raises(dataclasses.FrozenInstanceError):
        majority.bound = majority.bound  # type: ignore[misc]
    sides = SideResults()
    with pytest.raises(dataclasses.FrozenInstanceError):
        sides.judge = None  # type: ignore[misc]
    assert isinstance(majority, MajorityAtK)
    assert ReliableReport.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_problems_put_an_unread_judge_first_and_circular_calls_last() -> None:
    from pytest_reliable.verdict.sides import JudgeNoise

    calls = Calls()
    calls.problems.append("shift 2 timed out")
    circular = CircularResult(np.zeros(2), stats.binomial_bound(0, 2, of="instances"), calls)
    judge = JudgeNoise({}, "judge j could not be read")  # type: ignore[typeddict-item]
    sides = SideResults(circular=circular, judge=judge)
    assert sides.problems(["cell 3 failed"]) == [
        "judge j could not be read", "cell 3 failed", "circular: shift 2 timed out"]
