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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as _sps

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
    lead = scores.shape[:-2]
    n_inst = scores.shape[-1]
    flat_lead = int(np.prod(lead, dtype=np.int64))
    s = scores.reshape(flat_lead, -1, n_inst)
    lab = labels.reshape(flat_lead, -1, n_inst)
    mask = lab >= 0
    index = ((np.arange(flat_lead)[:, None, None] * n_groups + lab) * n_inst
             + np.arange(n_inst)[None, None, :])[mask]
    size = flat_lead * n_groups * n_inst
    counts = np.bincount(index, minlength=size).astype(np.float64)
    sums = np.bincount(index, weights=s[mask], minlength=size)
    shape = (*lead, n_groups, n_inst)
    return counts.reshape(shape), sums.reshape(shape)


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


def fit(counts: FloatArray, sums: FloatArray) -> Fit:
    """Least squares with instance fixed effects on tallies (`tallies`), with influence values.

    Model: score = instance level + group effect. With c_i the counts and S_i the sums of
    instance i (length-G vectors), n_i = sum(c_i) and m_i its mean, the normal equations are
    H beta = b with H = sum_i (diag(c_i) - c_i c_i' / n_i) and b = sum_i (S_i - c_i m_i); the
    effects are identified up to a constant, fixed by the pseudo-inverse. A group's estimate is
    ybar + beta_g - pi' beta (pi: the groups' shares of the cells), which is invariant to that
    constant. Influence values linearise the estimate in each instance's contribution (the
    estimating equations for beta, the overall mean and the shares).
    """
    n_groups = counts.shape[-2]
    n_i = counts.sum(axis=-2)
    active = n_i > 0
    n_active = active.sum(axis=-1).astype(np.float64)
    safe_n = np.where(active, n_i, 1.0)
    m_i = sums.sum(axis=-2) / safe_n
    per_group = counts.sum(axis=-1)
    total = per_group.sum(axis=-1)
    safe_total = np.where(total > 0, total, 1.0)
    ybar = sums.sum(axis=(-2, -1)) / safe_total
    weighted = counts / safe_n[..., None, :]
    info = (per_group[..., :, None] * np.eye(n_groups)
            - np.einsum("...ki,...ji->...kj", weighted, counts))
    b = (sums - counts * m_i[..., None, :]).sum(axis=-1)
    projector = np.linalg.pinv(info, rcond=1e-10, hermitian=True)
    beta = np.einsum("...kj,...j->...k", projector, b)
    fitted = np.einsum("...ki,...k->...i", counts, beta) / safe_n
    residual = sums - counts * (m_i[..., None, :] + beta[..., :, None] - fitted[..., None, :])
    scale = (n_active / safe_total)[..., None]
    psi_beta = n_active[..., None, None] * np.einsum("...kj,...ji->...ki", projector, residual)
    share = per_group / safe_total[..., None]
    psi_mean = (sums.sum(axis=-2) - ybar[..., None] * n_i) * scale
    psi_share = (counts - share[..., :, None] * n_i[..., None, :]) * scale[..., None]
    anchor = np.einsum("...k,...k->...", share, beta)
    estimates = ybar[..., None] + beta - anchor[..., None]
    psi = (psi_mean[..., None, :] + psi_beta
           - np.einsum("...k,...ki->...i", share, psi_beta)[..., None, :]
           - np.einsum("...k,...ki->...i", beta, psi_share)[..., None, :])
    psi = np.where(active[..., None, :], psi, 0.0)
    estimates = np.where(per_group > 0, estimates, np.nan)
    return Fit(estimates, psi, n_active, projector)


# -- bounds on arrays (shared by GroupEffects and the plan's simulation) -------------------------
def covariance(psi: FloatArray, n_active: FloatArray) -> FloatArray:
    """(..., G, G): the cluster-robust covariance of the estimates, sum_i psi psi' / (N (N-1))."""
    denom = n_active * np.maximum(n_active - 1.0, 1.0)
    return np.asarray(np.einsum("...ki,...ji->...kj", psi, psi) / denom[..., None, None],
                      dtype=np.float64)


def skewness(psi: FloatArray, n_active: FloatArray) -> FloatArray:
    """(..., G): the skewness of the influence values (0 where they do not vary)."""
    n = np.maximum(n_active, 1.0)[..., None]
    m2 = (psi**2).sum(axis=-1) / n
    m3 = (psi**3).sum(axis=-1) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = m3 / m2**1.5
    return np.where(m2 > _TINY, gamma, 0.0)


def _quantile(confidence: FloatArray | float, df: FloatArray | float, skew: FloatArray,
              n: FloatArray | float) -> FloatArray:
    """Student's t quantile widened by Hall's (1992) Cornish-Fisher term for a skewness
    ``skew`` of the values on the side the bound guards (positive skew there: never narrowed)."""
    t = np.asarray(_sps.t.ppf(confidence, np.maximum(df, 1.0)), dtype=np.float64)
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
    q = _quantile(confidence, df, side * skew, n)
    t_bound = estimate + side * q * se
    p = np.clip(estimate, 0.0, 1.0)
    var = p * (1.0 - p)
    degenerate = (var <= _TINY) | (se <= _TINY)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(degenerate, instances, var / np.maximum(se, _TINY) ** 2)
    # At least the group's instances: a larger se than that implies is the t bound's to show
    # (it is the wider one then); the guard is for an se that a run of all-right (or all-wrong)
    # cells made too small.
    n_eff = np.clip(n_eff, np.maximum(instances, 1.0), np.maximum(cells, 1.0))
    z = np.asarray(_sps.t.ppf(confidence, np.maximum(df, 1.0)), dtype=np.float64)
    wilson = _wilson_side(p, n_eff, z, side)
    bound = np.minimum(t_bound, wilson) if side < 0 else np.maximum(t_bound, wilson)
    return np.asarray(np.clip(bound, 0.0, 1.0), dtype=np.float64)


def spread_upper(diff: FloatArray, se: FloatArray, skew: FloatArray, df: FloatArray,
                 n: FloatArray, confidence: FloatArray | float) -> FloatArray:
    """One-sided upper bound on |difference| of a pair (``skew``: of the difference's influence
    values). |d| + q se with q skewness-corrected toward the observed sign; a pair that never
    differed (se 0) is bounded like a proportion seen 0 times on its instances (Wilson)."""
    size = np.abs(diff)
    toward = np.where(diff >= 0, skew, -skew)
    q = _quantile(confidence, df, toward, n)
    z = np.asarray(_sps.t.ppf(confidence, np.maximum(df, 1.0)), dtype=np.float64)
    never = z * z / (np.maximum(n, 1.0) + z * z)
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

    @property
    def n_groups(self) -> int:
        return int(self.estimates.size)

    @property
    def live(self) -> npt.NDArray[np.intp]:
        return np.flatnonzero(self.cells > 0)

    def covariance(self) -> FloatArray:
        cov = covariance(self.psi, np.asarray(self.n_active))
        return cov if self.row_covariance is None else cov + self.row_covariance

    def se(self) -> FloatArray:
        return np.asarray(np.sqrt(np.maximum(np.diag(self.covariance()), 0.0)), dtype=np.float64)

    def df(self) -> FloatArray:
        """Per group: N - 1, or Satterthwaite's df when sampled resamplings add error."""
        inst = np.full(self.n_groups, max(self.n_active - 1.0, 1.0))
        if self.row_covariance is None:
            return inst
        v_i = np.diag(covariance(self.psi, np.asarray(self.n_active)))
        v_r = np.maximum(np.diag(self.row_covariance), 0.0)
        rows = max(self.resamplings - 1, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            df = (v_i + v_r) ** 2 / (v_i**2 / inst + v_r**2 / rows)
        return np.where(np.isfinite(df), np.clip(df, 1.0, inst), inst)

    def skew(self) -> FloatArray:
        return skewness(self.psi, np.asarray(self.n_active))

    def level_bounds(self, confidence: FloatArray | float, side: int) -> FloatArray:
        """(G,): one-sided bounds on the groups' scores at ``confidence`` (a number or one per
        group), ``side`` -1 lower, +1 upper (`level_bound`)."""
        return level_bound(self.estimates, self.se(), self.skew(), self.df(),
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

    @property
    def size(self) -> int:
        return int(self.diff.size)

    def upper(self, confidence: float) -> FloatArray:
        """One-sided upper bounds on each pair's |difference| (see `spread_upper`)."""
        return spread_upper(self.diff, self.se, self.skew, self.df, self.n, confidence)

    def lower(self, confidences: FloatArray) -> FloatArray:
        """Lower bounds on |difference| at per-pair two-sided ``confidences`` (the favourable
        side under fail-on-evidence: the sign of a difference is chosen by the data)."""
        t = _sps.t.ppf(0.5 + np.asarray(confidences) / 2.0, np.maximum(self.df, 1.0))
        return np.asarray(np.abs(self.diff) - t * self.se, dtype=np.float64)

    def p_breach(self, limit: float) -> FloatArray:
        """p-values of "|difference| <= limit" (small: evidence that it is larger), inverting
        `lower`: 2 t.sf((|d| - limit) / se)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = (np.abs(self.diff) - limit) / self.se
        stat = np.where(self.se > _TINY, stat, np.where(np.abs(self.diff) > limit, np.inf,
                                                        -np.inf))
        return np.asarray(np.minimum(1.0, 2.0 * _sps.t.sf(stat, np.maximum(self.df, 1.0))),
                          dtype=np.float64)


def pairs_of(effects: GroupEffects, groups: npt.NDArray[np.intp]) -> Pairs:
    a, b = np.triu_indices(groups.size, k=1)
    i, j = groups[a], groups[b]
    cov = effects.covariance()
    var = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    d_psi = effects.psi[i] - effects.psi[j]
    df = np.minimum(effects.df()[i], effects.df()[j]) if i.size else np.zeros(0)
    n = np.full(i.size, effects.n_active)
    return Pairs(i, j, effects.estimates[i] - effects.estimates[j],
                 np.sqrt(np.maximum(var, 0.0)), skewness(d_psi, np.asarray(effects.n_active)),
                 df, n)


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
        q = _sps.t.ppf(1.0 - alpha / (total - 1), np.maximum(np.minimum(df[:, None], df[None, :]),
                                                             1.0))
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
    resamplings_sampled: bool = False,
) -> GroupEffects:
    """Paired group estimates (see `GroupEffects`) of a (resamplings, instances) score matrix.

    ``labels`` has the same shape and gives each cell's group in 0..n_groups-1, or -1 for a cell
    in no group (left out). ``offsets`` (same shape), when given, are known effects of another
    factor subtracted from each cell before the groups are compared (e.g. the correct option's
    displayed position, so formats do not absorb order effects). ``resamplings_sampled``: the
    resamplings' variants were sampled from a space larger than the plan could list (fixed
    mode), so a jackknife over resamplings adds the variant-sampling error.
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
    return GroupEffects(
        estimates=result.estimates, observed=observed, psi=result.psi,
        cells=cells.astype(np.int64), instances=(counts > 0).sum(axis=1).astype(np.int64),
        n_active=float(result.active), row_covariance=row_cov, resamplings=int(s.shape[0]))


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
    dev = reps - np.nanmean(np.where(np.isfinite(reps), reps, np.nan), axis=0)
    dev = np.where(np.isfinite(dev), dev, 0.0)
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
        projector = fit(counts, sums).projector
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

