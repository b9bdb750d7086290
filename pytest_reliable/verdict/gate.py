"""Thresholds -> verdict (SPEC section 11). Each threshold becomes a `ThresholdCheck`.

Policies (``decide=``):

- ``pass-on-evidence`` (default): a threshold passes only when its one-sided bound on the
  unfavourable side, at the marker's ``confidence``, clears the limit (the lower bound for
  ``min_*``, the upper bound for ``max_*``). A range passes when every group (``min_worst``) or
  every pairwise paired difference (``max_spread``) clears it. The test passes when every
  threshold does: an intersection-union test, so a model breaching any limit passes with
  probability at most 1 - confidence, with no multiplicity correction needed.
- ``fail-on-evidence``: a threshold fails only when the data show it is breached. Every
  elementary claim of the test (one per plain threshold, one per group of ``min_worst`` and
  ``min_median``'s groups, one per pair of ``max_spread``) gets a p-value; Holm's step-down over
  all of them at alpha = 1 - confidence decides which are rejected. The reported ``bound`` is
  the favourable-side bound at the Holm level its claim was compared with (the most extreme over
  a range's claims).
- ``estimate``: the point estimate against the limit; no error control.

``min_lower_ci`` keeps its own meaning under every policy: the canonical interval's lower end
must be >= the limit (it is already a bound). The bound functions live in `pytest_reliable.stats`.

``max_regression`` (SPEC section 9) is one more ``max_*`` threshold of the same test, on the
regression baseline - candidate: its claim is "the candidate is worse by at most the limit", its
bounds and p-value come from the paired difference's bound (`stats.paired_difference`: bounded
per-instance differences, plus the resamplings' t in fixed mode), and under fail-on-evidence it is
one more claim in the test's Holm family.

Means (``min_score``, ``min_pass_at_k``, ``min_pass_hat_k``) are decided on `stats.MeanBound`s
that hold at any N (`stats.bounded_mean`: Clopper-Pearson on 0/1 values, Gaffke's bound
otherwise); every p-value inverts its bound, so a claim rejected under fail-on-evidence is one
whose favourable-side bound at its Holm level breaches the limit.

Which evidence decides a ``@reliable`` threshold, and which statistic of the summary it reads, is
its row of the threshold table (`contract.thresholds`); `EVIDENCE` builds each kind of evidence
once, whatever the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pytest_reliable import stats
from pytest_reliable.contract.thresholds import (
    MEANS,
    THRESHOLD_TABLE,
    EvidenceKind,
    ThresholdRow,
)

# The vocabulary is `contract.vocabulary`'s (light enough for the plugin's start-up); the
# gate's own names for it stay importable from here.
from pytest_reliable.contract.vocabulary import CHECKLIST_DIRECTIONS as CHECKLIST_DIRECTIONS
from pytest_reliable.contract.vocabulary import DEFAULT_POLICY as DEFAULT_POLICY
from pytest_reliable.contract.vocabulary import DIRECTIONS as DIRECTIONS
from pytest_reliable.contract.vocabulary import ESTIMATE as ESTIMATE
from pytest_reliable.contract.vocabulary import FAIL_ON_EVIDENCE as FAIL_ON_EVIDENCE
from pytest_reliable.contract.vocabulary import MAX_REGRESSION as MAX_REGRESSION
from pytest_reliable.contract.vocabulary import PASS_ON_EVIDENCE as PASS_ON_EVIDENCE
from pytest_reliable.contract.vocabulary import POLICIES
from pytest_reliable.contract.vocabulary import Direction as Direction

if TYPE_CHECKING:
    from pytest_reliable.contract.markers import ReliableSpec
    from pytest_reliable.verdict.summary import Summary

_TOLERANCE = 1e-12
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ThresholdCheck:
    """One threshold of a test. ``observed`` is the point estimate; ``bound`` the value the
    decision used under ``decide`` (None for CheckList thresholds, which compare ``observed``)."""

    name: str
    limit: float
    observed: float | None
    direction: Direction
    bound: float | None = None
    decide: str | None = None
    method: str | None = None
    verdict: bool | None = None
    """The policy's decision; None = compare ``observed`` with ``limit``."""
    confidence: float | None = None

    @property
    def passed(self) -> bool:
        if self.verdict is not None:
            return self.verdict
        return _clears(self.observed, self.limit, self.direction)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "limit": self.limit, "observed": self.observed}
        if self.decide is not None:
            data.update(bound=self.bound, decide=self.decide, method=self.method)
        data["passed"] = self.passed
        return data

    def describe(self) -> str:
        relation = ">=" if self.direction == "min" else "<="
        text = f"{self.name}: observed {_shown(self.observed)}, required {relation} {self.limit:g}"
        if self.name == MAX_REGRESSION:  # observed is baseline - candidate
            text = (f"{self.name}: candidate worse than baseline by {_shown(self.observed)}, "
                    f"allowed <= {self.limit:g}")
        if self.decide is None or self.decide == ESTIMATE:
            return text + ("" if self.decide is None else " (estimate: no error control)")
        side = {
            (PASS_ON_EVIDENCE, "min"): "lower", (PASS_ON_EVIDENCE, "max"): "upper",
            (FAIL_ON_EVIDENCE, "min"): "upper", (FAIL_ON_EVIDENCE, "max"): "lower",
        }[(self.decide, self.direction)]
        if self.name == "min_lower_ci":
            side = "interval's lower end"
            return f"{text}; {side} {_shown(self.bound)} ({self.method})"
        level = f" at {self.confidence:.0%}" if self.confidence is not None else ""
        return f"{text}; {side} bound {_shown(self.bound)}{level} ({self.decide}, {self.method})"


def _shown(value: float | None) -> str:
    if value is None:
        return "n/a"
    # A difference of round-off (-1e-17, -0.0) is no difference: never "-0.0000".
    return f"{0.0 if abs(value) < 5e-5 else value:.4f}"


def _clears(value: float | None, limit: float, direction: str) -> bool:
    if value is None or math.isnan(value):
        return False
    if direction == "min":
        return value >= limit - _TOLERANCE
    return value <= limit + _TOLERANCE


# -- the evidence behind one threshold ------------------------------------------------------
@dataclass(frozen=True)
class Evidence:
    """A threshold's elementary claims, vectorised.

    ``unfavourable(c)``: per claim, the one-sided bound at confidence ``c`` on the side that must
    clear the limit under pass-on-evidence. ``favourable(levels)``: per claim, the bound on the
    other side at per-claim confidences. ``p_breach(limit)``: per claim, the p-value of "the
    limit is met" (small = evidence of a breach).
    """

    observed: float | None
    method: str
    unfavourable: Callable[[float], FloatArray]
    favourable: Callable[[FloatArray], FloatArray]
    p_breach: Callable[[float], FloatArray]


def proportion_evidence(
    observed: float | None, bounds: Sequence[stats.MeanBound], direction: Direction,
    method: str | None = None,
) -> Evidence:
    """Claims "mean >= limit" (min) or "mean <= limit" (max), one per bound."""
    low = direction == "min"

    def unfavourable(c: float) -> FloatArray:
        return np.array([b.lower(c) if low else b.upper(c) for b in bounds])

    def favourable(levels: FloatArray) -> FloatArray:
        return np.array([b.upper(float(c)) if low else b.lower(float(c))
                         for b, c in zip(bounds, levels)])

    def p_breach(limit: float) -> FloatArray:
        return np.array([b.p_below(limit) if low else b.p_above(limit) for b in bounds])

    return Evidence(observed, method or (bounds[0].method if bounds else ""), unfavourable,
                    favourable, p_breach)


def group_evidence(observed: float | None, effects: list[stats.GroupEffects],
                   grouping: str, unobserved: int = 0) -> Evidence:
    """``min_worst``: the claims "this group's score >= limit", one per populated group of every
    labelling (paired within instance; `stats.GroupEffects.lower` / ``upper``).

    ``unobserved``: listed groups no cell was rendered with. Their claims have no evidence: a
    lower bound of 0 under pass-on-evidence (the test cannot pass on evidence it never gathered);
    under fail-on-evidence they are left out (no evidence of a breach)."""
    live = [e.live for e in effects]

    def at(levels: FloatArray, side: int) -> FloatArray:
        out, start = [], 0
        for e, g in zip(effects, live):
            confidence = np.full(e.n_groups, 0.5)
            confidence[g] = levels[start:start + g.size]
            start += g.size
            out.append(e.level_bounds(confidence, side)[g])
        return np.concatenate(out) if out else np.zeros(0)

    def unfavourable(c: float) -> FloatArray:
        return np.concatenate([at(np.full(sum(g.size for g in live), c), -1),
                               np.zeros(unobserved)])

    def favourable(levels: FloatArray) -> FloatArray:
        return at(np.asarray(levels, dtype=np.float64), +1)

    def p_breach(limit: float) -> FloatArray:
        parts = [e.p_below(limit)[g] for e, g in zip(effects, live)]
        return np.concatenate(parts) if parts else np.zeros(0)

    method = (f"{stats.LEVEL_METHOD}; every group of {grouping}" + _unseen(unobserved)
              + _thinly_drawn(effects))
    return Evidence(observed, method, unfavourable, favourable, p_breach)


def looked_evidence(observed: float | None, looked: stats.LookedMeans, unobserved: int = 0
                    ) -> Evidence:
    """``min_worst`` after an adaptive search by cells: the claims "this format's score >=
    limit", each bounded at its looks (`stats.LookedMeans`). A format never brought to a look
    has no evidence: a lower bound of 0 and an upper bound of 1."""

    def unfavourable(c: float) -> FloatArray:
        return np.concatenate([looked.level_bounds(c, -1), np.zeros(unobserved)])

    def favourable(levels: FloatArray) -> FloatArray:
        return looked.level_bounds(np.asarray(levels, dtype=np.float64), +1)

    def p_breach(limit: float) -> FloatArray:
        return looked.p_below(limit)

    method = f"{looked.method}; every format" + _unseen(unobserved)
    return Evidence(observed, method, unfavourable, favourable, p_breach)


def _unseen(unobserved: int, what: str = "groups") -> str:
    return f" ({unobserved} listed {what} never rendered: no evidence)" if unobserved else ""


def _thinly_drawn(effects: list[stats.GroupEffects]) -> str:
    """The note for groups that sampled resamplings drew too thinly to bound
    (`stats.GroupEffects.single_draw`), naming the fix."""
    count = sum(int(e.single_draw[e.live].sum()) for e in effects if e.single_draw is not None)
    if not count:
        return ""
    return (f" ({count} groups without evidence: fixed mode sampled too few variants to show "
            "how the variants they average over score (a value, or a value of a dimension it "
            "averages over, drawn by fewer than 2 resamplings); raise n)")


def spread_evidence(observed: float | None, pairs: list[stats.Pairs],
                    unobserved_pairs: int = 0) -> Evidence:
    """Claims "|difference| <= limit", one per pair of groups of one labelling (paired within
    instance; `stats.Pairs`): the upper bound of |d| is |d| + q se (skewness-corrected t);
    evidence of a breach is two-sided (the sign of the difference is chosen by the data):
    lower bound |d| - t_{(1+c)/2} se, p = 2 t.sf((|d| - L) / se). ``unobserved_pairs``: pairs
    with a group no cell was rendered with: their upper bound is 1 (see `group_evidence`)."""
    live = [p for p in pairs if p.size]
    if not live:
        # One group or none: no pair can differ (an empty range has no observed value anyway).
        if observed is not None:
            return Evidence(observed, "a single group: no pair", lambda c: np.zeros(1),
                            lambda levels: np.zeros(1), lambda limit: np.ones(1))
        return Evidence(None, "no groups", lambda c: np.full(1, np.inf),
                        lambda levels: np.zeros(1), lambda limit: np.ones(1))

    def unfavourable(c: float) -> FloatArray:
        return np.concatenate([*(p.upper(c) for p in live), np.ones(unobserved_pairs)])

    def favourable(levels: FloatArray) -> FloatArray:
        out, start = [], 0
        for p in live:
            out.append(p.lower(np.asarray(levels[start:start + p.size])))
            start += p.size
        return np.concatenate(out)

    def p_breach(limit: float) -> FloatArray:
        return np.concatenate([p.p_breach(limit) for p in live])

    blind = sum(int(np.isinf(p.se).sum()) for p in live)
    note = (f" ({blind} pairs without evidence: no instance links them, or fixed mode sampled "
            "too few variants to bound a group; raise n)") if blind else ""
    return Evidence(observed, stats.PAIRED_METHOD + ", pairwise differences (skewness-corrected "
                    "t)" + _unseen(unobserved_pairs, "pairs") + note, unfavourable, favourable,
                    p_breach)


def std_evidence(bound: stats.SpreadBound) -> Evidence:
    """The claim "sigma <= limit" over the per-resampling scores."""
    return Evidence(
        bound.std if bound.n >= 2 else None, bound.method,
        lambda c: np.array([bound.upper(c)]),
        lambda levels: np.array([bound.lower(float(levels[0]))]),
        lambda limit: np.array([bound.p_above(limit)]),
    )


def regression_evidence(difference: stats.ClusteredDifference) -> Evidence:
    """The claim "the candidate is worse than the baseline by at most the limit", on the
    regression baseline - candidate = -(candidate - baseline) and its clustered bound."""
    return Evidence(
        -difference.estimate, difference.method,
        lambda c: np.array([-difference.lower(c)]),
        lambda levels: np.array([-difference.upper(float(levels[0]))]),
        lambda limit: np.array([difference.p_below(-limit)]),
    )


def median_evidence(observed: float | None, effects: list[stats.GroupEffects],
                    unobserved: int = 0) -> Evidence:
    """``min_median``: the claim "the median group's score >= limit", bounded by the median of
    the groups' bounds, each at level alpha / m with m = G // 2 + 1 (G groups).

    Why that is a bound at level alpha: if the median of the lower bounds exceeded the median
    score, some group among the m lowest-scoring ones would have a lower bound above its own
    score (for odd G, the m = (G + 1) / 2 groups at or below the median; for even G, whose
    median averages the two middle groups, the G / 2 + 1 groups at or below the upper middle
    one). Each of those m fixed groups errs with probability at most alpha / m, so all of them
    hold with probability at least 1 - alpha (Bonferroni), whatever their dependence. The same
    holds for the median of the upper bounds with the m highest groups. ``unobserved`` listed
    groups without cells count as groups bounded only by [0, 1] (lower 0, upper 1).
    """
    live = [e.live for e in effects]
    m = (sum(g.size for g in live) + unobserved) // 2 + 1

    def median_at(confidence: float, side: int) -> float:
        level = 1.0 - (1.0 - confidence) / m
        values = [e.level_bounds(level, side)[g] for e, g in zip(effects, live)]
        values.append(np.full(unobserved, 0.0 if side < 0 else 1.0))
        found = np.concatenate(values)
        return float(np.median(found)) if found.size else float("nan")

    def unfavourable(c: float) -> FloatArray:
        return np.array([median_at(c, -1)])

    def favourable(levels: FloatArray) -> FloatArray:
        return np.array([median_at(float(levels[0]), +1)])

    def p_breach(limit: float) -> FloatArray:
        # The smallest alpha at which the upper bound at 1 - alpha falls below the limit.
        if median_at(0.5, +1) >= limit:
            return np.array([1.0])
        lo, hi = 1e-12, 0.5
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            if median_at(1.0 - mid, +1) < limit:
                hi = mid
            else:
                lo = mid
        return np.array([hi])

    return Evidence(observed, f"median of the groups' bounds, each at alpha/{m} (Bonferroni over "
                    f"the {m} groups at or beyond the median); " + stats.PAIRED_METHOD
                    + _unseen(unobserved) + _thinly_drawn(effects),
                    unfavourable, favourable, p_breach)


# -- decisions --------------------------------------------------------------------------------
def decide_thresholds(
    claims: dict[str, tuple[float, Evidence]],
    decide: str,
    confidence: float,
    fixed: dict[str, tuple[float, float | None, str]] | None = None,
    directions: Mapping[str, Direction] = DIRECTIONS,
) -> list[ThresholdCheck]:
    """Apply policy ``decide`` to the test's thresholds.

    ``claims``: name -> (limit, evidence). ``fixed``: thresholds that are already bounds and are
    compared as they are under every policy (``min_lower_ci``): name -> (limit, value, method).
    ``directions``: every threshold name -> its `Direction`; checks come back in its order.
    """
    if decide not in POLICIES:
        raise ValueError(f"decide must be one of {POLICIES}, got {decide!r}")
    checks: dict[str, ThresholdCheck] = {}
    for name, (limit, value, method) in (fixed or {}).items():
        checks[name] = ThresholdCheck(name, limit, value, "min", value, decide, method,
                                      _clears(value, limit, "min"), confidence)
    if decide == FAIL_ON_EVIDENCE:
        checks.update(_fail_on_evidence(claims, confidence, directions))
    for name, (limit, evidence) in claims.items():
        direction = directions[name]
        if decide == ESTIMATE:
            checks[name] = ThresholdCheck(
                name, limit, evidence.observed, direction, evidence.observed, decide,
                "point estimate (no error control)", _clears(evidence.observed, limit, direction),
                confidence,
            )
        elif decide == PASS_ON_EVIDENCE:
            bounds = evidence.unfavourable(confidence)
            if evidence.observed is None or bounds.size == 0 or np.isnan(bounds).any():
                bound = None
            else:
                bound = float(bounds.min() if direction == "min" else bounds.max())
            checks[name] = ThresholdCheck(
                name, limit, evidence.observed, direction, bound, decide, evidence.method,
                _clears(bound, limit, direction), confidence,
            )
    return [checks[name] for name in directions if name in checks]


def _fail_on_evidence(
    claims: dict[str, tuple[float, Evidence]], confidence: float,
    directions: Mapping[str, Direction] = DIRECTIONS,
) -> dict[str, ThresholdCheck]:
    alpha = 1.0 - confidence
    names: list[str] = []
    pvalues: list[FloatArray] = []
    for name, (limit, evidence) in claims.items():
        names.append(name)
        pvalues.append(evidence.p_breach(limit) if evidence.observed is not None
                       else np.zeros(0))
    sizes = [p.size for p in pvalues]
    reject, levels = stats.holm(np.concatenate(pvalues) if pvalues else np.zeros(0), alpha)
    family = int(sum(sizes))
    checks: dict[str, ThresholdCheck] = {}
    start = 0
    for name, size in zip(names, sizes):
        limit, evidence = claims[name]
        direction = directions[name]
        part = slice(start, start + size)
        start += size
        if size == 0:
            checks[name] = ThresholdCheck(name, limit, evidence.observed, direction, None,
                                          FAIL_ON_EVIDENCE, evidence.method, False, confidence)
            continue
        bounds = evidence.favourable(1.0 - levels[part])
        bound = float(bounds.min() if direction == "min" else bounds.max())
        method = f"{evidence.method}; Holm over {family} claims"
        checks[name] = ThresholdCheck(
            name, limit, evidence.observed, direction, bound, FAIL_ON_EVIDENCE, method,
            not bool(reject[part].any()), confidence,
        )
    return checks


# -- a reliable test's thresholds ---------------------------------------------------------------
@dataclass(frozen=True)
class Fixed:
    """A threshold whose value is already a bound (``min_lower_ci``: the canonical interval's
    lower end): compared as it is under every policy."""

    value: float | None
    method: str


def _interval(summary: Summary, row: ThresholdRow) -> Fixed:
    return Fixed(_finite(summary.wilson_low),
                 f"canonical interval ({summary.interval_method}) at {summary.confidence:.0%}")


def _mean(summary: Summary, row: ThresholdRow) -> Evidence | None:
    if row.reads not in MEANS:
        raise ValueError(f"{row.name} reads {row.reads!r}, which is not a mean of the summary")
    found = summary.means().get(row.reads)
    if found is None:  # a side evaluation that did not run: nothing to decide
        return None
    return _proportion(*found)


def _groups(summary: Summary, row: ThresholdRow) -> Evidence:
    ranges = summary.formats
    if ranges.looked is not None:
        return looked_evidence(ranges.minimum, ranges.looked, len(ranges.unobserved))
    return group_evidence(ranges.minimum, ranges.effects(), ranges.grouping,
                          len(ranges.unobserved))


def _median(summary: Summary, row: ThresholdRow) -> Evidence:
    ranges = summary.formats
    return median_evidence(ranges.median, ranges.effects(), len(ranges.unobserved))


def _pairs(summary: Summary, row: ThresholdRow) -> Evidence:
    ranges = summary.formats
    return spread_evidence(ranges.spread, ranges.pairs(), ranges.unobserved_pairs())


def _std(summary: Summary, row: ThresholdRow) -> Evidence | None:
    return None if summary.std_bound is None else std_evidence(summary.std_bound)


EVIDENCE: dict[EvidenceKind, Callable[[Summary, ThresholdRow], Evidence | Fixed | None]] = {
    "interval": _interval,
    "mean": _mean,
    "groups": _groups,
    "median": _median,
    "pairs": _pairs,
    "std": _std,
}
"""How each kind of evidence of the threshold table (`contract.thresholds`) is read from a
summary; None: the statistic is absent (a side evaluation that did not run, a std without
resamplings) and the threshold is not decided."""


def reliable_thresholds(
    spec: ReliableSpec, summary: Summary, decide: str,
    baseline: stats.ClusteredDifference | None = None,
) -> list[ThresholdCheck]:
    """The checks of ``@reliable``'s thresholds on ``summary`` under policy ``decide``, each
    decided as its row of the threshold table says; ``max_regression`` on ``baseline``, the
    paired difference candidate - baseline (SPEC 9)."""
    claims: dict[str, tuple[float, Evidence]] = {}
    fixed: dict[str, tuple[float, float | None, str]] = {}
    for row in THRESHOLD_TABLE.values():
        limit = getattr(spec, row.name)
        if limit is None:
            continue
        found = EVIDENCE[row.evidence](summary, row)
        if isinstance(found, Fixed):
            fixed[row.name] = (float(limit), found.value, found.method)
        elif found is not None:
            claims[row.name] = (float(limit), found)
    if spec.max_regression is not None and baseline is not None:
        claims[MAX_REGRESSION] = (float(spec.max_regression), regression_evidence(baseline))
    return decide_thresholds(claims, decide, summary.confidence, fixed)


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _proportion(observed: float, bound: stats.MeanBound | None) -> Evidence:
    return proportion_evidence(_finite(observed), [bound] if bound is not None else [], "min")


# -- a CheckList test's thresholds --------------------------------------------------------------
ZERO_TOLERANCE = (
    "zero tolerance: a claim about these pairs, not an estimate (no bound can show a rate of "
    "exactly {value}); decided exactly under every policy"
)


def checklist_bound(counts: Sequence[int], sizes: Sequence[int]) -> stats.MeanBound:
    """The bound behind a CheckList rate: ``counts[i]`` of ``sizes[i]`` pairs (MFT: examples) made
    from example i. Pairs of one example are correlated (same text, same model reading it), so
    when some example gives several pairs the bound is on the examples: Gaffke's bound on their
    rates when every example gives as many pairs, else clustered by example (a ratio of unequal
    clusters); when every example gives at most one, the pairs are independent trials and the
    bound is the exact binomial one
    (`stats.binomial_bound`, Clopper-Pearson): Wilson's, which the report's ``interval`` shows,
    errs more often than its level near 0 and 1 (``max_flip_rate=0.02`` over 50 pairs: a
    compliant model failed on evidence 7.8% of the time)."""
    if max(sizes, default=0) <= 1:
        return stats.binomial_bound(int(sum(counts)), int(sum(sizes)), of="independent pairs")
    made = [(c, m) for c, m in zip(counts, sizes) if m > 0]
    if len({m for _, m in made}) == 1:
        # Every example gives as many pairs: the rate is the mean of the examples' own rates,
        # independent values in [0, 1], bounded at any N whatever their distribution (Gaffke's
        # bound). The clustered normal bound failed a compliant model 8.3% of the time (3 pairs
        # per example, flips concentrated in few examples).
        return stats.bounded_mean([c / m for c, m in made],
                                  of=f"examples' rates ({made[0][1]} pairs each)")
    return stats.clustered_proportion(counts, sizes)


def checklist_thresholds(
    limits: Mapping[str, float | None],
    counts: Sequence[int],
    sizes: Sequence[int],
    decide: str,
    confidence: float,
) -> list[ThresholdCheck]:
    """The checks of a CheckList test's thresholds under policy ``decide`` (SPEC section 11).

    ``limits``: ``max_flip_rate`` / ``max_fail_rate`` (a rate of bad pairs) or ``min_pass`` (a
    rate of passed examples) -> limit (None = not set). ``counts``/``sizes`` per example: the
    bad (INV, DIR) or passed (MFT) pairs and all pairs; see `checklist_bound`.

    A limit of exactly 0 on a ``max_*`` rate (``max_flip_rate=0.0``: "outputs must not change")
    or of 1 on ``min_pass`` is a deterministic claim about the pairs at hand: no confidence
    bound on a finite sample can reach 0 (or 1), so pass-on-evidence could never pass it. It is
    decided exactly under every policy: it passes only when no pair is bad (every example
    passes). With zero pairs every threshold fails (observed None).
    """
    pairs = int(sum(sizes))
    observed = float(sum(counts)) / pairs if pairs else None
    claims: dict[str, tuple[float, Evidence]] = {}
    exact: dict[str, ThresholdCheck] = {}
    for name, limit in limits.items():
        if limit is None:
            continue
        direction = CHECKLIST_DIRECTIONS[name]
        limit = float(limit)
        if limit == (0.0 if direction == "max" else 1.0):
            exact[name] = ThresholdCheck(
                name, limit, observed, direction, observed, decide,
                ZERO_TOLERANCE.format(value=f"{limit:g}"),
                observed is not None and observed == limit, confidence,
            )
        elif observed is None:
            claims[name] = (limit, proportion_evidence(None, [], direction, "no pairs"))
        else:
            claims[name] = (limit, proportion_evidence(
                observed, [checklist_bound(counts, sizes)], direction))
    checks = {check.name: check for check in decide_thresholds(
        claims, decide, confidence, directions=CHECKLIST_DIRECTIONS)}
    checks.update(exact)
    return [checks[name] for name in CHECKLIST_DIRECTIONS if name in checks]
