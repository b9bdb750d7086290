"""Run strategies: which resamplings a reliable test runs before its gate decides (no pytest here).

A strategy gets the test's `Evaluator` (its plan, run on demand on any model through the
session's runners) and returns a `GateRun`: the score matrix the gate decides on and how its size
was chosen. The session picks one strategy per test (`ReliableSession.strategy_for`); the summary,
the gate and the report never ask which one ran.

- `FixedN`: n resamplings (the marker's ``n``, else ``--reliable-n``, else 10).
- `StopEarly`: up to n, in batches, stopping once every verdict is settled (`stopping`).
- `AutoN`: n* from the store or from a pilot (``--reliable-n auto``, `nstar`).
- `Adaptive`: up to n, in rounds spent on the groups still open (``search="adaptive"``,
  `adaptive`).
- `Thompson`: n resamplings pulled format by format (``search="thompson"``, `thompson`).

Another strategy is one class with ``run(evaluator) -> GateRun`` and ``first_round()`` (what it
calls before any answer is known: ``--reliable-batch`` sends that ahead, `first_round`) and one
branch where the session chooses; how its calls travel (one at a time, in batches) is the
evaluator's runners' business.

n* lives in four rooms: the statistic `pytest_reliable.stats.reliable_n`, running it
`pytest_reliable.evaluate.nstar`, keeping it `pytest_reliable.store.nstar`, scheduling it
`pytest_reliable.evaluate.schedules`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_reliable.evaluate import cell_rounds
from pytest_reliable.evaluate.adaptive import Peek, run_adaptive
from pytest_reliable.evaluate.evaluation import Evaluator, ScoreMatrix
from pytest_reliable.evaluate.nstar import run_auto
from pytest_reliable.evaluate.stopping import GateBound, batch_size, run_until_settled
from pytest_reliable.evaluate.thompson import exploration_entry, run_thompson
from pytest_reliable.models.base import AsyncModel
from pytest_reliable.plan.sampling import dataset_option_count, n_listed_units
from pytest_reliable.space import Variant
from pytest_reliable.stats.looks import LookedMeans
from pytest_reliable.store.nstar import NStarEntries, NStarEntry, NStarKey

if TYPE_CHECKING:  # the JSON entry's shape; types only
    from pytest_reliable.schema.entries import ExplorationEntry, NStarCurveEntry


@dataclass(frozen=True)
class GateRun:
    """What a strategy ran: the matrix the gate decides on, and how its size was chosen."""

    matrix: ScoreMatrix
    n_star: NStarEntry | None = None
    """n* as the strategy decided it; None: the summary's n* of the matrix's own resamplings."""
    n_star_source: str = "resamplings"
    """Where n* comes from: "resamplings" (the matrix's own), "pilot" or "store"."""
    n_star_method: str = "paper"
    n_star_curve: NStarCurveEntry | None = None
    """The pilot's curves that gave ``n_star`` (None with the matrix's own n*, or a stored n*)."""
    pilot_n: int | None = None
    """The pilot's size when one ran in this run."""
    extra_made: int = 0
    extra_cached: int = 0
    """Calls outside ``matrix``: a pilot on another reference model."""
    stopped_early: bool = False
    stop_reason: str | None = None
    """Why the resamplings ended where they did, when the test asked to stop early."""
    search: str = "uniform"
    """How the resamplings were chosen (SPEC section 14): "uniform", "adaptive", "thompson"."""
    uniform_rows: int | None = None
    """The matrix's first rows run in plan order, when later rows were chosen by their group
    (the mean is taken over these); None: every row is in plan order."""
    exploration: ExplorationEntry | None = None
    """``search="thompson"``'s best and worst formats found (never a verdict)."""
    looked: LookedMeans | None = None
    """An adaptive search by cells: the formats' looked bounds ``min_worst`` is decided on."""

    @property
    def calls_made(self) -> int:
        return self.matrix.calls_made + self.extra_made

    @property
    def calls_cached(self) -> int:
        return self.matrix.calls_cached + self.extra_cached


@dataclass(frozen=True)
class FirstRound:
    """What a strategy calls before any answer is known: the plan's first ``n`` resamplings
    (only those below ``first_stage`` when given) and the canonical pass, on ``model`` (None:
    the model under test). ``size_known``: the whole run's size is known before any answer, so a
    baseline model's calls can go ahead too."""

    n: int
    first_stage: int | None = None
    model: AsyncModel | None = None
    size_known: bool = True


class RunStrategy(Protocol):
    """Chooses and runs a test's resamplings through ``evaluator``."""

    def run(self, evaluator: Evaluator) -> GateRun: ...

    def first_round(self) -> FirstRound: ...


@dataclass(frozen=True)
class FixedN:
    """``n`` resamplings and the canonical pass, at once."""

    n: int

    def run(self, evaluator: Evaluator) -> GateRun:
        return GateRun(evaluator.run(self.n))

    def first_round(self) -> FirstRound:
        return FirstRound(self.n)


@dataclass(frozen=True)
class StopEarly:
    """Up to ``n`` resamplings in batches, in plan order, stopping once every threshold's
    verdict under ``decide`` is settled by anytime-valid bounds (`stopping.run_until_settled`)."""

    n: int
    thresholds: Mapping[str, tuple[str, float]]
    """name -> (direction, limit) of the test's thresholds."""
    decide: str
    confidence: float
    gate_bound: GateBound | None = None
    """The bound the gate decides the mean on: a verdict is settled only when it agrees."""

    def run(self, evaluator: Evaluator) -> GateRun:
        stopped = run_until_settled(evaluator.staged(self.n), self.thresholds,
                                    decide=self.decide, confidence=self.confidence,
                                    gate_bound=self.gate_bound)
        return GateRun(stopped.matrix, stopped_early=stopped.stopped_early,
                       stop_reason=stopped.reason)

    def first_round(self) -> FirstRound:
        """The first stage only: the later ones run only when it did not settle the verdicts."""
        return FirstRound(self.n, first_stage=batch_size(self.n), size_known=False)


@dataclass(frozen=True)
class Adaptive:
    """Up to ``n`` resamplings in rounds, each spent on the groups (pairs, the mean) whose
    verdict is still open (`adaptive.run_adaptive`); ``peek`` bounds the range claims and
    ``keys_of_row(r)`` names the groups of the plan's resampling r."""

    n: int
    thresholds: Mapping[str, tuple[str, float]]
    decide: str
    confidence: float
    peek: Peek
    keys_of: Callable[[Sequence[Variant]], frozenset[str]]
    """The range keys of the groups cells with these variants fall in (`adaptive.row_keys`)."""
    batch: int | None = None
    grouping: str | tuple[str, ...] = "formats"
    gate_bound: GateBound | None = None
    """The bound the gate decides the mean on: a verdict is settled only when it agrees."""

    @property
    def by_cells(self) -> bool:
        """Whether the search runs single cells (`cell_rounds`) rather than whole rows."""
        return cell_rounds.applies(self.thresholds, self.grouping)

    def run(self, evaluator: Evaluator) -> GateRun:
        staged = evaluator.staged(self.n)
        if self.by_cells:
            ran = cell_rounds.run_cell_rounds(
                staged, self.thresholds, decide=self.decide, confidence=self.confidence,
                key_of=lambda v: v.format_key, batch=self.batch, gate_bound=self.gate_bound)
        else:
            ran = run_adaptive(staged, self.thresholds, decide=self.decide,
                               confidence=self.confidence, peek=self.peek,
                               keys_of_row=lambda r: self.keys_of(staged.row_variants(r)),
                               batch=self.batch, gate_bound=self.gate_bound)
        return GateRun(ran.matrix, stopped_early=ran.stopped_early, stop_reason=ran.reason,
                       search="adaptive",
                       uniform_rows=(ran.uniform_rows
                                     if ran.uniform_rows < ran.matrix.n_resamplings else None),
                       looked=ran.looked)

    def first_round(self) -> FirstRound:
        """The first round only (the plan's first rows, every group; one row when a search by
        cells has no mean to bound): later rounds depend on its answers."""
        first = (cell_rounds.first_rows(self.thresholds, self.n, self.batch) if self.by_cells
                 else self.batch or batch_size(self.n))
        return FirstRound(self.n, first_stage=first, size_known=False)


THOMPSON_PLAN_MAX = 2000
"""The most resamplings a Thompson search plans to list the space's formats (arms)."""


@dataclass(frozen=True)
class Thompson:
    """FormatSpread's search for the best and worst format under the test's budget of ``n``
    resamplings (fixed mode; `thompson.run_thompson`), seeded with the test's ``seed``. The
    thresholds are decided on the cells it drew; the exploration is reported apart."""

    n: int
    seed: int

    def run(self, evaluator: Evaluator) -> GateRun:
        # A plan long enough to list every format (fixed mode lists them without replacement),
        # so an arm exists for each; only ``n`` of its resamplings are pulled.
        units = n_listed_units(evaluator.space, dataset_option_count(evaluator.dataset) or 2)
        staged = evaluator.staged(max(self.n, min(units or self.n, THOMPSON_PLAN_MAX)))

        def arm_of(r: int) -> tuple[str, str]:
            variant = staged.row_variants(r)[0]
            return variant.format_key, variant.describe()

        ran = run_thompson(staged, budget=self.n, seed=self.seed, arm_of=arm_of)
        return GateRun(ran.matrix, search="thompson", exploration=exploration_entry(ran),
                       stop_reason=f"search='thompson': {ran.matrix.n_resamplings} of {self.n} "
                                   "resamplings pulled by format")

    def first_round(self) -> FirstRound:
        """The first pull (the plan's first resampling and the canonical pass): later pulls
        depend on its answers."""
        return FirstRound(self.n, first_stage=1, size_known=False)


@dataclass(frozen=True)
class AutoN:
    """n* resamplings (``--reliable-n auto``): a stored n*, or a pilot on ``reference`` whose
    first n* resamplings gate when the reference is the model under test (`nstar.run_auto`)."""

    key: NStarKey
    store: NStarEntries
    reference: AsyncModel
    stop_reason: str | None = None
    """Why the test's ``stop_early`` does not apply, when it asked for it."""

    def run(self, evaluator: Evaluator) -> GateRun:
        outcome = run_auto(
            self.key, self.store, reference_is_model=self.reference is evaluator.model,
            run=lambda n, on_reference: evaluator.run(n, self.reference if on_reference else None),
            extend=evaluator.extend,
        )
        return GateRun(
            outcome.matrix,
            n_star=outcome.entry,
            n_star_source=outcome.source,
            n_star_method=outcome.method,
            n_star_curve=outcome.curve,
            pilot_n=outcome.pilot_n,
            extra_made=outcome.extra_made,
            extra_cached=outcome.extra_cached,
            stop_reason=self.stop_reason,
        )

    def first_round(self) -> FirstRound:
        """A stored n*'s resamplings, else the pilot's on the reference model (its extension to
        n* depends on the pilot's answers)."""
        stored = self.store.get(self.key)
        if stored is not None:
            return FirstRound(min(stored.n_star, self.key.n_max))
        return FirstRound(self.key.pilot_n, model=self.reference, size_known=False)


__all__ = ["Adaptive", "AutoN", "FirstRound", "FixedN", "GateRun", "RunStrategy", "StopEarly", "Thompson"]
