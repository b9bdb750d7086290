"""The gate's error rates when a noisy, biased LLM judge grades the answers (SPEC sections 11, 12).

Run from the repository root (about a minute on 2 cores; ``--quick`` for a smoke run)::

    PYTHONPATH=. python benchmarks/bench_judge_errors.py [--reps 200] [--quick] [--workers 2]

Every gate runs through ``ReliableSession.run_reliable`` as the ``reliable`` fixture runs it, with
``Generation(grader=Judge(...))``: the model's answers, then the judge's votes through the same
runner (in-memory cache), each cell scored by its mean vote, the bounds of section 11 clustered
by instance. Truth is known:

- the model under test: instance i is right with probability ``p_i ~ Beta`` (mean ``p``,
  intra-instance correlation 0.5, instances fresh in every repetition); a cell's answer is
  ``right`` or ``wrong`` (so cells of one instance that give the same answer share their votes,
  as real answers do);
- the judge (a chat callable, one independent draw per vote from the runner's per-call seed): a
  reply is unparseable with probability ``u``, else PASS with probability ``1 - fn`` for a right
  answer and ``fp`` for a wrong one. So a vote passes with probability ``a = (1-u)(1-fn)`` for a
  right answer and ``b = (1-u) fp`` for a wrong one, and the judged score's truth is
  ``p a + (1 - p) b`` (what the gate measures: the judge's bias moves the estimand, which is why
  a team tests its judge with `JudgeTask`; the noise widens the bounds).

``min_score`` is set at the judged truth + 0.05 (wrong side), the truth, and the truth - 0.05; each policy's pass rate is
printed with its Monte Carlo standard error. Targets (SPEC section 11), checked at the end:
pass-on-evidence passes at most 1 - confidence (+ 2 MC errors) at the limit or on its wrong side;
fail-on-evidence fails at most 1 - confidence (+ 2 MC errors) a model meeting the limit.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import math
import re
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from scipy import stats as scipy_stats

from pytest_reliable import Generation, Judge, chat_model, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.models.base import request_seed
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.space import Space
from pytest_reliable.verdict.gate import reliable_thresholds

CONFIDENCE = 0.95
RHO = 0.5
SPACE = Space.from_mapping("judged", {
    "instruction": ["Answer the question.", "Answer briefly."],
    "field_marker": ["Question:", "Q:"],
})
POLICIES = ("pass-on-evidence", "fail-on-evidence", "estimate")
OFFSETS = {"wrong side": -0.05, "at the limit": 0.0, "right side": +0.05}
"""truth - limit: on the wrong side the judged truth lies 0.05 below the limit."""
ITEM = re.compile(r"Item (\d+)-(\d+)\b")


def _uniform(*parts: object) -> float:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / 2.0**64


@functools.cache
def instance_accuracy(p: float, key: str) -> float:
    concentration = 1 / RHO - 1
    return float(scipy_stats.beta.ppf(_uniform("instance", key), p * concentration,
                                      (1 - p) * concentration))


@dataclass(frozen=True)
class Case:
    """A model of accuracy ``p`` graded by a judge with unparsed rate ``u``, false-negative rate
    ``fn`` and false-positive rate ``fp``, with ``votes`` votes per answer."""

    name: str
    p: float
    u: float
    fn: float
    fp: float
    votes: int

    @property
    def truth(self) -> float:
        a, b = (1 - self.u) * (1 - self.fn), (1 - self.u) * self.fp
        return self.p * a + (1 - self.p) * b

    def model(self, prompt: str) -> str:
        found = ITEM.search(prompt)
        assert found, prompt
        key = f"{found.group(1)}-{found.group(2)}"
        return "right" if _uniform("cell", prompt) < instance_accuracy(self.p, key) else "wrong"

    def judge(self, messages: list[dict[str, str]]) -> str:
        seed = request_seed.get()  # the runner's per-call seed: vote index is in the key
        draw = _uniform("vote", seed, messages[-1]["content"])
        if draw < self.u:
            return "I cannot grade this."
        draw = (draw - self.u) / (1 - self.u)
        right = "\nAnswer: right\n" in messages[-1]["content"]
        return "PASS" if draw < ((1 - self.fn) if right else self.fp) else "FAIL"


CASES = [
    Case("exact judge, 1 vote", 0.7, 0.0, 0.0, 0.0, 1),
    Case("noisy judge, 3 votes", 0.7, 0.05, 0.15, 0.10, 3),
    Case("noisy judge, 1 vote", 0.7, 0.05, 0.15, 0.10, 1),
    Case("lenient judge, 3 votes", 0.6, 0.0, 0.05, 0.30, 3),
]


@dataclass(frozen=True)
class Job:
    case: Case
    rep: int
    instances: int
    resamplings: int


def run_job(job: Job) -> tuple[list[tuple[str, str, bool]], bool]:
    """(offset label, policy, passed) for one repetition: one run, every limit and policy decided
    from its summary by the function run_reliable decides with; and whether the run's judge
    could not be read (more than max_unparsed of its votes unread: the test would report an
    error, which these rates leave aside to keep measuring the bounds)."""
    case = job.case
    session = ReliableSession(Settings(rootdir=Path("."), no_cache=True))
    data = [{"question": f"Item {job.rep}-{i}: what is it?"} for i in range(job.instances)]
    judge = Judge(chat_model(case.judge, id=f"judge-{case.name}"), "The answer is right.",
                  votes=case.votes)
    out = []
    unread = False
    try:
        report = session.run_reliable(
            f"bench::{case.name}-{job.rep}", data, Generation(grader=judge),
            ReliableSpec(space=SPACE, n=job.resamplings, confidence=CONFIDENCE),
            text_model(case.model, id=f"sim-{case.p}"),
        )
        unread = any(p.startswith(f"judge judge-{case.name} could not be read")
                     for p in report.problems)
        for label, offset in OFFSETS.items():
            spec = ReliableSpec(space=SPACE, n=job.resamplings, confidence=CONFIDENCE,
                                min_score=min(1.0, max(0.0, case.truth - offset)))
            for policy in POLICIES:
                (check,) = reliable_thresholds(spec, report.summary, policy)
                out.append((label, policy, bool(check.passed)))
    finally:
        session.close()
    return out, unread


def rate(passes: list[bool]) -> tuple[float, float]:
    n = len(passes)
    p = sum(passes) / n
    return p, math.sqrt(max(p * (1 - p), 1 / n) / n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--resamplings", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="30 repetitions")
    args = parser.parse_args(argv)
    reps = 30 if args.quick else args.reps
    jobs = [Job(case, rep, args.instances, args.resamplings)
            for case in CASES for rep in range(reps)]
    start = time.perf_counter()
    results: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    unread: dict[str, int] = defaultdict(int)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for job, (rows, judge_unread) in zip(jobs, pool.map(run_job, jobs, chunksize=4)):
            unread[job.case.name] += judge_unread
            for label, policy, passed in rows:
                results[(job.case.name, label, policy)].append(passed)
    print(f"min_score pass rate (± MC s.e.), {reps} repetitions, N={args.instances} instances, "
          f"n={args.resamplings} resamplings, confidence {CONFIDENCE}; truth - limit = offset\n")
    print("| judge (model p) | judged truth | limit at | pass-on-evidence | fail-on-evidence "
          "| estimate |")
    print("|---|---|---|---|---|---|")
    failures = []
    alpha = 1 - CONFIDENCE
    for case in CASES:
        for label, offset in OFFSETS.items():
            cells = []
            for policy in POLICIES:
                p, se = rate(results[(case.name, label, policy)])
                cells.append(f"{p:.3f} ± {se:.3f}")
                if policy == "pass-on-evidence" and offset <= 0 and p > alpha + 2 * se:
                    failures.append(f"{case.name}, {label}: pass-on-evidence passes {p:.3f}")
                if policy == "fail-on-evidence" and offset >= 0 and 1 - p > alpha + 2 * se:
                    failures.append(f"{case.name}, {label}: fail-on-evidence fails {1 - p:.3f}")
            print(f"| {case.name} (p={case.p}, u={case.u}, fn={case.fn}, fp={case.fp}) | "
                  f"{case.truth:.3f} | {label} ({offset:+.2f}) | " + " | ".join(cells) + " |")
    print("\nruns whose judge could not be read (more than max_unparsed=0.1 of the votes unread: "
          "the test reports an error; the rates above leave this aside):")
    for case in CASES:
        print(f"  {case.name} (u={case.u}): {unread[case.name]} of {reps}")
    print(f"\n{len(jobs)} gates in {time.perf_counter() - start:.0f} s")
    if failures:
        print("TARGETS MISSED:\n  " + "\n  ".join(failures))
        return 1
    print("targets met: pass-on-evidence <= 1 - confidence at or beyond the limit's wrong side; "
          "fail-on-evidence fails <= 1 - confidence a model meeting the limit (within 2 MC s.e.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
