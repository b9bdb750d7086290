"""How many resamplings a gate runs under ``--reliable-n auto`` (SPEC section 7), without pytest.

`run_auto` is the whole policy: reuse a stored n*, or run a pilot on the reference model (once per
key across every process using the store), compute n* from its per-resampling scores
(`stats.min_reliable_n` with the chosen method), store it, and return the score matrix the gate
decides on. When the reference is the model under test the pilot is the gate's prefix (plans are prefix-consistent): its first n* resamplings gate, or, when a
bootstrap n* exceeds the pilot, the plan is extended beyond the pilot up to n* (at most the cap)
and only the new resamplings are called.

n* lives in four rooms: the statistic `pytest_reliable.stats.reliable_n`, running it
`pytest_reliable.evaluate.nstar`, keeping it `pytest_reliable.store.nstar`, scheduling it
`pytest_reliable.evaluate.schedules`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy.typing as npt

from pytest_reliable import stats
from pytest_reliable.evaluate.evaluation import ScoreMatrix
from pytest_reliable.store.nstar import NStarEntries, NStarEntry, NStarKey

if TYPE_CHECKING:  # the JSON entry's shape; types only
    from pytest_reliable.schema.entries import NStarCurveEntry

N_STAR_METHODS = stats.N_STAR_METHODS
DEFAULT_METHOD = "bootstrap"
"""The gate's question is about fresh resamplings; the paper's subsets over-promise there."""
DEFAULT_N_MAX = 1000


@dataclass(frozen=True)
class NStarOutcome:
    """What ``--reliable-n auto`` decided for one test, and the matrix the gate uses."""

    matrix: ScoreMatrix
    entry: NStarEntry
    """n* as the store keeps it: the estimate (uncapped: above ``n_max`` when the cap stopped
    the run), whether it is reliable, the eps it vouches for, the paper's n* beside it."""
    source: str
    """"pilot" or "store"."""
    method: str
    pilot_n: int | None
    """The size of the pilot behind n*: the one that ran in this run, or the stored entry's (a
    stored n* keeps its pilot's size, SPEC 7)."""
    extra_made: int = 0
    extra_cached: int = 0
    """Calls of a pilot on another reference model (not part of ``matrix``)."""
    curve: NStarCurveEntry | None = None
    """The pilot's curves that gave ``n_star`` (None when n* came from the store)."""

    @property
    def n_star(self) -> int:
        return self.entry.n_star

    @property
    def reliable(self) -> bool:
        return self.entry.reliable

    @property
    def achievable_eps(self) -> float:
        return self.entry.achievable_eps

    @property
    def n_star_paper(self) -> int | None:
        return self.entry.n_star_paper


RunFull = Callable[[int, bool], ScoreMatrix]
"""``run(n, on_reference)``: evaluate n resamplings on the reference (True) or the model under test."""
Extend = Callable[[ScoreMatrix, int], ScoreMatrix]
"""``extend(matrix, n)``: the model under test's resamplings ``matrix.n..n-1`` of the same plan."""


def curve_entry(result: stats.NStarResult, computed_from: str) -> NStarCurveEntry:
    """The curves of an n* result as the JSON entry stores them (what the HTML page draws)."""
    return {
        "computed_from": computed_from,
        "method": result.method,
        "n_scores": int(result.N),
        "mean_upper": [float(v) for v in result.mean_upper],
        "var_upper": [float(v) for v in result.var_upper],
    }


def find_n_star(
    pilot_scores: npt.ArrayLike, eps: float, delta: float, method: str, n_max: int
) -> tuple[NStarEntry, NStarCurveEntry]:
    """n* of a pilot's per-resampling scores, and the curves it was read from; with
    ``bootstrap`` the paper's n* rides along. The entry keeps the pilot's size."""
    found = stats.min_reliable_n(pilot_scores, eps=eps, delta=delta, method=method, n_max=n_max)
    paper = None
    if method == "bootstrap":
        paper = int(stats.min_reliable_n(pilot_scores, eps=eps, delta=delta).n_star)
    entry = NStarEntry(int(found.n_star), bool(found.reliable), float(found.achievable_eps), paper,
                       int(found.N))
    return entry, curve_entry(found, "pilot")


def stored_entry(entry: NStarEntry, key: NStarKey) -> NStarEntry:
    """A stored entry as this run reads it: with its pilot's size (the key's, for an entry
    stored before the entry kept it), and not reliable when a bootstrap pilot was under
    `stats.MIN_BOOTSTRAP_PILOT` (whatever an older version stored)."""
    pilot = entry.pilot_n if entry.pilot_n is not None else key.pilot_n
    small = key.n_star_method == "bootstrap" and pilot < stats.MIN_BOOTSTRAP_PILOT
    return replace(entry, pilot_n=pilot, reliable=entry.reliable and not small)


def run_auto(
    key: NStarKey,
    store: NStarEntries,
    *,
    reference_is_model: bool,
    run: RunFull,
    extend: Extend,
) -> NStarOutcome:
    """Gate resamplings under ``--reliable-n auto``; ``key`` carries eps, delta, method and cap.

    The pilot runs once per key across every process using the store: this one holds the key's
    claim while it runs it, the others wait for the entry it stores."""
    method, n_max = key.n_star_method, key.n_max
    stored = store.get(key)
    if stored is None:
        with store.pilot(key) as stored:
            if stored is None:
                return _pilot(key, store, reference_is_model=reference_is_model, run=run,
                              extend=extend)
    stored = stored_entry(stored, key)
    matrix = run(min(stored.n_star, n_max), False)
    return _outcome(matrix, stored, "store", method, pilot_n=stored.pilot_n)


def _pilot(
    key: NStarKey, store: NStarEntries, *, reference_is_model: bool, run: RunFull, extend: Extend
) -> NStarOutcome:
    method, n_max = key.n_star_method, key.n_max
    pilot = run(key.pilot_n, True)
    entry, curve = find_n_star(pilot.resampling_scores(), key.eps, key.delta, method, n_max)
    store.put(key, entry)  # a store that cannot take it warns; this run's verdict stands
    n_gate = min(entry.n_star, n_max)
    if not reference_is_model:
        matrix = run(n_gate, False)
        return _outcome(matrix, entry, "pilot", method, key.pilot_n,
                        extra=(pilot.calls_made, pilot.calls_cached), curve=curve)
    if n_gate <= pilot.n_resamplings:
        # The pilot's first n* resamplings are the gate, and every pilot call counts.
        return _outcome(pilot.head(n_gate), entry, "pilot", method, key.pilot_n, curve=curve)
    return _outcome(extend(pilot, n_gate), entry, "pilot", method, key.pilot_n, curve=curve)


def _outcome(
    matrix: ScoreMatrix,
    entry: NStarEntry,
    source: str,
    method: str,
    pilot_n: int | None,
    extra: tuple[int, int] = (0, 0),
    curve: NStarCurveEntry | None = None,
) -> NStarOutcome:
    return NStarOutcome(matrix, entry, source, method, pilot_n, extra_made=extra[0],
                        extra_cached=extra[1], curve=curve)


__all__ = [
    "DEFAULT_METHOD",
    "DEFAULT_N_MAX",
    "N_STAR_METHODS",
    "NStarOutcome",
    "curve_entry",
    "find_n_star",
    "run_auto",
    "stored_entry",
]
