"""Paired group estimates (SPEC section 11, issue 19 items 1 and 6): unbiased in ilr and fixed
mode, instance difficulty cancels, bounds invert their p-values, the noise floor, and the set of
groups that could be the worst. Small seeded simulations; the published rates are
benchmarks/bench_gate_errors.py's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_reliable import stats
from pytest_reliable.stats import groups


def _ilr(rng: np.random.Generator, reps: int, n: int, n_inst: int, factors: np.ndarray,
         p: float = 0.7) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` ilr matrices: each cell draws its group uniformly; instance accuracy ~ Beta
    (intra-instance correlation 0.5), a cell right with probability accuracy x its group's
    factor."""
    inst = rng.beta(p, 1 - p, size=(reps, 1, n_inst))
    labels = rng.integers(0, factors.size, size=(reps, n, n_inst))
    scores = (rng.random(labels.shape) < inst * factors[labels]).astype(float)
    return scores, labels


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_ilr_estimates_are_unbiased_at_any_number_of_resamplings(n: int) -> None:
    # One value always wrong: its score is 0, the other's 0.7. Comparing a cell with its
    # instance's mean including itself reported 0.7 / n (n=2: 0.35) for it.
    rng = np.random.default_rng(n)
    scores, labels = _ilr(rng, 300, n, 100, np.array([1.0, 0.0]))
    counts, sums = groups.tallies(scores, labels, 2)
    estimates = groups.fit(counts, sums).estimates
    bias = estimates.mean(axis=0) - np.array([0.7, 0.0])
    error = estimates.std(axis=0) / math.sqrt(300)
    assert (np.abs(bias) < 4 * error + 0.002).all(), (bias, error)


def test_fixed_mode_estimates_are_the_groups_cell_means() -> None:
    rng = np.random.default_rng(1)
    labels = np.repeat(rng.integers(0, 4, size=(12, 1)), 30, axis=1)  # one group per resampling
    scores = (rng.random((12, 30)) < 0.6).astype(float)
    effects = stats.paired_group_effects(scores, labels, 4)
    for g in range(4):
        if (labels == g).any():
            assert effects.estimates[g] == pytest.approx(scores[labels == g].mean())
            assert effects.observed[g] == pytest.approx(scores[labels == g].mean())


def test_paired_effects_cancel_instance_difficulty() -> None:
    # A prompt-insensitive model: every instance always right or always wrong, whatever the group.
    rng = np.random.default_rng(3)
    right = rng.random(60) < 0.7
    scores = np.tile(right.astype(float), (30, 1))
    labels = rng.integers(0, 6, size=scores.shape)
    effects = stats.paired_group_effects(scores, labels, 6)
    assert np.allclose(effects.estimates, scores.mean())
    pairs = effects.pairs()
    assert np.allclose(pairs.diff, 0.0)
    # A pair that never differed on 60 instances is not declared identical.
    assert (pairs.upper(0.95) > 0.02).all()
    # Observed group means differ (groups hold different instances); paired ones do not.
    assert np.ptp(effects.observed) > 0.01


def test_paired_effects_find_a_bad_group() -> None:
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 3, size=(30, 80))
    p = np.where(labels == 2, 0.3, 0.8)
    scores = (rng.random(labels.shape) < p).astype(float)
    effects = stats.paired_group_effects(scores, labels, 3)
    assert effects.upper(0.95)[2] < effects.lower(0.95)[0]
    assert effects.worst_candidates(0.95).tolist() == [2]


def test_cells_in_no_group_are_left_out() -> None:
    rng = np.random.default_rng(5)
    scores = (rng.random((6, 40)) < 0.5).astype(float)
    labels = rng.integers(0, 2, size=scores.shape)
    labels[:, :10] = -1  # e.g. instances without options: no displayed position
    kept = stats.paired_group_effects(scores[:, 10:], labels[:, 10:], 2)
    effects = stats.paired_group_effects(scores, labels, 2)
    assert np.allclose(effects.estimates, kept.estimates)
    assert np.allclose(effects.se(), kept.se())


def test_bounds_invert_their_p_values() -> None:
    rng = np.random.default_rng(6)
    scores, labels = _ilr(rng, 1, 5, 40, np.array([1.0, 0.8, 0.6]))
    effects = stats.paired_group_effects(scores[0], labels[0], 3)
    upper, lower = effects.upper(0.95), effects.lower(0.95)
    for g in range(3):
        up, low = float(upper[g]), float(lower[g])
        assert effects.p_below(up + 1e-6)[g] < 0.05 < effects.p_below(up - 1e-6)[g]
        assert effects.p_above(low - 1e-6)[g] < 0.05 < effects.p_above(low + 1e-6)[g]


def test_a_group_whose_cells_were_all_right_claims_no_certainty() -> None:
    scores = np.ones((2, 8))
    labels = np.array([[0] * 8, [1] * 8])
    effects = stats.paired_group_effects(scores, labels, 2)
    # Eight instances, every cell right: Wilson's bound on 8 trials (t on 7 df), not 1.0.
    assert effects.lower(0.95) == pytest.approx(8 / (8 + 1.8946**2), abs=1e-3)


def test_sampled_resamplings_add_their_error_in_fixed_mode() -> None:
    rng = np.random.default_rng(7)
    fmt = rng.normal(0, 0.15, size=(10, 1))  # formats differ: which ones were drawn matters
    labels = np.repeat(np.array([0, 1] * 5)[:, None], 50, axis=1)
    scores = np.clip(0.6 + fmt + rng.normal(0, 0.1, size=(10, 50)), 0, 1)
    listed = stats.paired_group_effects(scores, labels, 2)
    sampled = stats.paired_group_effects(scores, labels, 2, resamplings_sampled=True)
    assert np.allclose(listed.estimates, sampled.estimates)
    assert (sampled.se() > 1.5 * listed.se()).all()
    assert (sampled.df() < listed.df()).all()


def _fixed_rows(rows: list[int], n_inst: int = 40) -> np.ndarray:
    """Fixed-mode labels: one value per resampling, for every instance."""
    return np.repeat(np.array(rows)[:, None], n_inst, axis=1)


def test_sampled_values_need_every_value_they_average_over_drawn_twice() -> None:
    # Fixed mode, 7 resamplings sampled from a larger space: an enumerator's 2 values average
    # over an instruction's 3 listed values. Every instruction drawn twice or more: bounded;
    # one never drawn (the run cannot tell how variants with it score) or drawn once (no
    # variation of its variants shows): no bound for any enumerator value.
    rng = np.random.default_rng(11)
    scores = (rng.random((7, 40)) < 0.7).astype(float)
    enumerator = _fixed_rows([0, 1, 0, 1, 0, 1, 0])

    def bounded(instruction_rows: list[int] | None, sampled: bool = True) -> list[bool]:
        over = [] if instruction_rows is None else [(_fixed_rows(instruction_rows), 3)]
        effects = stats.paired_group_effects(scores, enumerator, 2, resamplings_sampled=sampled,
                                             spans_variants=True, averages_over=over)
        assert np.isfinite(effects.estimates).all()
        lower = effects.lower(0.95)
        assert ((lower > 0) == np.isfinite(effects.se())).all()
        return np.isfinite(effects.se()).tolist()

    assert bounded([0, 1, 2, 0, 1, 2, 0]) == [True, True]
    assert bounded([0, 1, 0, 1, 0, 1, 0]) == [False, False]  # instruction 2 never drawn
    assert bounded([0, 1, 2, 0, 1, 0, 1]) == [False, False]  # instruction 2 drawn once
    assert bounded(None) == [True, True]  # nothing said about what the values average over
    assert bounded([0, 1, 0, 1, 0, 1, 0], sampled=False) == [True, True]  # every variant listed


def test_a_sampled_value_drawn_by_one_resampling_has_no_bound() -> None:
    rng = np.random.default_rng(12)
    scores = (rng.random((6, 40)) < 0.7).astype(float)
    effects = stats.paired_group_effects(scores, _fixed_rows([0, 1, 1, 1, 1, 1]), 2,
                                         resamplings_sampled=True, spans_variants=True)
    assert np.isfinite(effects.se()).tolist() == [False, True]
    assert effects.lower(0.95)[0] == 0.0 and effects.upper(0.95)[0] == 1.0


def test_noise_floor_of_a_random_model_matches_its_spread() -> None:
    rng = np.random.default_rng(5)
    scores = (rng.random((30, 100)) < 0.7).astype(float)
    labels = rng.integers(0, 8, size=scores.shape)
    effects = stats.paired_group_effects(scores, labels, 8)
    spread = float(np.nanmax(effects.estimates) - np.nanmin(effects.estimates))
    floor = stats.noise_floor(scores, [(labels, 8)], permutations=200, seed=0)
    assert 0.5 * floor < spread < 2.0 * floor
    assert stats.noise_floor(np.ones((30, 100)), [(labels, 8)]) == 0.0


def test_noise_floor_uses_the_same_estimator() -> None:
    # At n=2 the least-squares spread of a prompt-insensitive model is about twice what the
    # old including-itself estimator showed; the floor must follow the estimator.
    rng = np.random.default_rng(8)
    reps, spreads, floors = 200, [], []
    for _ in range(reps):
        scores = (rng.random((2, 100)) < 0.6).astype(float)
        labels = rng.integers(0, 2, size=scores.shape)
        effects = stats.paired_group_effects(scores, labels, 2)
        spreads.append(abs(effects.estimates[0] - effects.estimates[1]))
        floors.append(stats.noise_floor(scores, [(labels, 2)], permutations=50, seed=1))
    assert np.mean(floors) == pytest.approx(np.mean(spreads), rel=0.15)


def test_worst_candidates_hold_the_true_worst_at_the_promised_rate() -> None:
    """Five groups, the two worst 0.02 apart: the set holds the true worst in >= 95% of runs
    (within Monte Carlo error) and drops the clearly better groups."""
    rng = np.random.default_rng(9)
    factors = np.array([1.0, 1.0, 0.9, 0.72, 0.7])
    reps, held, sizes = 200, 0, []
    for _ in range(reps):
        scores, labels = _ilr(rng, 1, 10, 100, factors)
        found = stats.paired_group_effects(scores[0], labels[0], 5).worst_candidates(0.95)
        held += 4 in found
        sizes.append(found.size)
    rate, mc = held / reps, math.sqrt(0.05 * 0.95 / reps)
    print(f"worst set holds the worst {rate:.3f}; mean size {np.mean(sizes):.2f}")
    assert rate >= 0.95 - 2 * mc
    assert np.mean(sizes) < 3.0


def test_worst_candidates_compare_across_dimensions() -> None:
    rng = np.random.default_rng(10)
    labels_a = rng.integers(0, 2, size=(10, 80))
    labels_b = rng.integers(0, 3, size=(10, 80))
    p = np.where(labels_b == 2, 0.2, 0.8)
    scores = (rng.random(labels_a.shape) < p).astype(float)
    a = stats.paired_group_effects(scores, labels_a, 2)
    b = stats.paired_group_effects(scores, labels_b, 3)
    found_a, found_b = stats.worst_candidates([a, b], 0.95)
    assert found_a.size == 0 and found_b.tolist() == [2]


def test_bad_labels_are_refused() -> None:
    with pytest.raises(ValueError, match="labels must be in"):
        stats.paired_group_effects(np.ones((2, 3)), np.full((2, 3), 5), 2)
    with pytest.raises(ValueError, match="shape"):
        stats.paired_group_effects(np.ones((2, 3)), np.zeros((3, 2)), 2)
