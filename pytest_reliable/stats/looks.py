"""Bounds on each group's score at a few pre-registered looks (SPEC section 14): what lets an
adaptive search give one group many cells and another few, and still decide on evidence.

Each group has a *sequence*: one cell per instance, the instances in an order fixed before any
answer (the search's seeded order), so the first m values of the sequence are m independent
draws of the group's score over instances like the dataset's, whatever the search did elsewhere.
The search may stop feeding a group at any time, for reasons that depend on every answer; the
bound stays valid because it is read only at *looks*: the sequence's lengths ``chunk``,
``2 chunk``, ... and its full length, ``looks`` of them, and a group's bound at confidence c is
the bound of its values up to its last look, at a level that spends a share of alpha = 1 - c:
`FINAL_SHARE` at the full length, the rest split equally over the earlier looks (a union bound
over the looks: the search may stop at any of them).
The bound of m values in [0, 1] is `bounded.bounded_mean` (Clopper-Pearson on 0/1 scores,
Gaffke's bound otherwise): exact at any m, for independent values, with no normal approximation.

The gate reads these bounds as it reads the paired ones (`GroupEffects.level_bounds`,
``p_below``), so Holm's correction over groups applies on top: a group's p-value is its
bound's at its last look, divided by that look's share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_reliable.stats._validation import ArrayLike, FloatArray
from pytest_reliable.stats.bounded import BoundedMean, bounded_mean

FINAL_SHARE = 0.8
"""The share of alpha a group's last look (its whole sequence) spends; the earlier looks share
the rest equally. A format that may breach the limit is fed to its end, where it is decided
nearly as a fixed-size test of all its instances would decide it, while the early looks still
settle formats far from the limit (benchmarks/bench_adaptive.py: with 24 formats, 400
instances, one format 0.2 worse, a share of 1/8 (equal looks) gave adaptive search 0.875 power
against uniform's 0.975, a share of 0.8 the same 0.975; the error rates hold at any share)."""
LOOKED_METHOD = ("one cell per instance in a seeded order (unpaired), exact bounded-mean bound, "
                 "Bonferroni over each group's looks")


def look_points(length: int, chunk: int) -> list[int]:
    """The lengths at which a sequence of ``length`` values is looked at: every multiple of
    ``chunk`` below ``length``, and ``length`` itself."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if length < 1:
        return []
    return [*range(chunk, length, chunk), length]


@dataclass(frozen=True, eq=False)
class LookedGroup:
    """One group's sequence so far and the bound at its last look."""

    key: str
    values: FloatArray
    """The group's values so far, in its sequence's order."""
    length: int
    """The most values its sequence can hold (the instances the plan gives it a cell on)."""
    chunk: int
    bound: BoundedMean | None = field(init=False)

    def __post_init__(self) -> None:
        used = self.used
        object.__setattr__(self, "bound", bounded_mean(self.values[:used]) if used else None)

    @property
    def looks(self) -> int:
        return max(1, len(look_points(self.length, self.chunk)))

    @property
    def used(self) -> int:
        """The values the bound reads: the sequence up to its last look."""
        reached = [p for p in look_points(self.length, self.chunk) if p <= self.values.size]
        return reached[-1] if reached else 0

    @property
    def estimate(self) -> float:
        return float(self.values[: self.used].mean()) if self.used else math.nan

    def share(self) -> float:
        """The share of alpha the look the bound reads (its last) spends."""
        if self.looks == 1:
            return 1.0
        if self.used == self.length:
            return FINAL_SHARE
        return (1.0 - FINAL_SHARE) / (self.looks - 1)

    def level(self, confidence: float) -> float:
        """The confidence the last look is read at so that every look together holds
        ``confidence``."""
        return 1.0 - (1.0 - confidence) * self.share()

    def lower(self, confidence: float) -> float:
        return 0.0 if self.bound is None else self.bound.lower(self.level(confidence))

    def upper(self, confidence: float) -> float:
        return 1.0 if self.bound is None else self.bound.upper(self.level(confidence))

    def p_below(self, limit: float) -> float:
        """p-value of "the group's score is >= limit" over every look (small: below)."""
        return 1.0 if self.bound is None else min(1.0, self.bound.p_below(limit) / self.share())


@dataclass(frozen=True, eq=False)
class LookedMeans:
    """Every group's looked bound, in the order of ``keys``: the shape `GroupEffects` gives the
    gate (``level_bounds``, ``p_below``, ``live``), so a gate decides on either the same way."""

    groups: tuple[LookedGroup, ...]
    method: str = LOOKED_METHOD

    @classmethod
    def of(cls, sequences: Sequence[tuple[str, ArrayLike, int]], chunk: int) -> LookedMeans:
        """From (key, values so far, full length) per group."""
        return cls(tuple(LookedGroup(key, np.asarray(values, dtype=np.float64).ravel(), length,
                                     chunk) for key, values, length in sequences))

    @property
    def keys(self) -> list[str]:
        return [g.key for g in self.groups]

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def live(self) -> np.ndarray:
        """The groups with a bound (at least one look reached)."""
        return np.flatnonzero([g.bound is not None for g in self.groups])

    def estimates(self) -> FloatArray:
        return np.array([g.estimate for g in self.groups], dtype=np.float64)

    def level_bounds(self, confidence: FloatArray | float, side: int) -> FloatArray:
        """(G,): one-sided bounds at ``confidence`` (one number, or one per group); ``side`` -1
        lower, +1 upper."""
        levels = np.broadcast_to(np.asarray(confidence, dtype=np.float64), (self.n_groups,))
        return np.array([g.lower(float(c)) if side < 0 else g.upper(float(c))
                         for g, c in zip(self.groups, levels)], dtype=np.float64)

    def interval(self, confidence: float) -> tuple[FloatArray, FloatArray]:
        two = 0.5 + confidence / 2.0
        return self.level_bounds(two, -1), self.level_bounds(two, +1)

    def p_below(self, limit: float) -> FloatArray:
        return np.array([g.p_below(limit) for g in self.groups], dtype=np.float64)


__all__ = ["FINAL_SHARE", "LOOKED_METHOD", "LookedGroup", "LookedMeans", "look_points"]
