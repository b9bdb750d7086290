"""Two models on the same cells: McNemar and the paired bootstrap over variants, and the
paired difference with bounds clustered by instance (the regression gate of SPEC section 9:
`paired_difference`, bounded differences valid at any N)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from statsmodels.stats.contingency_tables import mcnemar as _sm_mcnemar

from pytest_reliable.stats._validation import (
    ArrayLike,
    FloatArray,
    _count,
    _matrix,
    _open_unit,
    _paired,
)
from pytest_reliable.stats.bounded import (
    BoundedMean,
    MeanBound,
    TwoSourceMean,
    bounded_mean,
)
from pytest_reliable.stats.summaries import bootstrap_ci


# --------------------------------------------------------------------------- paired per variant


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test on paired 0/1 outcomes.

    ``a_only``: pairs where a succeeded and b failed; ``b_only``: the reverse (the discordant
    counts); ``p_value``: two-sided exact binomial p-value on the discordant pairs (1.0 when there
    are none); ``n``: number of pairs."""

    p_value: float
    a_only: int
    b_only: int
    n: int


def mcnemar_exact(outcomes_a: ArrayLike, outcomes_b: ArrayLike) -> McNemarResult:
    """Exact McNemar test (``statsmodels ... mcnemar(exact=True)``) of two models' paired 0/1
    outcomes on the same items. Outcomes must be 0/1 (or booleans) and of the same length."""
    a, b = _paired(outcomes_a, outcomes_b, "outcomes_a", "outcomes_b")
    for arr, name in ((a, "outcomes_a"), (b, "outcomes_b")):
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError(f"{name} must contain only 0/1 outcomes")
    ai, bi = a.astype(bool), b.astype(bool)
    both = int(np.sum(ai & bi))
    a_only = int(np.sum(ai & ~bi))
    b_only = int(np.sum(~ai & bi))
    neither = int(a.size) - both - a_only - b_only
    if a_only + b_only == 0:
        p = 1.0
    else:
        p = float(_sm_mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue)
        p = min(max(p, 0.0), 1.0)
    return McNemarResult(p_value=p, a_only=a_only, b_only=b_only, n=int(a.size))


@dataclass(frozen=True)
class PairedComparison:
    """Model a vs model b on the same variants.

    ``mean_difference`` = mean(a - b); ``low``/``high`` its paired-bootstrap interval at
    ``confidence``; ``mcnemar`` the exact McNemar test when both vectors are 0/1, else None."""

    mean_difference: float
    low: float
    high: float
    confidence: float
    n: int
    mcnemar: McNemarResult | None


def paired_comparison(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = 9_999,
    seed: int | None = 0,
) -> PairedComparison:
    """Paired comparison of two models scored on the same variants (index i of both vectors is
    the same variant): the mean difference a - b with a paired bootstrap interval (variants are
    resampled together, i.e. the per-variant differences are resampled; see :func:`bootstrap_ci`
    for the method and the degenerate case), plus the exact McNemar test when both are 0/1."""
    a, b = _paired(scores_a, scores_b, "scores_a", "scores_b")
    conf = _open_unit(confidence, "confidence")
    diff = a - b
    low, high = bootstrap_ci(diff, np.mean, confidence=conf, n_resamples=n_resamples, seed=seed)
    binary = bool(np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all())
    return PairedComparison(
        mean_difference=float(np.mean(diff)),
        low=low,
        high=high,
        confidence=conf,
        n=int(a.size),
        mcnemar=mcnemar_exact(a, b) if binary else None,
    )


# --------------------------------------------------------------------------- clustered difference


@dataclass(frozen=True)
class ClusteredDifference:
    """A paired difference a - b with bounds that respect clustering by instance.

    ``low`` / ``high`` are *one-sided* bounds at ``confidence`` each (from ``bound``, or the
    percentiles ``1 - confidence`` and ``confidence`` of the bootstrap ``replicates``), so
    ``[low, high]`` is a two-sided interval at ``2 * confidence - 1``: a gate deciding on one side
    uses one end.
    ``method`` names how the bounds were found; ``n_instances`` / ``n_cells`` what they rest on."""

    estimate: float
    low: float
    high: float
    confidence: float
    n_instances: int
    n_cells: int
    method: str
    replicates: FloatArray | None = field(default=None, repr=False, compare=False)
    """The bootstrap distribution behind the bounds: bounds at other levels and p-values (a
    gate's Holm correction) read it. None: only ``low``/``high`` at ``confidence`` are known."""
    bound: MeanBound | None = field(default=None, repr=False, compare=False)
    """Set by `paired_difference`: the bounded-difference bound that gives ``low``/``high`` and
    every other bound and p-value (see there)."""

    def lower(self, confidence: float) -> float:
        """The one-sided lower bound at ``confidence``."""
        if self.bound is not None:
            return self.bound.lower(_open_unit(confidence, "confidence"))
        return self._bounds(confidence)[0]

    def upper(self, confidence: float) -> float:
        """The one-sided upper bound at ``confidence``."""
        if self.bound is not None:
            return self.bound.upper(_open_unit(confidence, "confidence"))
        return self._bounds(confidence)[1]

    def p_above(self, limit: float) -> float:
        """p-value of "the true difference is <= limit" (small: evidence that it is above);
        ``lower(1 - p) == limit``. Needs the bounded-difference bound (`paired_difference`)."""
        if self.bound is None:
            return 1.0 - self.p_below(limit)
        return self.bound.p_above(limit)

    def p_below(self, limit: float) -> float:
        """p-value of "the true difference is >= limit" (small: evidence that it is below): the
        share of bootstrap replicates >= limit, so that ``upper(1 - p)`` is about ``limit``;
        exactly ``limit`` for the bounded-difference bound."""
        if self.bound is not None:
            return self.bound.p_below(limit)
        finite = self._finite_replicates()
        if finite.size == 0 or np.ptp(finite) <= 1e-15:
            return 1.0 if self.estimate >= limit - 1e-12 else 0.0
        return float(np.mean(finite >= limit))

    def _bounds(self, confidence: float) -> tuple[float, float]:
        if self.replicates is None:
            if abs(confidence - self.confidence) > 1e-12:
                raise ValueError(
                    f"bounds at {confidence} need the bootstrap replicates; this difference "
                    f"only has its bounds at {self.confidence}"
                )
            return self.low, self.high
        return _bootstrap_bounds(self.replicates, self.estimate, _open_unit(confidence, "confidence"))

    def _finite_replicates(self) -> FloatArray:
        if self.replicates is None:
            raise ValueError("p-values need the bootstrap replicates of the difference")
        return self.replicates[np.isfinite(self.replicates)]


CLUSTER_BOOTSTRAP = "cluster bootstrap over instances"
def _bootstrap_bounds(replicates: FloatArray, estimate: float, conf: float) -> tuple[float, float]:
    """One-sided percentile bounds; a degenerate distribution gives (estimate, estimate)."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0 or np.ptp(finite) <= 1e-15:
        return estimate, estimate
    low, high = np.percentile(finite, [100.0 * (1.0 - conf), 100.0 * conf])
    return float(low), float(high)


def paired_difference(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    confidence: float = 0.95,
    resample_resamplings: bool = False,
    n_resamples: int = 4_000,
    seed: int | None = 0,
) -> ClusteredDifference:
    """Mean paired difference a - b of two models' (resamplings x instances) matrices of [0, 1]
    scores over the same cells (cell [r, i] of both is the same rendered prompt), with bounds
    clustered by instance that hold at any number of instances (the ``max_regression`` gate).

    Instances are independent clusters, each with its own variants in ilr mode: the per-instance
    mean differences are independent values in [-1, 1], bounded by `bounded_mean` (Gaffke's
    bound). A t bound on them was liberal when the candidate only ever loses answers (the
    differences are then skewed: mostly 0, now and then -1): a candidate exactly at the limit
    passed on evidence 8-11% of the time at N=16-100.

    ``resample_resamplings``: the resamplings share their variants across instances (fixed mode)
    and were drawn from a larger space, so the variants' own sampling error is a second source:
    `TwoSourceMean` (the bounded bound over instances at alpha/2 plus the margin of the bounded
    bound of the per-resampling mean differences at alpha/2). The percentile two-way bootstrap it
    replaces had no small-sample correction (0.22 pass rate at the limit, N=16, n=5), and t on
    the resamplings still passed 0.17 at N=100, n=5 (a regression on a third of the formats that
    none of the 5 resamplings drew): with few resamplings the bound is wide, as it must be.

    ``n_resamples`` and ``seed`` are kept for compatibility: nothing here is random any more.
    """
    a, b = _matrix(scores_a, "scores_a"), _matrix(scores_b, "scores_b")
    if a.shape != b.shape:
        raise ValueError(f"scores_a and scores_b must have the same shape, got {a.shape} and {b.shape}")
    for arr, name in ((a, "scores_a"), (b, "scores_b")):
        if arr.min() < 0.0 or arr.max() > 1.0:
            raise ValueError(f"{name} must be scores in [0, 1]")
    conf = _open_unit(confidence, "confidence")
    _count(n_resamples, "n_resamples", minimum=1)
    diff = a - b
    n_rows, n_instances = diff.shape
    instances = bounded_mean(diff.mean(axis=0), low=-1.0, high=1.0,
                             of="per-instance mean differences (clustered by instance)")
    bound: BoundedMean | TwoSourceMean = instances
    if resample_resamplings and n_rows >= 2:
        rows = diff.mean(axis=1)
        spread = float(np.std(rows, ddof=1) / np.sqrt(n_rows))
        bound = TwoSourceMean(instances, spread, n_rows - 1, bounded_mean(
            rows, low=-1.0, high=1.0, of="per-resampling mean differences"))
    return ClusteredDifference(
        estimate=float(diff.mean()), low=bound.lower(conf), high=bound.upper(conf),
        confidence=conf, n_instances=n_instances, n_cells=int(diff.size), method=bound.method,
        bound=bound,
    )


def paired_group_differences(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    groups: dict[str, npt.NDArray[np.bool_]],
    *,
    confidence: float = 0.95,
    n_resamples: int = 4_000,
    seed: int | None = 0,
) -> dict[str, ClusteredDifference]:
    """Per group, the mean paired difference a - b over the group's cells, with clustered bounds.

    ``groups`` maps a group's name to a boolean mask of the matrices' shape (its cells: e.g. the
    cells rendered with one dimension value, or the resamplings of one format). Each group's
    estimate is the mean over its cells; its bounds come from one cluster bootstrap over
    instances shared by every group (a ratio estimator: resampled instances' sums of differences
    over their cell counts), so groups are compared on the same resampled instances.
    """
    a, b = _matrix(scores_a, "scores_a"), _matrix(scores_b, "scores_b")
    if a.shape != b.shape:
        raise ValueError(f"scores_a and scores_b must have the same shape, got {a.shape} and {b.shape}")
    conf = _open_unit(confidence, "confidence")
    reps = _count(n_resamples, "n_resamples", minimum=1)
    diff = a - b
    n_instances = diff.shape[1]
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_instances, np.full(n_instances, 1.0 / n_instances), reps)
    out: dict[str, ClusteredDifference] = {}
    for name, mask in groups.items():
        cells = np.asarray(mask, dtype=bool)
        if cells.shape != diff.shape:
            raise ValueError(f"group {name!r}: mask shape {cells.shape} is not {diff.shape}")
        counts = cells.sum(axis=0).astype(np.float64)
        if counts.sum() == 0:
            continue
        sums = np.where(cells, diff, 0.0).sum(axis=0)
        estimate = float(sums.sum() / counts.sum())
        denominators = weights @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            replicates = np.where(denominators > 0, (weights @ sums) / denominators, np.nan)
        low, high = _bootstrap_bounds(replicates, estimate, conf)
        out[name] = ClusteredDifference(
            estimate=estimate, low=low, high=high, confidence=conf,
            n_instances=int((counts > 0).sum()), n_cells=int(counts.sum()),
            method=CLUSTER_BOOTSTRAP,
        )
    return out
