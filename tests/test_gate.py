"""Policies (SPEC section 11): how thresholds are decided, and small seeded error-rate checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pytest_reliable import stats
from pytest_reliable.calls.requests import CallResult
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.evaluate.evaluation import (
    CellResult,
    EvaluationSettings,
    ScoreMatrix,
    grade_cells,
)
from pytest_reliable.evaluate.evaluation import plan_cells as make_cells
from pytest_reliable.models.base import ModelResponse
from pytest_reliable.space import Space
from pytest_reliable.tasks.builtin import MultipleChoice
from pytest_reliable.verdict.gate import (
    ThresholdCheck,
    decide_thresholds,
    proportion_evidence,
    reliable_thresholds,
    spread_evidence,
)
from pytest_reliable.verdict.summary import summarize


def _bound(p: float, n_inst: int = 50, n: int = 10, seed: int = 0) -> stats.ProportionBound:
    rng = np.random.default_rng(seed)
    return stats.clustered_mean((rng.random((n, n_inst)) < p).astype(float))


def test_pass_on_evidence_needs_every_bound_to_clear() -> None:
    good, weak = _bound(0.9), stats.ProportionBound(0.63, 0.03, 50, 500, "test")
    claims = {
        "min_score": (0.6, proportion_evidence(good.estimate, [good], "min")),
        "min_worst": (0.6, proportion_evidence(weak.estimate, [good, weak], "min")),
    }
    checks = {c.name: c for c in decide_thresholds(claims, "pass-on-evidence", 0.95)}
    assert checks["min_score"].passed and checks["min_score"].bound == good.lower(0.95)
    # The worst group's observed value clears 0.6 but its lower bound does not.
    assert checks["min_worst"].observed is not None and checks["min_worst"].observed > 0.6
    assert not checks["min_worst"].passed
    assert checks["min_worst"].bound == pytest.approx(weak.lower(0.95))


def test_fail_on_evidence_fails_only_a_clear_breach_with_holm() -> None:
    at_limit, below = _bound(0.6, seed=1), _bound(0.3, seed=2)
    claims = {
        "min_score": (0.6, proportion_evidence(at_limit.estimate, [at_limit], "min")),
        "min_worst": (0.6, proportion_evidence(below.estimate, [at_limit, below], "min")),
    }
    checks = {c.name: c for c in decide_thresholds(claims, "fail-on-evidence", 0.95)}
    assert checks["min_score"].passed
    assert not checks["min_worst"].passed
    assert checks["min_worst"].bound is not None and checks["min_worst"].bound < 0.6
    assert "Holm over 3 claims" in str(checks["min_worst"].method)


def test_estimate_compares_the_point_and_says_so() -> None:
    b = _bound(0.61)
    [check] = decide_thresholds(
        {"min_score": (0.6, proportion_evidence(b.estimate, [b], "min"))}, "estimate", 0.95
    )
    assert check.passed == (b.estimate >= 0.6) and check.bound == check.observed
    assert "no error control" in str(check.method)
    assert "no error control" in check.describe()


def test_min_lower_ci_is_its_own_bound_under_every_policy() -> None:
    for policy in ("pass-on-evidence", "fail-on-evidence", "estimate"):
        [check] = decide_thresholds({}, policy, 0.95,
                                    fixed={"min_lower_ci": (0.5, 0.48, "wilson")})
        assert not check.passed and check.bound == 0.48 and check.decide == policy


def _pairs(diff: list[float], se: list[float], df: float = 40, skew: float = 0.0) -> stats.Pairs:
    size = len(diff)
    return stats.Pairs(np.arange(size), np.arange(size) + 1, np.array(diff), np.array(se),
                       np.full(size, skew), np.full(size, df), np.full(size, df + 1))


def test_spread_bound_is_two_sided_for_a_breach() -> None:
    evidence = spread_evidence(0.3, [_pairs([0.3, -0.05], [0.05, 0.05])])
    assert evidence.unfavourable(0.95).max() == pytest.approx(0.3 + 1.6849 * 0.05, abs=1e-3)
    p = evidence.p_breach(0.1)
    assert p[0] < 0.01 and p[1] == pytest.approx(1.0)


def test_checklist_checks_keep_their_shape() -> None:
    check = ThresholdCheck("max_flip_rate", 0.0, 0.2, "max")
    assert check.as_dict() == {"name": "max_flip_rate", "limit": 0.0, "observed": 0.2,
                               "passed": False}


def test_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="decide must be one of"):
        decide_thresholds({}, "maybe", 0.95)


# -- small simulations through the real summary -------------------------------------------------
DATA = [{"question": f"q{i}", "choices": ["a", "b", "c", "d"], "answer": i % 4} for i in range(30)]


def simulated(
    n: int, mode: str, accuracy: Callable[[CellResult], float], seed: int,
    data: list[dict[str, Any]] | None = None, space: Space | None = None,
) -> tuple[ScoreMatrix, Space]:
    """A model of known truth: each cell right with probability ``accuracy(cell)``."""
    data = DATA if data is None else data
    space = space or Space.default()
    settings = EvaluationSettings(n=n, mode=mode, seed=seed)
    cells = make_cells(data, MultipleChoice(), space, settings)
    rng = np.random.default_rng(seed)
    results = []
    for cell in cells:
        gold = cell.prompt.gold_position or 0
        right = rng.random() < accuracy(cell)
        label = cell.prompt.labels[gold if right else (gold + 1) % 4]
        results.append(CallResult(ModelResponse(label)))
    return grade_cells(data, MultipleChoice(), cells, results, settings), space


def _rate(passes: int, reps: int) -> tuple[float, float]:
    rate = passes / reps
    return rate, math.sqrt(max(rate * (1 - rate), 0.25 / reps) / reps)


def test_a_model_at_the_limit_rarely_passes_on_evidence() -> None:
    reps, passes = 60, 0
    spec = ReliableSpec(n=5, min_score=0.7)
    for seed in range(reps):
        matrix, space = simulated(5, "ilr", lambda cell: 0.7, seed)
        summary = summarize(matrix, space, mode="ilr", eps=0.01, delta=0.1)
        [check] = reliable_thresholds(spec, summary, "pass-on-evidence")
        passes += check.passed
    rate, mc = _rate(passes, reps)
    print(f"at the limit, pass-on-evidence: pass rate {rate:.3f} +- {mc:.3f}")
    assert rate <= 0.05 + 2 * mc


def test_a_prompt_insensitive_model_rarely_fails_on_evidence() -> None:
    reps, fails = 60, 0
    spec = ReliableSpec(n=6, mode="fixed", max_spread=0.1, min_worst=0.7)
    for seed in range(reps):
        matrix, space = simulated(6, "fixed", lambda cell: 0.75, seed)
        summary = summarize(matrix, space, mode="fixed", eps=0.01, delta=0.1)
        checks = reliable_thresholds(spec, summary, "fail-on-evidence")
        fails += not all(check.passed for check in checks)
    rate, mc = _rate(fails, reps)
    print(f"prompt-insensitive, fail-on-evidence: fail rate {rate:.3f} +- {mc:.3f}")
    assert rate <= 0.05 + 2 * mc
