"""Run strategies: which resamplings a reliable test runs before its gate decides (no pytest here).

A strategy gets the test's `Evaluator` (its plan, run on demand on any model through the
session's runners) and returns a `GateRun`: the score matrix the gate decides on and how its size
was chosen. The session picks one strategy per test (`ReliableSession.strategy_for`); the summary,
the gate and the report never ask which one ran.

- `FixedN`: n resamplings (the marker's ``n``, else ``--reliable-n``, else 10).
- `StopEarly`: up to n, in batches, stopping once every verdict is settled (`stopping`).
- `AutoN`: n* from the store or from a pilot (``--reliable-n auto``, `nstar`).

Another strategy is one class with ``run(evaluator) -> GateRun`` and ``first_round()`` (what it
calls before any answer is known: ``--reliable-batch`` sends that ahead, `first_round`) and one
branch where the session chooses; how its calls travel (one at a time, in batches) is the
evaluator's runners' business.

n* lives in four rooms: the statistic `pytest_reliable.stats.reliable_n`, running it
`pytest_reliable.evaluate.nstar`, keeping it `pytest_reliable.store.nstar`, scheduling it
`pytest_reliable.evaluate.schedules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_reliable.evaluate.evaluation import Evaluator, ScoreMatrix
from pytest_reliable.evaluate.nstar import run_auto
from pytest_reliable.evaluate.stopping import batch_size, run_until_settled
from pytest_reliable.models.base import AsyncModel
from pytest_reliable.store.nstar import NStarEntries, NStarEntry, NStarKey

if TYPE_CHECKING:  # the JSON entry's shape; types only
    from pytest_reliable.schema.entries import NStarCurveEntry


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

    def run(self, evaluator: Evaluator) -> GateRun:
        stopped = run_until_settled(evaluator.staged(self.n), self.thresholds,
                                    decide=self.decide, confidence=self.confidence)
        return GateRun(stopped.matrix, stopped_early=stopped.stopped_early,
                       stop_reason=stopped.reason)

    def first_round(self) -> FirstRound:
        """The first stage only: the later ones run only when it did not settle the verdicts."""
        return FirstRound(self.n, first_stage=batch_size(self.n), size_known=False)


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


__all__ = ["AutoN", "FirstRound", "FixedN", "GateRun", "RunStrategy", "StopEarly"]
