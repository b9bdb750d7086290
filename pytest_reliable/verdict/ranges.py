"""A score matrix's ranges (SPEC sections 8 and 11): cells grouped by a pre-registered grouping,
each group's paired estimate and interval, and the range's min / median / max, spread, noise
floor and worst candidates. Pure functions, no I/O, no pytest.

Ranges are taken over a grouping pre-registered by the marker (never switched on cell counts):

- ``"formats"``: a format is a variant's values on the format dimensions (the default in fixed
  mode, where each resampling is one format).
- ``"dimensions"``: each value of each dimension with two or more values (the default in ilr
  mode); ``"dimensions:a,b"`` for the values of the listed dimensions only. The spread is the
  largest range within one dimension; the worst is the worst value over the listed dimensions.
- orders: ``"gold_position"`` (the displayed position of the correct option, the default) or
  ``"permutations"``.

Every group's estimate is paired within instance (`stats.paired_group_effects`: least squares
with instance fixed effects): instance difficulty cancels, so a model whose answers never depend
on the prompt shows no spread. Every range carries its ``noise_floor`` (`stats.noise_floor`),
its ``worst_candidates`` (the groups that could be the worst at the test's confidence) and every
group its paired ``score``, its ``observed`` mean, its interval (``low``, ``high``) and ``thin``
(fewer than ``min_cells`` cells). The ``dimensions`` marginals are the observed value means.
The summary (`verdict.summary`) holds a test's format and order ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_reliable import stats
from pytest_reliable.evaluate.evaluation import CellResult, ScoreMatrix
from pytest_reliable.plan.sampling import n_listed_units
from pytest_reliable.space import FORMAT_DIMENSIONS, PERMUTE_LISTED_MAX, Space

if TYPE_CHECKING:  # the JSON entry's shape; types only, so the core does not load the writers
    from pytest_reliable.schema.entries import GroupEntry, RangeEntry

NOISE_PERMUTATIONS = 200
"""Seeded within-instance label permutations behind every ``noise_floor``."""

@dataclass
class Group:
    """Cells that share a key (a format, a dimension value, an order), with their paired estimate."""

    key: str
    description: str
    scores: list[float] = field(default_factory=list)
    example: CellResult | None = None
    """The group's first answered cell with its lowest score (`_worse_example`): the prompt a
    failure message shows."""
    estimate: float | None = None
    """Paired within instance, in [0, 1]; None until estimated (then `score` is the raw mean)."""
    low: float | None = None
    high: float | None = None
    thin: bool = False

    @property
    def cells(self) -> int:
        return len(self.scores)

    @property
    def observed(self) -> float:
        """The plain mean of the group's cells."""
        return float(np.mean(self.scores)) if self.scores else float("nan")

    @property
    def score(self) -> float:
        if self.estimate is not None:
            return self.estimate
        return self.observed

    def as_dict(self) -> GroupEntry:
        return {
            "score": self.score,
            "observed": self.observed,
            "cells": self.cells,
            "low": self.low,
            "high": self.high,
            "thin": self.thin,
            "description": self.description,
        }


@dataclass
class Labelling:
    """One way of labelling the resampling cells: its groups (in label order) and their effects."""

    name: str
    groups: list[Group]
    labels: np.ndarray
    """(n, N) group index per cell, -1 for a cell in no group."""
    effects: stats.GroupEffects | None = None


@dataclass
class RangeSummary:
    """min / median / max over the groups of a pre-registered grouping, with the evidence."""

    minimum: float | None
    median: float | None
    maximum: float | None
    grouping: str
    groups: dict[str, Group]
    worst: Group | None
    spread_value: float | None = None
    noise_floor: float | None = None
    labellings: list[Labelling] = field(default_factory=list)
    worst_candidates: list[str] = field(default_factory=list)
    """Keys of the groups that could be the worst at the test's confidence (the worst first)."""
    unobserved: list[str] = field(default_factory=list)
    """Keys of listed dimension values no cell was rendered with (e.g. fixed mode with fewer
    resamplings than values): claims about them have no evidence."""
    looked: stats.LookedMeans | None = None
    """A search by cells (`evaluate.cell_rounds`): the formats' bounds at their looks, which
    ``min_worst`` is decided on and the groups' estimates and intervals show; None: paired."""

    @property
    def spread(self) -> float | None:
        """The largest range within one labelling (one dimension, or the formats)."""
        return self.spread_value

    def as_dict(self) -> RangeEntry:
        return {
            "min": self.minimum,
            "median": self.median,
            "max": self.maximum,
            "grouping": self.grouping,
            "per_variant": {key: g.as_dict() for key, g in self.groups.items()},
            "noise_floor": self.noise_floor,
            "worst_candidates": list(self.worst_candidates),
            "unobserved": list(self.unobserved),
            "estimator": stats.PAIRED_METHOD if self.looked is None else self.looked.method,
        }

    def effects(self) -> list[stats.GroupEffects]:
        """Each estimated labelling's paired estimates (every group of the range is in one)."""
        return [lab.effects for lab in self.labellings if lab.effects is not None]

    def group_masks(self) -> dict[str, tuple[str, np.ndarray]]:
        """Per group (keyed as in ``groups``), its description and the mask of its cells in the
        (n, N) score matrix: a paired comparison over the same grouping needs them (SPEC 9)."""
        return {
            _group_key(labelling, group, len(self.labellings)):
                (group.description, labelling.labels == index)
            for labelling in self.labellings for index, group in enumerate(labelling.groups)
        }

    def unobserved_pairs(self) -> int:
        """Pairs of values of one dimension with at least one value in ``unobserved``."""
        total = 0
        for labelling in self.labellings:
            unseen = sum(key.split("=", 1)[0] == labelling.name for key in self.unobserved)
            total += unseen * len(labelling.groups) + unseen * (unseen - 1) // 2
        return total

    def pairs(self) -> list[stats.Pairs]:
        """Every within-labelling pair's paired difference (for ``max_spread``: values are
        compared with values of the same dimension)."""
        return [effects.pairs() for effects in self.effects()]


def label_cells(
    cells: Sequence[CellResult],
    shape: tuple[int, int],
    key: Callable[[CellResult], str | None],
    describe: Callable[[CellResult], str],
    name: str = "",
) -> Labelling:
    """Group resampling cells by ``key`` (None = in no group), groups in first-seen order."""
    labels = np.full(shape, -1, dtype=np.int64)
    index: dict[str, int] = {}
    groups: list[Group] = []
    for cell in cells:
        k = key(cell)
        if k is None:
            continue
        g = index.get(k)
        if g is None:
            g = index[k] = len(groups)
            groups.append(Group(k, describe(cell), example=cell))
        elif _worse_example(cell, groups[g].example):
            groups[g].example = cell
        groups[g].scores.append(cell.score)
        labels[cell.resampling, cell.instance] = g
    return Labelling(name, groups, labels)


def _worse_example(cell: CellResult, shown: CellResult | None) -> bool:
    """Whether ``cell`` shows the group better than ``shown``: a failure report shows a prompt
    the model got wrong, so the group's example is its first answered cell with the lowest
    score (a call that did not complete has no answer to show)."""
    if shown is None or (shown.status != "ok" and cell.status == "ok"):
        return True
    return cell.status == "ok" and cell.score < shown.score


def estimate_labelling(
    scores: np.ndarray, labelling: Labelling, confidence: float, min_cells: int,
    offsets: np.ndarray | None = None, resamplings_sampled: bool = False,
    spans_variants: bool = False, averages_over: Sequence[tuple[np.ndarray, int]] = (),
) -> None:
    """Paired estimates, intervals and ``thin`` flags for every group of ``labelling``
    (``offsets``, ``resamplings_sampled``, ``spans_variants``, ``averages_over``: see
    `stats.paired_group_effects`)."""
    if not labelling.groups:
        return
    effects = stats.paired_group_effects(scores, labelling.labels, len(labelling.groups),
                                         offsets=offsets, resamplings_sampled=resamplings_sampled,
                                         spans_variants=spans_variants,
                                         averages_over=averages_over)
    labelling.effects = effects
    low, high = effects.interval(confidence)
    for g, group in enumerate(labelling.groups):
        # An estimate is a score: a least-squares estimate a hair outside [0, 1] is shown at the
        # end it passed (its bounds are computed from the unclipped estimate), and round-off of
        # the solve (1e-17 for a group whose every cell is 0) is not shown as a score.
        group.estimate = float(np.round(np.clip(effects.estimates[g], 0.0, 1.0), 12))
        group.low, group.high = float(low[g]), float(high[g])
        group.thin = group.cells < min_cells


def range_of(
    grouping: str, labellings: list[Labelling], scores: np.ndarray,
    offsets: np.ndarray | None = None, confidence: float = 0.95, noise: bool = True,
) -> RangeSummary:
    groups = [g for labelling in labellings for g in labelling.groups]
    keyed = {_group_key(labelling, g, len(labellings)): g
             for labelling in labellings for g in labelling.groups}
    if not groups:
        return RangeSummary(None, None, None, grouping, keyed, None, labellings=labellings)
    values = np.array([g.score for g in groups])
    worst = groups[int(np.argmin(values))]
    candidates = _worst_candidates(labellings, confidence)
    spread = max(
        (max(g.score for g in lab.groups) - min(g.score for g in lab.groups))
        for lab in labellings if lab.groups
    )
    floor = stats.noise_floor(
        scores, [(lab.labels, len(lab.groups)) for lab in labellings if lab.groups],
        permutations=NOISE_PERMUTATIONS, seed=0, offsets=offsets,
    ) if noise else None
    return RangeSummary(
        float(values.min()), float(np.median(values)), float(values.max()), grouping, keyed,
        worst, spread_value=float(spread), noise_floor=floor, labellings=labellings,
        worst_candidates=candidates,
    )


def read_looks(labelling: Labelling, looked: stats.LookedMeans, confidence: float) -> list[str]:
    """Each format's estimate and interval from its looked bounds (a format the search never
    brought to a look keeps its observed mean and has no evidence: [0, 1]); returns the formats
    that could be the worst (lower bound below the smallest upper bound), lowest first."""
    index = {key: j for j, key in enumerate(looked.keys)}
    low, high = looked.interval(confidence)
    for group in labelling.groups:
        j = index.get(group.key)
        found = looked.groups[j] if j is not None else None
        if found is None or found.bound is None:
            group.estimate, group.low, group.high = group.observed, 0.0, 1.0
        else:
            group.estimate = float(np.clip(found.estimate, 0.0, 1.0))
            group.low, group.high = float(low[j]), float(high[j])
    ceiling = min(float(g.high) for g in labelling.groups if g.high is not None)
    return [g.key for g in sorted(labelling.groups, key=lambda g: g.score)
            if g.low is not None and g.low <= ceiling]


def _worst_candidates(labellings: list[Labelling], confidence: float) -> list[str]:
    """The keys of the groups that could be the worst (`stats.worst_candidates`), by score."""
    estimated = [lab for lab in labellings if lab.effects is not None]
    sets = stats.worst_candidates([lab.effects for lab in estimated if lab.effects is not None],
                                  confidence)
    found = [(lab.groups[int(g)].score, _group_key(lab, lab.groups[int(g)], len(labellings)))
             for lab, chosen in zip(estimated, sets) for g in chosen]
    return [key for _, key in sorted(found)]


def _group_key(labelling: Labelling, group: Group, n_labellings: int) -> str:
    return f"{labelling.name}={group.key}" if n_labellings > 1 or labelling.name else group.key


def _display(space: Space, dim: str) -> Callable[[CellResult], str]:
    shown: dict[Any, str] = {}  # raw value -> its display (thousands of cells, a few values)

    def key(cell: CellResult) -> str:
        raw = cell.variant.value(dim)
        found = shown.get(raw)
        if found is None:
            found = shown[raw] = space.display_value(dim, raw)
        return found

    return key


def _labelled(space: Space, dim: str) -> Callable[[CellResult], str]:
    return lambda cell: f"{dim}={space.display_value(dim, cell.variant.value(dim))}"


def dimension_labellings(
    space: Space, cells: Sequence[CellResult], shape: tuple[int, int]
) -> dict[str, Labelling]:
    """Per dimension, its values as groups (every dimension, for the ``dimensions`` marginals)."""
    return {
        dim: label_cells(cells, shape, _display(space, dim), _labelled(space, dim), name=dim)
        for dim in space.variant_dimensions
    }


def format_range(
    space: Space,
    matrix: ScoreMatrix,
    grouping: str | tuple[str, ...],
    dimensions: dict[str, Labelling],
    offsets: np.ndarray | None = None,
    confidence: float = 0.95,
    noise: bool = True,
) -> RangeSummary:
    """The format range over the pre-registered ``grouping`` (estimated labellings expected in
    ``dimensions``; a formats labelling is built and must be estimated by the caller)."""
    if grouping == "formats":
        raise ValueError("format_range: use formats_labelling for the formats grouping")
    names = (
        [d for d in space.variant_dimensions if len(space.dimensions[d]) >= 2]
        if grouping == "dimensions" else list(grouping)
    )
    label = "dimensions" if grouping == "dimensions" else "dimensions:" + ",".join(names)
    found = range_of(label, [dimensions[d] for d in names], matrix.scores, offsets, confidence,
                   noise=noise)
    n_options = max((len(c.prompt.displayed) for c in matrix.cells), default=0)
    renderable = _renderable_values(space, n_options)
    found.unobserved = [
        f"{dim}={space.display_value(dim, value)}" for dim in names
        for index, value in enumerate(space.dimensions[dim])
        if index in renderable.get(dim, range(len(space.dimensions[dim])))
        and space.display_value(dim, value) not in {g.key for g in dimensions[dim].groups}
    ]
    return found


def listed_values(space: Space, matrix: ScoreMatrix) -> dict[str, int]:
    """Per value dimension, how many of its listed values the run could render (`format_range`'s
    unobserved values are the rest of these)."""
    n_options = max((len(c.prompt.displayed) for c in matrix.cells), default=0)
    renderable = _renderable_values(space, n_options)
    return {dim: len(renderable.get(dim, range(len(space.dimensions[dim]))))
            for dim in space.variant_dimensions}


_VALIDITY_ROWS = 200_000
"""Format combinations checked for which values can be rendered at all (larger spaces: all)."""


def _renderable_values(space: Space, n_options: int) -> dict[str, set[int]]:
    """Per format dimension, the indexes of values that some valid format uses for data with
    ``n_options`` options (an enumerator too short for them, say, is never rendered, so its
    absence is no gap in the evidence). Dimensions left out: every value counts."""
    sizes = [len(space.dimensions[d]) for d in FORMAT_DIMENSIONS]
    if math.prod(sizes) > _VALIDITY_ROWS:
        return {}
    grid = np.indices(sizes).reshape(len(sizes), -1).T
    valid = grid[space.format_validity_mask(grid, max(n_options, 2))]
    return {d: set(np.unique(valid[:, j]).tolist()) for j, d in enumerate(FORMAT_DIMENSIONS)}


def formats_labelling(matrix: ScoreMatrix, cells: Sequence[CellResult]) -> Labelling:
    return label_cells(cells, matrix.scores.shape, lambda c: c.variant.format_key,
                       lambda c: c.variant.describe())


def orders_labelling(
    matrix: ScoreMatrix, cells: Sequence[CellResult], grouping: str
) -> Labelling:
    shape = matrix.scores.shape
    if grouping == "permutations":
        return label_cells(
            cells, shape, lambda c: ",".join(str(j) for j in c.prompt.displayed) or "-",
            lambda c: "options shown in original order "
            + ",".join(str(j + 1) for j in c.prompt.displayed),
        )
    labelling = label_cells(
        cells, shape,
        lambda c: None if c.prompt.gold_position is None else str(c.prompt.gold_position + 1),
        lambda c: f"correct option shown at position {int(c.prompt.gold_position or 0) + 1}",
    )
    # Positions in their natural order (labels renumbered accordingly).
    order = sorted(range(len(labelling.groups)), key=lambda g: int(labelling.groups[g].key))
    remap = np.empty(len(order) + 1, dtype=np.int64)
    remap[-1] = -1
    for new, old in enumerate(order):
        remap[old] = new
    labelling.labels = remap[labelling.labels]
    labelling.groups = [labelling.groups[g] for g in order]
    return labelling


def order_offsets(
    matrix: ScoreMatrix, cells: Sequence[CellResult], space: Space, mode: str, confidence: float,
) -> np.ndarray | None:
    """Per cell, the paired effect of the correct option's displayed position, in fixed mode with
    permuted orders (None elsewhere).

    A fixed-mode resampling shows one order permutation to every instance, so a position-biased
    model would make that resampling's format look better or worse than it is; subtracting the
    position effect before formats are compared keeps format estimates free of order effects.
    In ilr every cell draws its own order, independently of its format: nothing to adjust.
    """
    if mode != "fixed" or space.option_order != "permute":
        return None
    gold = orders_labelling(matrix, cells, "gold_position")
    if len(gold.groups) < 2:
        return None
    effects = stats.paired_group_effects(matrix.scores, gold.labels, len(gold.groups))
    shift = np.append(effects.estimates - matrix.scores.mean(), 0.0)  # label -1: no shift
    return np.asarray(shift[gold.labels], dtype=np.float64)


def variants_sampled(space: Space, matrix: ScoreMatrix, mode: str) -> bool:
    """Whether a fixed-mode plan sampled its resamplings' variants from a space it could not
    enumerate in n resamplings (then the resamplings add variant-sampling error)."""
    if mode != "fixed":
        return False
    n_options = max((len(c.prompt.displayed) for c in matrix.cells), default=0)
    units = n_listed_units(space, n_options or PERMUTE_LISTED_MAX)
    return units is None or matrix.n_resamplings < units


def format_side(
    matrix: ScoreMatrix, space: Space, *, mode: str, grouping: str | tuple[str, ...],
    confidence: float, min_cells: int, noise: bool = True, peek: bool = False,
    looked: stats.LookedMeans | None = None,
) -> tuple[RangeSummary, dict[str, Labelling]]:
    """The format range over the pre-registered ``grouping`` (paired, order-adjusted in fixed
    mode) and every dimension's estimated labelling; ``peek``: the range's bounds only (no noise
    floor; under the formats grouping no dimension labellings): what an adaptive search's peeks
    read; ``looked``: a search by cells' bounds, which replace the formats' paired ones."""
    noise = noise and not peek
    scores, cells = matrix.scores, matrix.resampling_cells()
    shape = (matrix.n_resamplings, matrix.n_instances)
    sampled = variants_sampled(space, matrix, mode)
    offsets = order_offsets(matrix, cells, space, mode, confidence)
    dims = {} if peek and grouping == "formats" else dimension_labellings(space, cells, shape)
    listed = listed_values(space, matrix) if sampled and dims else {}
    for dim, labelling in dims.items():
        # A value's score averages over the other dimensions' listed values (all drawn twice or
        # more, or no bound: `stats.paired_group_effects`' averages_over).
        others = [(dims[o].labels, listed[o]) for o in dims if o != dim and listed.get(o)]
        estimate_labelling(scores, labelling, confidence, min_cells, offsets, sampled,
                           spans_variants=True, averages_over=others)
    if grouping == "formats":
        formats_lab = formats_labelling(matrix, cells)
        estimate_labelling(scores, formats_lab, confidence, min_cells, offsets, sampled)
        if looked is not None:
            candidates = read_looks(formats_lab, looked, confidence)
        formats = range_of("formats", [formats_lab], scores, offsets, confidence, noise=noise)
        if looked is not None:
            formats.looked, formats.worst_candidates = looked, candidates
    else:
        formats = format_range(space, matrix, grouping, dims, offsets, confidence, noise=noise)
    return formats, dims
