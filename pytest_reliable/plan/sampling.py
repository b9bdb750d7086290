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
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_reliable.contract.vocabulary import Mode
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.space import (
    FORMAT_DIMENSIONS,
    LIST_LIMIT,
    PERMUTE_LISTED_MAX,
    Space,
    Variant,
)
from pytest_reliable.space.variant import restrict_order as restrict_order  # re-exported

if TYPE_CHECKING:
    from pytest_reliable.plan.task import Task

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
        mode: Mode,
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
    mode: Mode = "ilr",
    seed: int = 0,
    n_options: int | None = None,
    task: Task | None = None,
) -> Plan:
    """The plan of ``n_resamplings`` resamplings of ``dataset`` under ``space``.

    ``n_options`` sizes the order permutations and the R2 check; by default the largest option
    list of ``task.options(record)`` when ``task`` is given, else of the records' ``choices``, and
    4 when neither gives one (pass ``task`` for a `Classification` with more than 4 labels).
    """
    if n_resamplings < 0:
        raise ValueError("n_resamplings must be >= 0")
    n_inst = len(dataset)
    n_options = _option_count(dataset, n_options, task)
    seed = int(seed)
    _check_canonical(space, n_options)
    draws = _Draws(space, n_options)
    pool = _demo_pool(space, n_inst, seed)
    uses_demos = max(space.dimensions["few_shot"]) > 0
    fill = _fill_ilr if mode == "ilr" else _fill_fixed
    cells = _Cells(n_resamplings, n_inst, len(draws.sizes))
    rankings = fill(cells, draws, seed, len(pool) if uses_demos else None)
    table, fmt = cells.format_table(draws.sizes)
    return Plan(space, n_inst, n_resamplings, mode, seed, n_options, table, draws.orders, fmt,
                cells.count, cells.temp, cells.order, pool, rankings)


def _option_count(dataset: Sequence[Any], n_options: int | None, task: Task | None) -> int:
    """``n_options`` as given, else the task's largest option list, the records' largest
    ``choices`` list, or PERMUTE_LISTED_MAX."""
    if n_options is None and task is not None and len(dataset):
        n_options = max(len(task.options(record) or ()) for record in dataset) or None
    if n_options is None:
        n_options = dataset_option_count(dataset) or PERMUTE_LISTED_MAX
    return n_options


def _check_canonical(space: Space, n_options: int) -> None:
    problems = space.violations(space.canonical_variant(), n_options)
    if problems:
        raise ReliableConfigError(
            f"space {space.name!r}: its canonical variant is invalid for data with {n_options} "
            f"options ({'; '.join(problems)}). Fix: choose another canonical enumerator.")


def _demo_pool(space: Space, n_inst: int, seed: int) -> np.ndarray:
    """The dataset indexes demonstrations are drawn from, drawn once from ``(seed, "pool")``."""
    if not n_inst:
        return np.zeros(0, dtype=int)
    pool: np.ndarray = np.random.default_rng([seed, _POOL]).permutation(n_inst)
    return pool[:min(space.few_shot.pool, n_inst)]


class _Draws:
    """Uniform draws of a space's units for data with ``n_options`` options: a valid format row
    (from the listed rows, or by rejection when the space is too large to list), a few-shot count
    index, a temperature index and an order id into `orders` (every permutation up to
    PERMUTE_LISTED_MAX options; beyond, the permutations drawn so far). ReliableConfigError when
    the space has no valid format for such data."""

    def __init__(self, space: Space, n_options: int) -> None:
        self.space = space
        self.n_options = n_options
        self.rows = space.valid_formats(n_options)
        self.sizes = tuple(len(space.dimensions[d]) for d in FORMAT_DIMENSIONS)
        self.n_counts = len(space.dimensions["few_shot"])
        self.n_temps = len(space.dimensions["temperature"])
        self.permute = space.option_order == "permute"
        self.listed_orders = not self.permute or n_options <= PERMUTE_LISTED_MAX
        self.orders: list[tuple[int, ...] | None] = (
            [None] if not self.permute
            else list(itertools.permutations(range(n_options))) if self.listed_orders
            else [])
        self._order_ids: dict[tuple[int, ...], int] = {}
        if self.rows is not None and self.rows.shape[0] == 0:
            raise ReliableConfigError(
                f"space {self.space.name!r} has no valid variant for data with {self.n_options} "
                "options. Fix: add values that obey the validity rules R1-R3.")

    def format_rows(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """k uniformly drawn valid format rows (by rejection when the space is not listed)."""
        if self.rows is not None:
            drawn: np.ndarray = self.rows[rng.integers(0, self.rows.shape[0], k)]
            return drawn
        out = np.empty((k, len(self.sizes)), dtype=np.int64)
        todo = np.arange(k)
        while todo.size:
            cand = np.stack([rng.integers(0, s, todo.size) for s in self.sizes], axis=1)
            ok = self.space.format_validity_mask(cand, self.n_options)
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    def order_ids(self, rng: np.random.Generator, k: int) -> np.ndarray | list[int]:
        """k uniformly drawn order ids (no randomness used without ``permute``)."""
        if not self.permute:
            return np.zeros(k, dtype=np.int64)
        if self.listed_orders:
            drawn: np.ndarray = rng.integers(0, len(self.orders), k)
            return drawn
        perms = rng.random((k, self.n_options)).argsort(axis=1)
        return [self._order_id(tuple(int(x) for x in p)) for p in perms]

    def order_id(self, rng: np.random.Generator) -> int:
        """One uniformly drawn order id (no randomness used without ``permute``)."""
        if not self.permute:
            return 0
        if self.listed_orders:
            return int(rng.integers(0, len(self.orders)))
        return self._order_id(tuple(int(x) for x in rng.permutation(self.n_options)))

    def _order_id(self, perm: tuple[int, ...]) -> int:
        got = self._order_ids.get(perm)
        if got is None:
            got = self._order_ids[perm] = len(self.orders)
            self.orders.append(perm)
        return got

    def n_listed_units(self) -> int:
        """How many units fixed mode lists (formats x counts x temperatures x orders), or 0 when
        it draws them by rejection instead (a space too large to list)."""
        total = n_listed_units(self.space, self.n_options)
        return total if total is not None and total <= LIST_LIMIT else 0

    def listed_unit(self, unit: int) -> tuple[np.ndarray, int, int, int]:
        """Unit number ``unit`` of the listing: (format row, count, temperature, order id)."""
        assert self.rows is not None
        unit, o = divmod(unit, len(self.orders))
        unit, t = divmod(unit, self.n_temps)
        f, c = divmod(unit, self.n_counts)
        return self.rows[f], c, t, o


class _Cells:
    """The plan's per-cell arrays while it is drawn: format rows, count, temperature, order id."""

    def __init__(self, n_resamplings: int, n_inst: int, n_dims: int) -> None:
        self.shape = (n_resamplings, n_inst)
        self.fmt_rows = np.zeros((n_resamplings, n_inst, n_dims), dtype=np.int64)
        self.count = np.zeros(self.shape, dtype=np.int64)
        self.temp = np.zeros(self.shape, dtype=np.int64)
        self.order = np.zeros(self.shape, dtype=np.int64)

    def format_table(self, sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The distinct format rows used (the plan's format table) and each cell's row in it."""
        flat = self.fmt_rows.reshape(-1, len(sizes))
        if not flat.shape[0]:
            return np.zeros((0, len(sizes)), dtype=np.int64), np.zeros(self.shape, dtype=np.int64)
        codes = np.ravel_multi_index(tuple(flat.T), sizes)
        unique, inverse = np.unique(codes, return_inverse=True)
        table = np.stack(np.unravel_index(unique, sizes), axis=1)
        return table, inverse.reshape(self.shape)


def _fill_ilr(cells: _Cells, draws: _Draws, seed: int, pool_size: int | None) -> np.ndarray | None:
    """ilr mode: every cell draws its own variant (and demo ranking) from ``(seed, r)``."""
    n_resamplings, n_inst = cells.shape
    rankings = (np.zeros((n_resamplings, n_inst, pool_size), dtype=np.int64)
                if pool_size is not None else None)
    for r in range(n_resamplings):
        rng = np.random.default_rng([seed, r])
        cells.fmt_rows[r] = draws.format_rows(rng, n_inst)
        cells.count[r] = rng.integers(0, draws.n_counts, n_inst)
        cells.temp[r] = rng.integers(0, draws.n_temps, n_inst)
        cells.order[r] = draws.order_ids(rng, n_inst)
        if rankings is not None:
            rankings[r] = rng.random((n_inst, rankings.shape[2])).argsort(axis=1)
    return rankings


def _fill_fixed(cells: _Cells, draws: _Draws, seed: int, pool_size: int | None
                ) -> np.ndarray | None:
    """fixed mode: one variant per resampling, without replacement: from seeded shuffled passes
    over the listed units, else by rejecting repeats; the demo ranking from ``(seed, r)``."""
    n_resamplings = cells.shape[0]
    rankings = (np.zeros((n_resamplings, pool_size), dtype=np.int64)
                if pool_size is not None else None)
    passes = _ShuffledPasses(seed, draws.n_listed_units())
    seen: set[tuple[Any, ...]] = set()
    for r in range(n_resamplings):
        if passes.total:
            row, c, t, o = draws.listed_unit(passes.unit(r))
        else:
            row, c, t, o = _unseen_unit(draws, np.random.default_rng([seed, _REJECT, r]), seen)
        cells.fmt_rows[r] = row
        cells.count[r], cells.temp[r], cells.order[r] = c, t, o
        if rankings is not None:
            rankings[r] = np.random.default_rng([seed, r]).permutation(rankings.shape[1])
    return rankings


class _ShuffledPasses:
    """Resampling r takes unit ``r mod total`` of pass ``r // total``; every pass is a shuffle of
    all ``total`` units seeded by ``(seed, pass)``."""

    def __init__(self, seed: int, total: int) -> None:
        self.seed, self.total = seed, total
        self._pass = -1
        self._perm = np.zeros(0, dtype=np.int64)

    def unit(self, r: int) -> int:
        p, pos = divmod(r, self.total)
        if p != self._pass:
            self._perm = np.random.default_rng([self.seed, _PASS, p]).permutation(self.total)
            self._pass = p
        return int(self._perm[pos])


_MAX_REPEATS = 10_000
"""Repeats drawn in a row before a space drawn by rejection counts as exhausted (a new pass)."""


def _unseen_unit(draws: _Draws, rng: np.random.Generator, seen: set[tuple[Any, ...]]
                 ) -> tuple[np.ndarray, int, int, int]:
    """A unit not in ``seen`` (which it joins), drawn by rejection; ``seen`` starts over when
    _MAX_REPEATS draws in a row were all repeats."""
    for attempt in range(_MAX_REPEATS):
        row = draws.format_rows(rng, 1)[0]
        c = int(rng.integers(0, draws.n_counts))
        t = int(rng.integers(0, draws.n_temps))
        o = draws.order_id(rng)
        key = (tuple(int(x) for x in row), c, t, draws.orders[o])
        if key not in seen:
            break
        if attempt == _MAX_REPEATS - 1:
            seen.clear()
    seen.add(key)
    return row, c, t, o


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
