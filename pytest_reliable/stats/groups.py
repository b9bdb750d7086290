"""Groups of cells compared within instance (the ranges of SPEC section 11): paired group
estimates, their bounds, the pairs behind a spread, the groups that could be the worst, and the
spread a prompt-insensitive model would show (the noise floor).

The estimator is least squares with instance fixed effects (the "within" estimator): every cell's
score is modelled as its instance's level plus its group's effect, and only differences between
cells of one instance inform the effects, so instance difficulty cancels. A group's estimate is
its effect put back on the score scale: the overall mean plus the effect minus the cell-weighted
mean effect. Its expectation is the group's score in every design the plugin makes:

- ilr (each cell draws its own variant): the other cells of an instance are independent draws
  from the space, so within-instance contrasts are unbiased for the group's effect, whatever the
  number of cells. (Comparing a cell with its instance's mean *including itself*, as this module
  did before, shrinks every effect toward 0 by (n - 1) / n.)
- fixed (one variant per resampling, every instance under it): the groups are whole resamplings,
  so the estimate is exactly the mean of the group's cells.

Standard errors are cluster-robust by instance (per-instance influence values, Liang-Zeger).
When a fixed-mode plan sampled its variants from a larger space (``resamplings_sampled``), which
variants a group got is a second source of error: a jackknife over resamplings adds it.

Bounds (`GroupEffects.lower` / ``upper``) are Student-t bounds with two guards, each of which can
only widen the bound (the more conservative of valid bounds stays valid): a Cornish-Fisher (Hall
1992) correction for the skewness of the influence values (a group near 0 or 1 has skewed
instance contributions: rare failing instances), and, for a group's score, Wilson's score bound on
the effective sample size p(1 - p) / se^2 (between the group's instances and its cells; its
instances when the cells are all 1 or all 0), which keeps a group whose cells were all right
from claiming certainty. ``benchmarks/bench_gate_errors.py`` measures the resulting error rates.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special as _special

from pytest_reliable.stats._validation import ArrayLike, FloatArray, _count, _score_matrix

PAIRED_METHOD = ("paired within instance (least squares with instance fixed effects), clustered by "
                 "instance")
LEVEL_METHOD = PAIRED_METHOD + "; t bound, skewness-corrected, guarded by Wilson on effective n"
TWO_WAY = "; plus sampled resamplings (jackknife), Satterthwaite df"
_TINY = 1e-12


# -- the least-squares fit, vectorised over a leading axis of independent fits ------------------
def tallies(scores: FloatArray, labels: npt.NDArray[np.int64], n_groups: int
            ) -> tuple[FloatArray, FloatArray]:
    """Per group and instance, the number of cells and the sum of their scores.

    ``scores`` and ``labels`` are (..., n, N) arrays (resamplings x instances, any leading axes);
    a label -1 leaves its cell out. Returns ``counts, sums`` of shape (..., G, N).
    """
    tally = Tally(labels, n_groups)
    return tally.counts, tally.sums(scores)


class Tally:
    """The bookkeeping of `tallies` for one labelling, reusable for many score arrays of its
    shape (the plan's simulation scores many candidate models on the same labels)."""

    def __init__(self, labels: npt.NDArray[np.int64], n_groups: int) -> None:
        lead = labels.shape[:-2]
        n_inst = labels.shape[-1]
        flat_lead = int(np.prod(lead, dtype=np.int64))
        lab = labels.reshape(flat_lead, -1, n_inst)
        self.mask = (lab >= 0).ravel()
        self.index = ((np.arange(flat_lead)[:, None, None] * n_groups + lab) * n_inst
                      + np.arange(n_inst)[None, None, :]).ravel()[self.mask]
        self.shape = (*lead, n_groups, n_inst)
        self.size = flat_lead * n_groups * n_inst
        self.counts = np.bincount(self.index, minlength=self.size).astype(
            np.float64).reshape(self.shape)

    def sums(self, scores: FloatArray) -> FloatArray:
        weights = np.ascontiguousarray(scores, dtype=np.float64).ravel()[self.mask]
        return np.bincount(self.index, weights=weights, minlength=self.size).reshape(self.shape)


@dataclass(frozen=True)
class Fit:
    """The within-instance least-squares fit of (..., G, N) tallies (see `fit`)."""

    estimates: FloatArray
    """(..., G): each group's score (NaN for a group without cells)."""
    psi: FloatArray
    """(..., G, N): per-instance influence values, estimate - truth ~ mean over instances."""
    active: FloatArray
    """(...,): instances with at least one labelled cell."""
    projector: FloatArray
    """(..., G, G): the pseudo-inverse of the within-instance information matrix."""
    null: FloatArray
    """(..., G, G): the projector on what the cells cannot tell apart (I - H+ H): a contrast c
    of the effects is estimated only when null @ c is 0 (no instance links the groups of a
    disconnected design, e.g. a few instances with two cells each)."""


_JACKKNIFE_CHUNK = 4_000_000
"""Entries of the (..., instances, G, G) leave-one-out systems solved at once."""


def _solve(counts: FloatArray, sums: FloatArray, info: FloatArray, b: FloatArray
           ) -> tuple[FloatArray, FloatArray]:
    """The groups' estimates ybar + beta - pi' beta of one system (``info`` beta = ``b``, tallies
    summed over instances), and the pseudo-inverse used. Leading axes broadcast."""
    per_group = counts.sum(axis=-1)
    total = per_group.sum(axis=-1)
    safe_total = np.where(total > 0, total, 1.0)
    ybar = sums.sum(axis=(-2, -1)) / safe_total
    projector = np.linalg.pinv(info, rcond=1e-10, hermitian=True)
    beta = np.einsum("...kj,...j->...k", projector, b)
    share = per_group / safe_total[..., None]
    anchor = np.einsum("...k,...k->...", share, beta)
    estimates = np.asarray(ybar[..., None] + beta - anchor[..., None], dtype=np.float64)
    return estimates, np.asarray(projector, dtype=np.float64)


def fit(counts: FloatArray, sums: FloatArray, *, influence: bool = True) -> Fit:
    """Least squares with instance fixed effects on tallies (`tallies`), with influence values.

    Model: score = instance level + group effect. With c_i the counts and S_i the sums of
    instance i (length-G vectors), n_i = sum(c_i) and m_i its mean, the normal equations are
    H beta = b with H = sum_i H_i, H_i = diag(c_i) - c_i c_i' / n_i, and b = sum_i (S_i - c_i m_i);
    the effects are identified up to a constant, fixed by the pseudo-inverse. A group's estimate
    is ybar + beta_g - pi' beta (pi: the groups' shares of the cells), which is invariant to
    that constant.

    Influence values are the jackknife's (leave one instance out, refit exactly: H - H_i,
    b - b_i, the totals less the instance's): psi_i = (N - 1)(estimate - estimate without i),
    centred. Unlike the linearised (sandwich) ones they see leverage: a contrast that a single
    instance carries fits that instance exactly (residual 0), and only leaving it out shows how
    little the contrast rests on. ``influence=False`` skips them (psi is then zeros).
    """
    n_groups = counts.shape[-2]
    n_i = counts.sum(axis=-2)
    active = n_i > 0
    n_active = active.sum(axis=-1).astype(np.float64)
    safe_n = np.where(active, n_i, 1.0)
    m_i = sums.sum(axis=-2) / safe_n
    b_i = sums - counts * m_i[..., None, :]  # (..., G, N)
    weighted = counts / safe_n[..., None, :]
    info = (counts.sum(axis=-1)[..., :, None] * np.eye(n_groups)
            - np.einsum("...ki,...ji->...kj", weighted, counts))
    estimates, projector = _solve(counts, sums, info, b_i.sum(axis=-1))
    estimates = np.where(counts.sum(axis=-1) > 0, estimates, np.nan)
    psi = np.zeros(counts.shape)
    if influence:
        psi = _jackknife(counts, sums, weighted, info, b_i, estimates, active, n_active)
    null = np.eye(n_groups) - np.einsum("...kj,...jl->...kl", projector, info)
    return Fit(estimates, psi, n_active, projector, null)


def _jackknife(counts: FloatArray, sums: FloatArray, weighted: FloatArray, info: FloatArray,
               b_i: FloatArray, estimates: FloatArray, active: npt.NDArray[np.bool_],
               n_active: FloatArray) -> FloatArray:
    """(..., G, N): centred jackknife influence values of `fit`'s estimates."""
    n_groups, n_inst = counts.shape[-2], counts.shape[-1]
    lead = counts.shape[:-2]
    rows = max(1, int(np.prod(lead, dtype=np.int64)))
    chunk = max(1, _JACKKNIFE_CHUNK // (rows * n_groups * n_groups))
    left_out = np.empty((*lead, n_inst, n_groups))
    for start in range(0, n_inst, chunk):
        part = slice(start, min(n_inst, start + chunk))
        c = np.moveaxis(counts[..., part], -1, -2)  # (..., k, G)
        w = np.moveaxis(weighted[..., part], -1, -2)
        own = c[..., :, None] * np.eye(n_groups) - w[..., :, None] * c[..., None, :]
        rest_counts = counts.sum(axis=-1)[..., None, :] - c  # (..., k, G)
        rest_sums = sums.sum(axis=-1)[..., None, :] - np.moveaxis(sums[..., part], -1, -2)
        rest_b = b_i.sum(axis=-1)[..., None, :] - np.moveaxis(b_i[..., part], -1, -2)
        # _solve on (..., k) systems: tallies with one instance axis of length 1 (its totals).
        found, _ = _solve(rest_counts[..., None], rest_sums[..., None],
                          info[..., None, :, :] - own, rest_b)
        left_out[..., part, :] = found
    scale = np.maximum(n_active - 1.0, 0.0)[..., None, None]
    psi = scale * (np.nan_to_num(estimates)[..., None, :] - left_out)  # (..., N, G)
    psi = np.where(active[..., :, None] & np.isfinite(psi), psi, 0.0)
    mean = psi.sum(axis=-2, keepdims=True) / np.maximum(n_active, 1.0)[..., None, None]
    psi = np.where(active[..., :, None], psi - mean, 0.0)
    return np.asarray(np.moveaxis(psi, -1, -2), dtype=np.float64)


# -- bounds on arrays (shared by GroupEffects and the plan's simulation) -------------------------
def covariance(psi: FloatArray, n_active: FloatArray) -> FloatArray:
    """(..., G, G): the cluster-robust covariance of the estimates, sum_i psi psi' / (N (N-1))."""
    denom = n_active * np.maximum(n_active - 1.0, 1.0)
    return np.asarray(np.einsum("...ki,...ji->...kj", psi, psi) / denom[..., None, None],
                      dtype=np.float64)


def skewness(psi: FloatArray, n_active: FloatArray) -> FloatArray:
    """(..., G): the skewness of the influence values (0 where they do not vary)."""
    n = np.maximum(n_active, 1.0)[..., None]
    square = psi * psi
    m2 = square.sum(axis=-1) / n
    m3 = (square * psi).sum(axis=-1) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = m3 / m2**1.5
    return np.where(m2 > _TINY, gamma, 0.0)


def effective_clusters(psi: FloatArray) -> FloatArray:
    """(..., G): the effective number of instances behind each estimate, (sum psi^2)^2 /
    sum psi^4 (Carter, Schnepel and Steigerwald 2017): N when every instance weighs the same,
    about k when k instances carry the estimate (a pair told apart by two instances, a group
    near 1 whose few failing instances carry its variance). The t bounds use it, less one, as
    their degrees of freedom: a clustered se from few effective clusters is itself noisy."""
    square = psi * psi
    s2 = square.sum(axis=-1)
    s4 = (square * square).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        found = s2 * s2 / s4
    return np.where(s4 > 0.0, found, float(psi.shape[-1]))


def _t(confidence: FloatArray | float, df: FloatArray | float) -> FloatArray:
    """Student's t quantile (scipy's ufunc: the gate asks for thousands of them)."""
    return np.asarray(_special.stdtrit(np.maximum(df, 1.0), confidence), dtype=np.float64)


def _widened(t: FloatArray, skew: FloatArray, n: FloatArray | float) -> FloatArray:
    """The quantile ``t`` widened by Hall's (1992) Cornish-Fisher term for a skewness ``skew``
    of the values on the side the bound guards (the other sign never narrows it)."""
    widen = np.maximum(skew, 0.0) * (2.0 * t * t + 1.0) / (6.0 * np.sqrt(np.maximum(n, 1.0)))
    return np.asarray(t + widen, dtype=np.float64)


def _wilson_side(p: FloatArray, n_eff: FloatArray, z: FloatArray, side: int) -> FloatArray:
    z2 = z * z
    denom = 1.0 + z2 / n_eff
    centre = (p + z2 / (2.0 * n_eff)) / denom
    half = z * np.sqrt(np.maximum(p * (1.0 - p), 0.0) / n_eff + z2 / (4.0 * n_eff**2)) / denom
    return np.asarray(centre + side * half, dtype=np.float64)


def level_bound(estimate: FloatArray, se: FloatArray, skew: FloatArray, df: FloatArray,
                n: FloatArray, cells: FloatArray, instances: FloatArray,
                confidence: FloatArray | float, side: int) -> FloatArray:
    """One-sided bound on a group's score (``side`` -1: lower, +1: upper), in [0, 1].

    The more conservative of the skewness-corrected t bound and Wilson's bound on the effective
    sample size p(1 - p) / se^2 (clipped to [instances, cells]; the group's instances when p is 0
    or 1 or se is 0). ``skew`` is the influence values' skewness (the lower side guards against
    negative skew), ``n`` the instances the influence values average over.
    """
    z = _t(confidence, df)
    with np.errstate(invalid="ignore"):
        t_bound = estimate + side * _widened(z, side * skew, n) * se
    t_bound = np.where(np.isfinite(se), t_bound, side * np.inf)  # unidentified: no evidence
    p = np.clip(estimate, 0.0, 1.0)
    var = p * (1.0 - p)
    degenerate = (var <= _TINY) | (se <= _TINY)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(degenerate, instances, var / np.maximum(se, _TINY) ** 2)
    # At least the group's instances: a larger se than that implies is the t bound's to show
    # (it is the wider one then); the guard is for an se that a run of all-right (or all-wrong)
    # cells made too small.
    n_eff = np.clip(n_eff, np.maximum(instances, 1.0), np.maximum(cells, 1.0))
    wilson = _wilson_side(p, n_eff, z, side)
    bound = np.minimum(t_bound, wilson) if side < 0 else np.maximum(t_bound, wilson)
    return np.asarray(np.clip(bound, 0.0, 1.0), dtype=np.float64)


def spread_upper(diff: FloatArray, se: FloatArray, skew: FloatArray, df: FloatArray,
                 n: FloatArray, confidence: FloatArray | float,
                 shared: FloatArray | None = None) -> FloatArray:
    """One-sided upper bound on |difference| of a pair (``skew``: of the difference's influence
    values). |d| + q se with q skewness-corrected toward the observed sign. A pair whose se is
    0 (its instances all agreed) gets the exact bound for differences in [-1, 1] seen ``shared``
    times (instances holding both groups): |d| <= P(an instance differs), and no instance of
    ``shared`` differing bounds that by 1 - alpha^(1/shared) (Clopper-Pearson)."""
    size = np.abs(diff)
    toward = np.where(diff >= 0, skew, -skew)
    q = _widened(_t(confidence, df), toward, n)
    seen = np.maximum(n if shared is None else shared, 0.0)
    with np.errstate(divide="ignore"):
        never = 1.0 - np.power(1.0 - np.asarray(confidence, dtype=np.float64),
                               1.0 / np.maximum(seen, 1e-300))
    return np.asarray(np.where(se <= _TINY, np.maximum(size, never), size + q * se),
                      dtype=np.float64)


def _p_by_bisection(bound_at: Callable[[FloatArray], FloatArray], limit: float,
                    shape: tuple[int, ...], side: int) -> FloatArray:
    """The smallest alpha at which the ``side`` bound at 1 - alpha lies beyond ``limit`` (side
    +1: the upper bound falls below it; -1: the lower bound rises above it); 1 when even the
    bound at confidence 1/2 does not. Bounds widen with confidence, so this inverts them."""

    def beyond(bound: FloatArray) -> npt.NDArray[np.bool_]:
        return np.asarray(bound < limit if side > 0 else bound > limit)

    lo = np.full(shape, 1e-12)
    hi = np.full(shape, 0.5)
    at_half = beyond(bound_at(np.full(shape, 0.5)))
    for _ in range(48):
        mid = np.sqrt(lo * hi)
        ok = beyond(bound_at(1.0 - mid))
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.asarray(np.where(at_half, hi, 1.0), dtype=np.float64)


# -- one labelling's estimates ------------------------------------------------------------------
@dataclass(frozen=True)
class GroupEffects:
    """Paired group estimates of one labelling of the cells (see the module docstring)."""

    estimates: FloatArray
    """(G,): each group's score, paired within instance (NaN: no cells)."""
    observed: FloatArray
    """(G,): the plain mean of the group's cells (NaN: no cells)."""
    psi: FloatArray
    """(G, N): per-instance influence values of the estimates."""
    cells: npt.NDArray[np.int64]
    instances: npt.NDArray[np.int64]
    n_active: float
    """Instances with at least one cell in some group."""
    row_covariance: FloatArray | None = None
    """(G, G): the covariance that sampled resamplings add (fixed mode), None when none do."""
    resamplings: int = 0
    null: FloatArray | None = None
    """(G, G): `Fit.null` (None: every contrast is estimated)."""
    shared: npt.NDArray[np.int64] | None = None
    """(G, G): instances holding cells of both groups (None: every instance)."""
    single_draw: npt.NDArray[np.bool_] | None = None
    """(G,): groups whose score averages over variants (a dimension value: over the other
    dimensions' values) whose sampled resamplings cannot show how the unseen variants score, so
    they have no bound (None: none): a group a single resampling drew, or every group when some
    listed value of a dimension it averages over was drawn by fewer than two resamplings
    (`paired_group_effects`' ``averages_over``)."""

    @property
    def n_groups(self) -> int:
        return int(self.estimates.size)

    @property
    def live(self) -> npt.NDArray[np.intp]:
        return np.flatnonzero(self.cells > 0)

    # Derived arrays, computed once (a gate asks for bounds at many levels).
    @functools.cached_property
    def _instance_covariance(self) -> FloatArray:
        return covariance(self.psi, np.asarray(self.n_active))

    @functools.cached_property
    def _covariance(self) -> FloatArray:
        cov = self._instance_covariance
        return cov if self.row_covariance is None else cov + self.row_covariance

    @functools.cached_property
    def _se(self) -> FloatArray:
        se = np.sqrt(np.maximum(np.diag(self._covariance), 0.0))
        return np.asarray(np.where(self.identified(), se, np.inf), dtype=np.float64)

    def identified(self) -> npt.NDArray[np.bool_]:
        """(G,): whether each group's score is estimated (its level is tied to the others by
        some instance; `Fit.null`). An unidentified group has an infinite se: no evidence."""
        known = (np.ones(self.n_groups, dtype=bool) if self.single_draw is None
                 else ~self.single_draw)
        if self.null is None:
            return known
        cells = np.where(self.cells > 0, self.cells, 0).astype(np.float64)
        share = cells / max(cells.sum(), 1.0)
        contrast = np.eye(self.n_groups) - share[None, :]
        return np.asarray((np.abs(contrast @ self.null.T).max(axis=1) < 1e-8) & known)

    @functools.cached_property
    def _df(self) -> FloatArray:
        inst = np.clip(np.minimum(effective_clusters(self.psi), self.n_active) - 1.0, 1.0, None)
        if self.row_covariance is None:
            return inst
        v_i = np.diag(self._instance_covariance)
        v_r = np.maximum(np.diag(self.row_covariance), 0.0)
        rows = max(self.resamplings - 1, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            df = (v_i + v_r) ** 2 / (v_i**2 / inst + v_r**2 / rows)
        return np.where(np.isfinite(df), np.clip(df, 1.0, inst), inst)

    @functools.cached_property
    def _skew(self) -> FloatArray:
        return skewness(self.psi, np.asarray(self.n_active))

    def covariance(self) -> FloatArray:
        """(G, G): the covariance of the estimates (instances, plus sampled resamplings)."""
        return np.array(self._covariance, dtype=np.float64)

    def se(self) -> FloatArray:
        return np.array(self._se, dtype=np.float64)

    def df(self) -> FloatArray:
        """Per group: its effective instances less one (`effective_clusters`), combined by
        Satterthwaite's rule with the resamplings' n - 1 when sampled resamplings add error."""
        return np.array(self._df, dtype=np.float64)

    def skew(self) -> FloatArray:
        """Per group: the skewness of its influence values."""
        return np.array(self._skew, dtype=np.float64)

    def level_bounds(self, confidence: FloatArray | float, side: int) -> FloatArray:
        """(G,): one-sided bounds on the groups' scores at ``confidence`` (a number or one per
        group), ``side`` -1 lower, +1 upper (`level_bound`)."""
        return level_bound(self.estimates, self._se, self._skew, self._df,
                           np.asarray(self.n_active), self.cells.astype(np.float64),
                           self.instances.astype(np.float64), confidence, side)

    def lower(self, confidence: float) -> FloatArray:
        """(G,): one-sided lower bounds on the groups' scores (NaN: no cells)."""
        return self.level_bounds(confidence, -1)

    def upper(self, confidence: float) -> FloatArray:
        return self.level_bounds(confidence, +1)

    def interval(self, confidence: float) -> tuple[FloatArray, FloatArray]:
        two = 0.5 + confidence / 2.0
        return self.level_bounds(two, -1), self.level_bounds(two, +1)

    def p_below(self, limit: float) -> FloatArray:
        """(G,): p-value of "the group's score is >= limit" (small: evidence it is below); the
        inverse of `upper`: upper(1 - p) == limit."""
        return _p_by_bisection(lambda c: self.level_bounds(c, +1), limit,
                               (self.n_groups,), +1)

    def p_above(self, limit: float) -> FloatArray:
        """(G,): p-value of "the group's score is <= limit" (small: evidence it is above)."""
        return _p_by_bisection(lambda c: self.level_bounds(c, -1), limit,
                               (self.n_groups,), -1)

    def pairs(self) -> Pairs:
        """Every pair (i < j) of populated groups of this labelling, paired within instance."""
        return pairs_of(self, self.live)

    def worst_candidates(self, confidence: float) -> npt.NDArray[np.intp]:
        """The groups that could be the worst (see `worst_candidates`)."""
        return worst_candidates([self], confidence)[0]


@dataclass(frozen=True)
class Pairs:
    """Pairwise paired differences estimate_i - estimate_j with their errors (arrays of pairs)."""

    i: npt.NDArray[np.intp]
    j: npt.NDArray[np.intp]
    diff: FloatArray
    se: FloatArray
    skew: FloatArray
    df: FloatArray
    n: FloatArray
    shared: FloatArray | None = None
    """Instances holding cells of both groups of each pair (None: ``n``)."""

    @property
    def size(self) -> int:
        return int(self.diff.size)

    def upper(self, confidence: float) -> FloatArray:
        """One-sided upper bounds on each pair's |difference| (see `spread_upper`)."""
        return spread_upper(self.diff, self.se, self.skew, self.df, self.n, confidence,
                            self.shared)

    def lower(self, confidences: FloatArray | float) -> FloatArray:
        """Lower bounds on |difference| at per-pair two-sided ``confidences`` (the favourable
        side under fail-on-evidence: the sign of a difference is chosen by the data), the t
        quantile widened for skewness away from 0."""
        toward = np.where(self.diff >= 0, -self.skew, self.skew)
        two_sided = 0.5 + np.asarray(confidences) / 2.0
        t = _widened(_t(two_sided, self.df), toward, self.n)
        size = np.abs(self.diff)
        # An se of 0: every instance holding both groups showed the same difference. For
        # differences in [-1, 1] the least favourable law puts the rest of its mass at the far
        # end: k equal observations rule out a mean below alpha^(1/k) (|d| + 1) - 1.
        seen = np.maximum(self.n if self.shared is None else self.shared, 0.0)
        with np.errstate(divide="ignore"):
            agreed = np.power(1.0 - two_sided, 1.0 / np.maximum(seen, 1e-300)) * (size + 1) - 1
        return np.asarray(np.where(self.se <= _TINY, agreed, size - t * self.se),
                          dtype=np.float64)

    def p_breach(self, limit: float) -> FloatArray:
        """p-values of "|difference| <= limit" (small: evidence that it is larger): the
        inverse of `lower`, lower(1 - p) == limit."""
        return _p_by_bisection(self.lower, limit, (self.size,), -1)


def pairs_of(effects: GroupEffects, groups: npt.NDArray[np.intp]) -> Pairs:
    a, b = np.triu_indices(groups.size, k=1)
    i, j = groups[a], groups[b]
    cov = effects.covariance()
    var = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    if effects.null is not None and i.size:
        contrast = np.zeros((i.size, effects.n_groups))
        contrast[np.arange(i.size), i] = 1.0
        contrast[np.arange(i.size), j] = -1.0
        unlinked = np.abs(contrast @ effects.null.T).max(axis=1) >= 1e-8
        var = np.where(unlinked, np.inf, var)
    if effects.single_draw is not None and i.size:
        var = np.where(effects.single_draw[i] | effects.single_draw[j], np.inf, var)
    d_psi = effects.psi[i] - effects.psi[j]
    df = np.clip(np.minimum(effective_clusters(d_psi), effects.n_active) - 1.0, 1.0, None)
    if effects.row_covariance is not None and i.size:
        df = np.minimum(df, np.minimum(effects.df()[i], effects.df()[j]))
    n = np.full(i.size, effects.n_active)
    shared = None if effects.shared is None else effects.shared[i, j].astype(np.float64)
    return Pairs(i, j, effects.estimates[i] - effects.estimates[j],
                 np.sqrt(np.maximum(var, 0.0)), skewness(d_psi, np.asarray(effects.n_active)),
                 df, n, shared)


def worst_candidates(labellings: list[GroupEffects], confidence: float
                     ) -> list[npt.NDArray[np.intp]]:
    """Per labelling, the groups that could be the worst of all labellings' groups at
    ``confidence``: a confidence set for the argmin of the groups' scores.

    Subset selection with the paired differences (Gupta's rule; Hsu's multiple comparisons with
    the best, here the worst): group g stays unless some group h is shown to score lower than g,
    i.e. estimate_g - estimate_h > q se(g - h) for some h, with q = t at 1 - alpha / (G - 1)
    (Bonferroni over the G - 1 comparisons of the true worst group). The true worst group is left
    out only if one of its G - 1 comparisons errs, so the set holds it with probability at least
    ``confidence``. Groups of different labellings (dimensions) are compared on the same cells.
    """
    live = [e.live for e in labellings]
    total = sum(g.size for g in live)
    if total == 0:
        return [np.zeros(0, dtype=np.intp) for _ in labellings]
    est = np.concatenate([e.estimates[g] for e, g in zip(labellings, live)])
    psi = np.concatenate([e.psi[g] for e, g in zip(labellings, live)])
    n_active = max(e.n_active for e in labellings)
    cov = covariance(psi, np.asarray(n_active))
    df = np.concatenate([e.df()[g] for e, g in zip(labellings, live)])
    offset = 0
    for e, g in zip(labellings, live):
        if e.row_covariance is not None:
            block = slice(offset, offset + g.size)
            cov[block, block] += e.row_covariance[np.ix_(g, g)]
        offset += g.size
    if total == 1:
        keep = np.ones(1, dtype=bool)
    else:
        alpha = 1.0 - confidence
        var = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2.0 * cov
        se = np.sqrt(np.maximum(var, 0.0))
        q = _t(1.0 - alpha / (total - 1), np.minimum(df[:, None], df[None, :]))
        beaten = (est[:, None] - est[None, :]) > q * se + _TINY
        np.fill_diagonal(beaten, False)
        keep = ~beaten.any(axis=1)
    out = []
    offset = 0
    for g in live:
        out.append(g[keep[offset:offset + g.size]])
        offset += g.size
    return out


def paired_group_effects(
    scores: ArrayLike, labels: ArrayLike, n_groups: int, *, offsets: ArrayLike | None = None,
    resamplings_sampled: bool = False, spans_variants: bool = False,
    averages_over: Sequence[tuple[ArrayLike, int]] = (),
) -> GroupEffects:
    """Paired group estimates (see `GroupEffects`) of a (resamplings, instances) score matrix.

    ``labels`` has the same shape and gives each cell's group in 0..n_groups-1, or -1 for a cell
    in no group (left out). ``offsets`` (same shape), when given, are known effects of another
    factor subtracted from each cell before the groups are compared (e.g. the correct option's
    displayed position, so formats do not absorb order effects). ``resamplings_sampled``: the
    resamplings' variants were sampled from a space larger than the plan could list (fixed
    mode), so a jackknife over resamplings adds the variant-sampling error. ``spans_variants``:
    a group's score averages over variants (dimension values; not formats), so with sampled
    resamplings a group drawn by a single resampling has no bound (`GroupEffects.single_draw`).
    ``averages_over``: with ``spans_variants``, the other dimensions the groups' scores average
    over, each as (its labels, shaped like ``scores``; its number of listed values). When some
    listed value of one of them was drawn by fewer than two sampled resamplings (never, or once),
    no group has a bound: every group's score averages over that value, and the resamplings show
    nothing (no draw) or no variation (one draw) of how the variants with it score. Without this
    a run that never drew a bad instruction bounds every other value's score by the good
    instructions' alone (fixed mode, N=1000, n=5: ``min_median`` passed at its limit 20% of the
    time, `benchmarks/bench_gate_errors.py` part B).
    """
    s = _score_matrix(scores)
    lab = np.asarray(labels, dtype=np.int64)
    if lab.shape != s.shape:
        raise ValueError(f"labels must have the shape of scores {s.shape}, got {lab.shape}")
    groups = _count(n_groups, "n_groups")
    if lab.size and (lab.max() >= groups or lab.min() < -1):
        raise ValueError(f"labels must be in -1..{groups - 1}")
    _, observed_sums = tallies(s, lab, groups)
    if offsets is not None:
        s = s - np.asarray(offsets, dtype=np.float64)
    counts, sums = tallies(s, lab, groups)
    result = fit(counts, sums)
    cells = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.where(cells > 0, observed_sums.sum(axis=1) / cells, np.nan)
    row_cov = None
    if resamplings_sampled and s.shape[0] > 1:
        row_cov = _resampling_jackknife(s, lab, groups, result.estimates)
    present = (counts > 0).astype(np.int64)
    single = None
    if row_cov is not None and spans_variants:
        single = (resamplings_drawing(lab, groups) < 2) & (cells > 0)
        if any((resamplings_drawing(np.asarray(other, dtype=np.int64), listed) < 2).any()
               for other, listed in averages_over):
            single = cells > 0
    return GroupEffects(
        estimates=result.estimates, observed=observed, psi=result.psi,
        cells=cells.astype(np.int64), instances=present.sum(axis=1),
        n_active=float(result.active), row_covariance=row_cov, resamplings=int(s.shape[0]),
        null=result.null, shared=present @ present.T, single_draw=single)


def resamplings_drawing(labels: npt.NDArray[np.int64], n_groups: int) -> npt.NDArray[np.int64]:
    """(n_groups,): per group, the resamplings (rows of ``labels``) with a cell in it."""
    return np.asarray((labels[:, :, None] == np.arange(n_groups)).any(axis=1).sum(axis=0),
                      dtype=np.int64)


def _resampling_jackknife(s: FloatArray, lab: npt.NDArray[np.int64], groups: int,
                          full: FloatArray) -> FloatArray:
    """(G, G): the jackknife covariance of the estimates over resamplings (leave one out).

    A group whose only resampling is left out has no estimate in that replicate; its entries use
    the replicates where it has one (a format run once adds no resampling error: nothing shows
    how its other draws, e.g. another option order, would have scored)."""
    n = s.shape[0]
    per_row_counts, per_row_sums = tallies(s[:, None, :], lab[:, None, :], groups)  # (n, G, N)
    counts = per_row_counts.sum(axis=0)[None] - per_row_counts
    sums = per_row_sums.sum(axis=0)[None] - per_row_sums
    reps = fit(counts, sums).estimates  # (n, G)
    finite = np.isfinite(reps)
    reps = np.where(finite, reps, 0.0)
    centre = reps.sum(axis=0) / np.maximum(finite.sum(axis=0), 1)
    dev = np.where(finite, reps - centre, 0.0)
    return np.asarray((n - 1) / n * dev.T @ dev, dtype=np.float64)


def noise_floor(
    scores: ArrayLike,
    labellings: list[tuple[ArrayLike, int]],
    *,
    permutations: int = 200,
    seed: int = 0,
    offsets: ArrayLike | None = None,
) -> float:
    """The mean spread of paired group estimates with group labels permuted within instance.

    What a prompt-insensitive model would show on these cells, under the same estimator: each
    permutation shuffles every instance's scores over its own cells (so labels are permuted
    within instance), the spread is the largest (max - min) over the labellings' populated
    groups, and the result is its mean over ``permutations`` seeded permutations. Permuting
    within instance keeps every instance's label counts, so the least-squares information matrix
    is the same for every permutation: only its right-hand side is recomputed.
    ``offsets``: as in `paired_group_effects`.
    """
    s = _score_matrix(scores)
    if offsets is not None:
        s = s - np.asarray(offsets, dtype=np.float64)
    reps = _count(permutations, "permutations", minimum=1)
    n, n_inst = s.shape
    dev = s - s.mean(axis=0)
    shuffled = np.random.default_rng(seed).permuted(
        np.broadcast_to(dev, (reps, n, n_inst)).copy(), axis=1
    )
    spread = np.zeros(reps)
    for labels, n_groups in labellings:
        lab = np.asarray(labels, dtype=np.int64)
        counts, sums = tallies(s, lab, n_groups)
        live = counts.sum(axis=1) > 0
        if live.sum() < 2:
            continue
        projector = fit(counts, sums, influence=False).projector
        _, perm_sums = tallies(shuffled, np.broadcast_to(lab, shuffled.shape), n_groups)
        # b = sum_i (S_i - c_i m_i), m_i the mean of instance i's labelled cells after the
        # shuffle (the same as before it when every cell of the instance is labelled).
        n_i = counts.sum(axis=0)
        m_i = perm_sums.sum(axis=1) / np.where(n_i > 0, n_i, 1.0)
        b = (perm_sums - counts[None] * m_i[:, None, :]).sum(axis=-1)
        beta = b @ projector.T
        effects = beta[:, live]
        spread = np.maximum(spread, effects.max(axis=1) - effects.min(axis=1))
    return float(spread.mean())

