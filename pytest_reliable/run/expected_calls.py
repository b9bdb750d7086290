"""The calls a test that stops early is expected to make, under the model the plan simulates.

``--reliable-plan`` quotes, for a test with ``stop_early`` or ``search="adaptive"`` whose
resamplings only ``min_score`` / ``min_win_rate`` depend on (thresholds of the canonical pass
settle after the first batch), the resamplings its stopping rule runs on simulated gates of the
planned design (`stats.power.mean_scores_simulated`: every answer structure the plan simulates,
the true score at the threshold's own figure, where the gate passes 80% of the time), through
the rule itself (`evaluate.stopping.check` on each batch with the gate's own bound, as the run
checks). A gate whose truth lies further from the limit stops sooner; one nearer runs longer;
none runs more than ``n``.
Ranges under adaptive search are not simulated here (their cells follow the groups' answers):
the plan gives their worst case. No pytest here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pytest_reliable import stats
from pytest_reliable.evaluate.stopping import (
    CANONICAL_ONLY,
    RESAMPLING_MEAN,
    batch_size,
    check,
    check_step,
)
from pytest_reliable.stats import power

EXPECTED_REPS = 40
"""Simulated gates per answer structure (each one a few dozen stopping checks)."""


@dataclass(frozen=True)
class ExpectedStop:
    """The median resamplings a stopping gate ran, per simulated answer structure: the span
    ``low``-``high`` over the structures, at the true score ``truth``."""

    low: int
    high: int
    truth: float

    def describe(self, instances: int, k: int, n: int) -> str:
        span = str(self.low) if self.low == self.high else f"{self.low}-{self.high}"
        calls = (f"{instances * (self.low + k)}" if self.low == self.high
                 else f"{instances * (self.low + k)}-{instances * (self.high + k)}")
        return (f"expected {span} of {n} resamplings ({calls} calls) for a model at the figure "
                f"{self.truth:.3f}, the same under every format (median of {EXPECTED_REPS} "
                "simulated gates per answer structure); format effects make it run longer, a "
                "model further from the limit stops sooner")


def settled_by_the_mean(thresholds: Mapping[str, tuple[str, float]]) -> bool:
    """Whether only the mean over resamplings (and the canonical pass) decides when to stop."""
    names = set(thresholds)
    return bool(names & RESAMPLING_MEAN) and names <= RESAMPLING_MEAN | CANONICAL_ONLY


def expected_stop(design: power.Design, thresholds: Mapping[str, tuple[str, float]],
                  truth: float, *, adaptive: bool) -> ExpectedStop:
    """Resamplings the stopping rule runs on simulated gates of ``design`` at ``truth``:
    ``adaptive`` rounds of `batch_size` (`evaluate.adaptive`), else a first batch and then
    `check_step` (`evaluate.stopping.run_until_settled`)."""
    n = design.resamplings
    first = min(batch_size(n), n)
    step = batch_size(n) if adaptive else check_step(n)
    medians = []
    for structure in power.STRUCTURES:
        scores = power.mean_scores_simulated(design, truth, structure, EXPECTED_REPS)
        stops = []
        for gate in scores:
            ran = first
            while ran < n and not check(
                thresholds, gate[:ran], decide=design.decide, confidence=design.confidence,
                n_planned=n, gate=functools.partial(_gate_bound, design, gate[:ran]),
            ).stop:
                ran = min(n, ran + step)
            stops.append(ran)
        medians.append(int(np.ceil(np.median(stops))))
    return ExpectedStop(min(medians), max(medians), truth)


def _gate_bound(design: power.Design, scores: np.ndarray) -> stats.MeanBound:
    """The gate's own bound on these rows, as the run asks it (`verdict.summary.gate_mean_bound`:
    two-way while a fixed-mode plan has run fewer resamplings than its space has formats)."""
    sampled = design.mode == "fixed" and (design.units == 0 or scores.shape[0] < design.units)
    return stats.mean_bound(scores, two_way=sampled)


__all__ = ["EXPECTED_REPS", "ExpectedStop", "expected_stop", "settled_by_the_mean"]
