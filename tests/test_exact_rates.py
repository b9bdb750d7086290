"""Issue 31 item 2: thresholds decided on a count of independent 0/1 outcomes (CheckList rates,
circular accuracy, maj@k) use the exact binomial bound, whose one-sided error is at most its
level for every true rate; the reports keep showing Wilson's interval where they did."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pytest_reliable import stats
from pytest_reliable.evaluate.circular import CircularResult, _scored, circular_entry
from pytest_reliable.evaluate.evaluation import Calls
from pytest_reliable.verdict.gate import proportion_evidence


def test_circular_is_decided_exactly_and_shown_with_wilson() -> None:
    values = np.array([1.0] * 49 + [0.0])
    result = CircularResult(values, stats.binomial_bound(49, 50), Calls())
    entry = circular_entry(result, 0.95)
    assert (entry["low"], entry["high"]) == pytest.approx(stats.wilson_interval(49, 50, 0.95))
    assert "Clopper-Pearson" in result.bound.method
    assert result.bound.lower(0.95) == pytest.approx(float(scipy_stats.beta.ppf(0.05, 49, 2)))


def test_the_circular_score_of_graded_cells_gets_the_exact_bound() -> None:
    _, bound = _scored([], 20)  # no cell graded wrong: every instance right
    assert isinstance(bound, stats.BoundedMean) and bound.method.startswith("Clopper-Pearson")
    assert bound.lower(0.95) == pytest.approx(0.05 ** (1 / 20))


def test_maj_at_k_is_bounded_exactly_on_0_1_values_and_by_gaffke_on_partial_credit() -> None:
    from pytest_reliable.verdict.sides import majority_at_k

    class Matrix:  # the two attributes majority_at_k reads
        def __init__(self, k: int, n: int, cells: list[object]) -> None:
            self.canonical_scores = np.zeros((k, n))
            self._cells = cells

        def canonical_cells(self) -> list[object]:
            return self._cells

    class Cell:
        def __init__(self, instance: int, prediction: str, score: float) -> None:
            self.instance, self.prediction, self.score, self.parsed = (instance, prediction,
                                                                       score, True)

    right = [Cell(i, "a", 1.0) for i in range(30) for _ in range(3)]
    values, bound = majority_at_k(Matrix(3, 30, right))  # type: ignore[arg-type]
    assert values.tolist() == [1.0] * 30 and bound.method.startswith("Clopper-Pearson")
    evidence = proportion_evidence(1.0, [bound], "min")
    assert evidence.unfavourable(0.95)[0] == pytest.approx(0.05 ** (1 / 30))
    partial = [Cell(i, "a", 0.5) for i in range(30) for _ in range(3)]
    _, half = majority_at_k(Matrix(3, 30, partial))  # type: ignore[arg-type]
    assert half.method.startswith("Gaffke")
