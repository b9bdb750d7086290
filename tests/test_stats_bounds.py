"""Clustered bounds (SPEC section 11): shapes, boundaries, and coverage by small seeded simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_reliable import stats


def _clustered_matrix(rng: np.random.Generator, n: int, n_inst: int, p: float) -> np.ndarray:
    """Binary cells whose instances differ in difficulty (correlated within instance)."""
    difficulty = rng.beta(2 * p / (1 - p), 2, size=n_inst) if p < 1 else np.ones(n_inst)
    return (rng.random((n, n_inst)) < difficulty[None, :]).astype(float)


def test_clustered_mean_is_the_mean_and_brackets_it() -> None:
    rng = np.random.default_rng(0)
    scores = _clustered_matrix(rng, 30, 100, 0.7)
    bound = stats.clustered_mean(scores)
    assert bound.estimate == pytest.approx(scores.mean())
    assert bound.lower(0.95) < bound.estimate < bound.upper(0.95)
    # Clustering: the instance-level variance dominates, far fewer effective cells than 3000.
    assert bound.clusters <= bound.n_eff < 0.5 * scores.size
    low, high = bound.interval(0.95)
    assert low < bound.lower(0.95) and high > bound.upper(0.95)


def test_all_ones_is_not_certain() -> None:
    bound = stats.clustered_mean(np.ones((10, 20)))
    assert bound.n_eff == 20  # one trial per instance, not 200 cells
    assert 0.8 < bound.lower(0.95) < 0.9
    assert bound.upper(0.95) == 1.0


def test_half_everywhere_contains_half() -> None:
    bound = stats.clustered_mean(np.full((4, 5), 0.5))
    low, high = bound.interval(0.95)
    assert bound.estimate == 0.5 and low < 0.5 < high


def test_two_way_is_wider_when_resamplings_differ() -> None:
    rng = np.random.default_rng(1)
    format_effect = rng.normal(0, 0.15, size=(10, 1))
    scores = np.clip(0.6 + format_effect + rng.normal(0, 0.1, size=(10, 50)), 0, 1)
    one = stats.clustered_mean(scores)
    two = stats.clustered_mean(scores, two_way=True)
    assert two.se > one.se and two.lower(0.95) < one.lower(0.95)
    assert "two-way" in two.method


def test_scores_outside_unit_interval_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        stats.clustered_mean(np.array([[0.2, 3.7]]))


def test_p_values_invert_the_bound() -> None:
    bound = stats.clustered_mean(_clustered_matrix(np.random.default_rng(2), 10, 40, 0.6))
    upper = bound.upper(0.95)
    assert bound.p_below(upper + 1e-6) < 0.05 < bound.p_below(upper - 1e-6)
    lower = bound.lower(0.95)
    assert bound.p_above(lower - 1e-6) < 0.05 < bound.p_above(lower + 1e-6)


def test_std_bound_uses_ddof_1_and_chi_square() -> None:
    values = np.array([0.5, 0.6, 0.7, 0.55, 0.65])
    bound = stats.sample_std_bound(values)
    assert bound.std == pytest.approx(float(np.std(values, ddof=1)))
    assert bound.lower(0.95) < bound.std < bound.upper(0.95)
    assert bound.p_above(bound.upper(0.95)) == pytest.approx(0.95, abs=1e-9)


def test_holm_is_step_down() -> None:
    reject, levels = stats.holm([0.01, 0.04, 0.03, 0.5], 0.05)
    assert reject.tolist() == [True, False, False, False]
    assert levels.tolist() == pytest.approx([0.0125, 0.025, 0.05 / 3, 0.05])
    reject, _ = stats.holm([0.001, 0.01, 0.02], 0.05)
    assert reject.all()


@pytest.mark.parametrize("p", [0.5, 0.8, 0.95])
def test_lower_bound_covers_at_the_promised_rate(p: float) -> None:
    """200 seeded gates of 20 resamplings x 40 instances: the one-sided 90% lower bound falls
    below the true mean at least ~90% of the time (within Monte Carlo error)."""
    rng = np.random.default_rng(int(p * 100))
    difficulty = rng.beta(2 * p / (1 - p), 2, size=5_000)
    truth = float(difficulty.mean())
    reps, covered = 200, 0
    for _ in range(reps):
        inst = rng.choice(difficulty, size=40)
        scores = (rng.random((20, 40)) < inst[None, :]).astype(float)
        covered += stats.clustered_mean(scores).lower(0.90) <= truth
    rate = covered / reps
    mc = math.sqrt(0.9 * 0.1 / reps)
    print(f"p={p}: coverage {rate:.3f} +- {mc:.3f}")
    assert rate >= 0.90 - 3 * mc


def test_instance_jackknife_is_the_leave_one_instance_out_variance_of_s2() -> None:
    from pytest_reliable.stats.bounds import instance_jackknife

    rng = np.random.default_rng(4)
    cells = (rng.random((12, 9)) < rng.random(9)).astype(float)
    left_out = [np.var(np.delete(cells, i, axis=1).mean(axis=1), ddof=1) for i in range(9)]
    brute = 8 / 9 * float(np.sum((np.array(left_out) - np.mean(left_out)) ** 2))
    assert instance_jackknife(cells) == pytest.approx(brute)


def test_a_format_effect_only_some_instances_feel_widens_the_fixed_mode_std_bound() -> None:
    """Issue 31 item 1: with a bad format felt by 3 of 8 instances, which instances were drawn
    decides the spread over resamplings; the bound's degrees of freedom see it (the per-instance
    variance rule it replaced saw only each instance's own cell noise)."""
    rng = np.random.default_rng(5)
    n, n_inst = 30, 8
    bad = rng.random(n) < 1 / 3
    feels = np.arange(n_inst) < 3
    accuracy = np.where(bad[:, None] & feels[None, :], 0.1, 0.9)
    cells = (rng.random((n, n_inst)) < accuracy).astype(float)
    bound = stats.sample_std_bound(cells.mean(axis=1), cells)
    plain = stats.sample_std_bound(cells.mean(axis=1))
    assert bound.df < 0.5 * plain.df
    assert bound.lower(0.95) < plain.lower(0.95)
