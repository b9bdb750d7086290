"""Adaptive search (SPEC section 14): resamplings spent where a verdict is still open (no pytest).

``search="adaptive"`` runs a test's plan in rounds, as early stopping does (`stopping`), and
after each round asks which thresholds are still open:

- ``min_score`` (and a pairwise judge's ``min_win_rate``): the mean over resamplings, bounded by
  `stopping.mean_bounds` (a confidence sequence widened by the instance margin) on the rows run
  in plan order. While it is open, the next round is the plan's next rows, every cell of them
  (a mean needs resamplings drawn as the plan draws them, not chosen by their group).
- ``min_worst`` (one claim per group of the pre-registered grouping) and ``max_spread`` (one
  claim per pair of groups of one labelling): each claim's bounds come from the gate's own paired
  estimator (a `Peek`, computed by the verdict layer), one-sided at ``1 - alpha / (rounds x
  claims)`` on each side, where ``rounds`` is the most rounds the test can run: a union bound over
  every peek and every claim, so the bounds hold at every peek at once (an anytime-valid
  sequence by Bonferroni over the peeks; they already cover instance sampling, clustered by
  instance), and a claim settled failing is one the gate's Holm step can reject too (its first
  step is at alpha / claims): the search never stops on evidence the gate cannot use. Once the mean is settled
  (or absent), a round runs only the plan's later rows that hold a cell of an open group: rows
  are taken in plan order and a row skipped is never run, so each group's rows are a prefix of
  the plan's rows of that group (the cache serves a rerun, which makes the same choices on the
  same answers).
- A threshold settles as `stopping.settled` says: the bounds exclude the limit. A range is
  settled once one claim is settled on the failing side, or every claim on the passing side;
  a group the plan holds but no cell has reached yet is open.
- Thresholds of the canonical pass are settled after the first round; any other (``min_median``,
  a baseline comparison) is not settled adaptively: the test then runs all ``n`` resamplings in
  plan order, and the stop reason says why. ``max_std`` is refused before the run (its error
  rates under adaptive sampling are not measured).

The run stops when every threshold is settled or the plan's ``n`` resamplings are spent (the worst
case: as many calls as ``search="uniform"``). The gate then decides as always on the cells
received; the summary's mean (and ``min_score``'s bound) uses the rows run in plan order only
(`AdaptiveRun.uniform_rows`), so rows chosen by their group never weigh on the mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_reliable.contract.markers import ADAPTIVE_REFUSED
from pytest_reliable.contract.thresholds import adaptive as adaptively
from pytest_reliable.evaluate.evaluation import ScoreMatrix, StagedEvaluation, append_resamplings
from pytest_reliable.evaluate.stopping import (
    CANONICAL_ONLY,
    RESAMPLING_MEAN,
    SEQUENCE,
    GateBound,
    batch_size,
    bound_of,
    mean_settled,
    settled,
)
from pytest_reliable.space import Space, Variant
from pytest_reliable.stats.looks import LookedMeans

RANGE_THRESHOLDS = adaptively("claims") | adaptively("cells")
"""Thresholds over the groups of a range: settled claim by claim, rounds targeted at open ones
(the threshold table's ``adaptive="claims"`` rows, and its ``"cells"`` rows where a search by
cells does not apply: `cell_rounds.applies`)."""
REFUSED = ADAPTIVE_REFUSED
"""Thresholds ``search="adaptive"`` refuses before the run, and why (the marker's check)."""


@dataclass(frozen=True)
class Claim:
    """One elementary claim of a range threshold: a group (``min_worst``) or a pair of groups
    (``max_spread``), its keys (as the range's ``per_variant`` keys) and its bounds at the peek's
    confidence (``low`` on the failing side of a ``min``, ``high`` on a ``max``'s)."""

    keys: frozenset[str]
    low: float
    high: float


Peek = Callable[[ScoreMatrix, int, Callable[[int], float]], Mapping[str, Sequence[Claim]]]
"""(cells so far, rows run in plan order, the one-sided confidence for a threshold of so many
claims) -> per range threshold (``min_worst``, ``max_spread``) its claims, bounded by the gate's
paired estimator."""


def row_keys(space: Space, grouping: str | tuple[str, ...], variants: Sequence[Variant]
             ) -> frozenset[str]:
    """The range keys (as ``per_variant``'s) of the groups the cells with ``variants`` fall in,
    under the pre-registered ``grouping``."""
    if grouping == "formats":
        return frozenset(v.format_key for v in variants)
    names = ([d for d in space.variant_dimensions if len(space.dimensions[d]) >= 2]
             if grouping == "dimensions" else list(grouping))
    return frozenset(f"{d}={space.display_value(d, v.value(d))}" for v in variants for d in names)


def range_status(direction: str, limit: float, claims: Sequence[Claim], universe: frozenset[str],
                 decide: str) -> frozenset[str] | None:
    """None when the range threshold is settled, else the keys of the groups still open: those
    of unsettled claims, and groups of ``universe`` (the plan's) that no claim covers yet."""
    unsettled = [c for c in claims if not settled(direction, limit, c.low, c.high, decide)]
    failing = [c for c in claims if c not in unsettled
               and (c.high < limit if direction == "min" else c.low > limit)]
    if failing:
        return None
    seen = frozenset(k for c in claims for k in c.keys)
    open_keys = frozenset(k for c in unsettled for k in c.keys) | (universe - seen)
    return open_keys or None


@dataclass(frozen=True)
class AdaptiveRun:
    matrix: ScoreMatrix
    stopped_early: bool
    reason: str
    uniform_rows: int
    """The matrix's first rows, run in plan order (what the mean is taken over)."""
    plan_rows: list[int] = field(default_factory=list)
    """The plan's resampling behind each row of the matrix."""
    looked: LookedMeans | None = None
    """A search by cells (`cell_rounds`): each format's bounds at its looks, what the gate
    decides ``min_worst`` on; None for rounds of whole rows."""


def rounds(n: int, step: int) -> int:
    """The most rounds a test of ``n`` resamplings in rounds of ``step`` can run."""
    return max(1, math.ceil(n / step))


def run_adaptive(
    staged: StagedEvaluation,
    thresholds: Mapping[str, tuple[str, float]],
    *,
    decide: str,
    confidence: float,
    peek: Peek,
    keys_of_row: Callable[[int], frozenset[str]],
    batch: int | None = None,
    sequence: str = SEQUENCE,
    gate_bound: GateBound | None = None,
) -> AdaptiveRun:
    """Run ``staged``'s plan in rounds until every threshold is settled (module docstring);
    ``gate_bound``: the gate's own bound on the mean (`stopping.gate_agrees`)."""
    n = staged.settings.n
    step = batch or batch_size(n)
    most = rounds(n, step)

    def peek_confidence(claims: int) -> float:
        return 1.0 - (1.0 - confidence) / (most * max(1, claims))

    matrix = staged.run(0, min(step, n), canonical=True)
    uniform = matrix.n_resamplings
    plan_rows = list(range(uniform))
    uncovered = sorted(set(thresholds) - RESAMPLING_MEAN - CANONICAL_ONLY - RANGE_THRESHOLDS)
    if uncovered and uniform < n and not matrix.problems:
        tail = staged.run(uniform, n, canonical=False)
        return AdaptiveRun(append_resamplings(matrix, tail), False,
                           f"ran all {n} resamplings in plan order: not settled adaptively: "
                           + ", ".join(uncovered), n, list(range(n)))
    ranged = {name: limit for name, limit in thresholds.items() if name in RANGE_THRESHOLDS}
    universe = frozenset().union(*(keys_of_row(r) for r in range(n))) if ranged else frozenset()
    next_row = uniform
    while True:
        if matrix.problems:  # a missing answer is never scored: no decision can rest on it
            return AdaptiveRun(matrix, True, "calls did not complete; stopped", uniform,
                               plan_rows)
        claims = peek(matrix, uniform, peek_confidence) if ranged else {}
        # The gate's Holm family: a claim per group or pair of a range, one per other threshold.
        family = len(thresholds) - len(ranged) + sum(max(1, len(claims.get(name, ())))
                                                     for name in ranged)
        mean_open = []
        for name, (direction, limit) in sorted(thresholds.items()):
            if name in RESAMPLING_MEAN:
                drawn = matrix.head(uniform)
                done, _ = mean_settled(
                    direction, limit, drawn.scores, decide=decide, confidence=confidence,
                    sequence=sequence, t_opt=max(10, n // 4), family=family,
                    gate=bound_of(gate_bound, drawn))
                if not done:
                    mean_open.append(name)
        open_keys: dict[str, frozenset[str]] = {}
        for name, (direction, limit) in sorted(ranged.items()):
            found = range_status(direction, limit, claims.get(name, ()), universe, decide)
            if found is not None:
                open_keys[name] = found
        if not mean_open and not open_keys:
            return AdaptiveRun(matrix, matrix.n_resamplings < n,
                               f"settled after {matrix.n_resamplings} of {n} resamplings "
                               f"({_rows_note(uniform, matrix.n_resamplings)})", uniform,
                               plan_rows)
        if next_row >= n:
            still = ", ".join([*mean_open, *sorted(open_keys)])
            return AdaptiveRun(matrix, matrix.n_resamplings < n,
                               f"the plan's {n} resamplings spent, {still} not settled "
                               f"({_rows_note(uniform, matrix.n_resamplings)})", uniform,
                               plan_rows)
        if mean_open:
            rows = list(range(next_row, min(n, next_row + step)))
            next_row = rows[-1] + 1
            tail = staged.run(rows[0], next_row, canonical=False)
            uniform += len(rows)
        else:
            wanted = frozenset().union(*open_keys.values())
            rows = []
            while next_row < n and len(rows) < step:
                if keys_of_row(next_row) & wanted:
                    rows.append(next_row)
                next_row += 1
            if not rows:
                continue  # the plan holds no more cells of the open groups: stops above
            tail = staged.run_rows(rows, first_row=matrix.n_resamplings)
        matrix = append_resamplings(matrix, tail)
        plan_rows += rows


def _rows_note(uniform: int, total: int) -> str:
    if uniform == total:
        return "all in plan order"
    return f"{uniform} in plan order, {total - uniform} chosen for open groups"


__all__ = [
    "RANGE_THRESHOLDS",
    "REFUSED",
    "AdaptiveRun",
    "Claim",
    "Peek",
    "range_status",
    "row_keys",
    "run_adaptive",
]
