"""Score matrix -> the numbers a report shows (SPEC section 8). Pure functions, no I/O.

The groupings:
- formats: a format is a variant's values on the format dimensions. In ``fixed`` mode each
  resampling is one format and a format used by several resamplings scores their mean. In ``ilr``
  mode a format scores the mean of the cells rendered in it; min/median/max use the formats with at
  least ``min_cells`` cells when there are at least 5 of them, otherwise the per-dimension marginals
  of the dimensions with two or more values (``grouping: "dimensions"``).
- orders: by displayed position permutation when at least 5 permutations have ``min_cells`` cells,
  otherwise by the displayed position of the correct option (``grouping: "gold_position"``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_reliable import stats
from pytest_reliable.evaluation import CellResult, ScoreMatrix
from pytest_reliable.space import Space

MIN_GROUPS = 5
"""Groups with ``min_cells`` cells needed before a range is taken over groups themselves."""


@dataclass
class Group:
    """Cells that share a key (a format, a dimension value, an order)."""

    key: str
    description: str
    scores: list[float] = field(default_factory=list)
    example: CellResult | None = None

    @property
    def cells(self) -> int:
        return len(self.scores)

    @property
    def score(self) -> float:
        return float(np.mean(self.scores)) if self.scores else float("nan")

    @property
    def binary(self) -> bool:
        return bool(self.scores) and all(s in (0.0, 1.0) for s in self.scores)

    def as_dict(self, low: float | None = None, high: float | None = None) -> dict[str, Any]:
        return {
            "score": self.score,
            "cells": self.cells,
            "wilson_low": low,
            "wilson_high": high,
            "description": self.description,
        }


def groups_as_dict(groups: dict[str, Group], confidence: float) -> dict[str, dict[str, Any]]:
    """Per-group JSON, with Wilson intervals for 0/1 scores computed in one vectorised call."""
    binary = [g for g in groups.values() if g.binary]
    intervals: dict[str, tuple[float, float]] = {}
    if binary:
        lows, highs = stats.wilson_intervals(
            [sum(g.scores) for g in binary], [g.cells for g in binary], confidence
        )
        intervals = {g.key: (float(lo), float(hi)) for g, lo, hi in zip(binary, lows, highs)}
    return {key: g.as_dict(*intervals.get(key, (None, None))) for key, g in groups.items()}


@dataclass
class RangeSummary:
    """min / median / max over groups, with the grouping used and the worst group."""

    minimum: float | None
    median: float | None
    maximum: float | None
    grouping: str
    groups: dict[str, Group]
    worst: Group | None

    @property
    def spread(self) -> float | None:
        if self.minimum is None or self.maximum is None:
            return None
        return self.maximum - self.minimum

    def as_dict(self, confidence: float) -> dict[str, Any]:
        return {
            "min": self.minimum,
            "median": self.median,
            "max": self.maximum,
            "grouping": self.grouping,
            "per_variant": groups_as_dict(self.groups, confidence),
        }


def group_cells(
    cells: Iterable[CellResult],
    key: Callable[[CellResult], Hashable],
    describe: Callable[[CellResult], str],
) -> dict[str, Group]:
    groups: dict[str, Group] = {}
    for cell in cells:
        name = str(key(cell))
        group = groups.get(name)
        if group is None:
            group = groups[name] = Group(name, describe(cell), example=cell)
        group.scores.append(cell.score)
    return groups


def _range(groups: list[Group], grouping: str, all_groups: dict[str, Group]) -> RangeSummary:
    if not groups:
        return RangeSummary(None, None, None, grouping, all_groups, None)
    values = np.array([g.score for g in groups])
    worst = groups[int(np.argmin(values))]
    return RangeSummary(
        float(values.min()), float(np.median(values)), float(values.max()), grouping, all_groups,
        worst,
    )


def dimension_marginals(space: Space, cells: list[CellResult]) -> dict[str, dict[str, Group]]:
    """Per dimension, per value (as displayed), the cells rendered with that value."""
    marginals: dict[str, dict[str, Group]] = {}
    for dim in space.variant_dimensions:
        marginals[dim] = group_cells(
            cells, key=_value_of(space, dim), describe=_labelled_value_of(space, dim)
        )
    return marginals


def _value_of(space: Space, dim: str) -> Callable[[CellResult], str]:
    return lambda cell: space.display_value(dim, cell.variant.value(dim))


def _labelled_value_of(space: Space, dim: str) -> Callable[[CellResult], str]:
    return lambda cell: f"{dim}={space.display_value(dim, cell.variant.value(dim))}"


def format_range(
    space: Space, matrix: ScoreMatrix, mode: str, min_cells: int,
    marginals: dict[str, dict[str, Group]],
) -> RangeSummary:
    cells = matrix.resampling_cells()
    formats = group_cells(cells, key=lambda c: c.variant.format_key, describe=_describe_format)
    if mode == "fixed":
        # One format per resampling: a format's score is the mean of its resamplings' scores,
        # which equals the mean of its cells because every resampling has the same N cells.
        return _range(list(formats.values()), "formats", formats)
    populated = [g for g in formats.values() if g.cells >= min_cells]
    if len(populated) >= MIN_GROUPS:
        return _range(populated, "formats", formats)
    value_groups = [
        group
        for dim, values in marginals.items()
        if len(space.dimensions[dim]) >= 2
        for group in values.values()
    ]
    return _range(value_groups, "dimensions", formats)


def order_range(matrix: ScoreMatrix, min_cells: int) -> RangeSummary:
    cells = matrix.resampling_cells()
    permutations = group_cells(
        cells,
        key=lambda c: ",".join(str(j) for j in c.prompt.displayed) or "-",
        describe=lambda c: "options shown in original order "
        + ",".join(str(j + 1) for j in c.prompt.displayed),
    )
    populated = [g for g in permutations.values() if g.cells >= min_cells]
    if len(populated) >= MIN_GROUPS:
        return _range(populated, "permutations", permutations)
    positions = group_cells(
        (c for c in cells if c.prompt.gold_position is not None),
        key=lambda c: int(c.prompt.gold_position or 0) + 1,
        describe=lambda c: f"correct option shown at position {int(c.prompt.gold_position or 0) + 1}",
    )
    ordered = dict(sorted(positions.items(), key=lambda kv: int(kv[0])))
    return _range(list(ordered.values()), "gold_position", ordered)


def _describe_format(cell: CellResult) -> str:
    return cell.variant.describe()


@dataclass
class Summary:
    """Everything a `reliable` test reports, computed once from its score matrix."""

    n_resamplings: int
    mean: float
    std: float
    canonical_score: float
    wilson_low: float
    wilson_high: float
    canonical_n: int
    formats: RangeSummary
    orders: RangeSummary
    dimensions: dict[str, dict[str, float]]
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float
    k: int
    n_star: int | None
    n_star_reliable: bool | None
    achievable_eps: float | None
    unparsed: int
    confidence: float

    def fields(self) -> dict[str, Any]:
        """The report fields of SPEC section 8 that come from the score matrix."""
        return {
            "n_resamplings": self.n_resamplings,
            "mean": self.mean,
            "std": self.std,
            "canonical": {
                "score": self.canonical_score,
                "wilson_low": self.wilson_low,
                "wilson_high": self.wilson_high,
                "n": self.canonical_n,
            },
            "formats": self.formats.as_dict(self.confidence),
            "orders": self.orders.as_dict(self.confidence),
            "dimensions": self.dimensions,
            "pass_at_1": self.pass_at_1,
            "pass_at_k": self.pass_at_k,
            "pass_hat_k": self.pass_hat_k,
            "k": self.k,
            "n_star": self.n_star,
            "n_star_reliable": self.n_star_reliable,
            "achievable_eps": self.achievable_eps,
            "unparsed": self.unparsed,
        }


def summarize(
    matrix: ScoreMatrix,
    space: Space,
    *,
    mode: str,
    eps: float,
    delta: float,
    min_cells: int = 20,
    confidence: float = 0.95,
) -> Summary:
    per_resampling = matrix.resampling_scores()
    moments = stats.moments(per_resampling)
    k, n_instances = matrix.canonical_scores.shape
    first = matrix.canonical_scores[0]
    low, high = stats.wilson_interval(round(first.sum()), n_instances, confidence)
    successes = np.rint(matrix.canonical_scores.sum(axis=0)).astype(int)
    at_1 = float(np.mean([stats.pass_at_k(k, int(c), 1) for c in successes]))
    at_k = float(np.mean([stats.pass_at_k(k, int(c), k) for c in successes]))
    hat_k = float(np.mean([stats.pass_hat_k(k, int(c), k) for c in successes]))
    n_star = reliable = achievable = None
    if matrix.n_resamplings >= 2:
        result = stats.min_reliable_n(per_resampling, eps=eps, delta=delta)
        n_star, reliable, achievable = (
            int(result.n_star), bool(result.reliable), float(result.achievable_eps)
        )
    marginals = dimension_marginals(space, matrix.resampling_cells())
    unparsed = int((~matrix.parsed).sum() + (~matrix.canonical_parsed).sum())
    return Summary(
        n_resamplings=matrix.n_resamplings,
        mean=moments.mean,
        std=moments.std,
        canonical_score=at_1,
        wilson_low=float(low),
        wilson_high=float(high),
        canonical_n=n_instances,
        formats=format_range(space, matrix, mode, min_cells, marginals),
        orders=order_range(matrix, min_cells),
        dimensions={
            dim: {value: group.score for value, group in values.items()}
            for dim, values in marginals.items()
        },
        pass_at_1=at_1,
        pass_at_k=at_k,
        pass_hat_k=hat_k,
        k=k,
        n_star=n_star,
        n_star_reliable=reliable,
        achievable_eps=achievable,
        unparsed=unparsed,
        confidence=confidence,
    )
