"""search="adaptive" against search="uniform": error rates, power and calls (SPEC section 14).

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_adaptive.py [--reps 100] [--quick] [--grid core|full]
        [--mode ilr|fixed] [--formats 24] [--instances 400] [--model 'bad format -0.2']
    PYTHONPATH=. python benchmarks/bench_adaptive.py --replay benchmarks/data/matrix.npz
        [--reps 20] [--n 30] [--limits 0.5,0.6]

Both searches run through the plugin's own code: the run strategies
(`evaluate.adaptive.run_adaptive` for adaptive, every planned resampling for uniform), the peeks
(`verdict.claims.range_peek`), the summary (`verdict.summary.summarize`) and the gate
(`verdict.gate.reliable_thresholds`). Only the model and the rendering are replaced: a
`MatrixEvaluation` serves each planned cell (instance i, the plan's variant) from a table of
answers, instances x formats, as a cache at temperature 0 does (a prompt asked twice is one
call). The plan is the plugin's (`plan.sampling.make_plan`), so rows, formats and their order are
those a real run draws.

Simulated models (``--grid``): instance i has accuracy p_i ~ Beta(mean 0.8, intra-class
correlation 0.5), fresh in every repetition; a cell (i, f) is right when u_if < p_i m_f (u
uniform, fixed per cell: one answer per prompt). Format f's score is 0.8 m_f. Models: one bad
format (0.1 or 0.2 worse), a bad dimension value (every format with the first instruction 0.1
worse), a prompt-insensitive model. Spaces of 8, 24 and 96 formats, N = 30 / 100 / 400
instances, ilr and fixed mode, ``group_by="formats"``.

Rows printed per (space, N, mode, model, scenario): the rate of the scenario's outcome for
uniform and adaptive, each with its Monte Carlo SE, the median calls of each and their ratio.
Scenarios (``min_worst`` at the worst format's true score, moved as named):

- ``pass@limit`` / ``pass@wrong``: pass-on-evidence pass rate at the limit and 0.05 beyond it
  (target: <= alpha + 2 SE);
- ``fail@compliant``: fail-on-evidence fail rate of a model meeting its limit exactly (target
  <= alpha + 2 SE);
- ``power``: fail-on-evidence detects the worst format 0.1 below its limit (the bad-format and
  bad-value models) and ``power(pass)``: pass-on-evidence passes a model whose worst format is
  0.15 above its limit (target for both: adaptive's rate >= uniform's - 2 SE).

``--replay FILE.npz`` replays both searches on a real instance x format score matrix (arrays
``scores`` in [0, 1], ``formats`` the JSON of each format's variant values, ``instance_ids``):
each repetition draws a plan (seed) over a space whose formats are the file's, and serves every
cell from the matrix; printed per limit: each search's verdicts and calls.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_reliable.calls.requests import Request
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.evaluate import cell_rounds
from pytest_reliable.evaluate.adaptive import row_keys, run_adaptive
from pytest_reliable.evaluate.evaluation import (
    CANONICAL,
    CellResult,
    EvaluationSettings,
    PlannedCell,
    ScoreMatrix,
)
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.plan.prompt import Prompt
from pytest_reliable.plan.sampling import make_plan
from pytest_reliable.space import Space, Variant
from pytest_reliable.store.nstar import NStarEntry
from pytest_reliable.verdict.claims import range_peek
from pytest_reliable.verdict.gate import reliable_thresholds
from pytest_reliable.verdict.summary import Summary, summarize

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
P = 0.8
RHO = 0.5
GROUPING = "formats"
PROMPT = Prompt(messages=(), labels=("A", "B"), displayed=(0, 1), gold_position=0)
REQUEST = Request.of([("user", "-")], SamplingParams())
NO_N_STAR = NStarEntry(0, False, 0.0)  # n* is not what is measured here: skip its subsets

INSTRUCTIONS = ["Answer with the label.", "Choose the right option.", "Pick one.",
                "Select the correct answer."]
ENUMERATORS = ["upper", "number", "lower"]
WRAPPERS = ["({})", "{}.", "{}:", "[{}]"]
SEPARATORS = ["\n", "; "]


def space_of(formats: int) -> Space:
    """A space of 8, 24 or 96 formats."""
    shapes = {8: (2, 2, 2, 1), 24: (3, 2, 2, 2), 96: (4, 3, 4, 2)}
    i, e, w, s = shapes[formats]
    mapping: dict[str, list[str]] = {"instruction": INSTRUCTIONS[:i],
                                     "enumerator": ENUMERATORS[:e], "wrapper": WRAPPERS[:w]}
    if s > 1:
        mapping["option_separator"] = SEPARATORS[:s]
    return Space.from_mapping(f"sim{formats}", mapping)


# -- the evaluation: a plan's cells served from an answer table ------------------------------
class MatrixEvaluation:
    """What `run_adaptive` needs of a `StagedEvaluation`, with cells served from ``table``
    (instances x formats, scores in [0, 1]) at the plan's variants; ``format_index`` maps a
    variant's format key to its column. Calls are counted as a temperature-0 cache counts
    them: each distinct (instance, format) once."""

    def __init__(self, space: Space, n: int, mode: str, seed: int, table: np.ndarray,
                 format_index: dict[str, int]) -> None:
        n_instances = table.shape[0]
        dataset = [{"question": f"q{i}", "choices": ["a", "b"], "answer": 0}
                   for i in range(n_instances)]
        plan = make_plan(space, dataset, n, mode=mode, seed=seed, n_options=2)
        self.settings = EvaluationSettings(n=n, mode=mode, seed=seed)
        self.table = table
        self.variants = [[plan.cell(r, i).variant for i in range(n_instances)] for r in range(n)]
        self.columns = np.array([[format_index[v.format_key] for v in row]
                                 for row in self.variants], dtype=np.int64)
        self.canonical = [plan.canonical_cell(i).variant for i in range(n_instances)]
        self._index = format_index
        self.asked: set[tuple[int, int]] = set()

    @property
    def calls(self) -> int:
        return len(self.asked)

    def row_variants(self, row: int) -> list[Variant]:
        return self.variants[row]

    def _matrix(self, rows: Sequence[int], first_row: int, canonical: bool) -> ScoreMatrix:
        n_instances = self.table.shape[0]
        instances = np.arange(n_instances)
        scores = np.array([self.table[instances, self.columns[r]] for r in rows]).reshape(
            len(rows), n_instances)
        cells = [CellResult(PlannedCell(first_row + j, i, self.variants[r][i], PROMPT, REQUEST),
                            "ok", "", None, float(scores[j, i]), True)
                 for j, r in enumerate(rows) for i in range(n_instances)]
        for r in rows:
            self.asked.update(zip(instances.tolist(), self.columns[r].tolist()))
        canonical_scores = np.zeros((1, n_instances))
        if canonical:
            keys = [self.canonical[i].format_key for i in range(n_instances)]
            cols = np.array([self.format_index_of(k) for k in keys])
            canonical_scores[0] = self.table[instances, cols]
            cells += [CellResult(PlannedCell(CANONICAL, i, self.canonical[i], PROMPT, REQUEST),
                                 "ok", "", None, float(canonical_scores[0, i]), True)
                      for i in range(n_instances)]
            self.asked.update(zip(instances.tolist(), cols.tolist()))
        return ScoreMatrix(scores=scores, parsed=np.ones_like(scores, dtype=bool),
                           canonical_scores=canonical_scores,
                           canonical_parsed=np.ones((1, n_instances), dtype=bool), cells=cells)

    def format_index_of(self, key: str) -> int:
        return self._index[key]

    def run(self, start: int, stop: int, *, canonical: bool) -> ScoreMatrix:
        return self._matrix(list(range(start, stop)), start, canonical)

    def run_rows(self, rows: Sequence[int], *, first_row: int) -> ScoreMatrix:
        return self._matrix(list(rows), first_row, False)

    def run_cells(self, wanted: Sequence[tuple[int, int]]) -> ScoreMatrix:
        n, n_instances = len(self.variants), self.table.shape[0]
        scores = np.zeros((n, n_instances))
        cells = []
        for r, i in wanted:
            column = int(self.columns[r, i])
            scores[r, i] = self.table[i, column]
            cells.append(CellResult(PlannedCell(r, i, self.variants[r][i], PROMPT, REQUEST),
                                    "ok", "", None, float(scores[r, i]), True))
            self.asked.add((i, column))
        return ScoreMatrix(scores=scores, parsed=np.ones_like(scores, dtype=bool),
                           canonical_scores=np.zeros((1, n_instances)),
                           canonical_parsed=np.ones((1, n_instances), dtype=bool), cells=cells)


# -- one gate, both searches ---------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    passed: bool
    calls: int
    rows: int


def gate(space: Space, spec: ReliableSpec, decide: str, n: int, mode: str, seed: int,
         table: np.ndarray, format_index: dict[str, int], search: str) -> Outcome:
    """One test's verdict and calls under ``search``, through the plugin's code."""
    summary, calls, rows = run_search(space, spec, decide, n, mode, seed, table, format_index,
                                      search)
    return Outcome(all(c.passed for c in reliable_thresholds(spec, summary, decide)), calls, rows)


def run_search(space: Space, spec: ReliableSpec, decide: str, n: int, mode: str, seed: int,
               table: np.ndarray, format_index: dict[str, int], search: str
               ) -> tuple[Summary, int, int]:
    """The summary the gate decides on, the calls and the resamplings of one search."""
    staged = MatrixEvaluation(space, n, mode, seed, table, format_index)
    thresholds = {name: (("max" if name.startswith("max") else "min"), float(getattr(spec, name)))
                  for name in ("min_score", "min_worst", "max_spread")
                  if getattr(spec, name) is not None}
    uniform_rows: int | None = None
    looked = None
    if search == "adaptive" and cell_rounds.applies(thresholds, GROUPING):
        by_cells = cell_rounds.run_cell_rounds(
            staged, thresholds, decide=decide, confidence=CONFIDENCE,  # type: ignore[arg-type]
            key_of=lambda v: v.format_key)
        matrix, looked = by_cells.matrix, by_cells.looked
        uniform_rows = by_cells.uniform_rows
    elif search == "adaptive":
        ran = run_adaptive(
            staged, thresholds, decide=decide, confidence=CONFIDENCE,  # type: ignore[arg-type]
            peek=range_peek(space, mode=mode, grouping=GROUPING, min_cells=spec.min_cells,
                            order_group_by=spec.order_group_by),
            keys_of_row=lambda r: row_keys(space, GROUPING, staged.row_variants(r)))
        matrix = ran.matrix
        uniform_rows = ran.uniform_rows if ran.uniform_rows < matrix.n_resamplings else None
    else:
        matrix = staged.run(0, n, canonical=True)
    summary = summarize(matrix, space, mode=mode, eps=0.5, delta=0.5, min_cells=spec.min_cells,
                        confidence=CONFIDENCE, group_by=GROUPING, n_star=NO_N_STAR,
                        mean_rows=uniform_rows, looked=looked)
    return summary, staged.calls, matrix.n_resamplings


# -- simulated models ------------------------------------------------------------------------
@dataclass(frozen=True)
class Model:
    name: str
    factors: Callable[[list[Variant]], np.ndarray]
    """Per format (in `format_keys` order, given as variants), its factor m_f."""

    def worst(self, variants: list[Variant]) -> float:
        return float(P * self.factors(variants).min())


def _one_bad(d: float) -> Callable[[list[Variant]], np.ndarray]:
    def factors(variants: list[Variant]) -> np.ndarray:
        m = np.ones(len(variants))
        m[len(variants) // 2] = (P - d) / P
        return m
    return factors


def _bad_value(variants: list[Variant]) -> np.ndarray:
    return np.array([(P - 0.1) / P if v.instruction == INSTRUCTIONS[0] else 1.0
                     for v in variants])


MODELS = {
    "bad format -0.1": Model("bad format -0.1", _one_bad(0.1)),
    "bad format -0.2": Model("bad format -0.2", _one_bad(0.2)),
    "bad value -0.1": Model("bad value -0.1", _bad_value),
    "insensitive": Model("insensitive", lambda variants: np.ones(len(variants))),
}


def format_keys(space: Space) -> list[str]:
    """The space's formats, in the order a fixed-mode plan first lists them."""
    return list(_variants_by_key(space))


def _variants_by_key(space: Space) -> dict[str, Variant]:
    plan = make_plan(space, [{"question": "q", "choices": ["a", "b"], "answer": 0}], 400,
                     mode="fixed", seed=0, n_options=2)
    found: dict[str, Variant] = {}
    for r in range(400):
        variant = plan.cell(r, 0).variant
        found.setdefault(variant.format_key, variant)
    return found


def table_for(model: Model, variants: list[Variant], n_instances: int,
              rng: np.random.Generator) -> np.ndarray:
    concentration = 1 / RHO - 1
    p_i = rng.beta(P * concentration, (1 - P) * concentration, size=n_instances)
    u = rng.random((n_instances, len(variants)))
    return (u < p_i[:, None] * model.factors(variants)[None, :]).astype(np.float64)


@dataclass(frozen=True)
class Scenario:
    name: str
    decide: str
    shift: float
    """The limit: the worst format's truth + shift."""
    wants: str
    """"pass" or "fail": the outcome whose rate is printed."""
    bound: str
    """"error" (rate <= alpha + 2 SE) or "power" (adaptive >= uniform - 2 SE)."""


SCENARIOS = (
    Scenario("pass@limit", "pass-on-evidence", 0.0, "pass", "error"),
    Scenario("pass@wrong", "pass-on-evidence", 0.05, "pass", "error"),
    Scenario("fail@compliant", "fail-on-evidence", 0.0, "fail", "error"),
    Scenario("power", "fail-on-evidence", 0.1, "fail", "power"),
    Scenario("power(pass)", "pass-on-evidence", -0.15, "pass", "power"),
)


def applies(scenario: Scenario, model: Model) -> bool:
    if scenario.name == "power":
        return model.name.startswith("bad")
    return True


def _se(rate: float, reps: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / reps)


def run_model(formats: int, n_instances: int, mode: str, model: Model, reps: int, n: int,
              seed: int) -> list[dict[str, Any]]:
    """Every scenario of ``model``: the uniform run is one per repetition (its cells do not
    depend on the limit), decided under each scenario's limit; adaptive runs per scenario."""
    space = space_of(formats)
    by_key = _variants_by_key(space)
    keys, variants = list(by_key), list(by_key.values())
    index = {k: j for j, k in enumerate(keys)}
    scenarios = [sc for sc in SCENARIOS if applies(sc, model)]
    specs = {sc.name: ReliableSpec(min_worst=model.worst(variants) + sc.shift, n=n,
                                   mode=mode,  # type: ignore[arg-type]
                                   group_by=GROUPING, decide=sc.decide)  # type: ignore[arg-type]
             for sc in scenarios}
    rng = np.random.default_rng(seed)
    hits = {sc.name: {"uniform": 0, "adaptive": 0} for sc in scenarios}
    calls = {sc.name: {"uniform": [], "adaptive": []} for sc in scenarios
             }  # type: dict[str, dict[str, list[int]]]
    for rep in range(reps):
        table = table_for(model, variants, n_instances, rng)
        summary, made, _ = run_search(space, specs[scenarios[0].name], scenarios[0].decide, n,
                                      mode, rep, table, index, "uniform")
        for sc in scenarios:
            spec = specs[sc.name]
            passed = all(c.passed for c in reliable_thresholds(spec, summary, sc.decide))
            hits[sc.name]["uniform"] += int(passed == (sc.wants == "pass"))
            calls[sc.name]["uniform"].append(made)
            found = gate(space, spec, sc.decide, n, mode, rep, table, index, "adaptive")
            hits[sc.name]["adaptive"] += int(found.passed == (sc.wants == "pass"))
            calls[sc.name]["adaptive"].append(found.calls)
    rows = []
    for sc in scenarios:
        rates = {s: hits[sc.name][s] / reps for s in ("uniform", "adaptive")}
        median = {s: float(np.median(calls[sc.name][s])) for s in rates}
        if sc.bound == "error":
            ok = all(rates[s] <= ALPHA + 2 * _se(rates[s], reps) for s in rates)
        else:
            ok = rates["adaptive"] >= rates["uniform"] - 2 * _se(rates["uniform"], reps)
        rows.append({"formats": formats, "N": n_instances, "mode": mode, "model": model.name,
                     "scenario": sc.name, "limit": float(specs[sc.name].min_worst or 0.0),
                     "rates": rates, "se": {s: _se(rates[s], reps) for s in rates},
                     "calls": median, "ok": ok,
                     "ratio": median["uniform"] / max(median["adaptive"], 1.0)})
    return rows


def resamplings(formats: int, mode: str) -> int:
    """Uniform's n: fixed mode lists each format twice; ilr 30 resamplings."""
    return 2 * formats if mode == "fixed" else 30


GRIDS = {
    "core": [(24, 100, mode) for mode in ("ilr", "fixed")],
    "full": [(f, n, mode) for f in (8, 24, 96) for n in (30, 100, 400)
             for mode in ("ilr", "fixed")],
}


def main_grid(args: argparse.Namespace) -> int:
    failures = 0
    print(f"{'formats':>7} {'N':>4} {'mode':5} {'model':16} {'scenario':15} {'limit':>6} "
          f"{'uniform':>14} {'adaptive':>14} {'calls u/a':>13} {'ratio':>6}")
    for formats, n_instances, mode in GRIDS[args.grid]:
        if (args.mode and mode != args.mode) or (args.formats and formats != args.formats) or (
                args.instances and n_instances != args.instances):
            continue
        for model in MODELS.values():
            if args.model and model.name != args.model:
                continue
            started = time.perf_counter()
            found = run_model(formats, n_instances, mode, model, args.reps,
                              resamplings(formats, mode), args.seed)
            took = time.perf_counter() - started
            for row in found:
                rates, se = row["rates"], row["se"]
                flag = "" if row["ok"] else "  <-- outside its target"
                failures += 0 if row["ok"] else 1
                print(f"{formats:>7} {n_instances:>4} {mode:5} {model.name:16} "
                      f"{row['scenario']:15} {row['limit']:6.3f} "
                      f"{rates['uniform']:6.3f}+-{se['uniform']:.3f} "
                      f"{rates['adaptive']:6.3f}+-{se['adaptive']:.3f} "
                      f"{row['calls']['uniform']:6.0f}/{row['calls']['adaptive']:<6.0f} "
                      f"{row['ratio']:6.2f}{flag}", flush=True)
            print(f"  ({model.name}: {took:.0f}s)", flush=True)
    print(f"\n{failures} rows outside their target (alpha = {ALPHA:g}; a rate may exceed it by "
          "2 MC SE)")
    return 1 if failures else 0


# -- replay on a real matrix -------------------------------------------------------------------
def load_matrix(path: Path) -> tuple[np.ndarray, list[dict[str, Any]]]:
    data = np.load(path, allow_pickle=False)
    scores = np.asarray(data["scores"], dtype=np.float64)
    formats = [json.loads(str(f)) for f in data["formats"]]
    if scores.ndim != 2 or scores.shape[1] != len(formats):
        raise SystemExit(f"{path}: scores must be instances x formats, one format per column")
    return scores, formats


def replay_space(formats: list[dict[str, Any]]) -> Space:
    """A space whose formats are the matrix's columns, one each. A matrix may hold a sample of a
    larger space's formats (the shipped one: 48 seeded draws of 128 and the canonical format),
    so the product of its dimensions' values would list formats it never measured: each column
    is one value of a single dimension instead, and the gate groups by formats."""
    return Space.from_mapping("replay", {"instruction": [f"format {j}" for j in
                                                         range(len(formats))]})


def replay(args: argparse.Namespace) -> int:
    scores, formats = load_matrix(Path(args.replay))
    space = replay_space(formats)
    # The matrix's columns by the format key of the variant each stands for.
    index = {key: int(str(variant.value("instruction")).split()[-1])
             for key, variant in _variants_by_key(space).items()}
    if len(index) != len(formats):
        raise SystemExit(f"{args.replay}: the plan lists {len(index)} of {len(formats)} formats")
    worst = float(scores.mean(axis=0).min())
    print(f"replay {args.replay}: {scores.shape[0]} instances x {scores.shape[1]} formats; "
          f"mean {scores.mean():.3f}, worst format {worst:.3f}, best "
          f"{scores.mean(axis=0).max():.3f}")
    keys = format_keys(space)
    limits = [float(x) for x in args.limits.split(",")] if args.limits else [
        round(worst - 0.1, 2), round(worst + 0.1, 2)]
    print(f"{'mode':5} {'limit':>6} {'decide':17} {'uniform pass':>12} {'adaptive pass':>13} "
          f"{'agree':>6} {'calls u/a (median)':>20} {'ratio':>6}")
    for mode in ("ilr", "fixed"):
        n = args.n or (2 * len(keys) if mode == "fixed" else 30)
        for limit in limits:
            for decide in ("pass-on-evidence", "fail-on-evidence"):
                spec = ReliableSpec(min_worst=limit, n=n, mode=mode,  # type: ignore[arg-type]
                                    group_by=GROUPING, decide=decide)  # type: ignore[arg-type]
                passed = {"uniform": [], "adaptive": []}  # type: dict[str, list[bool]]
                calls = {"uniform": [], "adaptive": []}  # type: dict[str, list[int]]
                for rep in range(args.reps):
                    for search in ("uniform", "adaptive"):
                        found = gate(space, spec, decide, n, mode, rep, scores, index, search)
                        passed[search].append(found.passed)
                        calls[search].append(found.calls)
                agree = np.mean([a == b for a, b in zip(passed["uniform"], passed["adaptive"])])
                cu, ca = np.median(calls["uniform"]), np.median(calls["adaptive"])
                print(f"{mode:5} {limit:6.2f} {decide:17} {np.mean(passed['uniform']):12.2f} "
                      f"{np.mean(passed['adaptive']):13.2f} {agree:6.2f} "
                      f"{cu:>9.0f}/{ca:<10.0f} {cu / max(ca, 1):6.2f}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="core")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 10 repetitions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=("ilr", "fixed"), default=None,
                        help="only this mode's rows (run the two in parallel)")
    parser.add_argument("--formats", type=int, default=None, help="only this space size")
    parser.add_argument("--instances", type=int, default=None, help="only this N")
    parser.add_argument("--model", default=None, help="only this model (e.g. 'bad format -0.2')")
    parser.add_argument("--replay", help="an instance x format score matrix (.npz)")
    parser.add_argument("--n", type=int, default=None, help="resamplings of a replayed gate")
    parser.add_argument("--limits", default=None, help="replay: min_worst limits, comma-separated")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps = min(args.reps, 10)
    if args.replay:
        return replay(args)
    return main_grid(args)


if __name__ == "__main__":
    sys.exit(main())
