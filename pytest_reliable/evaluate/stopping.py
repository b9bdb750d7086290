"""Early stopping: when a gate has seen enough resamplings to know its verdict (no pytest here).

A gate with ``stop_early`` runs its resamplings in batches, in plan order (a stopped run is the
prefix of the full one, so the cache serves a rerun), and after each batch asks `check` whether
every threshold's verdict is settled. Peeking after every batch must not inflate the error rates,
so the bounds used here stay valid at any stopping time (confidence sequences), unlike a fixed-n
interval re-checked.

What the bounds cover, honestly:

- The observation of resampling r is its mean score over the test's fixed instances. Resamplings
  are drawn independently from the space, so a confidence sequence over them covers mu_I, the
  mean over the space *for these instances*, not the mean over instances like them. Which
  sequence: see `SEQUENCE` (the asymptotic one by default; the exact betting one settles a model
  0.1 above its limit only after about 70 resamplings).
- Instance sampling enters as a margin: the bound on mu (the threshold's estimand, SPEC section 11)
  is the sequence's bound widened by the distance from the mean to the gate's own clustered bound
  (`stats.clustered_mean`: Wilson on the effective n, t(N-1)) at alpha/2. The error budget
  alpha = 1 - confidence is split in halves: alpha/2 for the sequence (each side), alpha/2 for
  the instance margin. The sequence's half is spent in two parts (union bound): a quarter on the
  early looks (resamplings `FIRST_LOOK` = 6 to 9, a sequence of their own) and the rest from
  resampling `LATE` = 10 on (the sequence measured since issue 9, burn-in 10).
- Where the calls go (``benchmarks/bench_calls_to_verdict.py --n 30 --instances 100 --reps
  1000 [--mode ilr]``: 100 instances, up to 30 resamplings, min_score 0.7 under
  pass-on-evidence at 95%, format effects +-0.05, every gate decided on the plugin's own bound).
  A gate costs N x (resamplings + 1 canonical sample) calls, so the stopping point is
  everything. In ilr mode a model 0.10 above its limit stops after about 7 resamplings (3.8x
  fewer calls; 0.10 below: 3.1x) and passes at the limit 1.6% of the time, as the full gate
  does. In fixed mode it stops after about 11 (2.6x), and no rule that keeps the gate's verdict
  can do much better: re-checking the gate's own bound after every batch saves 3.0x there.
  With one burn-in of 10 no gate could stop before resampling 10: that alone capped every
  saving at 31/11 = 2.8x. Below 10 the running standard deviation is the risk: a fixed-mode
  model whose format effect is two-valued shows only one value in the first t draws with
  probability 2^-t and the sequence then looks narrow; hence the stricter early looks. The
  instance margin (about 0.035 of the 0.10 on 100 instances) is paid at every look; counting
  only the between-instance variance component of a two-way analysis of variance (the sequence
  already covers the cells' noise) saved more on a narrower bound than the plugin's, but
  raised the pass rate at the limit of that two-valued model to 5.8%-6.4%, so it is not used.
- Covered thresholds: ``min_score`` (the mean over resamplings). Thresholds computed from the
  canonical pass alone (``min_lower_ci``, ``min_pass_at_k``, ``min_pass_hat_k``) do not change
  with more resamplings and are settled after the first batch. Group ranges and ``max_std`` have
  no anytime-valid bound here: a test with any of them runs all n resamplings (the report says so).
- When the run stops, the gate decides on the resamplings it ran with its own (fixed-n) bound
  (`stats.mean_bound`: Gaffke's bound on the per-instance means, plus t on the resamplings'
  means where fixed mode sampled its formats). That bound is not always the narrower one: in
  fixed mode its two parts are added at alpha/2 each, and on the anytime bounds alone a model
  0.10 above its limit (100 instances, n=30) failed 2.1% of 2,000 gates where the full gate
  fails 1.1% (the excess: stops called settled passes). So a verdict counts as settled only
  when the gate's own bound on the rows run decides it the same way (`gate_agrees`): 1.0% then,
  and the mean stopping point moved from 10.65 to 10.68 resamplings.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_reliable import stats
from pytest_reliable.contract.thresholds import settled_by
from pytest_reliable.contract.vocabulary import FAIL_ON_EVIDENCE, PASS_ON_EVIDENCE, is_policy
from pytest_reliable.evaluate.evaluation import ScoreMatrix, StagedEvaluation, append_resamplings

RESAMPLING_MEAN = settled_by("sequence")
"""Thresholds on the mean over resamplings: covered by the confidence sequence (the threshold
table's ``stopping`` column, `contract.thresholds`)."""
CANONICAL_ONLY = settled_by("canonical")
"""Thresholds of the canonical pass only: more resamplings never change them."""


def settled(direction: str, limit: float, low: float, high: float, decide: str) -> bool:
    """Whether a threshold's verdict under ``decide`` can no longer change, given anytime-valid
    bounds ``[low, high]`` on its estimand (valid simultaneously at every stopping time).

    Every policy settles when the bounds exclude the limit: then the truth lies on one side, and
    the bound the policy decides on ("pass-on-evidence": the unfavourable side, "fail-on-evidence":
    the favourable side, "estimate": the point estimate) will be on that side too. ``direction``
    is "min" (>= limit passes) or "max" (<= limit passes).
    """
    if not is_policy(decide):
        raise ValueError(f"decide must be a policy of SPEC section 11, got {decide!r}")
    if direction == "min":
        return low >= limit or high < limit
    if direction == "max":
        return high <= limit or low > limit
    raise ValueError(f"direction must be 'min' or 'max', got {direction!r}")


GateBound = Callable[[ScoreMatrix], stats.MeanBound]
"""The bound the gate will decide a mean threshold on, from the rows run so far
(`verdict.summary.gate_mean_bound`, given by the session)."""


def gate_agrees(direction: str, limit: float, low: float, high: float, gate: stats.MeanBound,
                *, decide: str, confidence: float, family: int = 1) -> bool:
    """Whether the gate's own bound ``gate`` decides a threshold the way anytime bounds
    ``[low, high]`` that exclude the limit settled it (`settled`).

    Only two cases can disagree: a settled pass under pass-on-evidence needs the gate's
    unfavourable bound beyond the limit, and a settled failure under fail-on-evidence needs its
    favourable bound short of it, at the strictest level Holm can give a family of ``family``
    p-values (alpha / family: a p-value there is rejected whatever the others; a range
    threshold adds one per group or pair it claims about). In every other case the gate's bound
    lies on the point estimate's far side, which the anytime bounds already put beyond the limit.
    """
    favourable = low >= limit if direction == "min" else high <= limit
    if decide == PASS_ON_EVIDENCE and favourable:
        if direction == "min":
            return gate.lower(confidence) >= limit
        return gate.upper(confidence) <= limit
    if decide == FAIL_ON_EVIDENCE and not favourable:
        level = 1.0 - (1.0 - confidence) / max(1, family)
        if direction == "min":
            return gate.upper(level) < limit
        return gate.lower(level) > limit
    return True


def mean_settled(
    direction: str, limit: float, scores: npt.NDArray[np.float64], *, decide: str,
    confidence: float, sequence: str, t_opt: int,
    gate: Callable[[], stats.MeanBound] | None = None, family: int = 1,
) -> tuple[bool, MeanBounds]:
    """Whether a threshold on the mean is settled after the rows of ``scores``: its anytime
    bounds exclude the limit (`settled`) and ``gate()``, the gate's own bound on the same rows
    when given, decides it the same way (`gate_agrees`; asked only once the anytime bounds
    settle, as an exact bound costs more than a look). Also returns the anytime bounds."""
    bounds = mean_bounds(scores, confidence, sequence=sequence, t_opt=t_opt)
    if not settled(direction, limit, bounds.low, bounds.high, decide):
        return False, bounds
    if gate is None:
        return True, bounds
    return gate_agrees(direction, limit, bounds.low, bounds.high, gate(), decide=decide,
                       confidence=confidence, family=family), bounds


@dataclass(frozen=True)
class MeanBounds:
    """Anytime-valid bounds on a gate's mean score: the sequence's, widened for instances."""

    low: float
    high: float
    cs_low: float
    cs_high: float
    instance_margin: float


SEQUENCES = ("asymptotic", "betting")
SEQUENCE = "asymptotic"
"""Which confidence sequence stops a gate. ``betting`` (`stats.betting_cs`) is exact for any
scores in [0, 1] but pays for that range: resampling means vary by a few points, and with bets
truncated to keep the capital positive over all of [0, 1] it needed about 70 resamplings to settle
a model 0.1 above its limit (1.4x fewer calls than n=100, benchmarks/bench_calls_to_verdict.py
--sequence betting).
``asymptotic`` (`stats.asymptotic_cs`) uses the observed variance, as the gate's own normal bounds
do, and settles the same model in a few batches; its error rates are measured there."""


FIRST_LOOK = 6
"""The first resampling count at which a gate may stop (`stats.asymptotic_cs`'s t_min for the
early looks)."""
LATE = 10
"""From here on the sequence is the one measured since issue 9 (the sequence's own burn-in)."""
EARLY_SHARE = 0.25
"""The share of alpha spent on the early looks (FIRST_LOOK to LATE - 1); the sequence from LATE
on spends the rest. One burn-in of 10 capped the saving at 31/11 = 2.8x on n=30 whatever the
model; a CLT sequence started before 10 at the full alpha raised the pass rate at the limit
(a model whose format effect is two-valued can show only one value in the first few draws, with
probability 2^-t), so the early looks are a separate, stricter sequence: by the union bound the
two together still spend alpha."""
T_OPT_FLOOR = 10
"""The late sequence is tightest at t_opt = max(T_OPT_FLOOR, n / 4) resamplings."""


def sequence_bounds(
    per_resampling: npt.NDArray[np.float64], alpha: float, *, sequence: str, t_opt: int,
) -> tuple[float, float]:
    """The sequence's bounds on mu_I after the resamplings so far, two-sided at ``alpha``."""
    t = per_resampling.size
    if sequence == "betting":
        cs = stats.betting_cs(per_resampling, alpha)
    elif sequence != "asymptotic":
        raise ValueError(f"sequence must be one of {SEQUENCES}, got {sequence!r}")
    elif t < LATE:
        cs = stats.asymptotic_cs(per_resampling, alpha * EARLY_SHARE, t_opt=LATE,
                                 t_min=FIRST_LOOK)
    else:
        cs = stats.asymptotic_cs(per_resampling, alpha * (1.0 - EARLY_SHARE), t_opt=t_opt,
                                 t_min=LATE)
    return float(cs.low[-1]), float(cs.high[-1])


def mean_bounds(
    scores: npt.NDArray[np.float64], confidence: float, *, sequence: str = SEQUENCE,
    t_opt: int = 20,
) -> MeanBounds:
    """Bounds on the mean over the space and over instances, from a (resamplings, instances)
    matrix of scores in [0, 1]; see the module docstring for the error budget."""
    alpha = 1.0 - confidence
    per_resampling = np.clip(scores.mean(axis=1), 0.0, 1.0)
    low, high = sequence_bounds(per_resampling, alpha, sequence=sequence, t_opt=t_opt)
    if scores.shape[1] < 2:
        # One instance says nothing about instances like it.
        return MeanBounds(-math.inf, math.inf, low, high, math.inf)
    # The instance margin is the gate's own clustered bound (at alpha/2), so a verdict settled
    # here is the verdict the gate reaches on the same resamplings.
    instances = stats.clustered_mean(scores)
    margin_low = instances.p - instances.lower(1.0 - alpha / 2.0)
    margin_high = instances.upper(1.0 - alpha / 2.0) - instances.p
    return MeanBounds(low - margin_low, high + margin_high, low, high,
                      max(margin_low, margin_high))


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    reason: str


def check(
    thresholds: Mapping[str, tuple[str, float]],
    scores: npt.NDArray[np.float64],
    *,
    decide: str,
    confidence: float,
    sequence: str = SEQUENCE,
    n_planned: int | None = None,
    gate: Callable[[], stats.MeanBound] | None = None,
) -> StopDecision:
    """Whether a gate may stop after the resamplings in ``scores`` (rows, in plan order).

    ``thresholds``: name -> (direction, limit) of the test's thresholds. ``gate``: the bound
    the gate will decide the mean on, from the same rows (`mean_settled`).
    """
    uncovered = sorted(set(thresholds) - RESAMPLING_MEAN - CANONICAL_ONLY)
    if uncovered:
        return StopDecision(False, "not covered by anytime-valid bounds: " + ", ".join(uncovered))
    n = scores.shape[0]
    reasons = []
    for name, (direction, limit) in sorted(thresholds.items()):
        if name in CANONICAL_ONLY:
            continue
        done, bounds = mean_settled(
            direction, limit, scores, decide=decide, confidence=confidence, sequence=sequence,
            t_opt=max(T_OPT_FLOOR, (n_planned or 2 * n) // 4), gate=gate,
            family=len(thresholds))
        if not done:
            why = (f"exclude {limit:g}, but the gate's own bound does not decide it so yet"
                   if settled(direction, limit, bounds.low, bounds.high, decide)
                   else f"contain {limit:g}")
            return StopDecision(False, f"{name} not settled after {n} resamplings: anytime "
                                f"bounds [{bounds.low:.4f}, {bounds.high:.4f}] {why}")
        reasons.append(f"{name} in [{bounds.low:.4f}, {bounds.high:.4f}] vs {limit:g}")
    if not reasons:
        return StopDecision(True, f"no threshold depends on the resamplings; stopped after {n}")
    return StopDecision(True, f"settled after {n} resamplings: " + "; ".join(reasons))


def bound_of(gate_bound: GateBound | None, matrix: ScoreMatrix
              ) -> Callable[[], stats.MeanBound] | None:
    """``gate_bound`` on ``matrix``, asked when needed (`mean_settled`)."""
    return None if gate_bound is None else functools.partial(gate_bound, matrix)


def batch_size(n: int) -> int:
    """Resamplings in the first batch (the batch path's first stage): about 20 batches over a
    full run, at least 2."""
    return max(2, math.ceil(n / 20))


def check_step(n: int) -> int:
    """Resamplings per later batch: about 30 checks over a full run, at least 1. A check costs
    no call and a gate stops at the first check after its verdict settled, so a finer step stops
    nearer that point (at n=30: after 7 or 9 resamplings, not only after 8 or 10)."""
    return max(1, math.ceil(n / 30))


@dataclass(frozen=True)
class StoppedRun:
    matrix: ScoreMatrix
    stopped_early: bool
    reason: str


def run_until_settled(
    staged: StagedEvaluation,
    thresholds: Mapping[str, tuple[str, float]],
    *,
    decide: str,
    confidence: float,
    batch: int | None = None,
    sequence: str = SEQUENCE,
    gate_bound: GateBound | None = None,
) -> StoppedRun:
    """Run ``staged``'s resamplings batch by batch in plan order (the canonical pass with the
    first), checking after each batch; stop when `check` says so, or after all of them.
    ``batch``: resamplings per batch (default: `batch_size` first, then `check_step`).
    ``gate_bound``: the gate's own bound on the rows run (see `gate_agrees`)."""
    n = staged.settings.n
    matrix = staged.run(0, min(batch or batch_size(n), n), canonical=True)
    step = batch or check_step(n)
    while matrix.n_resamplings < n:
        if matrix.problems:  # a missing answer is never scored: no decision can rest on it
            return StoppedRun(matrix, True, "calls did not complete; stopped")
        decision = check(thresholds, matrix.scores, decide=decide, confidence=confidence,
                         sequence=sequence, n_planned=n,
                         gate=bound_of(gate_bound, matrix))
        if decision.stop:
            return StoppedRun(matrix, True, decision.reason)
        if decision.reason.startswith("not covered"):
            # Nothing will settle: run the rest at once.
            tail = staged.run(matrix.n_resamplings, n, canonical=False)
            return StoppedRun(append_resamplings(matrix, tail), False,
                              f"ran all {n} resamplings: {decision.reason}")
        stop = min(n, matrix.n_resamplings + step)
        matrix = append_resamplings(matrix, staged.run(matrix.n_resamplings, stop, canonical=False))
    return StoppedRun(matrix, False, f"ran all {n} resamplings: verdicts not settled before")
