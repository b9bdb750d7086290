"""Bounds on means of bounded values (issue 19 item 2): exact on 0/1 values, p-values that invert
the bounds, and coverage where normal theory failed (small N, skew, accuracy near 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from pytest_reliable import stats
from pytest_reliable.stats.bounds import pair_variance_bound


def test_zero_one_values_get_clopper_pearson_and_the_binomial_test() -> None:
    values = np.r_[np.ones(15), np.zeros(1)]
    bound = stats.bounded_mean(values)
    assert bound.method.startswith(stats.bounded.CLOPPER_PEARSON)
    assert bound.lower(0.95) == pytest.approx(sps.beta.ppf(0.05, 15, 2))
    assert bound.upper(0.95) == pytest.approx(sps.beta.ppf(0.95, 16, 1))
    # Exact test: P(X <= 15 | N=16, p=0.99), the fail-on-evidence p-value of pass@k >= 0.99.
    assert bound.p_below(0.99) == pytest.approx(sps.binom.cdf(15, 16, 0.99))
    assert bound.upper(1 - bound.p_below(0.99)) == pytest.approx(0.99, abs=1e-9)


def test_a_single_value_at_the_top_of_the_range_is_not_certainty() -> None:
    bound = stats.bounded_mean(np.ones(20))
    assert bound.upper(0.95) == 1.0 and 0.85 < bound.lower(0.95) < 0.87  # 0.05 ** (1 / 20)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=40),
       limit=st.floats(0.05, 0.95))
def test_p_values_invert_the_bounds(values: list[float], limit: float) -> None:
    bound = stats.bounded_mean(values)
    p = bound.p_below(limit)
    if 1e-6 < p < 1 - 1e-6:
        assert bound.upper(1 - p) == pytest.approx(limit, abs=1e-6)
    p = bound.p_above(limit)
    if 1e-6 < p < 1 - 1e-6:
        assert bound.lower(1 - p) == pytest.approx(limit, abs=1e-6)


def test_the_p_values_invert_the_bounds_at_the_mean_too() -> None:
    # A limit at the weighted mean puts the saddlepoint at 0, where K(s) is what is left after
    # its terms cancel: summed naively, the CDF jittered by 1e-4 there and the bounds by 1e-5.
    for values, limit in (([0.9, 0.6, 0.9], 0.6),
                          ([0.6399843979953908, 0.3, 0.3, 0.6399843979953908,
                            0.9600266694360555], 0.6399843979953908)):
        bound = stats.bounded_mean(values)
        p_below, p_above = bound.p_below(limit), bound.p_above(limit)
        assert 0 < p_above < 1
        assert bound.lower(1 - p_above) == pytest.approx(limit, abs=1e-9)
        if p_below < 1:  # every value >= 0.6: "the mean is >= 0.6" has p-value 1
            assert bound.upper(1 - p_below) == pytest.approx(limit, abs=1e-9)


def test_bounds_stay_in_the_range_and_bracket_the_mean() -> None:
    x = np.random.default_rng(1).uniform(-1, 0.2, 30)
    bound = stats.bounded_mean(x, low=-1.0, high=1.0)
    assert -1.0 <= bound.lower(0.99) < bound.lower(0.9) < x.mean() < bound.upper(0.9)
    assert bound.upper(0.99) <= 1.0
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        stats.bounded_mean([1.5], low=-1.0, high=1.0)


def test_the_saddlepoint_quantile_matches_the_dirichlet_it_computes() -> None:
    # Gaffke's lower bound is the alpha quantile of a Dirichlet(1, ..., 1) weighted mean of the
    # values and one 0: checked against the weighted means themselves.
    x = np.array([0.9, 0.8, 0.1, 0.95, 0.7, 1.0, 0.4])
    weights = np.random.default_rng(2).dirichlet(np.ones(x.size + 1), 200_000)
    sampled = np.quantile(weights[:, 1:] @ x, 0.05)
    assert stats.bounded_mean(x).lower(0.95) == pytest.approx(sampled, abs=3e-3)


def test_skewed_small_samples_hold_their_level() -> None:
    # 12% nearly impossible instances at N=8 (the Wilson-on-Kish bound passed 28% at the limit).
    rng = np.random.default_rng(3)
    truth = 0.12 * 0.02 + 0.88 * 0.8
    passes = 0
    reps = 400
    for _ in range(reps):
        q = np.where(rng.random(8) < 0.12, 0.02, rng.beta(8, 2, 8))
        scores = (rng.random((10, 8)) < q).astype(float)
        passes += stats.mean_bound(scores).lower(0.95) >= truth
    assert passes / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)


def test_fixed_mode_over_a_sampled_space_adds_the_resamplings() -> None:
    rng = np.random.default_rng(4)
    scores = (rng.random((6, 40)) < 0.7).astype(float)
    scores[2] = 0.0  # a collapsing format shared by every instance
    one = stats.mean_bound(scores)
    two = stats.mean_bound(scores, two_way=True)
    assert two.lower(0.95) < one.lower(0.95) and "t(5)" in two.method
    p = two.p_below(0.8)
    assert two.upper(1 - p) == pytest.approx(0.8, abs=1e-6)


def test_pair_variance_bound_does_not_trust_a_sample_without_spread() -> None:
    # Ten equal values: the chi-square bound says sigma = 0; pairs in [0, 1] cannot rule out a
    # rare value the sample missed.
    bound = stats.sample_std_bound(np.full(10, 0.7), bounded=True)
    assert bound.std == 0.0 and bound.upper(0.95) > 0.3
    assert stats.sample_std_bound(np.full(10, 0.7)).upper(0.95) == 0.0
    pairs = pair_variance_bound(np.random.default_rng(5).random(1000))
    assert pairs is not None and pairs.estimate == pytest.approx(1 / 12, abs=0.01)
    assert pair_variance_bound([0.5]) is None


def test_ilr_std_bound_comes_from_the_cells_at_any_n() -> None:
    rng = np.random.default_rng(6)
    q = rng.beta(2, 1, 30)
    scores = (rng.random((2, 30)) < q).astype(float)
    bound = stats.cell_std_bound(scores)
    truth = math.sqrt(float(np.mean(q * (1 - q))) / 30)
    assert bound.lower(0.95) < truth < bound.upper(0.95)
    assert bound.std == pytest.approx(float(np.std(scores.mean(axis=1), ddof=1)))
    p = bound.p_above(0.05)
    assert 0.0 <= p <= 1.0 and "within-instance variances" in bound.method


def test_fixed_std_bound_takes_the_more_conservative_side_of_chi_square_and_pairs() -> None:
    # Two collapsing formats among ten resamplings: heavy tails that a chi-square lower bound
    # (even kurtosis-corrected) reads as a breach more often than alpha.
    values = np.r_[np.full(8, 0.7), 0.15, 0.2] + np.linspace(0, 0.01, 10)
    chi = stats.sample_std_bound(values)
    both = stats.sample_std_bound(values, bounded=True)
    assert both.std == chi.std
    assert both.lower(0.95) <= chi.lower(0.95) and both.upper(0.95) >= chi.upper(0.95)
    assert both.p_above(0.1) >= chi.p_above(0.1)
    p = both.p_above(0.1)
    if 1e-6 < p < 1 - 1e-6:
        assert both.lower(1 - p) == pytest.approx(0.1, abs=1e-4)
