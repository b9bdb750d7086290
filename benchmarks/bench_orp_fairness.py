"""Benchmark: ILR's fairness claim, ORP between two configurations under ilr vs fixed sampling.

Run from the repository root::

    python benchmarks/bench_orp_fairness.py [--repeats 200] [--n 8] [--instances 40]
    python benchmarks/bench_orp_fairness.py --real [--n 8] [--bootstrap 2000]

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

``--real`` measures the claim on the embedded model instead: the example gate's two configurations
(examples/conftest.py: SmolLM2 behind today's system prompt and behind the new one) on the example's
real BBH movie_recommendation instances (all 16), ``n`` resamplings of the `movies` space under ilr
and under fixed (equal calls: n x 16 per configuration and mode, plus one canonical pass per
configuration that both modes share), through the plugin's own `ReliableSession` runner and
`evaluation.evaluate`, with the response cache in ``.reliable/`` of the working directory (a re-run
replays it). One plan per mode cannot give a Monte Carlo error, so the uncertainty printed is a
bootstrap over instances (both configurations and both modes resampled together, so the ilr - fixed
difference is paired): its standard error and 90% percentile interval.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytest_reliable import Dataset, MultipleChoice
from pytest_reliable.plan.sampling import make_plan
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


def _example_conftest() -> Any:
    """examples/conftest.py as a module: the real run uses the example's own two configurations."""
    spec = importlib.util.spec_from_file_location("examples_conftest", ROOT / "examples" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _orp_row(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    result = orp(a.mean(axis=1), b.mean(axis=1))
    return result.area, result.sigma_d, result.rho


def run_real(n: int, bootstrap: int, seed: int) -> None:
    from pytest_reliable.evaluate.evaluation import EvaluationSettings, evaluate
    from pytest_reliable.models.local import LOCAL_MODEL_NAME, LocalModelServer
    from pytest_reliable.run.session import ReliableSession, Settings

    example = _example_conftest()
    space = load_spaces(SPACE_FILE)["movies"]
    dataset = Dataset.from_bbh(ROOT / "examples" / "data" / "bbh" / "movie_recommendation.json")
    task = MultipleChoice()
    session = ReliableSession(Settings(rootdir=Path.cwd()))
    nodeid = "benchmarks/bench_orp_fairness.py::real"
    matrices: dict[tuple[str, str], Any] = {}
    started = time.perf_counter()
    made = cached = 0
    try:
        with LocalModelServer() as server:
            endpoint = (server.base_url, LOCAL_MODEL_NAME)
            configs = {"candidate": example.NEW_SYSTEM_PROMPT,
                       "production": example.TODAYS_SYSTEM_PROMPT}
            for config, system_prompt in configs.items():
                model = example.behind_system_prompt(endpoint, system_prompt)
                model.max_concurrency = 1  # one llama.cpp slot: calls in shared-prefix order
                for mode in ("ilr", "fixed"):
                    settings = EvaluationSettings(n=n, mode=mode, seed=seed, nodeid=nodeid)
                    matrix = evaluate(dataset, task, space, settings, session.runner(model, nodeid))
                    if matrix.problems:
                        raise SystemExit(f"{config}/{mode}: {matrix.problems[:3]}")
                    made, cached = made + matrix.calls_made, cached + matrix.calls_cached
                    matrices[(config, mode)] = matrix.scores
                    print(f"  {config:10} {mode:5} accuracy {matrix.scores.mean():.3f} "
                          f"({matrix.calls_made} calls made, {matrix.calls_cached} cached, "
                          f"{time.perf_counter() - started:.0f} s)", flush=True)
    finally:
        session.close()
    n_instances = len(dataset)
    print(f"ORP between the example's two configurations on the embedded model ({LOCAL_MODEL_NAME}), "
          f"n={n} resamplings x N={n_instances} BBH movie_recommendation instances per mode, "
          f"seed {seed}; {made} calls made, {cached} cached, {time.perf_counter() - started:.0f} s")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_instances, size=(bootstrap, n_instances))
    areas: dict[str, np.ndarray] = {}
    print(f"{'mode':6} {'cand-prod':>9} {'ORP area':>9} {'boot SE':>8} {'90% interval':>17} "
          f"{'sigma_d':>8} {'rho':>6}")
    for mode in ("ilr", "fixed"):
        a, b = matrices[("candidate", mode)], matrices[("production", mode)]
        area, sigma_d, rho = _orp_row(a, b)
        areas[mode] = np.array([_orp_row(a[:, p], b[:, p])[0] for p in picks])
        lo, hi = np.quantile(areas[mode], [0.05, 0.95])
        print(f"{mode:6} {a.mean() - b.mean():+9.3f} {area:9.4f} {areas[mode].std(ddof=1):8.4f} "
              f"[{lo:.4f}, {hi:.4f}] {sigma_d:8.4f} {rho:6.3f}")
    diff = areas["ilr"] - areas["fixed"]
    point = (_orp_row(matrices[("candidate", "ilr")], matrices[("production", "ilr")])[0]
             - _orp_row(matrices[("candidate", "fixed")], matrices[("production", "fixed")])[0])
    lo, hi = np.quantile(diff, [0.05, 0.95])
    print(f"ilr - fixed ORP area: {point:+.4f}, bootstrap SE {diff.std(ddof=1):.4f}, "
          f"90% interval [{lo:+.4f}, {hi:+.4f}] ({bootstrap} resamples of the instances)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true",
                        help="the embedded model on the example's two configurations")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--n", type=int, default=None,
                        help="resamplings per mode (default 8)")
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    if args.real:
        run_real(args.n or 8, args.bootstrap, args.seed)
    else:
        run(args.repeats, args.n or 8, args.instances)


if __name__ == "__main__":
    main()
