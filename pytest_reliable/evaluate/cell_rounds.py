"""Adaptive search by cells (SPEC section 14): each format gets the cells its verdict needs (no pytest).

`adaptive.run_adaptive` chooses whole resamplings, and a resampling holds every format (ilr) or
is one format on every instance (fixed mode), so it can only skip whole rows: 1.0x fewer calls in
ilr, at most about 2x in fixed mode. A ``min_worst`` gate over the formats grouping needs less:
a format clearly above (or below) the limit after a few instances needs no more, and the format
that may breach it needs many. Here a round runs single cells.

- **What each format's bound reads.** Every format (group) has a sequence fixed before any answer:
  its cells in the plan, ordered by resampling and then by a seeded order of the instances
  (`instance_order`), one per instance (its first). Its bound is `stats.LookedMeans`'s: the
  exact bounded-mean bound of the sequence's first values, read only at its looks (every
  ``chunk`` values and at its end) with a Bonferroni share per look, so it holds whatever the
  search fed it. It is unpaired: a format given many instances cannot be compared within
  instance with one given few, and its own instances are a random sample of the dataset's.
- **Rounds.** The first round is the plan's first rows, whole, and the canonical pass (the mean
  over resamplings, when ``min_score`` asks for it, grows by whole rows in plan order as in
  `adaptive`; a whole row is a prefix of every format's sequence). Then every format is brought
  to its first look; then each round takes the open format whose upper bound is lowest (the one
  nearest to breaching: LUCB's choice) to its next look. A format is settled when its bounds
  exclude the limit (`stopping.settled`) at the level the gate reads: the test's confidence
  under pass-on-evidence (every format is its own claim of an intersection-union test) and
  ``1 - alpha / claims`` under fail-on-evidence (Holm's first step over the test's claims). The
  run stops when every threshold is settled, or no open format has cells left in the plan.
- **Which tests.** ``min_worst`` over the formats grouping, alone or with ``min_score`` and the
  thresholds of the canonical pass (`applies`). A spread compares formats within instance and
  a dimension's value shares its rows' variants in fixed mode, so ``max_spread`` and other
  groupings keep `adaptive`'s rounds of whole rows.

The gate then decides ``min_worst`` on the same looked bounds (the summary's ``looked``), so a
format the search settled failing is one the gate fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from pytest_reliable.contract.thresholds import adaptive as adaptively
from pytest_reliable.evaluate.adaptive import AdaptiveRun
from pytest_reliable.evaluate.evaluation import (
    ScoreMatrix,
    StagedEvaluation,
    append_resamplings,
    cells_matrix,
)
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
from pytest_reliable.space import Variant
from pytest_reliable.stats.looks import LookedMeans, look_points

BY_CELLS = adaptively("cells")
"""Thresholds a search by cells settles: claims "this group's score >= limit" (the threshold
table's ``adaptive="cells"`` rows: ``min_worst``)."""
LOOKS = 8
"""A format's sequence is looked at about this many times (``chunk`` = its length / LOOKS)."""
MIN_CHUNK = 10
"""The fewest values between two looks: a bound of fewer says little and costs a look."""


def applies(thresholds: Mapping[str, object], grouping: object) -> bool:
    """Whether a test's thresholds are searched by cells (module docstring): one threshold of
    `BY_CELLS` over the formats grouping, beside thresholds of the mean and the canonical pass."""
    rest = set(thresholds) - CANONICAL_ONLY - RESAMPLING_MEAN
    return grouping == "formats" and len(rest) == 1 and rest <= BY_CELLS


def first_rows(thresholds: Mapping[str, object], n: int, batch: int | None = None) -> int:
    """The plan's resamplings a search by cells runs whole in its first round: the early
    stopping batch when a mean needs rows in plan order, else one."""
    return min(batch or batch_size(n), n) if set(thresholds) & RESAMPLING_MEAN else min(1, n)


def chunk_for(instances: int) -> int:
    return max(MIN_CHUNK, math.ceil(instances / LOOKS))


def instance_order(instances: int, seed: int) -> np.ndarray:
    """Each instance's place in every format's sequence: a permutation drawn from the test's
    seed alone (a dataset is often sorted by topic: its own order is no random sample)."""
    rank = np.empty(instances, dtype=np.int64)
    rank[np.random.default_rng([seed, 14]).permutation(instances)] = np.arange(instances)
    return rank


def sequences(keys: Sequence[Sequence[str]], rank: np.ndarray) -> dict[str, list[tuple[int, int]]]:
    """Per format, its sequence of cells (resampling, instance): ``keys[r][i]`` is the format
    of the plan's cell (r, i)."""
    found: dict[str, list[tuple[int, int]]] = {}
    seen: set[tuple[str, int]] = set()
    for r, row in enumerate(keys):
        for i in sorted(range(len(row)), key=lambda i: int(rank[i])):
            if (row[i], i) not in seen:
                seen.add((row[i], i))
                found.setdefault(row[i], []).append((r, i))
    return found


def run_cell_rounds(
    staged: StagedEvaluation,
    thresholds: Mapping[str, tuple[str, float]],
    *,
    decide: str,
    confidence: float,
    key_of: Callable[[Variant], str],
    batch: int | None = None,
    sequence: str = SEQUENCE,
    gate_bound: GateBound | None = None,
) -> AdaptiveRun:
    """Run ``staged``'s plan by cells until every threshold is settled (module docstring);
    ``gate_bound``: the gate's own bound on the mean (`stopping.gate_agrees`)."""
    n = staged.settings.n
    keys = [[key_of(v) for v in staged.row_variants(r)] for r in range(n)]
    n_instances = len(keys[0]) if keys else 0
    chunk = chunk_for(n_instances)
    plan = sequences(keys, instance_order(n_instances, staged.settings.seed))
    means = sorted(set(thresholds) & RESAMPLING_MEAN)
    step = batch or batch_size(n)  # the mean's later rounds, as early stopping's
    if not applies(thresholds, "formats"):
        raise ValueError(f"a search by cells settles one of {sorted(BY_CELLS)} beside the mean "
                         f"and the canonical pass, not {sorted(thresholds)}")
    [ranged] = sorted(set(thresholds) & BY_CELLS)
    limit = thresholds[ranged][1]  # a "min" threshold: "this group's score >= limit"
    others = len(thresholds) - 1
    alpha = 1.0 - confidence
    # The level a format's bounds are read at: the gate's (module docstring).
    level = (1.0 - alpha / (len(plan) + others) if decide == "fail-on-evidence" else confidence)

    head = staged.run(0, first_rows(thresholds, n, batch), canonical=True)
    parts: list[ScoreMatrix] = []
    scores: dict[tuple[int, int], float] = {}

    def take(matrix: ScoreMatrix) -> None:
        for cell in matrix.resampling_cells():
            scores.setdefault((cell.resampling, cell.instance), cell.score)

    def values(key: str) -> list[float]:
        out = []
        for cell in plan[key]:
            if cell not in scores:
                break
            out.append(scores[cell])
        return out

    def looked(got: Mapping[str, list[float]]) -> LookedMeans:
        return LookedMeans.of([(k, got[k], len(cells)) for k, cells in plan.items()], chunk)

    def finish(reason: str) -> AdaptiveRun:
        matrix, plan_rows = cells_matrix(head, parts)
        return AdaptiveRun(matrix, len(scores) < n * n_instances, reason, head.n_resamplings,
                           plan_rows, looked=looked({k: values(k) for k in plan}))

    take(head)
    next_row = head.n_resamplings
    while True:
        if head.problems or any(p.problems for p in parts):
            return finish("calls did not complete; stopped")
        mean_open = [name for name in means if not mean_settled(
            *thresholds[name], head.scores, decide=decide, confidence=confidence,
            sequence=sequence, t_opt=max(10, n // 4), family=len(plan) + others,
            gate=bound_of(gate_bound, head))[0]]
        if mean_open and next_row < n:
            stop = min(n, next_row + step)
            head = append_resamplings(head, staged.run(next_row, stop, canonical=False))
            take(head)
            next_row = stop
            continue
        got = {k: values(k) for k in plan}
        bounds = {g.key: (g.lower(level), g.upper(level)) for g in looked(got).groups}
        failing = [k for k, (low, high) in bounds.items() if high < limit]
        open_keys = [k for k, (low, high) in bounds.items()
                     if not settled("min", limit, low, high, decide)]
        if not mean_open and (failing or not open_keys):
            verdict = f"{failing[0]} settled below the limit" if failing else "every format settled"
            return finish(f"{verdict} after {len(scores)} of {n * n_instances} cells "
                          f"({_note(head.n_resamplings, len(plan))})")
        fed = [k for k in open_keys if len(got[k]) < len(plan[k])]
        if not fed:
            still = ", ".join([*mean_open, *([ranged] if open_keys else [])])
            return finish(f"the plan's cells spent, {still} not settled ({len(scores)} of "
                          f"{n * n_instances} cells)")
        # Every format to its first look; then the open format nearest to breaching the limit.
        chosen = [k for k in fed if len(got[k]) < min(chunk, len(plan[k]))]
        if not chosen:
            lowest = min(bounds[k][1] for k in fed)
            chosen = [k for k in fed if bounds[k][1] == lowest]
        wanted: list[tuple[int, int]] = []
        for k in chosen:
            have = len(got[k])
            target = next(p for p in look_points(len(plan[k]), chunk) if p > have)
            wanted += plan[k][have:target]
        part = staged.run_cells(wanted)  # never empty: each chosen format's next cell
        parts.append(part)
        take(part)


def _note(rows: int, formats: int) -> str:
    return f"{rows} resamplings in plan order, then cells for the open ones of {formats} formats"


__all__ = ["BY_CELLS", "LOOKS", "MIN_CHUNK", "applies", "chunk_for", "first_rows",
           "instance_order", "run_cell_rounds", "sequences"]
