"""Benchmark: ILR's fairness claim, ORP between two configurations under ilr vs fixed sampling.

Run from the repository root::

    python benchmarks/bench_orp_fairness.py [--repeats 200] [--n 8] [--instances 40]

The ILR paper (Li et al.) claims that instance-level randomization lowers the Observed Reversal
Probability between two models compared at the same cost, because a fixed setting can favour one
model's format preferences. We measure it on our own plans: the real `sampling.make_plan` of the
example gate's `movies` space (examples/reliable.yaml, 2592 formats, permuted option orders) over
BBH instances, `ilr` and `fixed` at equal calls (n resamplings x N instances each), and our
`stats.orp` on the per-resampling scores of the two configurations.

The two configurations are *simulated*, not the embedded model: the embedded SmolLM2 answers
about 0.45 s per call on this machine, and a stable ORP estimate needs hundreds of repeated plans.
The simulation is calibrated to what we measured on the embedded model's real BBH matrix
(research/verdicts.md): per-cell correctness is mostly format x instance interaction (about 79%
of the logit variance), plus shared instance difficulty and a format preference of each
configuration (correlation 0.3 between the two: "a new system prompt likes other formats").
A cell's answer is a deterministic function of (configuration, instance, format): temperature 0.

Printed per mode: the mean ORP area with its Monte Carlo standard error, sigma_d, rho, and the
rate at which the observed difference of the two configurations has the wrong sign compared with
their true difference over the whole space (the reversal ORP tries to predict).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from pathlib import Path

import numpy as np

from pytest_reliable import Dataset, MultipleChoice
from pytest_reliable.sampling import make_plan
from pytest_reliable.space import load_spaces
from pytest_reliable.stats import orp

ROOT = Path(__file__).resolve().parent.parent
SPACE_FILE = ROOT / "examples" / "reliable.yaml"
DATA = ROOT / "tests" / "data" / "bbh" / "logical_deduction_three_objects.json"

# Logit scale components (standard deviations), calibrated as the module docstring says.
INSTANCE_SD, FORMAT_SD, INTERACTION_SD = 0.9, 0.45, 1.6
PREFERENCE_CORRELATION = 0.3
MEANS = {"production": -0.55, "candidate": -0.45}  # accuracies about 0.38 and 0.40


def _uniforms(*parts: object) -> tuple[float, float]:
    """Two uniform (0, 1) draws that are a pure function of ``parts`` (no global state)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return ((int.from_bytes(digest[:8], "big") + 0.5) / 2**64,
            (int.from_bytes(digest[8:16], "big") + 0.5) / 2**64)


def _unit_normal(*parts: object) -> float:
    """A standard normal draw that is a pure function of ``parts`` (Box-Muller)."""
    u1, u2 = _uniforms(*parts)
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)


class SimulatedConfiguration:
    """P(correct) = sigmoid(mean + instance + preference(format) + interaction(instance, format))."""

    def __init__(self, name: str, world: int) -> None:
        self.name, self.world = name, world

    def preference(self, fmt: str) -> float:
        shared = _unit_normal("shared-format", self.world, fmt)
        own = _unit_normal("own-format", self.world, self.name, fmt)
        r = PREFERENCE_CORRELATION
        return FORMAT_SD * (math.sqrt(r) * shared + math.sqrt(1 - r) * own)

    def p_correct(self, instance: int, fmt: str) -> float:
        logit = (MEANS[self.name] + INSTANCE_SD * _unit_normal("instance", self.world, instance)
                 + self.preference(fmt)
                 + INTERACTION_SD * _unit_normal("cell", self.world, self.name, instance, fmt))
        return 1 / (1 + math.exp(-logit))

    def score(self, instance: int, fmt: str) -> float:
        u, _ = _uniforms("answer", self.world, self.name, instance, fmt)
        return float(u < self.p_correct(instance, fmt))


def true_difference(a: SimulatedConfiguration, b: SimulatedConfiguration, formats: list[str],
                    instances: int) -> float:
    """Expected score difference over the whole space (every format equally likely)."""
    return float(np.mean([a.p_correct(i, f) - b.p_correct(i, f)
                          for i in range(instances) for f in formats]))


def run(repeats: int, n: int, instances: int) -> None:
    space = load_spaces(SPACE_FILE)["movies"]
    dataset = Dataset.from_records(list(Dataset.from_bbh(DATA))[:instances])
    task = MultipleChoice()
    rng = np.random.default_rng(0)
    # The true difference needs a format sample of the huge space: 400 formats drawn once.
    format_pool = sorted({make_plan(space, dataset, 1, mode="fixed", seed=int(s), task=task)
                          .cell(0, 0).variant.format_key for s in rng.integers(1 << 31, size=400)})
    results: dict[str, dict[str, list[float]]] = {m: {"area": [], "sigma_d": [], "rho": [],
                                                     "reversed": []} for m in ("ilr", "fixed")}
    started = time.perf_counter()
    for world in range(repeats):
        a = SimulatedConfiguration("candidate", world)
        b = SimulatedConfiguration("production", world)
        truth = true_difference(a, b, format_pool, instances)
        for mode in ("ilr", "fixed"):
            plan = make_plan(space, dataset, n, mode=mode, seed=1000 + world, task=task)
            keys = [[plan.cell(r, i).variant.format_key for i in range(instances)]
                    for r in range(n)]
            scores_a = np.array([[a.score(i, keys[r][i]) for i in range(instances)]
                                 for r in range(n)])
            scores_b = np.array([[b.score(i, keys[r][i]) for i in range(instances)]
                                 for r in range(n)])
            result = orp(scores_a.mean(axis=1), scores_b.mean(axis=1))
            observed = float(scores_a.mean() - scores_b.mean())
            results[mode]["area"].append(result.area)
            results[mode]["sigma_d"].append(result.sigma_d)
            results[mode]["rho"].append(result.rho)
            results[mode]["reversed"].append(float(observed * truth < 0))
    elapsed = time.perf_counter() - started
    print(f"ORP between two simulated configurations, {repeats} worlds, n={n} resamplings x "
          f"N={instances} instances per mode ({n * instances} cells each), {elapsed:.0f} s")
    print(f"{'mode':6} {'ORP area':>18} {'sigma_d':>8} {'rho':>6} {'reversal rate':>18}")
    for mode, values in results.items():
        area = np.array(values["area"])
        rev = np.array(values["reversed"])
        print(f"{mode:6} {area.mean():9.4f} +- {area.std(ddof=1) / math.sqrt(area.size):.4f} "
              f"{np.mean(values['sigma_d']):8.4f} {np.mean(values['rho']):6.3f} "
              f"{rev.mean():9.3f} +- {math.sqrt(rev.mean() * (1 - rev.mean()) / rev.size):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--instances", type=int, default=40)
    args = parser.parse_args()
    run(args.repeats, args.n, args.instances)


if __name__ == "__main__":
    main()
