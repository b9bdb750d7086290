"""Score matrix -> the numbers a report shows and the evidence a gate decides on (SPEC 8, 11).

Pure functions, no I/O, no pytest. `summarize` computes a test's `Summary` once: its moments, the
canonical pass's interval, pass@k and pass^k with their bounds, n*, and its format and order
ranges (`verdict.ranges`: cells grouped by a pre-registered grouping, paired within instance).
Side evaluations (maj@k, circular) give the summary their means with bounds as frozen results
(`verdict.sides`, `evaluate.circular`), taken at construction: a threshold reads a mean by its
name (`Summary.means`, `contract.thresholds`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import numpy as np

from pytest_reliable import stats
from pytest_reliable.contract.thresholds import MeanStatistic
from pytest_reliable.errors import ReliableError
from pytest_reliable.evaluate.evaluation import CANONICAL, ScoreMatrix
from pytest_reliable.evaluate.nstar import curve_entry
from pytest_reliable.plan.data import record_location
from pytest_reliable.space import Space
from pytest_reliable.store.nstar import NStarEntry
from pytest_reliable.verdict.ranges import (
    RangeSummary,
    estimate_labelling,
    format_side,
    orders_labelling,
    range_of,
    variants_sampled,
)

if TYPE_CHECKING:  # the JSON entry's shape; types only, so the core does not load the writers
    from pytest_reliable.plan.task import Task
    from pytest_reliable.schema.entries import NStarCurveEntry, SummaryFields

PASS_CRITERION = "score == 1 (full credit)"
"""When one of the canonical pass's k samples counts as passed for pass@k and pass^k (the JSON
entry's ``pass_criterion``). Scores may be partial credit in [0, 1]; pass@k asks whether some
sample (pass^k: every sample) *passed*, so a sample passes only with full credit, as a code
sample passes only when every test passes. pass@1 stays the mean canonical score (SPEC 11)."""
FULL_CREDIT = 1.0 - 1e-9
"""A score at least this high is full credit (round-off in a grader's arithmetic, e.g. a sum of
fractions, is not partial credit)."""


def std_bound(scores: np.ndarray, mode: str) -> stats.SpreadBound:
    """The bound behind ``max_std``. ilr: a resampling's score is a mean of N independent cells,
    so the cells bound its variance (`stats.cell_std_bound`, valid at any n >= 2); fixed mode: one
    format per resampling, only the n per-resampling scores tell (`stats.sample_std_bound`:
    chi-square, and also the distribution-free bound from pairs of resamplings, whichever is
    more conservative)."""
    if mode == "ilr":
        return stats.cell_std_bound(scores)
    return stats.sample_std_bound(scores.mean(axis=1), scores, bounded=True)


def gate_mean_bound(matrix: ScoreMatrix, *, space: Space, mode: str) -> stats.MeanBound:
    """The bound ``min_score`` (and every threshold on the mean) is decided on: one-way over the
    instances, two-way where fixed mode sampled its formats (`stats.mean_bound`). Early stopping
    and adaptive search ask it too, so that what they call settled is what the gate decides."""
    return stats.mean_bound(matrix.scores, two_way=variants_sampled(space, matrix, mode))


def passed_samples(canonical_scores: np.ndarray) -> np.ndarray:
    """Per instance, how many of its k canonical samples passed (`PASS_CRITERION`)."""
    return np.asarray((canonical_scores >= FULL_CREDIT).sum(axis=0), dtype=np.int64)


class ScoreRangeError(ReliableError):
    """A grader returned a score outside [0, 1] (or not a number)."""


def check_scores(matrix: ScoreMatrix, task: Task, dataset: Sequence[Any] | None = None) -> None:
    """Raise `ScoreRangeError` naming the task, the instance and the value of the first cell
    whose score is not a number in [0, 1]."""
    for cell in matrix.cells:
        score = cell.score
        if isinstance(score, (int, float)) and math.isfinite(score) and 0.0 <= score <= 1.0:
            continue
        where = "the canonical pass" if cell.resampling == CANONICAL else (
            f"resampling {cell.resampling + 1} of {matrix.n_resamplings}")
        record = ""
        if dataset is not None and 0 <= cell.instance < len(dataset):
            text = str(dataset[cell.instance])
            record = f" {text[:80] + '...' if len(text) > 80 else text}"
        raise ScoreRangeError(
            f"{task!r}: the grader returned score {score!r} for the instance at "
            f"{record_location(dataset, cell.instance)}{record} ({where}); scores must be "
            "numbers in [0, 1]. Fix the grader (e.g. 1.0 right, 0.0 wrong, or a fraction of "
            "credit)."
        )


class SideMeans(Protocol):
    """A side evaluation's frozen result, as the summary takes it: its means with their bounds,
    by the names threshold rows read them by (`contract.thresholds.MeanStatistic`)."""

    def means(self) -> Mapping[MeanStatistic, tuple[float, stats.MeanBound]]: ...


Mean: TypeAlias = tuple[float, stats.MeanBound | None]
"""A mean and the bound a threshold on it is decided on (None: no bound, it cannot pass)."""


@dataclass(frozen=True)
class Summary:
    """Everything a `reliable` test reports, computed once from its score matrix and the side
    evaluations' frozen results (``sides``)."""

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
    interval_method: str = "wilson"
    mean_bound: stats.MeanBound | None = None
    std_bound: stats.SpreadBound | None = None
    pass_at_k_bound: stats.MeanBound | None = None
    pass_hat_k_bound: stats.MeanBound | None = None
    n_star_curve: NStarCurveEntry | None = None
    """The curves ``n_star`` was read from (the report's ``n_star_curve``: the HTML page draws
    them)."""
    sides: tuple[SideMeans, ...] = ()
    """The side evaluations that ran (`verdict.sides.MajorityAtK`, circular's
    `evaluate.circular.CircularResult`), taken once here."""

    def means(self) -> dict[MeanStatistic, Mean]:
        """Every mean a threshold may be decided on, with its bound, by name; a side
        evaluation's are present only when it ran."""
        found: dict[MeanStatistic, Mean] = {
            "mean": (self.mean, self.mean_bound),
            "pass_at_k": (self.pass_at_k, self.pass_at_k_bound),
            "pass_hat_k": (self.pass_hat_k, self.pass_hat_k_bound),
        }
        for side in self.sides:
            found.update(side.means())
        return found

    @property
    def maj_at_k(self) -> float | None:
        """Majority vote of the canonical pass's k samples (`verdict.sides.majority_at_k`)."""
        found = self.means().get("maj_at_k")
        return None if found is None else found[0]

    def fields(self) -> SummaryFields:
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
                "interval_method": self.interval_method,
            },
            "formats": self.formats.as_dict(),
            "orders": self.orders.as_dict(),
            "dimensions": self.dimensions,
            "pass_at_1": self.pass_at_1,
            "pass_at_k": self.pass_at_k,
            "pass_hat_k": self.pass_hat_k,
            "k": self.k,
            "pass_criterion": PASS_CRITERION,
            "n_star": self.n_star,
            "n_star_reliable": self.n_star_reliable,
            "achievable_eps": self.achievable_eps,
            "unparsed": self.unparsed,
        }


def _own_n_star(
    per_resampling: np.ndarray, eps: float, delta: float
) -> tuple[NStarEntry | None, NStarCurveEntry | None]:
    """The paper's n* of a run's own per-resampling scores and its curves (None below 2
    resamplings)."""
    if per_resampling.size < 2:
        return None, None
    found = stats.min_reliable_n(per_resampling, eps=eps, delta=delta)
    entry = NStarEntry(int(found.n_star), bool(found.reliable), float(found.achievable_eps))
    return entry, curve_entry(found, "resamplings")


def summarize(
    matrix: ScoreMatrix,
    space: Space,
    *,
    mode: str,
    eps: float,
    delta: float,
    min_cells: int = 20,
    confidence: float = 0.95,
    group_by: str | tuple[str, ...] | None = None,
    order_group_by: str = "gold_position",
    n_star: NStarEntry | None = None,
    n_star_curve: NStarCurveEntry | None = None,
    mean_rows: int | None = None,
    sides: Sequence[SideMeans] = (),
    looked: stats.LookedMeans | None = None,
) -> Summary:
    """``mean_rows``: the matrix's first rows were run in plan order and the rest chosen by
    their group (``search="adaptive"``): the mean, its bound, the moments and n* are taken over
    the first ``mean_rows`` only (rows chosen by their group would weigh on them); None: all.

    ``group_by`` None = the mode's default ("formats" in fixed, "dimensions" in ilr).

    ``n_star``: n* as the run strategy decided it (``--reliable-n auto``: from a pilot or the
    store), ``n_star_curve`` the curves it was read from (None for a stored n*); ``n_star``
    None = the paper's n* of the matrix's own resamplings (none below 2 of them) and its curves.

    ``sides``: the side evaluations' frozen results (maj@k, circular), taken as they are.

    ``looked``: an adaptive search by cells' bounds on the formats (`evaluate.cell_rounds`):
    the formats range shows them and ``min_worst`` is decided on them.
    """
    grouping = group_by if group_by is not None else ("formats" if mode == "fixed" else "dimensions")
    scores = matrix.scores
    drawn = matrix if mean_rows is None else matrix.head(mean_rows)
    per_resampling = drawn.resampling_scores()
    moments = stats.moments(per_resampling)
    k, n_instances = matrix.canonical_scores.shape
    first = matrix.canonical_scores[0]
    if np.isin(first, (0.0, 1.0)).all():
        low, high = stats.wilson_interval(round(first.sum()), n_instances, confidence)
        interval_method = "wilson"
    else:
        low, high = stats.clustered_mean(first).interval(confidence)
        interval_method = "clustered (Wilson on effective n; scores not all 0/1)"
    successes = passed_samples(matrix.canonical_scores)
    at_k_each = np.array([stats.pass_at_k(k, int(c), k) for c in successes])
    hat_k_each = np.array([stats.pass_hat_k(k, int(c), k) for c in successes])
    at_1 = float(matrix.canonical_scores.mean())
    if n_star is None:
        n_star, n_star_curve = _own_n_star(per_resampling, eps, delta)
    cells = matrix.resampling_cells()
    sampled = variants_sampled(space, matrix, mode)
    orders_lab = orders_labelling(matrix, cells, order_group_by)
    estimate_labelling(scores, orders_lab, confidence, min_cells, resamplings_sampled=sampled)
    orders = range_of(order_group_by, [orders_lab], scores, confidence=confidence)
    formats, dims = format_side(matrix, space, mode=mode, grouping=grouping,
                                confidence=confidence, min_cells=min_cells, looked=looked)
    unparsed = matrix.unparsed()
    return Summary(
        n_resamplings=matrix.n_resamplings,
        mean=moments.mean,
        std=moments.std,
        canonical_score=at_1,
        wilson_low=float(low),
        wilson_high=float(high),
        canonical_n=n_instances,
        formats=formats,
        orders=orders,
        dimensions={  # observed value means (SPEC 8); the paired estimates are the ranges'
            dim: {g.key: g.observed for g in labelling.groups} for dim, labelling in dims.items()
        },
        pass_at_1=at_1,
        pass_at_k=float(at_k_each.mean()),
        pass_hat_k=float(hat_k_each.mean()),
        k=k,
        n_star=n_star.n_star if n_star is not None else None,
        n_star_reliable=n_star.reliable if n_star is not None else None,
        achievable_eps=n_star.achievable_eps if n_star is not None else None,
        unparsed=unparsed,
        confidence=confidence,
        interval_method=interval_method,
        mean_bound=gate_mean_bound(drawn, space=space, mode=mode) if drawn.scores.size else None,
        std_bound=std_bound(drawn.scores, mode) if per_resampling.size else None,
        # Each instance's k samples pass or not as a whole: 0/1 per instance, bounded exactly.
        pass_at_k_bound=stats.bounded_mean(at_k_each, of="per-instance pass@k values"),
        pass_hat_k_bound=stats.bounded_mean(hat_k_each, of="per-instance pass^k values"),
        n_star_curve=n_star_curve,
        sides=tuple(sides),
    )
