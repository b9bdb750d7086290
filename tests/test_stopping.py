"""The early-stopping rule (`pytest_reliable.evaluate.stopping`) on simulated score matrices."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from pytest_reliable import stats
from pytest_reliable.evaluate.stopping import (
    EARLY_SHARE,
    FIRST_LOOK,
    LATE,
    batch_size,
    check,
    check_step,
    gate_agrees,
    mean_bounds,
    settled,
)


@pytest.mark.parametrize("decide", ["pass-on-evidence", "fail-on-evidence", "estimate"])
def test_settled_when_the_bounds_exclude_the_limit(decide: str) -> None:
    assert settled("min", 0.5, 0.6, 0.9, decide)      # clears: pass settled
    assert settled("min", 0.5, 0.1, 0.4, decide)      # falls short: fail settled
    assert not settled("min", 0.5, 0.4, 0.6, decide)  # either way
    assert settled("max", 0.2, 0.0, 0.1, decide) and settled("max", 0.2, 0.3, 0.5, decide)
    assert not settled("max", 0.2, 0.1, 0.3, decide)


def test_bad_policy_or_direction() -> None:
    with pytest.raises(ValueError, match="decide"):
        settled("min", 0.5, 0.6, 0.9, "vote")
    with pytest.raises(ValueError, match="direction"):
        settled("least", 0.5, 0.6, 0.9, "estimate")


def _scores(mean: float, n: int, rng: np.random.Generator) -> np.ndarray:
    a = np.clip(mean + 0.1 * rng.standard_normal(100), 0, 1)
    return (rng.random((n, 100)) < a[None, :]).astype(float)


def test_clear_cut_models_settle_and_a_model_at_the_limit_does_not() -> None:
    rng = np.random.default_rng(0)
    kwargs = {"decide": "pass-on-evidence", "confidence": 0.95, "n_planned": 100}
    assert check({"min_score": ("min", 0.7)}, _scores(0.9, 20, rng), **kwargs).stop
    assert check({"min_score": ("min", 0.7)}, _scores(0.5, 20, rng), **kwargs).stop
    assert not check({"min_score": ("min", 0.7)}, _scores(0.7, 20, rng), **kwargs).stop
    # Before the asymptotic sequence's burn-in nothing settles.
    assert not check({"min_score": ("min", 0.7)}, _scores(0.9, 5, rng), **kwargs).stop


def test_instance_uncertainty_keeps_a_gate_on_few_instances_running() -> None:
    """Three instances cannot vouch for instances like them, however many resamplings."""
    rng = np.random.default_rng(1)
    scores = (rng.random((60, 3)) < np.array([0.95, 0.9, 0.4])).astype(float)
    decision = check({"min_score": ("min", 0.6)}, scores, decide="pass-on-evidence",
                     confidence=0.95)
    assert not decision.stop and "not settled" in decision.reason


def test_thresholds_without_anytime_bounds_never_stop_and_canonical_ones_do() -> None:
    scores = np.ones((30, 10))
    uncovered = check({"min_score": ("min", 0.5), "max_spread": ("max", 0.1)}, scores,
                      decide="pass-on-evidence", confidence=0.95)
    assert not uncovered.stop and "max_spread" in uncovered.reason
    canonical = check({"min_lower_ci": ("min", 0.5)}, scores[:2], decide="estimate",
                      confidence=0.95)
    assert canonical.stop


def test_a_clear_cut_model_stops_before_ten_resamplings_and_not_before_the_first_look() -> None:
    """The one burn-in of 10 capped every saving at (n + 1) / 11, 2.8x at n=30 (issue 30)."""
    rng = np.random.default_rng(2)
    kwargs = {"decide": "pass-on-evidence", "confidence": 0.95, "n_planned": 30}
    scores = _scores(0.9, 30, rng)
    assert check({"min_score": ("min", 0.7)}, scores[:FIRST_LOOK], **kwargs).stop
    assert not check({"min_score": ("min", 0.7)}, scores[:FIRST_LOOK - 1], **kwargs).stop


def test_the_early_looks_spend_a_share_of_alpha_the_late_sequence_the_rest() -> None:
    """Union bound: the early sequence is stricter than one at the full alpha, the late one
    too, so the two together never spend more than alpha."""
    rng = np.random.default_rng(3)
    scores = _scores(0.8, 12, rng)
    x = scores.mean(axis=1)
    for t, share, t_min in ((8, EARLY_SHARE, FIRST_LOOK), (12, 1 - EARLY_SHARE, LATE)):
        bounds = mean_bounds(scores[:t], 0.95, t_opt=10)
        stricter = stats.asymptotic_cs(x[:t], 0.05 * share, t_opt=LATE if t < LATE else 10,
                                       t_min=t_min)
        full = stats.asymptotic_cs(x[:t], 0.05, t_opt=LATE if t < LATE else 10, t_min=t_min)
        assert bounds.cs_low == pytest.approx(float(stricter.low[-1]))
        assert bounds.cs_low < float(full.low[-1]) and bounds.cs_high > float(full.high[-1])


def test_a_first_batch_then_about_thirty_checks() -> None:
    assert batch_size(30) == 2 and batch_size(100) == 5
    assert check_step(30) == 1 and check_step(31) == 2 and check_step(100) == 4
    assert check_step(1) == 1


def _fixed_mode(seed: int) -> np.ndarray:
    """30 resamplings x 100 instances of a fixed-mode gate: one format per resampling, whose
    effect (+-0.05) every instance shares; the model is about 0.1 above a limit of 0.7."""
    rng = np.random.default_rng(seed)
    a = np.clip(0.8 + 0.15 * rng.standard_normal(100), 0.05, 0.95)
    f = 0.05 * rng.choice([-1.0, 1.0], 30)
    return (rng.random((30, 100)) < np.clip(a[None, :] + f[:, None], 0, 1)).astype(float)


def test_a_stop_waits_until_the_gates_own_bound_decides_as_the_anytime_bounds_do() -> None:
    """Seed 92: after 14 resamplings the anytime bounds clear 0.7, but the fixed-mode gate's own
    bound (Gaffke + t, at alpha/2 each) is 0.697 there: stopping would have failed a model whose
    full run passes (0.725). With the gate's bound given, the check waits."""
    scores = _fixed_mode(92)
    kwargs = {"decide": "pass-on-evidence", "confidence": 0.95, "n_planned": 30}
    thresholds = {"min_score": ("min", 0.7)}
    first = next(m for m in range(2, 30) if check(thresholds, scores[:m], **kwargs).stop)
    assert first == 14  # where the anytime bounds alone stop
    gate = stats.mean_bound(scores[:first], two_way=True)
    assert gate.lower(0.95) < 0.7
    waited = check(thresholds, scores[:first], gate=lambda: gate, **kwargs)
    assert not waited.stop and "gate's own bound" in waited.reason
    stop = next((m for m in range(first + 1, 30) if check(
        thresholds, scores[:m], gate=functools.partial(stats.mean_bound, scores[:m], two_way=True),
        **kwargs).stop),
        30)  # or the full run
    assert stats.mean_bound(scores[:stop], two_way=True).lower(0.95) >= 0.7
    assert stats.mean_bound(scores, two_way=True).lower(0.95) >= 0.7  # the full run passes


def test_the_gate_can_disagree_only_with_the_side_its_policy_needs_evidence_for() -> None:
    narrow = stats.mean_bound(_fixed_mode(3)[:20], two_way=True)  # about [0.68, 0.82]
    wide = stats.mean_bound(_fixed_mode(3)[:3, :10], two_way=True)
    for gate in (narrow, wide):
        # A settled failure under pass-on-evidence, a settled pass under fail-on-evidence and
        # either under estimate: the gate's bound sits beyond its own point estimate.
        assert gate_agrees("min", 0.95, 0.5, 0.9, gate, decide="pass-on-evidence",
                           confidence=0.95)
        assert gate_agrees("min", 0.3, 0.5, 0.9, gate, decide="fail-on-evidence",
                           confidence=0.95)
        assert gate_agrees("min", 0.3, 0.5, 0.9, gate, decide="estimate", confidence=0.95)
    assert gate_agrees("min", 0.65, 0.66, 0.9, narrow, decide="pass-on-evidence",
                       confidence=0.95)
    assert not gate_agrees("min", 0.65, 0.66, 0.9, wide, decide="pass-on-evidence",
                           confidence=0.95)
    assert gate_agrees("min", 0.85, 0.5, 0.84, narrow, decide="fail-on-evidence",
                       confidence=0.95)
    assert not gate_agrees("min", 0.85, 0.5, 0.84, wide, decide="fail-on-evidence",
                           confidence=0.95)
    # Holm's strictest level for a family of claims: alpha / family.
    assert not gate_agrees("min", 0.85, 0.5, 0.84, narrow, decide="fail-on-evidence",
                           confidence=0.95, family=1000)
