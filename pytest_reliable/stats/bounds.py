"""Bounds for gates (SPEC section 11): clustered means and proportions, Wilson's bound on
independent trials, the chi-square bound of a standard deviation, and Holm's step-down.

Cells of one instance are correlated, so every standard error here is cluster-robust by instance
(Liang-Zeger: the variance of per-instance influence values, Miller 2024, "Adding Error Bars to
Evals"). Where the plan samples variants (fixed mode over a space too large to enumerate in n
resamplings) the resamplings are a second clustering dimension and their variance is added (the
two-way bootstrap's variance, slightly conservative). Means of [0, 1] scores get Wilson's score
interval on the Kish effective sample size n_eff = p(1 - p) / se^2, clamped to [clusters, cells],
with Student's t quantile on clusters - 1 degrees of freedom: unlike a percentile bootstrap it does
not claim certainty when every cell is 1 (or 0). Differences (paired, within instance) use t on
their clustered se.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
from scipy import stats as _sps

from pytest_reliable.stats.bounded import BoundedMean, bounded_mean
from pytest_reliable.stats._validation import (
    ArrayLike,
    FloatArray,
    _count,
    _score_matrix,
    _scores,
)


def _t(level: float, df: int) -> float:
    return float(_sps.t.ppf(level, max(int(df), 1)))


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval for proportion ``p`` on ``n`` (possibly fractional) trials."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(max(p * (1.0 - p), 0.0) / n + z2 / (4.0 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class ProportionBound:
    """A mean of [0, 1] scores with its clustered standard error.

    One-sided bounds: Wilson's score interval on the effective sample size ``n_eff`` (the Kish
    design effect from the clustered variance), with Student's t quantile on ``clusters - 1``
    degrees of freedom. ``n_eff`` is clamped to [``clusters``, ``cells``]: when every score is 1
    (or 0) the variance says nothing and ``n_eff = clusters`` (one trial per instance); when the
    variance is 0 at an interior mean, ``n_eff = cells``.
    """

    estimate: float
    se: float
    clusters: int
    cells: int
    method: str

    @property
    def p(self) -> float:
        return min(1.0, max(0.0, self.estimate))

    @property
    def n_eff(self) -> float:
        p, low, high = self.p, float(max(self.clusters, 1)), float(max(self.cells, 1))
        if p * (1.0 - p) <= 0.0:
            return low
        if self.se <= 0.0:
            return high
        return min(high, max(low, p * (1.0 - p) / (self.se * self.se)))

    @property
    def df(self) -> int:
        return max(self.clusters - 1, 1)

    def lower(self, confidence: float) -> float:
        """One-sided lower bound at ``confidence``."""
        return _wilson(self.p, self.n_eff, _t(confidence, self.df))[0]

    def upper(self, confidence: float) -> float:
        """One-sided upper bound at ``confidence``."""
        return _wilson(self.p, self.n_eff, _t(confidence, self.df))[1]

    def interval(self, confidence: float) -> tuple[float, float]:
        """Two-sided interval at ``confidence``."""
        return _wilson(self.p, self.n_eff, _t(0.5 + confidence / 2.0, self.df))

    def p_below(self, limit: float) -> float:
        """p-value of "the true mean is >= limit" (small: evidence that it is below), by the
        score test that Wilson's interval inverts: ``upper(1 - p) == limit``."""
        return _score_p(self.p, self.n_eff, limit, self.df, below=True)

    def p_above(self, limit: float) -> float:
        """p-value of "the true mean is <= limit" (small: evidence that it is above)."""
        return _score_p(self.p, self.n_eff, limit, self.df, below=False)


def _score_p(p: float, n: float, limit: float, df: int, *, below: bool) -> float:
    if limit <= 0.0 or limit >= 1.0:
        if below:
            return 1.0 if limit <= 0.0 or p >= 1.0 else 0.0
        return 1.0 if limit >= 1.0 or p <= 0.0 else 0.0
    stat = (p - limit) / math.sqrt(limit * (1.0 - limit) / n)
    return float(_sps.t.cdf(stat, df) if below else _sps.t.sf(stat, df))


def clustered_mean(scores: ArrayLike, *, two_way: bool = False) -> ProportionBound:
    """The mean of a (resamplings, instances) score matrix with a cluster-robust standard error.

    Clustered by instance: se^2 = var(instance means, ddof=1) / N. ``two_way=True`` (the plan
    sampled the variants of its resamplings from a larger space) adds var(resampling means,
    ddof=1) / n, and the clusters for the degrees of freedom and the n_eff floor are then
    min(n, N). A 1-D input is one row (e.g. per-instance values). Bounds: `ProportionBound`.
    """
    s = _score_matrix(scores)
    n, n_inst = s.shape
    var = float(np.var(s.mean(axis=0), ddof=1)) / n_inst if n_inst > 1 else 0.0
    clusters = n_inst
    method = "clustered by instance; Wilson on effective n, t(N-1)"
    if two_way:
        if n > 1:
            var += float(np.var(s.mean(axis=1), ddof=1)) / n
        clusters = min(n, n_inst)
        method = ("two-way clustered (instances and sampled resamplings); Wilson on effective n, "
                  "t(min(n, N)-1)")
    return ProportionBound(float(s.mean()), math.sqrt(max(var, 0.0)), clusters, int(s.size),
                           method)


def clustered_proportion(successes: ArrayLike, trials: ArrayLike) -> ProportionBound:
    """A proportion over trials grouped in clusters of unequal size (e.g. CheckList pairs, grouped
    by the example they were made from): sum(successes) / sum(trials), with the clustered
    (ratio-estimator) standard error se^2 = N / (N - 1) * sum((y_i - r m_i)^2) / (sum m_i)^2.

    With equal cluster sizes this is `clustered_mean` of the (trials, clusters) matrix. Clusters
    with no trial are ignored. Bounds: `ProportionBound` (clusters = clusters with a trial).
    """
    y = np.asarray(successes, dtype=np.float64).ravel()
    m = np.asarray(trials, dtype=np.float64).ravel()
    if y.shape != m.shape or (m < 0).any() or (y < 0).any() or (y > m).any():
        raise ValueError("successes and trials must be equal-length counts with "
                         "0 <= successes <= trials")
    keep = m > 0
    y, m = y[keep], m[keep]
    if y.size == 0:
        raise ValueError("clustered_proportion needs at least one trial")
    total = float(m.sum())
    rate = float(y.sum()) / total
    n_clusters = int(y.size)
    var = 0.0
    if n_clusters > 1:
        var = n_clusters / (n_clusters - 1) * float(np.sum((y - rate * m) ** 2)) / total**2
    return ProportionBound(rate, math.sqrt(var), n_clusters, round(total),
                           "clustered by example; Wilson on effective n, t(N-1)")


@dataclass(frozen=True)
class WilsonBound(ProportionBound):
    """``successes`` out of ``cells`` independent 0/1 trials: Wilson's score bounds with the
    normal quantile (no clustering, so no t correction). ``se`` and ``clusters`` are unused."""

    def lower(self, confidence: float) -> float:
        return _wilson(self.p, self.cells, float(_sps.norm.ppf(confidence)))[0]

    def upper(self, confidence: float) -> float:
        return _wilson(self.p, self.cells, float(_sps.norm.ppf(confidence)))[1]

    def interval(self, confidence: float) -> tuple[float, float]:
        return _wilson(self.p, self.cells, float(_sps.norm.ppf(0.5 + confidence / 2.0)))

    def p_below(self, limit: float) -> float:
        return self._normal_p(limit, below=True)

    def p_above(self, limit: float) -> float:
        return self._normal_p(limit, below=False)

    def _normal_p(self, limit: float, *, below: bool) -> float:
        # The score test Wilson's interval inverts; a limit at 0 or 1 is decided exactly.
        if limit <= 0.0 or limit >= 1.0:
            return _score_p(self.p, self.cells, limit, 1, below=below)
        stat = (self.p - limit) / math.sqrt(limit * (1.0 - limit) / self.cells)
        return float(_sps.norm.cdf(stat) if below else _sps.norm.sf(stat))


def wilson_bound(successes: int, n: int) -> WilsonBound:
    """The `ProportionBound` of ``successes`` out of ``n`` independent 0/1 trials (Wilson)."""
    n_i = _count(n, "n", minimum=1)
    c_i = _count(successes, "successes", minimum=0)
    if c_i > n_i:
        raise ValueError(f"successes must be in [0, n] = [0, {n_i}], got {successes!r}")
    return WilsonBound(c_i / n_i, 0.0, n_i, n_i, "Wilson score bound (independent trials)")


# --------------------------------------------------------------------------- std bound, Holm


class SpreadBound(Protocol):
    """What a gate reads from the bound of a standard deviation (``max_std``): the observed sample
    standard deviation (ddof=1) of the ``n`` per-resampling scores, its one-sided bounds, and the
    p-value of "sigma <= limit" that inverts the lower bound (``lower(1 - p) == limit``)."""

    @property
    def std(self) -> float: ...

    @property
    def n(self) -> int: ...

    @property
    def method(self) -> str: ...

    def upper(self, confidence: float) -> float: ...

    def lower(self, confidence: float) -> float: ...

    def p_above(self, limit: float) -> float: ...


CHI_SQUARE_STD = (
    "sample std (ddof=1), chi-square bound (df corrected for kurtosis and for instance "
    "sampling by a jackknife over instances; per-resampling means on a 1/N grid: variance floor "
    "1/(12 N^2))"
)


@dataclass(frozen=True)
class StdBound:
    """The sample standard deviation (ddof=1) of ``n`` values with chi-square bounds.

    Normal theory: (n - 1) s^2 / sigma^2 ~ chi2(n - 1). Two corrections make it honest for the
    per-resampling scores of a gate (fixed mode: one format's mean over the instances each):

    - kurtosis: var(s^2) = sigma^4 (2 / (n - 1) + kappa / n) for excess kurtosis kappa (a format
      that collapses now and then makes the scores heavy-tailed), so the degrees of freedom are
      2 / (2 / (n - 1) + kappa / n) (``excess_kurtosis`` is floored at 0: never narrower than
      normal theory);
    - instance sampling: ``dataset_var`` is the variance of s^2 that comes from the instances
      themselves (the claim is about instances like the dataset's, and which instances were drawn
      moves the spread over resamplings: with a format effect that only some instances feel, a
      dataset of 8 holds 0, 1 or 3 of them); it lowers the degrees of freedom by Satterthwaite's
      rule, df = 2 s^4 / (2 s^4 / df_kurtosis + dataset_var).

    ``floor`` is added to s^2 in the bounds (not in ``std``): per-resampling means of 0/1 cells
    lie on a grid of step 1/N, so two resamplings tie with positive probability and s = 0 would
    pass any limit; the grid's rounding variance 1/(12 N^2) keeps the bound honest there.
    """

    std: float
    n: int
    dataset_var: float = 0.0
    excess_kurtosis: float = 0.0
    floor: float = 0.0
    method: str = CHI_SQUARE_STD
    pairs: BoundedMean | None = None
    """Set for values in [0, 1] (`sample_std_bound` with ``bounded=True``): the bounded-mean
    bound of sigma^2 from disjoint pairs (see `pair_variance_bound`); ``upper`` is then the larger
    of the two upper bounds, ``lower`` the smaller of the two lower bounds (fail-on-evidence: a
    sample that drew a rare format twice showed a kurtosis-corrected chi-square breach for a
    compliant model 8-9% of the time, N=8-30, n=10-30). A chi-square bound, kurtosis-corrected or not, cannot see a rare
    value that the sample missed (one collapsing format in 24 is missed by 10 resamplings 65% of
    the time): it passed pass-on-evidence at the limit 30-50% of the time (N=30, n=10-30)."""

    @property
    def df(self) -> float:
        if self.n < 2:
            return 0.0
        df_kurtosis = 2.0 / (2.0 / (self.n - 1) + max(self.excess_kurtosis, 0.0) / self.n)
        var_s2 = self._variance**2 * 2.0 / df_kurtosis
        if var_s2 <= 0.0 or self.dataset_var <= 0.0:
            return df_kurtosis
        return max(1.0, 2.0 * self._variance**2 / (var_s2 + self.dataset_var))

    @property
    def _variance(self) -> float:
        return self.std**2 + self.floor

    def upper(self, confidence: float) -> float:
        if self.n < 2:
            return math.inf
        df = self.df
        chi_square = math.sqrt(df * self._variance / float(_sps.chi2.ppf(1.0 - confidence, df)))
        if self.pairs is None:
            return chi_square
        return max(chi_square, math.sqrt(self.pairs.upper(confidence)))

    def lower(self, confidence: float) -> float:
        if self.n < 2:
            return 0.0
        df = self.df
        chi_square = math.sqrt(df * self._variance / float(_sps.chi2.ppf(confidence, df)))
        if self.pairs is None:
            return chi_square
        return min(chi_square, math.sqrt(max(self.pairs.lower(confidence), 0.0)))

    def p_above(self, limit: float) -> float:
        """p-value of "sigma <= limit" (small: evidence that sigma is above the limit); with
        ``pairs``, the larger of the two p-values (the lower bound is the smaller of the two)."""
        if self.n < 2:
            return 1.0
        if limit <= 0.0:
            return 0.0 if self._variance > 0.0 else 1.0
        df = self.df
        p = float(_sps.chi2.sf(df * self._variance / limit**2, df))
        if self.pairs is None:
            return p
        return max(p, self.pairs.p_above(limit**2))


PAIRED_STD = (
    "; both bounds also from the halved squared differences of disjoint pairs (values in [0, 1]: "
)


def pair_variance_bound(values: ArrayLike) -> BoundedMean | None:
    """The bounded-mean bound of sigma^2 for independent values in [0, 1]: the halved squared
    differences (x_2j - x_2j+1)^2 / 2 of disjoint pairs are independent, in [0, 1/2], with mean
    sigma^2, so `bounded_mean` bounds sigma^2 at any n whatever the values' distribution (a rare
    value the sample missed included: the bound then stays wide). None below two values."""
    x = _scores(values, "values")
    m = x.size // 2
    if m < 1:
        return None
    halves = (x[: 2 * m : 2] - x[1 : 2 * m : 2]) ** 2 / 2.0
    return bounded_mean(np.clip(halves, 0.0, 0.5), high=0.5,
                        of="halved squared differences of disjoint pairs of resamplings")


def instance_jackknife(cells: FloatArray) -> float:
    """The jackknife variance, over instances, of the sample variance (ddof=1) of the row means
    of a (resamplings, instances) matrix: how much s^2 moves with which instances were drawn.

    Its part from the instances' own cell noise, var(v_i) / N^3 (v_i an instance's variance over
    its cells), is what this bound used before; the jackknife also sees how a format effect
    differs between instances (a format that breaks the instances in the middle of the
    difficulty range, and no others), which made fail-on-evidence fail a compliant model 15% of
    the time at N=8, n=30 (intra-instance correlation 0.8: a dataset with more of those
    instances than usual shows a spread the population does not have)."""
    n_inst = cells.shape[1]
    rows = cells.mean(axis=1)
    left_out = (n_inst * rows[:, None] - cells) / (n_inst - 1)  # (n, N): row means without i
    s2 = np.var(left_out, axis=0, ddof=1)
    return float((n_inst - 1) / n_inst * np.sum((s2 - s2.mean()) ** 2))


def sample_std_bound(
    values: ArrayLike, cells: ArrayLike | None = None, *, bounded: bool = False
) -> StdBound:
    """`StdBound` of ``values`` (one score per resampling).

    ``cells``, the (resamplings, instances) matrix the values are row means of, adds the
    instance-sampling variance of s^2 (`instance_jackknife`: leave one instance out, recompute
    s^2 of the row means) and the grid floor 1/(12 N^2). The excess kurtosis is the values' own
    (bias-corrected, from 4 values on). ``bounded``: the values lie in [0, 1]; each bound is
    also the pairs' bounded one (`pair_variance_bound`), whichever is more conservative.
    """
    x = _scores(values, "values")
    std = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    dataset_var = 0.0
    floor = 0.0
    kurtosis = 0.0
    if x.size >= 4 and np.ptp(x) > 0.0:
        kurtosis = float(_sps.kurtosis(x, fisher=True, bias=False))
    if cells is not None:
        s = np.asarray(cells, dtype=np.float64)
        if s.ndim == 2 and s.shape[1] >= 1:
            floor = 1.0 / (12.0 * s.shape[1] ** 2)
        if s.ndim == 2 and s.shape[0] > 1 and s.shape[1] > 1:
            dataset_var = instance_jackknife(s)
    if bounded:
        pairs = pair_variance_bound(x)
        if pairs is not None:
            return StdBound(std, int(x.size), dataset_var, kurtosis, floor,
                            CHI_SQUARE_STD + PAIRED_STD + pairs.method + ")", pairs)
    return StdBound(std, int(x.size), dataset_var, kurtosis, floor)


CELL_STD = (
    "sample std (ddof=1); bound from the cells (ilr: a resampling's score is the mean of N "
    "independent cells, so its variance is the mean within-instance variance / N): "
)


@dataclass(frozen=True)
class CellStdBound:
    """The per-resampling standard deviation in ilr mode, bounded from the cells.

    In ilr every cell draws its own variant, so a resampling's score is the mean of N independent
    cells and its variance is sigma^2 = E[v_i] / N, v_i the variance of instance i's cells. Each
    instance's sample variance (ddof=1) of its n cells is an unbiased estimate of v_i, bounded
    (at most floor(n/2) ceil(n/2) / (n (n - 1)) for scores in [0, 1]) and independent across
    instances, so `bounded_mean` bounds E[v_i] at any N and any n >= 2, the instances' own
    variation included. ``std`` stays the sample standard deviation (ddof=1) of the n
    per-resampling scores (what the report shows).
    """

    std: float
    n: int
    instances: int
    variances: BoundedMean

    @property
    def method(self) -> str:
        return CELL_STD + self.variances.method

    def upper(self, confidence: float) -> float:
        return math.sqrt(self.variances.upper(confidence) / self.instances)

    def lower(self, confidence: float) -> float:
        return math.sqrt(max(self.variances.lower(confidence), 0.0) / self.instances)

    def p_above(self, limit: float) -> float:
        """p-value of "sigma <= limit": of "E[v_i] <= limit^2 N"."""
        return self.variances.p_above(limit**2 * self.instances)


def cell_std_bound(cells: ArrayLike) -> CellStdBound | StdBound:
    """The `CellStdBound` of an ilr (resamplings, instances) matrix of [0, 1] scores; with one
    resampling there is no within-instance variance: a `StdBound` of one value (unbounded)."""
    s = _score_matrix(cells)
    n, n_inst = s.shape
    rows = s.mean(axis=1)
    if n < 2:
        return StdBound(0.0, n)
    most = (n // 2) * ((n + 1) // 2) / (n * (n - 1))
    within = np.clip(np.var(s, axis=0, ddof=1), 0.0, most)
    variances = bounded_mean(within, high=most, of="within-instance variances")
    return CellStdBound(float(np.std(rows, ddof=1)), n, n_inst, variances)


def holm(pvalues: ArrayLike, alpha: float) -> tuple[npt.NDArray[np.bool_], FloatArray]:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise level ``alpha``,
    and the level each hypothesis was compared with (alpha / (m - rank), rank 0 = smallest p)."""
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    m = p.size
    order = np.argsort(p, kind="stable")
    levels_sorted = alpha / (m - np.arange(m))
    ok = p[order] <= levels_sorted
    stop = int(np.argmin(ok)) if not ok.all() else m
    reject = np.zeros(m, dtype=bool)
    reject[order[:stop]] = True
    levels = np.empty(m)
    levels[order] = levels_sorted
    return reject, levels
