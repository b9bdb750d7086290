"""Benchmark: model calls to a verdict, with and without early stopping, and the error rates.

Run from the repository root::

    python benchmarks/bench_calls_to_verdict.py [--reps 200] [--n 100] [--instances 200]
        [--mode fixed|ilr]

Simulated models of known truth: instance i has accuracy a_i (a Beta sample, rescaled into
[0.05, 0.95]), each format an effect of +-0.05 (fair coin), and a cell is right with probability
a_i + its format's effect: the true score over instances like these and over the space is exactly
the Beta mean, placed at distances -0.1, 0, 0.05, 0.1 and 0.2 from the limit ``min_score=0.7``.
``--mode fixed`` (the default): one format per resampling, shared by every instance (fixed mode
over a sampled space); ``--mode ilr``: each cell draws its own format (ilr mode, the plugin's
default). Each gate draws fresh instances and resamplings.

Every gate decides ``min_score`` under pass-on-evidence as the plugin does, on the plugin's own
bound (`stats.mean_bound`: Gaffke's bound on the per-instance means, plus t on the resamplings'
means in fixed mode, at alpha/2 each): the full gate after n resamplings, the early-stopping one
after the resamplings `stopping.run_until_settled` (the plugin's own loop: anytime-valid bounds,
and the gate's own bound agreeing) ran. The last two columns re-check the gate's bound after
every batch and stop when it clears or fails by it: a mistake for its error rate (the confidence
sequence avoids it), but its saving is the most any rule could save that stops only where the
gate's own bound has decided. Calls = instances x (resamplings + 1 canonical sample). Rates carry
their Monte Carlo standard errors. Targets: >= 3x fewer calls at |distance| >= 0.1; pass rate at
distance 0 <= 0.05 (the promise of pass-on-evidence) within Monte Carlo error.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_reliable import stats
from pytest_reliable.evaluate.evaluation import ScoreMatrix
from pytest_reliable.evaluate.stopping import batch_size, check_step, run_until_settled

LIMIT, CONFIDENCE, FORMAT_EFFECT, CONCENTRATION = 0.7, 0.95, 0.05, 10.0
DISTANCES = (-0.1, 0.0, 0.05, 0.1, 0.2)
TARGET_SAVING = 3.0


@dataclass
class SimulatedEvaluation:
    """Duck-types `evaluation.StagedEvaluation`: rows of one seeded gate's score matrix."""

    scores: np.ndarray
    settings: object = field(init=False)

    def __post_init__(self) -> None:
        self.settings = type("Settings", (), {"n": self.scores.shape[0]})()

    def run(self, start: int, stop: int, *, canonical: bool) -> ScoreMatrix:
        rows = self.scores[start:stop]
        n_instances = self.scores.shape[1]
        return ScoreMatrix(
            scores=rows, parsed=np.ones_like(rows, dtype=bool),
            canonical_scores=np.zeros((1, n_instances)),
            canonical_parsed=np.ones((1, n_instances), dtype=bool), cells=[],
            calls_made=rows.size + (n_instances if canonical else 0),
        )


MODES = ("fixed", "ilr")


def simulate(truth: float, n: int, n_instances: int, rng: np.random.Generator,
             effect: float = FORMAT_EFFECT, mode: str = "fixed") -> np.ndarray:
    inner = (truth - effect) / (1 - 2 * effect)
    a = effect + (1 - 2 * effect) * rng.beta(
        inner * CONCENTRATION, (1 - inner) * CONCENTRATION, n_instances
    )
    # fixed: a resampling is one format for every instance; ilr: every cell its own format.
    f = effect * rng.choice([-1.0, 1.0], (n, 1) if mode == "fixed" else (n, n_instances))
    return (rng.random((n, n_instances)) < a[None, :] + f).astype(np.float64)


def gate_bound(scores: np.ndarray, mode: str) -> stats.MeanBound:
    """The plugin's bound on the mean (`verdict.summary.gate_mean_bound`): a fixed-mode plan of
    n resamplings from a larger space sampled its formats, so the bound is two-way."""
    return stats.mean_bound(scores, two_way=mode == "fixed")


def gate_passes(scores: np.ndarray, mode: str) -> bool:
    return gate_bound(scores, mode).lower(CONFIDENCE) >= LIMIT


def naive_peeking(scores: np.ndarray, step: int, mode: str) -> tuple[int, bool]:
    """Stop at the first batch where the gate's fixed-n bound clears or falls short of the
    limit."""
    n = scores.shape[0]
    for m in range(step, n, step):
        bound = gate_bound(scores[:m], mode)
        if bound.lower(CONFIDENCE) >= LIMIT or bound.upper(CONFIDENCE) < LIMIT:
            return m, bound.lower(CONFIDENCE) >= LIMIT
    return n, gate_passes(scores, mode)


def rate(values: list[bool]) -> str:
    """A pass rate with its Monte Carlo standard error."""
    p = float(np.mean(values))
    return f"{p:.3f}+-{math.sqrt(max(p * (1 - p), 1e-12) / len(values)):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--n", type=int, default=100, help="resamplings of a full gate")
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format-effect", type=float, default=FORMAT_EFFECT,
                        help="each resampling's effect is +- this (a fair coin)")
    parser.add_argument("--sequence", choices=("asymptotic", "betting"), default="asymptotic",
                        help="the confidence sequence that stops the gate")
    parser.add_argument("--mode", choices=MODES, default="fixed",
                        help="fixed: a format per resampling; ilr: a format per cell")
    args = parser.parse_args()
    mode = args.mode
    rng = np.random.default_rng(args.seed)
    thresholds = {"min_score": ("min", LIMIT)}
    step = batch_size(args.n)
    full_calls = args.instances * (args.n + 1)
    print(f"min_score={LIMIT} under pass-on-evidence at {CONFIDENCE:.0%}; {args.instances} "
          f"instances, n={args.n} resamplings, a first batch of {step}, then checks every "
          f"{check_step(args.n)}, {args.reps} gates per row, "
          f"{args.sequence} confidence sequence, format effects +-{args.format_effect:g}, "
          f"{mode} mode")
    header = (f"{'truth-limit':>11}  {'full: calls':>11}  {'pass rate':>13}  "
              f"{'early: calls':>14}  {'pass rate':>13}  {'saving':>6}  "
              f"{'peeking: pass rate':>18}  {'saving':>6}")
    print(header)
    print("-" * len(header))
    failures = []
    start = time.perf_counter()
    for distance in DISTANCES:
        if not args.format_effect < LIMIT + distance < 1 - args.format_effect:
            print(f"{distance:>+11.2f}  (no such model: format effects +-{args.format_effect:g} "
                  f"around {LIMIT + distance:g} leave [0, 1])")
            continue
        full_pass, early_pass, naive_pass, early_calls, naive_rows = [], [], [], [], []
        for _ in range(args.reps):
            scores = simulate(LIMIT + distance, args.n, args.instances, rng, args.format_effect,
                              mode)
            full_pass.append(gate_passes(scores, mode))
            stopped = run_until_settled(
                SimulatedEvaluation(scores), thresholds, decide="pass-on-evidence",
                confidence=CONFIDENCE, sequence=args.sequence,
                gate_bound=lambda matrix: gate_bound(matrix.scores, mode),
            )
            early_pass.append(gate_passes(stopped.matrix.scores, mode))
            early_calls.append(stopped.matrix.calls_made)
            peeked_rows, peeked_pass = naive_peeking(scores, step, mode)
            naive_pass.append(peeked_pass)
            naive_rows.append(peeked_rows)
        reps = args.reps

        calls = np.array(early_calls, dtype=float)
        mean_calls, se_calls = calls.mean(), calls.std(ddof=1) / math.sqrt(reps)
        saving = full_calls / mean_calls
        print(f"{distance:>+11.2f}  {full_calls:>11d}  {rate(full_pass):>13}  "
              f"{mean_calls:>8.0f}+-{se_calls:<5.0f}  {rate(early_pass):>13}  {saving:>5.1f}x  "
              f"{rate(naive_pass):>18}  "
              f"{full_calls / (args.instances * (np.mean(naive_rows) + 1)):>5.1f}x")
        p0 = float(np.mean(early_pass))
        if distance <= 0 and p0 > 1 - CONFIDENCE + 2 * math.sqrt(0.05 * 0.95 / reps):
            failures.append(f"early-stopping pass rate {p0:.3f} at distance {distance}")
        if abs(distance) >= 0.1 and saving < TARGET_SAVING:
            failures.append(f"saving {saving:.1f}x < {TARGET_SAVING}x at distance {distance}")
    print(f"({time.perf_counter() - start:.0f} s)")
    for failure in failures:
        print("TARGET MISSED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
