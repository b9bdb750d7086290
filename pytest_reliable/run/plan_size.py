"""The design a test's figures are simulated on, and the size at which they can go its way.

No model call and no pytest here. `plan_design` turns a marker, its space and a size into the
`stats.power.Design` that `run.plan_figures` simulates: the test's grouping (`grouping_of`), its
hypotheses, whether a search by cells decides ``min_worst`` (`by_cells`). `suggest_size` is the
size suggestion of a plan: the smallest n at which every threshold can go its policy's way at all
(`plan_figures.reachable`), or the N that could.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_reliable.contract.vocabulary import RELIABLE_THRESHOLDS, Mode, Policy
from pytest_reliable.run.plan_figures import MAX_THRESHOLDS, MIN_THRESHOLDS, reachable
from pytest_reliable.stats.power import POWER, Design, RangeLayout


# -- the size that can go the policy's way (issue 31 item 5) ------------------------------------
@dataclass(frozen=True)
class SizeSuggestion:
    """The smallest n at which every threshold of a test can go its policy's way (`reachable`),
    and when no n up to the cap can, the smallest N that could at the cap (None: not found up to
    `SIZE_N_FACTOR` times the dataset)."""

    n: int | None
    n_max: int
    instances: int | None = None
    blocking: tuple[str, ...] = ()
    """The thresholds no n up to the cap makes reachable."""

    def describe(self, decide: str, n_now: int) -> str:
        way = {"pass-on-evidence": "pass on evidence", "fail-on-evidence": "fail on evidence",
               "estimate": "pass"}[decide]
        if self.n is not None:
            now = ("this test's n" if self.n == n_now else
                   f"this test runs n={n_now}")
            return (f"size: every threshold can {way} with {POWER:.0%} probability from "
                    f"n={self.n} ({now}) under every simulated answer structure")
        text = (f"size: no n up to --reliable-n-max={self.n_max} lets "
                f"{', '.join(self.blocking)} {way} with {POWER:.0%} probability under every "
                "simulated answer structure")
        if self.instances is not None:
            text += f"; N >= {self.instances} instances would, at n={self.n_max}"
        else:
            text += "; more instances, fewer groups, or another limit"
        return text


SIZE_N_FACTOR = 64
"""How far past the dataset the size suggestion looks for the instances a test needs."""


def suggest_size(spec: Any, space: Any, instances: int, n_options: int, decide: Policy,
                 n_max: int, search: str | None = None) -> SizeSuggestion | None:
    """The smallest n in [1, ``n_max``] at which every threshold of ``spec`` is `reachable`
    (bisection: more resamplings never make a threshold harder to reach), and when none is, the
    smallest N that is at ``n_max`` (doubling, then bisection). None: no threshold."""
    names = [name for name in (*MIN_THRESHOLDS, *MAX_THRESHOLDS)
             if getattr(spec, name, None) is not None]
    if not names:
        return None

    @functools.cache
    def blocking(n: int, n_inst: int) -> tuple[str, ...]:
        design, _ = plan_design(spec, space, n_inst, n, n_options, decide, search)
        return tuple(name for name in names
                     if not reachable(name, float(getattr(spec, name)), design))

    n = _least_passing(lambda m: not blocking(m, instances), 2 if "max_std" in names else 1,
                       n_max)
    if n is not None:
        return SizeSuggestion(n, n_max)
    found = _least_passing(lambda m: not blocking(n_max, m), instances + 1,
                           instances * SIZE_N_FACTOR)
    return SizeSuggestion(None, n_max, found, blocking(n_max, instances))


def _least_passing(ok: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest m in [low, high] with ``ok(m)`` (``ok`` monotone); None when ``ok(high)``
    fails. Doubles from ``low`` first, so a small answer costs few checks."""
    if low > high:
        return None
    step, probe = 1, low
    last_bad = low - 1
    while probe < high:
        if ok(probe):
            break
        last_bad = probe
        probe = min(high, low + step)
        step *= 2
    else:
        if not ok(high):
            return None
        probe = high
    lo, hi = last_bad, probe  # ok(hi), not ok(lo) (or lo below the range)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# -- groups and the simulated design ------------------------------------------------------------
@dataclass(frozen=True)
class Grouping:
    label: str
    groups: int
    pairs: int
    smallest_cells: float
    layout: RangeLayout


def grouping_of(space: Any, mode: Mode, group_by: Any, instances: int, resamplings: int,
                n_options: int) -> Grouping | None:
    """The test's pre-registered grouping, its smallest group's expected cell count and its
    layout of groups over cells (what the plan simulates)."""
    from pytest_reliable.plan.sampling import n_listed_units

    if group_by is None:
        group_by = "formats" if mode == "fixed" else "dimensions"
    cells = instances * resamplings
    units = n_listed_units(space, max(n_options, 2))
    sampled = mode == "fixed" and (units is None or resamplings < units)
    if group_by == "formats":
        formats = int(space.n_valid_formats(max(n_options, 2)))
        groups = max(1, min(resamplings, formats)) if mode == "fixed" else max(1, formats)
        layout = RangeLayout(mode, formats=groups, sampled=sampled)
        return Grouping("formats", groups, groups * (groups - 1) // 2, cells / groups, layout)
    dims = space.dimensions
    names = list(dims) if group_by == "dimensions" else list(group_by)
    sizes = [len(dims[d]) for d in names if d in dims and len(dims[d]) >= 2]
    if not sizes:
        return None
    label = "dimensions" if group_by == "dimensions" else "dimensions:" + ",".join(names)
    layout = RangeLayout(mode, tuple(sizes), sampled=sampled)
    return Grouping(label, sum(sizes), sum(v * (v - 1) // 2 for v in sizes), cells / max(sizes),
                    layout)


def by_cells(spec: Any, search: str) -> bool:
    """Whether a test searched by ``search`` is decided by a search by cells
    (`evaluate.cell_rounds.applies` on its thresholds and grouping)."""
    from pytest_reliable.evaluate import cell_rounds

    return search == "adaptive" and cell_rounds.applies(named_thresholds(spec),
                                                         spec.grouping())


def named_thresholds(spec: Any) -> dict[str, None]:
    """The reliable thresholds ``spec`` sets, as `evaluate.cell_rounds` takes them."""
    return dict.fromkeys(name for name in RELIABLE_THRESHOLDS
                         if getattr(spec, name, None) is not None)


def plan_design(spec: Any, space: Any, instances: int, resamplings: int, n_options: int,
                decide: Policy, search: str | None = None) -> tuple[Design, Grouping | None]:
    """The design ``--reliable-plan`` simulates; ``search`` (None: the marker's, else uniform:
    `ReliableSpec.search_under`) says whether a search by cells decides ``min_worst``
    (`Design.cells_chunk`)."""
    from pytest_reliable.evaluate import cell_rounds

    thresholds = [name for name in (*MIN_THRESHOLDS, *MAX_THRESHOLDS)
                  if getattr(spec, name, None) is not None]
    grouping = None
    if any(name in ("min_worst", "max_spread", "min_median") for name in thresholds):
        grouping = grouping_of(space, spec.mode, getattr(spec, "group_by", None), instances,
                               resamplings, n_options)
    hypotheses = len(thresholds)
    if grouping is not None:
        if getattr(spec, "min_worst", None) is not None:
            hypotheses += grouping.groups - 1
        if getattr(spec, "max_spread", None) is not None:
            hypotheses += grouping.pairs - 1
    from pytest_reliable.plan.sampling import n_listed_units

    units = n_listed_units(space, max(n_options, 2))
    mode: Mode = getattr(spec, "mode", "ilr")
    design = Design(
        instances=instances, resamplings=resamplings, k=spec.k, confidence=spec.confidence,
        decide=decide, layout=grouping.layout if grouping else None,
        groups=grouping.groups if grouping else 0, pairs=grouping.pairs if grouping else 0,
        hypotheses=max(hypotheses, 1), mode=mode, units=units or 0,
        sampled=mode == "fixed" and (units is None or resamplings < units),
        cells_chunk=(cell_rounds.chunk_for(instances)
                     if by_cells(spec, search or spec.search_under(None)) else 0),
    )
    return design, grouping
