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

import numpy as np
import numpy.typing as npt
from scipy import stats as _sps

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


@dataclass(frozen=True)
class StdBound:
    """The sample standard deviation (ddof=1) of ``n`` values with chi-square bounds.

    Normal theory: (n - 1) s^2 / sigma^2 ~ chi2(n - 1). ``dataset_var`` is the variance of
    sigma^2 that comes from the instances themselves (the claim is about instances like the
    dataset's, not this dataset only); it lowers the degrees of freedom by Satterthwaite's rule,
    df = (n - 1) * v_chi / (v_chi + dataset_var) with v_chi = 2 s^4 / (n - 1).
    """

    std: float
    n: int
    dataset_var: float = 0.0
    method: str = "sample std (ddof=1), chi-square bound (Satterthwaite df with instance sampling)"

    @property
    def df(self) -> float:
        if self.n < 2:
            return 0.0
        v_chi = 2.0 * self.std**4 / (self.n - 1)
        if v_chi <= 0.0 or self.dataset_var <= 0.0:
            return float(self.n - 1)
        return max(1.0, (self.n - 1) * v_chi / (v_chi + self.dataset_var))

    def upper(self, confidence: float) -> float:
        if self.n < 2:
            return math.inf
        df = self.df
        return math.sqrt(df * self.std**2 / float(_sps.chi2.ppf(1.0 - confidence, df)))

    def lower(self, confidence: float) -> float:
        if self.n < 2:
            return 0.0
        df = self.df
        return math.sqrt(df * self.std**2 / float(_sps.chi2.ppf(confidence, df)))

    def p_above(self, limit: float) -> float:
        """p-value of "sigma <= limit" (small: evidence that sigma is above the limit)."""
        if self.n < 2:
            return 1.0
        if limit <= 0.0:
            return 0.0 if self.std > 0.0 else 1.0
        df = self.df
        return float(_sps.chi2.sf(df * self.std**2 / limit**2, df))


def sample_std_bound(values: ArrayLike, cells: ArrayLike | None = None) -> StdBound:
    """`StdBound` of ``values`` (one score per resampling).

    ``cells``, the (resamplings, instances) matrix the values are row means of, adds the
    instance-sampling variance of sigma^2: sigma^2 = mean_i(v_i) / N with v_i the variance of
    instance i's cells, so var(sigma^2) ~ var(v_i) / N^3 (within-instance variances only).
    """
    x = _scores(values, "values")
    std = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    dataset_var = 0.0
    if cells is not None:
        s = np.asarray(cells, dtype=np.float64)
        if s.ndim == 2 and s.shape[0] > 1 and s.shape[1] > 1:
            per_instance = np.var(s, axis=0, ddof=1)
            dataset_var = float(np.var(per_instance, ddof=1)) / s.shape[1] ** 3
    return StdBound(std, int(x.size), dataset_var)


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
