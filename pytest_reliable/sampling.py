"""Plans: which variant (and which demonstrations) every (resampling, instance) cell uses.

Modes (SPEC section 3):

- ``ilr`` (default): every cell draws its own variant, uniformly over the valid variants.
- ``fixed``: one variant per resampling, drawn without replacement in seeded shuffled passes over
  every valid variant (format, few-shot count, temperature and, with ``permute``, the order
  permutation); a space too large to list is drawn without replacement by rejecting repeats.

Both modes are prefix-consistent: resampling r only uses randomness derived from ``(seed, r)`` (or,
in fixed mode, from ``(seed, pass)`` and the resamplings before it), so the plan for n is the
prefix of the plan for any larger n. Seeds come from `derive_seed` (sha256 of the session seed and
the test's nodeid), never from global random state.

Option order: a permutation covers the largest option count in the dataset (every permutation up
to 4 options, sampled beyond); an instance with fewer options shows its own positions in the
permutation's relative order (see `restrict_order`).

Few-shot: a pool of ``few_shot.pool`` instances is drawn once from ``(seed, "pool")``; a cell's
demonstrations are the first ``count`` pool members of a random ranking of the pool, skipping the
instance itself, in ranking order (``order: shuffle``) or pool order (``order: fixed``). The
ranking is drawn per resampling in fixed mode and per cell in ilr mode.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.space import (
    FORMAT_DIMENSIONS,
    LIST_LIMIT,
    PERMUTE_LISTED_MAX,
    Space,
    Variant,
)

MODES = ("ilr", "fixed")
_POOL, _PASS, _REJECT = 0x9001, 0x9002, 0x9003


def derive_seed(seed: int, nodeid: str) -> int:
    """A test's own seed: sha256 of the session seed and the nodeid (63 bits, stable)."""
    digest = hashlib.sha256(f"{int(seed)}\x00{nodeid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class Cell:
    """One planned cell: its variant and the dataset indexes of its demonstrations."""

    variant: Variant
    demos: tuple[int, ...] = ()


def restrict_order(order: tuple[int, ...] | None, n_options: int) -> tuple[int, ...]:
    """The display order of an instance with ``n_options`` options under permutation ``order``:
    its own positions, in the permutation's relative order (positions the permutation does not
    cover, when an instance has more options than the plan was sized for, follow in order)."""
    if order is None:
        return tuple(range(n_options))
    shown = tuple(p for p in order if p < n_options)
    if len(shown) < n_options:
        shown += tuple(range(len(order), n_options))
    return shown


def dataset_option_count(dataset: Sequence[Any]) -> int:
    """The largest number of options among records with ``choices`` (0 when none has any)."""
    best = 0
    for record in dataset:
        choices = record.get("choices") if isinstance(record, dict) else None
        if isinstance(choices, list | tuple):
            best = max(best, len(choices))
    return best


class Plan:
    """Variants and demonstrations for ``n_resamplings`` x ``n_instances`` cells.

    Stored as integer arrays (format id, few-shot count index, temperature index, order id per
    cell); `cell` builds (and caches) the `Variant` objects.
    """

    def __init__(
        self,
        space: Space,
        n_instances: int,
        n_resamplings: int,
        mode: str,
        seed: int,
        n_options: int,
        format_table: np.ndarray,
        order_table: list[tuple[int, ...] | None],
        fmt: np.ndarray,
        count: np.ndarray,
        temp: np.ndarray,
        order: np.ndarray,
        pool: np.ndarray,
        rankings: np.ndarray | None,
    ) -> None:
        self.space = space
        self.n_instances = n_instances
        self._n = n_resamplings
        self.mode = mode
        self.seed = seed
        self.n_options = n_options
        self._formats = format_table
        self._orders = order_table
        self._fmt, self._count, self._temp, self._order = fmt, count, temp, order
        self.pool = pool
        self._rankings = rankings
        self._counts = space.dimensions["few_shot"]
        self._temps = space.dimensions["temperature"]
        self._fixed_demos = space.few_shot.order == "fixed"
        self._pool_position = {int(p): k for k, p in enumerate(pool)}
        self._variants: dict[tuple[int, int, int, int], Variant] = {}
        self._format_values: dict[int, dict[str, Any]] = {}
        self._canonical: Variant = space.canonical_variant()

    @property
    def n_resamplings(self) -> int:
        return self._n

    def variant(self, r: int, i: int) -> Variant:
        key = (int(self._fmt[r, i]), int(self._count[r, i]), int(self._temp[r, i]),
               int(self._order[r, i]))
        v = self._variants.get(key)
        if v is None:
            values = self._format_values.get(key[0])
            if values is None:
                values = self._format_values[key[0]] = self.space.format_variant(
                    self._formats[key[0]])
            v = Variant(**values, few_shot=int(self._counts[key[1]]),
                        temperature=float(self._temps[key[2]]), order=self._orders[key[3]])
            self._variants[key] = v
        return v

    def cell(self, r: int, i: int) -> Cell:
        """The variant and demonstrations of instance ``i`` in resampling ``r``."""
        if not 0 <= r < self._n or not 0 <= i < self.n_instances:
            raise IndexError(f"cell ({r}, {i}) outside {self._n} x {self.n_instances}")
        variant = self.variant(r, i)
        if not variant.few_shot:
            return Cell(variant, ())
        assert self._rankings is not None
        ranking = self._rankings[r] if self._rankings.ndim == 2 else self._rankings[r, i]
        return Cell(variant, self._demos(ranking, i, variant.few_shot))

    def canonical_cell(self, i: int) -> Cell:
        """The canonical variant (original order) with the first ``count`` pool members."""
        variant = self._canonical
        if not variant.few_shot:
            return Cell(variant, ())
        return Cell(variant, self._demos(np.arange(len(self.pool)), i, variant.few_shot))

    def _demos(self, ranking: np.ndarray, i: int, count: int) -> tuple[int, ...]:
        picks: list[int] = []
        for k in ranking:
            j = int(self.pool[int(k)])
            if j != i:
                picks.append(j)
                if len(picks) == count:
                    break
        if self._fixed_demos:
            picks.sort(key=self._pool_position.__getitem__)
        return tuple(picks)

    def cells(self) -> list[list[Cell]]:
        return [[self.cell(r, i) for i in range(self.n_instances)] for r in range(self._n)]


def make_plan(
    space: Space,
    dataset: Sequence[Any],
    n_resamplings: int,
    *,
    mode: str = "ilr",
    seed: int = 0,
    n_options: int | None = None,
    task: Any = None,
) -> Plan:
    """The plan of ``n_resamplings`` resamplings of ``dataset`` under ``space``.

    ``n_options`` sizes the order permutations and the R2 check; by default the largest option
    list of ``task.options(record)`` when ``task`` is given, else of the records' ``choices``, and
    4 when neither gives one (pass ``task`` for a `Classification` with more than 4 labels).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if n_resamplings < 0:
        raise ValueError("n_resamplings must be >= 0")
    n_inst = len(dataset)
    if n_options is None and task is not None and n_inst:
        counts = [len(task.options(record) or ()) for record in dataset]
        n_options = max(counts) or None
    if n_options is None:
        n_options = dataset_option_count(dataset) or PERMUTE_LISTED_MAX
    seed = int(seed)
    canonical = space.canonical_variant()
    problems = space.violations(canonical, n_options)
    if problems:
        raise ReliableConfigError(
            f"space {space.name!r}: its canonical variant is invalid for data with {n_options} "
            f"options ({'; '.join(problems)}). Fix: choose another canonical enumerator.")
    rows = space.valid_formats(n_options)
    sizes = np.array([len(space.dimensions[d]) for d in FORMAT_DIMENSIONS])
    permute = space.option_order == "permute"
    n_counts = len(space.dimensions["few_shot"])
    n_temps = len(space.dimensions["temperature"])
    listed_orders = not permute or n_options <= PERMUTE_LISTED_MAX
    order_table: list[tuple[int, ...] | None]
    if not permute:
        order_table = [None]
    elif listed_orders:
        order_table = list(itertools.permutations(range(n_options)))
    else:
        order_table = []
    shape = (n_resamplings, n_inst)
    pool_size = min(space.few_shot.pool, n_inst)
    pool = np.random.default_rng([seed, _POOL]).permutation(n_inst)[:pool_size] if n_inst else (
        np.zeros(0, dtype=int))
    uses_demos = max(space.dimensions["few_shot"]) > 0

    if rows is not None and rows.shape[0] == 0:
        raise ReliableConfigError(
            f"space {space.name!r} has no valid variant for data with {n_options} options. "
            "Fix: add values that obey the validity rules R1-R3.")

    order_ids: dict[tuple[int, ...], int] = {}

    def order_id(perm: tuple[int, ...]) -> int:
        got = order_ids.get(perm)
        if got is None:
            got = order_ids[perm] = len(order_table)
            order_table.append(perm)
        return got

    def draw_rows(rng: np.random.Generator, k: int) -> np.ndarray:
        """k uniformly drawn valid format rows (by rejection when the space is not listed)."""
        if rows is not None:
            return rows[rng.integers(0, rows.shape[0], k)]
        out = np.empty((k, len(sizes)), dtype=np.int64)
        todo = np.arange(k)
        while todo.size:
            cand = np.stack([rng.integers(0, s, todo.size) for s in sizes], axis=1)
            ok = space.format_validity_mask(cand, n_options)
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    fmt_rows = np.zeros((n_resamplings, n_inst, len(sizes)), dtype=np.int64)
    count = np.zeros(shape, dtype=np.int64)
    temp = np.zeros(shape, dtype=np.int64)
    order = np.zeros(shape, dtype=np.int64)
    rankings: np.ndarray | None = None

    if mode == "ilr":
        if uses_demos:
            rankings = np.zeros((n_resamplings, n_inst, pool_size), dtype=np.int64)
        for r in range(n_resamplings):
            rng = np.random.default_rng([seed, r])
            if rows is not None:
                fmt_rows[r] = rows[rng.integers(0, rows.shape[0], n_inst)]
            else:
                fmt_rows[r] = draw_rows(rng, n_inst)
            count[r] = rng.integers(0, n_counts, n_inst)
            temp[r] = rng.integers(0, n_temps, n_inst)
            if permute and listed_orders:
                order[r] = rng.integers(0, len(order_table), n_inst)
            elif permute:
                perms = rng.random((n_inst, n_options)).argsort(axis=1)
                order[r] = [order_id(tuple(int(x) for x in p)) for p in perms]
            if rankings is not None:
                rankings[r] = rng.random((n_inst, pool_size)).argsort(axis=1)
    else:
        if uses_demos:
            rankings = np.zeros((n_resamplings, pool_size), dtype=np.int64)
        n_orders = len(order_table) if listed_orders else 0
        total = (rows.shape[0] * n_counts * n_temps * n_orders) if rows is not None else 0
        listable = rows is not None and listed_orders and total <= LIST_LIMIT
        seen: set[tuple[Any, ...]] = set()
        current_pass = -1
        perm_of_pass: np.ndarray | None = None
        for r in range(n_resamplings):
            rng = np.random.default_rng([seed, r])
            if listable:
                assert rows is not None
                p, pos = divmod(r, total)
                if p != current_pass:
                    perm_of_pass = np.random.default_rng([seed, _PASS, p]).permutation(total)
                    current_pass = p
                assert perm_of_pass is not None
                unit = int(perm_of_pass[pos])
                unit, o = divmod(unit, n_orders)
                unit, t = divmod(unit, n_temps)
                f, c = divmod(unit, n_counts)
                fmt_rows[r] = rows[f]
                count[r], temp[r], order[r] = c, t, o
            else:
                reject = np.random.default_rng([seed, _REJECT, r])
                for attempt in range(10_000):
                    row = draw_rows(reject, 1)[0]
                    c = int(reject.integers(0, n_counts))
                    t = int(reject.integers(0, n_temps))
                    if not permute:
                        o = 0
                    elif listed_orders:
                        o = int(reject.integers(0, len(order_table)))
                    else:
                        o = order_id(tuple(int(x) for x in reject.permutation(n_options)))
                    key = (tuple(int(x) for x in row), c, t, order_table[o])
                    if key not in seen:
                        break
                    if attempt == 9_999:  # the space is (nearly) exhausted: start a new pass
                        seen.clear()
                seen.add(key)
                fmt_rows[r] = row
                count[r], temp[r], order[r] = c, t, o
            if rankings is not None:
                rankings[r] = rng.permutation(pool_size)

    flat = fmt_rows.reshape(-1, len(sizes))
    if flat.shape[0]:
        codes = np.ravel_multi_index(tuple(flat.T), tuple(int(x) for x in sizes))
        unique, inverse = np.unique(codes, return_inverse=True)
        table = np.stack(np.unravel_index(unique, tuple(int(x) for x in sizes)), axis=1)
        fmt = inverse.reshape(shape)
    else:
        table, fmt = np.zeros((0, len(sizes)), dtype=np.int64), np.zeros(shape, dtype=np.int64)
    return Plan(space, n_inst, n_resamplings, mode, seed, n_options, table, order_table, fmt,
                count, temp, order, pool, rankings)


def n_listed_units(space: Space, n_options: int) -> int | None:
    """How many distinct fixed-mode variants a listed space has (None when not listed)."""
    rows = space.valid_formats(n_options)
    if rows is None:
        return None
    orders = 1
    if space.option_order == "permute":
        if n_options > PERMUTE_LISTED_MAX:
            return None
        orders = math.factorial(n_options)
    return int(rows.shape[0] * len(space.dimensions["few_shot"])
               * len(space.dimensions["temperature"]) * orders)
