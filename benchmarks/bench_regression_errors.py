"""max_regression's error rates: a simulated candidate/baseline pair of known difference, through the
real plugin code.

Run from the repository root (about two minutes at the defaults)::

    PYTHONPATH=. python benchmarks/bench_regression_errors.py [--reps 300] [--instances 40] [--n 5]

Every repetition runs ``ReliableSession.run_reliable`` with a candidate and a ``reliable_baseline``
model exactly as the ``reliable`` fixture runs it (the candidate's plan, the baseline on the same
cells, the paired difference and its clustered bound, the gate). The models are
bench_gate_errors.py's simulated ones, paired: instance i has the baseline accuracy
``p_i ~ Beta(mean p, intra-instance correlation 0.5)`` (fresh instances every repetition) and the
candidate accuracy ``p_i (p + delta) / p``, so candidate - baseline is ``delta`` exactly in
expectation; a cell's two answers share their random draw half of the time (two models that
agree on most prompts, and disagree both ways on some).

Printed, each with its Monte Carlo standard error (SPEC sections 9 and 11; alpha = 1 - confidence):

- pass-on-evidence, candidate exactly at -max_regression: pass rate (target <= alpha);
- fail-on-evidence, candidate equal to the baseline: fail rate (target <= alpha);
- fail-on-evidence, candidate exactly at -max_regression: fail rate (target <= alpha);
- fail-on-evidence, max_regression and min_score both exactly at their limits: the test's fail
  rate with the gate's Holm correction over both (target <= alpha), and, for contrast, the rate
  at which either threshold decided alone at alpha fails (what the family-wise error was before
  max_regression joined the gate's family).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gate_errors import QUESTION, SPACE, _uniform, dataset, instance_accuracy, rate

from pytest_reliable import MultipleChoice, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.verdict.gate import reliable_thresholds
from pytest_reliable.verdict.results import ReliableReport

CONFIDENCE = 0.95
RHO = 0.5
SHARED = 0.5
"""The share of cells where the candidate's answer uses the baseline's random draw."""


@dataclass(frozen=True)
class PairedModel:
    """The baseline (``delta`` None) or a candidate ``delta`` away from it, mean accuracy ``p``."""

    p: float
    delta: float | None = None

    async def __call__(self, prompt: str) -> str:
        found = QUESTION.search(prompt)
        assert found, prompt
        key = f"{found.group(1)}-{found.group(2)}"
        accuracy = instance_accuracy(self.p, RHO, key)
        draw = _uniform("cell", prompt)
        if self.delta is not None:
            accuracy *= (self.p + self.delta) / self.p
            if _uniform("pair", prompt) >= SHARED:
                draw = _uniform("candidate", prompt)
        return f"true {key}" if draw < accuracy else f"false {key} one"


def run_pair(session: ReliableSession, rep: int, p: float, delta: float, limit: float,
             instances: int, n: int) -> ReliableReport:
    spec = ReliableSpec(space=SPACE, n=n, confidence=CONFIDENCE, max_regression=limit)
    return session.run_reliable(
        f"bench::regression-{rep}", dataset(rep, instances), MultipleChoice(), spec,
        text_model(PairedModel(p, delta), id=f"candidate{delta:+}"),
        text_model(PairedModel(p), id="baseline"),
    )


def decide(report: ReliableReport, policy: str, **limits: float) -> bool:
    """Whether a gate with ``limits`` passes under ``policy``, on the run's own summary and paired
    difference, by the function run_reliable decides with."""
    assert report.baseline is not None
    spec = ReliableSpec(space=SPACE, n=report.matrix.n_resamplings, confidence=CONFIDENCE,
                        **limits)  # type: ignore[arg-type]
    checks = reliable_thresholds(spec, report.summary, policy, baseline=report.baseline.difference)
    return all(c.passed for c in checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--n", type=int, default=5, help="resamplings")
    parser.add_argument("--p", type=float, default=0.6, help="the baseline's mean accuracy")
    parser.add_argument("--limit", type=float, default=0.05, help="max_regression")
    args = parser.parse_args(argv)
    limit, p = args.limit, args.p
    poe, foe = "pass-on-evidence", "fail-on-evidence"
    rows: dict[str, list[bool]] = {name: [] for name in (
        "poe_at_limit_passes", "foe_equal_fails", "foe_at_limit_fails", "foe_holm_fails",
        "foe_alone_fails")}
    started = time.perf_counter()
    for rep in range(args.reps):
        session = ReliableSession(Settings(rootdir=Path("."), no_cache=True))
        try:
            at_limit = run_pair(session, rep, p, -limit, limit, args.instances, args.n)
            equal = run_pair(session, rep, p, 0.0, limit, args.instances, args.n)
        finally:
            session.close()
        rows["poe_at_limit_passes"].append(decide(at_limit, poe, max_regression=limit))
        rows["foe_equal_fails"].append(not decide(equal, foe, max_regression=limit))
        rows["foe_at_limit_fails"].append(not decide(at_limit, foe, max_regression=limit))
        # min_score at the candidate's true mean: both thresholds exactly at their limits.
        both = {"max_regression": limit, "min_score": round(p - limit, 6)}
        rows["foe_holm_fails"].append(not decide(at_limit, foe, **both))
        rows["foe_alone_fails"].append(any(not decide(at_limit, foe, **{k: v})
                                           for k, v in both.items()))
    seconds = time.perf_counter() - started
    alpha = 1 - CONFIDENCE
    print(f"# max_regression error rates: N={args.instances} instances, n={args.n} resamplings "
          f"(ilr), baseline accuracy {p}, max_regression {limit}, confidence {CONFIDENCE}, "
          f"{args.reps} repetitions, {seconds:.0f} s")
    labels = {
        "poe_at_limit_passes": ("pass-on-evidence, candidate at -max_regression: passes", True),
        "foe_equal_fails": ("fail-on-evidence, candidate equal to baseline: fails", True),
        "foe_at_limit_fails": ("fail-on-evidence, candidate at -max_regression: fails", True),
        "foe_holm_fails": ("fail-on-evidence, + min_score at its limit, Holm (the gate): fails",
                           True),
        "foe_alone_fails": ("  the same two decided each alone at alpha: either fails", False),
    }
    missed = []
    for key, (label, target) in labels.items():
        r, se = rate(rows[key])
        verdict = ""
        if target:
            ok = r <= alpha + 2 * se
            verdict = f"target <= {alpha:.2f}: {'met' if ok else 'MISSED'}"
            if not ok:
                missed.append(label)
        print(f"{label:72} {r:.3f} +- {se:.3f}  {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
