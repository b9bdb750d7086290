"""Bounds on means of bounded values that keep their promise at any sample size (SPEC section 11).

The gate's means (``min_score``, pass@k, pass^k, the paired difference of ``max_regression``) are
means of N independent values in a known range: per-instance means of [0, 1] scores in ilr mode
(each instance draws its own variants) and in fixed mode over an enumerated space, per-instance
mean differences in [-1, 1]. A normal (t or Wilson) bound on such values is liberal when their
distribution is skewed, at small N and near the ends of the range: a sample that happens to miss
the rare low values shows a small variance and a high mean at once (measured: a min_score bound on
12% nearly impossible instances passed at the limit 28% of the time at N=8; accuracy 0.99 at N=100
passed 15%).

The bound used here is Gaffke's (2005), studied by Learned-Miller and Thomas (2019, "A new
confidence interval for the mean of a bounded random variable"): add one pessimistic value at the
end of the range (0 for a lower bound, 1 for an upper bound), weight the N + 1 values by a flat
Dirichlet draw (the Bayesian bootstrap), and take the weighted mean's quantile:

    lower(c) = the (1 - c) quantile of  sum_i W_i x_i + W_0 * 0,    W ~ Dirichlet(1, ..., 1)
    upper(c) = the c quantile of        sum_i W_i x_i + W_0 * 1

On 0/1 values this *is* Clopper-Pearson's exact binomial bound (the weights of k ones sum to a
Beta(k, N - k + 1) variable), so 0/1 values are bounded exactly, with the binomial test as p-value.
For other values it is conjectured (not proven) to hold for every distribution on the range, at
every N and level; no counterexample is known, and the benchmarks here check it on the gate's own
regimes. It costs little where a t bound is right (about 1.03x today's margin at N=1000, 1.07x at
N=100) because the extra value weighs 1 / (N + 1).

The quantiles are computed, not sampled: the weighted mean is <= t exactly when
sum_i E_i (x_i - t) <= 0 for independent unit exponentials E_i, a weighted sum of Gamma variables
whose distribution the Lugannani-Rice saddlepoint formula gives to about 1% of the tail probability
(0.5% at N >= 8, and on the conservative side at N <= 2), deterministically and in microseconds
(no Monte Carlo noise in a verdict).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy import optimize as _opt
from scipy import stats as _sps

from pytest_reliable.stats._validation import (
    ArrayLike,
    FloatArray,
    _count,
    _open_unit,
    _score_matrix,
)

GAFFKE = "Gaffke's bounded-mean bound"
CLOPPER_PEARSON = "Clopper-Pearson exact binomial bound"


class MeanBound(Protocol):
    """What a gate reads from the bound of a mean: one-sided bounds at any confidence, and the
    p-values that invert them (``upper(1 - p_below(L)) == L``, ``lower(1 - p_above(L)) == L``)."""

    @property
    def estimate(self) -> float: ...

    @property
    def method(self) -> str: ...

    def lower(self, confidence: float) -> float: ...

    def upper(self, confidence: float) -> float: ...

    def interval(self, confidence: float) -> tuple[float, float]: ...

    def p_below(self, limit: float) -> float:
        """p-value of "the true mean is >= limit" (small: evidence that it is below)."""
        ...

    def p_above(self, limit: float) -> float:
        """p-value of "the true mean is <= limit" (small: evidence that it is above)."""
        ...


# --------------------------------------------------------------------------- the distribution


def _weighted_mean_cdf(x: FloatArray, k: FloatArray, extra: float, t: float) -> float:
    """P(sum_a G_a x_a + E extra <= t (sum_a G_a + E)) for independent G_a ~ Gamma(k_a), E ~ Exp(1):
    the CDF at ``t`` of the Dirichlet-weighted mean of values ``x`` (with multiplicities ``k``) and
    one ``extra`` value, by the Lugannani-Rice saddlepoint formula for sum_a G_a (x_a - t) + ..."""
    c = np.append(x - t, extra - t)
    shape = np.append(k, 1.0)
    keep = c != 0.0
    c, shape = c[keep], shape[keep]
    if c.size == 0 or (c <= 0.0).all():
        return 1.0
    if (c >= 0.0).all():
        return 0.0

    def slope(s: float) -> float:  # K'(s) of K(s) = -sum shape log(1 - s c)
        return float(np.sum(shape * c / (1.0 - s * c)))

    left, right = 1.0 / float(c.min()), 1.0 / float(c.max())
    squeeze = 1.0 - 1e-12
    s = float(_opt.brentq(slope, left * squeeze, right * squeeze, xtol=1e-300, rtol=1e-15,
                          maxiter=500))
    return float(_saddlepoint_cdf(np.array([s]), c[None, :], shape[None, :])[0])


def _saddlepoint_cdf(s: FloatArray, c: FloatArray, shape: FloatArray) -> FloatArray:
    """The Lugannani-Rice CDF at the saddlepoints ``s`` (R,) of rows of terms ``c`` (R, A) with
    Gamma shapes ``shape`` (R, A; a shape of 0 is no term)."""
    one_minus = 1.0 - s[:, None] * c
    k2 = np.sum(shape * c * c / one_minus**2, axis=1)
    k3 = np.sum(2.0 * shape * c**3 / one_minus**3, axis=1)
    # K(s) with the saddlepoint equation K'(s) = 0 cancelling its first-order terms exactly:
    # K(s) = sum shape (-log(1 - y) - y / (1 - y)), y = s c, every term O(y^2) and <= 0. Summed
    # as -log(1 - y), the terms cancel to K ~ -s^2 k2 / 2 near the mean, and 1/w - 1/u below
    # magnified the rounding left: the CDF jittered by 1e-4 and the bounds by 1e-5 there.
    y = s[:, None] * c
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(np.abs(y) < 1e-3,
                         -(y**2 / 2 + 2 * y**3 / 3 + 3 * y**4 / 4 + 4 * y**5 / 5),
                         -np.log1p(-y) - y / one_minus)
        cgf = np.sum(np.where(shape > 0.0, shape * terms, 0.0), axis=1)
        w = np.copysign(np.sqrt(np.maximum(-2.0 * cgf, 0.0)), s)
        u = s * np.sqrt(k2)
        tail = _sps.norm.cdf(w) + _sps.norm.pdf(w) * (1.0 / w - 1.0 / u)
        # The saddlepoint is the mean: the formula's limit.
        at_mean = 0.5 + k3 / (6.0 * math.sqrt(2.0 * math.pi) * k2**1.5)
    value = np.where(np.abs(s) * np.sqrt(k2) < 1e-7, at_mean, tail)
    return np.asarray(np.clip(value, 0.0, 1.0), dtype=np.float64)


def weighted_mean_cdfs(x: FloatArray, counts: FloatArray, extra: float,
                       t: FloatArray | float) -> FloatArray:
    """`_weighted_mean_cdf` for many samples at once (what a simulation of the gate needs): the
    values ``x`` (A,) shared by every row or one row of values per sample (R, A), each row of
    ``counts`` (R, A) one sample's multiplicities (0: the value is absent), ``t`` one point per
    row (or one for all). The saddlepoints are found on all
    rows together by Newton's method safeguarded by bisection (K' increases between its poles),
    to the same precision as the gate's root finder."""
    counts = np.asarray(counts, dtype=np.float64)
    rows = counts.shape[0]
    at = np.broadcast_to(np.asarray(t, dtype=np.float64), (rows,))
    values = np.broadcast_to(np.asarray(x, dtype=np.float64), counts.shape)
    c = np.concatenate([values - at[:, None], (extra - at)[:, None]], axis=1)
    shape = np.concatenate([counts, np.ones((rows, 1))], axis=1)
    live = (shape > 0.0) & (c != 0.0)
    shape = np.where(live, shape, 0.0)
    low_c = np.where(live, c, np.inf).min(axis=1)
    high_c = np.where(live, c, -np.inf).max(axis=1)
    out = np.full(rows, np.nan)
    out[~(low_c < 0.0)] = 0.0  # every term >= 0 (or none): the weighted mean is >= t
    out[~(high_c > 0.0)] = 1.0  # every term <= 0
    todo = np.flatnonzero(np.isnan(out))
    if todo.size:
        c_t, shape_t = c[todo], shape[todo]
        squeeze = 1.0 - 1e-12
        lo, hi = squeeze / low_c[todo], squeeze / high_c[todo]
        s = np.zeros(todo.size)  # K'(0) is the mean term's sign: start at the mean, inside
        s = np.where((s <= lo) | (s >= hi), (lo + hi) / 2.0, s)
        for _ in range(300):  # Newton's steps on K', bisection wherever a step leaves the bracket
            one_minus = 1.0 - s[:, None] * c_t
            slope = np.sum(shape_t * c_t / one_minus, axis=1)
            lo, hi = np.where(slope < 0.0, s, lo), np.where(slope < 0.0, hi, s)
            step = s - slope / np.sum(shape_t * c_t * c_t / one_minus**2, axis=1)
            nxt = np.where((step > lo) & (step < hi), step, (lo + hi) / 2.0)
            if np.all(np.abs(nxt - s) <= 1e-15 * np.abs(nxt) + 1e-300):
                s = nxt
                break
            s = nxt
        out[todo] = _saddlepoint_cdf(s, c_t, shape_t)
    return out


def _weighted_mean_quantile(x: FloatArray, k: FloatArray, extra: float, q: float) -> float:
    """The ``q`` quantile of the Dirichlet-weighted mean (see `_weighted_mean_cdf`)."""
    low = min(float(x.min()), extra)
    high = max(float(x.max()), extra)
    if high - low <= 0.0:
        return low

    def gap(t: float) -> float:
        return _weighted_mean_cdf(x, k, extra, t) - q

    if gap(low) >= 0.0:
        return low
    if gap(high) <= 0.0:
        return high
    return float(_opt.brentq(gap, low, high, xtol=1e-12, rtol=1e-12, maxiter=200))


# --------------------------------------------------------------------------- one source


@dataclass(frozen=True, eq=False)
class BoundedMean:
    """The mean of N independent values in [``low``, ``high``] with Gaffke's bound (module
    docstring); 0/1 values (every value at an end of the range) get Clopper-Pearson's exact bound
    and the exact binomial test, which is what Gaffke's bound is on such values.

    Build it with `bounded_mean`. ``n`` is the number of values (instances).
    """

    estimate: float
    n: int
    low: float
    high: float
    values: FloatArray = field(repr=False)
    """The distinct values, rescaled to [0, 1]."""
    counts: FloatArray = field(repr=False)
    method: str = GAFFKE

    @property
    def binary(self) -> bool:
        return bool(np.isin(self.values, (0.0, 1.0)).all())

    @property
    def successes(self) -> int:
        """Values at the top of the range (meaningful when `binary`)."""
        return int(round(float(self.counts[self.values == 1.0].sum())))

    def _to_unit(self, value: float) -> float:
        return (value - self.low) / (self.high - self.low)

    def _from_unit(self, value: float) -> float:
        return self.low + (self.high - self.low) * value

    def lower(self, confidence: float) -> float:
        """One-sided lower bound at ``confidence``."""
        alpha = 1.0 - _open_unit(confidence, "confidence")
        if self.binary:
            k = self.successes
            unit = float(_sps.beta.ppf(alpha, k, self.n - k + 1)) if k > 0 else 0.0
        else:
            unit = _weighted_mean_quantile(self.values, self.counts, 0.0, alpha)
        return self._from_unit(unit)

    def upper(self, confidence: float) -> float:
        """One-sided upper bound at ``confidence``."""
        conf = _open_unit(confidence, "confidence")
        if self.binary:
            k = self.successes
            unit = float(_sps.beta.ppf(conf, k + 1, self.n - k)) if k < self.n else 1.0
        else:
            unit = _weighted_mean_quantile(self.values, self.counts, 1.0, conf)
        return self._from_unit(unit)

    def interval(self, confidence: float) -> tuple[float, float]:
        """Two-sided interval at ``confidence`` (each end a one-sided bound at (1 + c) / 2)."""
        side = 0.5 + _open_unit(confidence, "confidence") / 2.0
        return self.lower(side), self.upper(side)

    def p_below(self, limit: float) -> float:
        """p-value of "the true mean is >= limit": P(upper weighted mean >= limit), so that
        ``upper(1 - p) == limit``; the binomial P(X <= k | limit) on 0/1 values."""
        ell = self._to_unit(float(limit))
        if ell <= 0.0:
            return 1.0
        if self.binary:
            return float(_sps.binom.cdf(self.successes, self.n, min(ell, 1.0)))
        if ell >= 1.0:
            return 1.0 if (self.values >= 1.0).all() else 0.0
        return 1.0 - _weighted_mean_cdf(self.values, self.counts, 1.0, ell)

    def p_above(self, limit: float) -> float:
        """p-value of "the true mean is <= limit": P(lower weighted mean <= limit), so that
        ``lower(1 - p) == limit``; the binomial P(X >= k | limit) on 0/1 values."""
        ell = self._to_unit(float(limit))
        if ell >= 1.0:
            return 1.0
        if self.binary:
            return float(_sps.binom.sf(self.successes - 1, self.n, max(ell, 0.0)))
        if ell <= 0.0:
            return 1.0 if (self.values <= 0.0).all() else 0.0
        return _weighted_mean_cdf(self.values, self.counts, 0.0, ell)


def bounded_mean(
    values: ArrayLike, *, low: float = 0.0, high: float = 1.0, of: str = "values"
) -> BoundedMean:
    """`BoundedMean` of ``values``: N independent values in [``low``, ``high``] (e.g. per-instance
    means of [0, 1] scores; per-instance mean differences with ``low=-1``). ``of`` names the
    values in the method string ("... on the 40 per-instance means")."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("bounded_mean needs at least one value")
    if not (math.isfinite(low) and math.isfinite(high) and high > low):
        raise ValueError(f"the range must be finite with low < high, got [{low}, {high}]")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite")
    tolerance = 1e-9 * (high - low)
    if x.min() < low - tolerance or x.max() > high + tolerance:
        raise ValueError(f"values must lie in [{low:g}, {high:g}]")
    unit = np.clip((x - low) / (high - low), 0.0, 1.0)
    # Round-off near the ends (a mean of scores that should be 1.0) is snapped, so 0/1 data stay
    # 0/1 and take the exact path.
    unit[unit < 1e-12] = 0.0
    unit[unit > 1.0 - 1e-12] = 1.0
    distinct, counts = np.unique(unit, return_counts=True)
    core = CLOPPER_PEARSON if np.isin(distinct, (0.0, 1.0)).all() else GAFFKE
    method = f"{core} on the {x.size} {of}"
    return BoundedMean(float(np.clip(x.mean(), low, high)), int(x.size), float(low), float(high),
                       distinct, counts.astype(np.float64), method)


def binomial_bound(successes: int, n: int, *, of: str = "independent trials") -> BoundedMean:
    """``successes`` out of ``n`` independent 0/1 outcomes, bounded exactly (Clopper-Pearson,
    with the binomial test as p-value): the one-sided error is at most its level for every true
    rate and every n. Wilson's score bound, whose interval the reports show, is not: near 0 and 1
    at small counts its one-sided error exceeds its level (a compliant rate of 0.99 at N=100
    failed on evidence 7.9% of the time where 5% was the level; up to 18% for rates of 0.9-0.99
    at N=8-20: ``benchmarks/bench_checklist_gate.py --exact-only`` sums the binomial for both)."""
    n_i = _count(n, "n", minimum=1)
    k_i = _count(successes, "successes", minimum=0)
    if k_i > n_i:
        raise ValueError(f"successes must be in [0, n] = [0, {n_i}], got {successes!r}")
    values = np.array([0.0, 1.0])
    counts = np.array([float(n_i - k_i), float(k_i)])
    keep = counts > 0
    return BoundedMean(k_i / n_i, n_i, 0.0, 1.0, values[keep], counts[keep],
                       f"{CLOPPER_PEARSON} on the {n_i} {of}")


# --------------------------------------------------------------------------- two sources


@dataclass(frozen=True, eq=False)
class TwoSourceMean:
    """A mean over instances *and* resamplings that share their variants (fixed mode over a space
    sampled rather than enumerated): two sources of error, bounded separately at half the error
    rate each and added (Bonferroni, valid whatever their dependence).

    ``instances``: the bounded-mean bound of the per-instance means; it bounds the mean over the
    resamplings actually drawn. ``spread``: the standard error of the per-resampling means (they
    are independent draws of variants), with Student's t on ``df`` = n - 1 degrees of freedom; it
    bounds how far the drawn variants' mean lies from the space's. With a single resampling the
    variants say nothing about the space: the bounds are the ends of the range.
    """

    instances: BoundedMean
    spread: float
    df: int
    rows: BoundedMean | None = None
    """Set: the resampling part is the bounded-mean bound of the n per-resampling means (its
    margin, mean - bound, at alpha/2) instead of t. t on a handful of resamplings cannot see a
    variant effect that none of them drew (a regression on a third of the formats is missed by 5
    resamplings 13% of the time); the bounded bound can, at the price of width."""

    @property
    def estimate(self) -> float:
        return self.instances.estimate

    @property
    def method(self) -> str:
        if self.rows is not None:
            part = f"{self.rows.method} (its margin)"
        else:
            part = f"t({self.df}) on the {self.df + 1} resamplings' means"
        return (f"{self.instances.method} at alpha/2, plus {part} at alpha/2 (two-way: fixed "
                "mode sampled its variants from the space)")

    def _margin(self, alpha: float, side: str) -> float:
        if self.df < 1:
            return math.inf
        if self.rows is not None:
            conf = 1.0 - alpha / 2.0
            if side == "lower":
                return self.rows.estimate - self.rows.lower(conf)
            return self.rows.upper(conf) - self.rows.estimate
        return float(_sps.t.ppf(1.0 - alpha / 2.0, self.df)) * self.spread

    def lower(self, confidence: float) -> float:
        alpha = 1.0 - _open_unit(confidence, "confidence")
        bound = self.instances.lower(1.0 - alpha / 2.0) - self._margin(alpha, "lower")
        return max(self.instances.low, bound)

    def upper(self, confidence: float) -> float:
        alpha = 1.0 - _open_unit(confidence, "confidence")
        bound = self.instances.upper(1.0 - alpha / 2.0) + self._margin(alpha, "upper")
        return min(self.instances.high, bound)

    def interval(self, confidence: float) -> tuple[float, float]:
        side = 0.5 + _open_unit(confidence, "confidence") / 2.0
        return self.lower(side), self.upper(side)

    def p_below(self, limit: float) -> float:
        """The smallest alpha at which ``upper(1 - alpha) < limit`` (by bisection: the bound
        moves monotonically with alpha), so ``upper(1 - p) == limit``."""
        return _invert(lambda alpha: self.upper(1.0 - alpha) < limit)

    def p_above(self, limit: float) -> float:
        return _invert(lambda alpha: self.lower(1.0 - alpha) > limit)


def _invert(rejects: Callable[[float], bool]) -> float:
    """inf{alpha in (0, 1): rejects(alpha)}, 1.0 when no alpha rejects (``rejects`` is monotone:
    once it holds at some alpha it holds at every larger one)."""
    top = 1.0 - 1e-12
    if not rejects(top):
        return 1.0
    bottom = 1e-15
    if rejects(bottom):
        return 0.0
    for _ in range(60):
        mid = math.sqrt(bottom * top) if top / bottom > 10.0 else (bottom + top) / 2.0
        if rejects(mid):
            top = mid
        else:
            bottom = mid
    return top


def mean_bound(scores: ArrayLike, *, two_way: bool = False) -> BoundedMean | TwoSourceMean:
    """The bound of the mean of a (resamplings, instances) matrix of [0, 1] scores.

    Per-instance means are independent bounded values (ilr: each instance draws its own variants;
    fixed mode over an enumerated space: every instance meets the same, whole space), so their
    mean gets `bounded_mean`. ``two_way=True``: the plan sampled its resamplings' variants from a
    larger space and every instance shares them (fixed mode): `TwoSourceMean`.
    """
    s = _score_matrix(scores)
    n = s.shape[0]
    instances = bounded_mean(s.mean(axis=0), of="per-instance means (clustered by instance)")
    if not two_way:
        return instances
    rows = s.mean(axis=1)
    spread = float(np.std(rows, ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    return TwoSourceMean(instances, spread, n - 1)
