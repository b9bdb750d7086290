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
The simulation is shaped after what research/verdicts.md reports of the embedded model's real
BBH matrix (parameters chosen by hand, not fitted): per-cell correctness is mostly format x
instance interaction (72% of the logit variance here; 79% measured there), plus shared instance
difficulty and a format preference of each
configuration (correlation 0.3 between the two: "a new system prompt likes other formats").
A cell's answer is a deterministic function of (configuration, instance, format): temperature 0.

Printed per mode: the mean ORP area with its Monte Carlo standard error, sigma_d, rho, and the
rate at which the observed difference of the two configurations has the wrong sign compared with
their true difference over the whole space (the reversal ORP tries to predict).
"""

from __future__ import annotations

import argparse
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

# Logit scale components (standard deviations), chosen as the module docstring says.
INSTANCE_SD, FORMAT_SD, INTERACTION_SD = 0.9, 0.45, 1.6
PREFERENCE_CORRELATION = 0.3
MEANS = {"production": -0.55, "candidate": -0.45}  # accuracies about 0.38 and 0.40


class SimulatedWorld:
    """Two configurations over one pool of instances and formats, drawn from ``seed``.

    P(correct) = sigmoid(mean + instance + preference(format) + interaction(instance, format)).
    Every component is drawn once, on first use, and kept: a cell's answer is a function of
    (configuration, instance, format), as at temperature 0.
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.instance: dict[int, float] = {}
        self.preference: dict[tuple[str, str], float] = {}
        self.shared: dict[str, float] = {}
        self.cell: dict[tuple[str, int, str], tuple[float, float]] = {}

    def _normal(self, table: dict, key: object) -> float:  # type: ignore[type-arg]
        if key not in table:
            table[key] = float(self.rng.standard_normal())
        return table[key]

    def p_correct(self, config: str, instance: int, fmt: str) -> float:
        r = PREFERENCE_CORRELATION
        preference = FORMAT_SD * (math.sqrt(r) * self._normal(self.shared, fmt)
                                  + math.sqrt(1 - r) * self._normal(self.preference, (config, fmt)))
        interaction, _ = self._cell(config, instance, fmt)
        logit = (MEANS[config] + INSTANCE_SD * self._normal(self.instance, instance) + preference
                 + INTERACTION_SD * interaction)
        return 1 / (1 + math.exp(-logit))

    def _cell(self, config: str, instance: int, fmt: str) -> tuple[float, float]:
        key = (config, instance, fmt)
        if key not in self.cell:
            self.cell[key] = (float(self.rng.standard_normal()), float(self.rng.random()))
        return self.cell[key]

    def score(self, config: str, instance: int, fmt: str) -> float:
        p = self.p_correct(config, instance, fmt)
        return float(self._cell(config, instance, fmt)[1] < p)

    def true_difference(self, formats: list[str], instances: int) -> float:
        """Expected candidate - production over the space (``formats``: a large sample of it)."""
        return float(np.mean([self.p_correct("candidate", i, f)
                              - self.p_correct("production", i, f)
                              for i in range(instances) for f in formats]))


def run(repeats: int, n: int, instances: int) -> None:
    space = load_spaces(SPACE_FILE)["movies"]
    dataset = Dataset.from_records(list(Dataset.from_bbh(DATA))[:instances])
    task = MultipleChoice()
    # The true difference needs a sample of the (huge) space: 200 distinct formats, drawn once.
    pool_plan = make_plan(space, dataset, 200, mode="fixed", seed=7, task=task)
    format_pool = sorted({pool_plan.cell(r, 0).variant.format_key for r in range(200)})
    results: dict[str, dict[str, list[float]]] = {m: {"area": [], "sigma_d": [], "rho": [],
                                                     "reversed": []} for m in ("ilr", "fixed")}
    started = time.perf_counter()
    for world in range(repeats):
        sim = SimulatedWorld(world)
        truth = sim.true_difference(format_pool, instances)
        for mode in ("ilr", "fixed"):
            plan = make_plan(space, dataset, n, mode=mode, seed=1000 + world, task=task)
            keys = [[plan.cell(r, i).variant.format_key for i in range(instances)]
                    for r in range(n)]
            scores_a, scores_b = (
                np.array([[sim.score(config, i, keys[r][i]) for i in range(instances)]
                          for r in range(n)])
                for config in ("candidate", "production")
            )
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
