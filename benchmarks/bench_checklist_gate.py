"""The CheckList gate's error rates: simulated models of known truth through the real code.

Run from the repository root (about a minute)::

    PYTHONPATH=. python benchmarks/bench_checklist_gate.py [--reps 400] [--examples 100]
        [--exact-only]

Each repetition draws a fresh population of examples and runs ``checklist.run_invariance`` and
``checklist.run_mft`` (pairing, prediction, flip counting, clustering by example, the policy in
``gate.checklist_thresholds``) with a batched ``predict`` of known truth:

- INV: example i has a flip propensity ``q_i ~ Beta`` with mean ``rate`` and intra-example
  correlation 0.3; each example gives 1 pair (``--pairs 1``: exact binomial) or 3 pairs (three
  perturbations, clustered by example); a perturbed copy flips with probability ``q_i``.
- MFT: each example is answered right with probability ``p`` (independent: the exact binomial
  bound).

Then, computed exactly (no simulation; ``--exact-only`` alone): the error rate of a claim at its
limit near 0 and 1, one pair per example, for N = 8 to 300, under Wilson's bound (before) and the
exact binomial bound the gate decides on now (`exact_part`).

The limit is set at the truth moved to its wrong side by 0.05, at the truth, and 0.05 inside it;
the table prints how often each policy passes (+- its Monte Carlo error). Targets (SPEC 11):
pass-on-evidence passes a model at or beyond the limit at most 1 - confidence of the time;
fail-on-evidence fails a model meeting the limit (at or inside it) at most 1 - confidence.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytest_reliable.checklist import Perturbation, Prediction, run_invariance, run_mft

POLICIES = ("pass-on-evidence", "fail-on-evidence", "estimate")
CONFIDENCE = 0.95
ICC = 0.3


def _copies(k: int) -> Perturbation:
    """k perturbed copies of every example (they carry their example's id and copy number)."""

    def fn(example: dict[str, Any], rng: np.random.Generator) -> list[dict[str, Any]]:
        return [{**example, "copy": j + 1} for j in range(k)]

    return Perturbation(f"copies{k}", fn)


def _inv_predict(q: np.ndarray, rng: np.random.Generator) -> Callable[[Sequence[Any]], list[Any]]:
    def predict(batch: Sequence[dict[str, Any]]) -> list[Any]:
        out = []
        for example in batch:
            flips = example.get("copy", 0) > 0 and rng.random() < q[example["id"]]
            out.append(Prediction("b" if flips else "a", True, ""))
        return out

    return predict


def _propensities(rate: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if rate <= 0.0:
        return np.zeros(n)
    strength = (1.0 - ICC) / ICC
    return rng.beta(rate * strength, (1.0 - rate) * strength, size=n)


def inv_pass_rate(rate: float, limit: float, decide: str, reps: int, n: int, pairs: int,
                  seed: int) -> float:
    rng = np.random.default_rng(seed)
    passed = 0
    for _ in range(reps):
        q = _propensities(rate, n, rng)
        examples = [{"id": i, "text": f"example {i}"} for i in range(n)]
        result = run_invariance(examples, [_copies(pairs)], _inv_predict(q, rng), seed=0,
                                confidence=CONFIDENCE, decide=decide, max_flip_rate=limit)
        passed += result.passed
    return passed / reps


def mft_pass_rate(p: float, limit: float, decide: str, reps: int, n: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    passed = 0
    for _ in range(reps):
        right = rng.random(n) < p
        examples = [{"id": i, "label": "a"} for i in range(n)]

        def predict(batch: Sequence[dict[str, Any]], right: np.ndarray = right) -> list[Any]:
            return [Prediction("a" if right[e["id"]] else "b", True, "") for e in batch]

        passed += run_mft(examples, predict, confidence=CONFIDENCE, decide=decide,
                          min_pass=limit).passed
    return passed / reps


# -- exact error rates of 0/1 rates near their ends (issue 31 item 2) -------------------------
EXACT_N = (8, 10, 16, 20, 30, 50, 100, 300)
EXACT_RATES = (0.90, 0.95, 0.98, 0.99)
"""Pass rates of ``min_pass`` (their mirror, 1 - rate, is a ``max_flip_rate`` / ``max_fail_rate``
of one pair per example: the same counts, the same bounds)."""


def exact_error(n: int, rate: float, policy: str, bound: Callable[[int, int], Any] | None) -> float:
    """The exact error rate of a ``min_pass=rate`` claim over ``n`` independent examples when
    the true pass rate is the limit itself: the binomial probability of every count k at which
    the claim goes against the truth (pass-on-evidence passes it, fail-on-evidence fails it),
    each count decided by the real gate (`gate.checklist_thresholds`), or with ``bound``
    (e.g. `stats.wilson_bound`, the bound it replaced) through `gate.decide_thresholds`."""
    from scipy import stats as scipy_stats

    from pytest_reliable.verdict.gate import (
        checklist_thresholds,
        decide_thresholds,
        proportion_evidence,
    )

    wrong = 0.0
    for k in range(n + 1):
        if bound is None:
            (check,) = checklist_thresholds({"min_pass": rate}, [1] * k + [0] * (n - k),
                                            [1] * n, policy, CONFIDENCE)
        else:
            evidence = proportion_evidence(k / n, [bound(k, n)], "min")
            (check,) = decide_thresholds({"min_pass": (rate, evidence)}, policy, CONFIDENCE,
                                         directions={"min_pass": "min"})
        if check.passed == (policy == "pass-on-evidence"):
            wrong += float(scipy_stats.binom.pmf(k, n, rate))
    return wrong


def exact_part() -> list[str]:
    """The exact table: Wilson's bound (before) and the exact binomial bound the gate uses now,
    per N and true rate; a claim at its limit must err at most 1 - confidence (computed, no
    Monte Carlo error)."""
    from pytest_reliable import stats

    alpha = 1 - CONFIDENCE
    print(f"\n# exact error rates at the limit, one pair per example, confidence {CONFIDENCE}: "
          "fail-on-evidence fails a compliant model / pass-on-evidence passes a breaching one "
          "(min_pass = the true pass rate; 1 - rate is the mirror flip or fail rate); "
          "Wilson (before) -> exact binomial (now)")
    print("| N | " + " | ".join(f"rate {r:g} (flip {1 - r:.2f}): FoE fails / PoE passes"
                                 for r in EXACT_RATES) + " |")
    print("|---|" + "---|" * len(EXACT_RATES))
    problems = []
    for n in EXACT_N:
        cells = []
        for rate in EXACT_RATES:
            before = [exact_error(n, rate, p, stats.wilson_bound)
                      for p in ("fail-on-evidence", "pass-on-evidence")]
            now = [exact_error(n, rate, p, None) for p in ("fail-on-evidence", "pass-on-evidence")]
            cells.append(f"{before[0]:.3f} -> {now[0]:.3f} / {before[1]:.3f} -> {now[1]:.3f}")
            problems += [f"N={n} rate {rate}: {value:.4f}" for value in now if value > alpha]
        print(f"| {n} | " + " | ".join(cells) + " |")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--exact-only", action="store_true",
                        help="only the exact error rates near 0 and 1 (no simulation)")
    args = parser.parse_args()
    if args.exact_only:
        missed = exact_part()
        print("targets met" if not missed else "TARGETS MISSED:\n  " + "\n  ".join(missed))
        return
    reps, n = args.reps, args.examples
    started = time.perf_counter()
    print(f"CheckList gate error rates: {n} examples, confidence {CONFIDENCE}, {reps} repetitions;"
          f" pass rate +- Monte Carlo error")
    rows: list[tuple[str, str, float, float, dict[str, float]]] = []
    cases: list[tuple[str, str, float, float, Callable[[str, int], float]]] = []
    for pairs in (1, 3):
        truth = 0.10
        for place, limit in (("wrong side", truth - 0.05), ("at limit", truth),
                             ("right side", truth + 0.05)):
            label = f"INV max_flip_rate, {pairs} pair{'s' if pairs > 1 else ''}/example"
            cases.append((label, place, truth, limit,
                          lambda d, s, limit=limit, pairs=pairs, truth=truth:
                          inv_pass_rate(truth, limit, d, reps, n, pairs, s)))
    truth = 0.85
    for place, limit in (("wrong side", truth + 0.05), ("at limit", truth),
                         ("right side", truth - 0.05)):
        cases.append(("MFT min_pass", place, truth, limit,
                      lambda d, s, limit=limit, truth=truth: mft_pass_rate(truth, limit, d, reps,
                                                                           n, s)))
    for seed, (label, place, truth, limit, run) in enumerate(cases):
        rates = {decide: run(decide, seed) for decide in POLICIES}
        rows.append((label, place, truth, limit, rates))
    header = f"{'threshold':<34} {'truth':>5} {'limit':>5} {'place':<10} " + " ".join(
        f"{p:>17}" for p in POLICIES)
    print(header)
    print("-" * len(header))
    problems = []
    for label, place, truth, limit, rates in rows:
        cells = []
        for decide in POLICIES:
            r = rates[decide]
            cells.append(f"{r:.3f} +- {math.sqrt(max(r * (1 - r), 1e-9) / reps):.3f}".rjust(17))
        print(f"{label:<34} {truth:>5.2f} {limit:>5.2f} {place:<10} " + " ".join(cells))
        mc = 2 * math.sqrt(0.05 * 0.95 / reps)
        if place != "right side" and rates["pass-on-evidence"] > 0.05 + mc:
            problems.append(f"{label} {place}: pass-on-evidence passes {rates['pass-on-evidence']}")
        if place != "wrong side" and 1 - rates["fail-on-evidence"] > 0.05 + mc:
            problems.append(f"{label} {place}: fail-on-evidence fails "
                            f"{1 - rates['fail-on-evidence']:.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")
    problems += exact_part()
    print("targets met" if not problems else "TARGETS MISSED:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    main()
