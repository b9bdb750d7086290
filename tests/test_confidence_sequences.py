"""Anytime-valid bounds (`stats.betting_cs`): coverage at data-dependent stopping times.

A confidence sequence must hold the mean at *every* t at once with probability >= 1 - alpha, so
it also holds at any stopping time a gate chooses by peeking. The simulations here are modest and
seeded; benchmarks/bench_calls_to_verdict.py runs the full check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_reliable.stats import asymptotic_cs, betting_cs

MEAN = 0.7


def _sequences(count: int, length: int, seed: int) -> np.ndarray:
    """Resampling scores: means over 20 instances of 0/1 answers, a format effect per resampling."""
    rng = np.random.default_rng(seed)
    format_effect = np.clip(MEAN + 0.1 * rng.standard_normal((count, length)), 0, 1)
    return rng.binomial(20, format_effect) / 20


def test_uniform_coverage_so_any_stopping_time_is_covered() -> None:
    alpha, count = 0.1, 150
    x = _sequences(count, 120, seed=1)
    ever_missed = np.zeros(count, dtype=bool)
    missed_when_peeking_stops = np.zeros(count, dtype=bool)
    for j in range(count):
        cs = betting_cs(x[j], alpha)
        outside = (cs.low > MEAN) | (cs.high < MEAN)
        ever_missed[j] = outside.any()
        # A data-dependent stopping time: stop at the first t where the lower bound is highest
        # so far and above 0.65 (an eager gate), else at the end.
        hits = np.flatnonzero(cs.low > 0.65)
        t = hits[0] if hits.size else len(cs.low) - 1
        missed_when_peeking_stops[j] = outside[t]
    rate = ever_missed.mean()
    se = math.sqrt(alpha * (1 - alpha) / count)
    print(f"P(ever outside) = {rate:.3f} (promised <= {alpha}, MC se {se:.3f})")
    assert rate <= alpha + 2 * se
    assert missed_when_peeking_stops.mean() <= rate


def test_a_fixed_n_interval_rechecked_is_not_anytime_valid() -> None:
    """The contrast the sequence exists for: a t-interval checked after every observation."""
    alpha, count = 0.1, 200
    x = _sequences(count, 200, seed=2)
    t = np.arange(1, 201)
    means = np.cumsum(x, axis=1) / t
    sd = np.array([[np.std(row[:k], ddof=1) if k > 1 else 1.0 for k in t] for row in x])
    z = 1.645
    naive_missed = (np.abs(means - MEAN) > z * sd / np.sqrt(t))[:, 5:].any(axis=1).mean()
    assert naive_missed > 2 * alpha  # peeking inflates the nominal 10% several-fold


def test_one_sided_bounds() -> None:
    x = _sequences(1, 300, seed=3)[0]
    lower, upper, both = (betting_cs(x, 0.05, side=s) for s in ("lower", "upper", "two-sided"))
    assert np.all(lower.high == 1.0) and np.all(upper.low == 0.0)
    # A one-sided sequence spends all of alpha on its side: tighter than the two-sided one.
    assert np.all(lower.low >= both.low - 1e-12) and np.all(upper.high <= both.high + 1e-12)
    assert lower.low[-1] > both.low[-1]
    assert lower.low[-1] < x.mean() < upper.high[-1]


def test_bounds_shrink_and_never_widen() -> None:
    x = _sequences(1, 400, seed=4)[0]
    cs = betting_cs(x, 0.05)
    assert np.all(np.diff(cs.low) >= 0) and np.all(np.diff(cs.high) <= 0)  # running intersection
    assert cs.high[-1] - cs.low[-1] < 0.06
    assert cs.high[9] - cs.low[9] > 0.2
    assert cs.alpha == 0.05 and cs.side == "two-sided" and len(cs.low) == 400


def test_extreme_observations() -> None:
    ones = betting_cs(np.ones(50), 0.05)
    assert ones.high[-1] == 1.0 and ones.low[-1] > 0.85  # bets are truncated at 1/2
    zeros = betting_cs(np.zeros(50), 0.05)
    assert zeros.low[-1] == 0.0 and zeros.high[-1] == pytest.approx(1 - ones.low[-1])


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"x": [0.5, 1.2]}, "[0, 1]"),
        ({"x": [-0.1]}, "[0, 1]"),
        ({"x": []}, "not be empty"),
        ({"x": [0.5], "alpha": 1.0}, "alpha"),
        ({"x": [0.5], "side": "left"}, "side"),
    ],
)
def test_invalid_arguments(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        betting_cs(**kwargs)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- asymptotic sequence


def test_asymptotic_sequence_uniform_coverage_after_its_burn_in() -> None:
    alpha, count = 0.1, 400
    x = _sequences(count, 100, seed=5)
    ever_missed = np.zeros(count, dtype=bool)
    for j in range(count):
        cs = asymptotic_cs(x[j], alpha, t_opt=25)
        ever_missed[j] = ((cs.low > MEAN) | (cs.high < MEAN)).any()
    rate = ever_missed.mean()
    se = math.sqrt(alpha * (1 - alpha) / count)
    print(f"asymptotic: P(ever outside) = {rate:.3f} (promised <= {alpha}, MC se {se:.3f})")
    assert rate <= alpha + 2 * se


def test_asymptotic_sequence_is_tighter_than_betting() -> None:
    x = _sequences(1, 60, seed=6)[0]
    betting, asymptotic = betting_cs(x, 0.05), asymptotic_cs(x, 0.05)
    # No bound before the burn-in (t_min=10): [0, 1] for scores in [0, 1].
    assert np.all(asymptotic.low[:9] == 0.0) and np.all(asymptotic.high[:9] == 1.0)
    width_b = betting.high[-1] - betting.low[-1]
    width_a = asymptotic.high[-1] - asymptotic.low[-1]
    assert width_a < 0.8 * width_b
    assert asymptotic.low[-1] < x.mean() < asymptotic.high[-1]
