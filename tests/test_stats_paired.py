"""Paired differences with clustered bounds (`stats.paired_difference`, `paired_group_differences`).

The coverage claims are checked by simulation: models of known true difference whose cells are
correlated within an instance (what real evaluations look like), printing the rates with their
Monte Carlo errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytest_reliable import stats


def _pair(rng: np.random.Generator, n: int, instances: int, p_a: float, p_b: float,
          ) -> tuple[np.ndarray, np.ndarray]:
    """0/1 cells with a per-instance difficulty shared by both models and every resampling."""
    shift = rng.normal(0.0, 1.2, size=instances)

    def draw(p: float) -> np.ndarray:
        logit = math.log(p / (1 - p)) + shift
        prob = 1 / (1 + np.exp(-logit))
        return (rng.random((n, instances)) < prob).astype(float)

    return draw(p_a), draw(p_b)


def test_estimate_is_the_mean_cell_difference_and_bounds_bracket_it() -> None:
    rng = np.random.default_rng(3)
    a, b = _pair(rng, 10, 40, 0.7, 0.6)
    result = stats.paired_difference(a, b, confidence=0.9)
    assert result.estimate == pytest.approx(float((a - b).mean()))
    assert result.low < result.estimate < result.high
    assert (result.n_instances, result.n_cells) == (40, 400)
    assert "Gaffke" in result.method and "clustered by instance" in result.method
    # Every bound and p-value comes from one bound: the p-value inverts it exactly.
    assert result.upper(1 - result.p_below(0.05)) == pytest.approx(0.05, abs=1e-9)
    assert result.lower(1 - result.p_above(0.05)) == pytest.approx(0.05, abs=1e-9)


def test_identical_models_differ_by_nothing_and_agreement_on_few_instances_proves_little() -> None:
    # Three instances on which two models agree do not show that they agree on instances like
    # them (a t bound of zero width claimed they do); a thousand nearly do.
    a = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    few = stats.paired_difference(a, a)
    assert few.estimate == 0.0 and few.low < -0.2 and few.high > 0.2
    many = stats.paired_difference(np.tile(a, (1, 400)), np.tile(a, (1, 400)))
    assert many.estimate == 0.0 and -0.01 < many.low < 0.0 < many.high < 0.01


def test_same_data_same_bounds_and_two_way_is_wider_when_rows_share_a_variant() -> None:
    rng = np.random.default_rng(5)
    a, b = _pair(rng, 8, 30, 0.7, 0.6)
    # A variant effect shared by every instance of a resampling (fixed mode): row shifts.
    a = np.clip(a - (rng.random((8, 1)) < 0.3), 0, 1)
    one = stats.paired_difference(a, b)
    assert one == stats.paired_difference(a, b)
    two = stats.paired_difference(a, b, resample_resamplings=True)
    assert "two-way" in two.method and "8 per-resampling mean differences" in two.method
    assert two.high - two.low > one.high - one.low


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1.0, 0.0], [1.0, 0.0], "matrix"),
        ([[1.0, 0.0]], [[1.0, 0.0, 1.0]], "same shape"),
        ([[1.0, float("nan")]], [[1.0, 0.0]], "finite"),
        ([[1.0, 2.0]], [[1.0, 0.0]], r"\[0, 1\]"),
    ],
)
def test_bad_input_is_named(a: list, b: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stats.paired_difference(a, b)


def test_one_sided_bounds_cover_the_true_difference_at_their_confidence() -> None:
    """Each end is a one-sided bound at `confidence`: it misses the truth at most ~5% of the time
    (the cluster bootstrap is slightly liberal with few instances: allow 2 Monte Carlo errors)."""
    rng = np.random.default_rng(11)
    reps, misses_low, misses_high = 300, 0, 0
    for _ in range(reps):
        a, b = _pair(rng, 5, 60, 0.65, 0.65)  # true difference 0
        result = stats.paired_difference(a, b, confidence=0.95, n_resamples=1000,
                                         seed=int(rng.integers(1 << 31)))
        misses_low += result.low > 0
        misses_high += result.high < 0
    for misses in (misses_low, misses_high):
        rate = misses / reps
        error = math.sqrt(0.05 * 0.95 / reps)
        print(f"one-sided miss rate {rate:.3f} +- {error:.3f} (nominal 0.05)")
        assert rate <= 0.05 + 2 * error


def test_group_differences_use_each_groups_cells() -> None:
    a = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    b = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
    top = np.array([[True] * 3, [False] * 3])
    groups = stats.paired_group_differences(a, b, {"top": top, "bottom": ~top,
                                                   "none": np.zeros_like(top)})
    assert set(groups) == {"top", "bottom"}  # a group without cells has no difference
    assert groups["top"].estimate == 0.0 and groups["top"].low == groups["top"].high == 0.0
    assert groups["bottom"].estimate == pytest.approx(2 / 3)
    assert groups["bottom"].n_cells == 3
    with pytest.raises(ValueError, match="mask shape"):
        stats.paired_group_differences(a, b, {"bad": np.ones((1, 3), dtype=bool)})


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 12)),
           elements=st.sampled_from([0.0, 0.5, 1.0])),
    st.data(),
)
def test_bounds_are_ordered_and_one_group_of_all_cells_is_the_whole(
    a: np.ndarray, data: st.DataObject
) -> None:
    b = data.draw(arrays(np.float64, a.shape, elements=st.sampled_from([0.0, 1.0])))
    whole = stats.paired_difference(a, b, n_resamples=200)
    assert whole.low <= whole.estimate + 1e-12 and whole.estimate <= whole.high + 1e-12
    [group] = stats.paired_group_differences(
        a, b, {"all": np.ones(a.shape, dtype=bool)}, n_resamples=200).values()
    assert group.estimate == pytest.approx(whole.estimate)
    assert -1.0 <= group.low <= group.high <= 1.0
