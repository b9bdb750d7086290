"""Groups of cells compared within instance (the ranges of SPEC section 11): paired group
effects and the spread a prompt-insensitive model would show (the noise floor)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_reliable.stats._validation import ArrayLike, FloatArray, _count, _score_matrix
from pytest_reliable.stats.bounds import ProportionBound


PAIRED_METHOD = "paired within instance, clustered by instance; t(N-1)"


@dataclass(frozen=True)
class GroupEffects:
    """Group estimates of one labelling of the cells, paired within instance.

    A group's estimate is the overall mean plus the mean over its cells of (score - that
    instance's mean over all its cells): instance difficulty cancels, so groups that hold
    different instances are comparable. Standard errors come from per-instance influence values
    (``psi``, shape (G, N)); a pair's difference uses the difference of their influence values, so
    it is paired too. Differences carry a continuity term 1/(2N) in their se, so a pair that never
    differed on N instances is not declared identical.
    """

    estimates: FloatArray
    psi: FloatArray
    cells: npt.NDArray[np.int64]
    instances: npt.NDArray[np.int64]

    @property
    def n_instances(self) -> int:
        return int(self.psi.shape[1])

    def bound(self, g: int) -> ProportionBound:
        n = self.n_instances
        se = math.sqrt(float(np.sum(self.psi[g] ** 2)) / (n * (n - 1))) if n > 1 else 0.0
        return ProportionBound(float(self.estimates[g]), se, int(self.instances[g]),
                               int(self.cells[g]), PAIRED_METHOD + "; Wilson on effective n")

    def pairs(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray, FloatArray]:
        """Every pair (i < j) of populated groups: (i, j, estimate_i - estimate_j, se)."""
        live = np.flatnonzero(self.cells > 0)
        a, b = np.triu_indices(live.size, k=1)
        i, j = live[a], live[b]
        n = self.n_instances
        if n < 2 or i.size == 0:
            empty = np.zeros(0)
            return i, j, empty, empty
        gram = self.psi[live] @ self.psi[live].T / (n * (n - 1))
        var = np.diag(gram)[a] + np.diag(gram)[b] - 2.0 * gram[a, b]
        se = np.sqrt(np.maximum(var, 0.0) + (0.5 / n) ** 2)
        return i, j, self.estimates[i] - self.estimates[j], se

    def df(self) -> int:
        return max(self.n_instances - 1, 1)


def paired_group_effects(
    scores: ArrayLike, labels: ArrayLike, n_groups: int, *, offsets: ArrayLike | None = None
) -> GroupEffects:
    """Paired group estimates (see `GroupEffects`) of a (resamplings, instances) score matrix.

    ``labels`` has the same shape and gives each cell's group in 0..n_groups-1, or -1 for a cell
    in no group (it still counts in its instance's mean). ``offsets`` (same shape), when given,
    are known effects of another factor subtracted from each cell before the groups are compared
    (e.g. the correct option's displayed position, so formats do not absorb order effects).
    """
    s = _score_matrix(scores)
    lab = np.asarray(labels, dtype=np.int64)
    if lab.shape != s.shape:
        raise ValueError(f"labels must have the shape of scores {s.shape}, got {lab.shape}")
    n_inst = s.shape[1]
    groups = _count(n_groups, "n_groups")
    overall = float(s.mean())
    if offsets is not None:
        s = s - np.asarray(offsets, dtype=np.float64)
    inst_mean = s.mean(axis=0)
    dev = s - inst_mean
    inst_mean = inst_mean - inst_mean.mean() + overall
    mask = lab >= 0
    flat = (lab * n_inst + np.arange(n_inst)[None, :])[mask]
    size = groups * n_inst
    a = np.bincount(flat, weights=dev[mask], minlength=size).reshape(groups, n_inst)
    c = np.bincount(flat, minlength=size).reshape(groups, n_inst).astype(np.float64)
    cells = c.sum(axis=1)
    safe = np.where(cells > 0, cells, 1.0)
    shift = a.sum(axis=1) / safe
    psi = (inst_mean - overall)[None, :] + (a - c * shift[:, None]) / (safe[:, None] / n_inst)
    estimates = np.where(cells > 0, overall + shift, np.nan)
    return GroupEffects(estimates, psi, cells.astype(np.int64), (c > 0).sum(axis=1))


def noise_floor(
    scores: ArrayLike,
    labellings: list[tuple[ArrayLike, int]],
    *,
    permutations: int = 200,
    seed: int = 0,
    offsets: ArrayLike | None = None,
) -> float:
    """The mean spread of paired group estimates with group labels permuted within instance.

    What a prompt-insensitive model would show on these cells: each permutation shuffles every
    instance's scores over its own cells (so labels are permuted within instance), the spread is
    the largest (max - min) over the labellings' populated groups, and the result is its mean over
    ``permutations`` seeded permutations. ``offsets``: as in `paired_group_effects`.
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
    flat_shuffled = shuffled.reshape(reps, n * n_inst)
    spread = np.zeros(reps)
    for labels, n_groups in labellings:
        lab = np.asarray(labels, dtype=np.int64).ravel()
        mask = lab >= 0
        cells = np.bincount(lab[mask], minlength=n_groups)
        live = cells > 0
        if live.sum() < 2:
            continue
        if n_groups <= 64:  # a one-hot product is fastest for a few groups
            onehot = np.zeros((lab.size, n_groups))
            onehot[np.flatnonzero(mask), lab[mask]] = 1.0
            sums: FloatArray = flat_shuffled @ onehot
        else:
            flat = (np.arange(reps)[:, None] * n_groups + lab[mask][None, :]).ravel()
            sums = np.asarray(np.bincount(flat, weights=flat_shuffled[:, mask].ravel(),
                                          minlength=reps * n_groups),
                              dtype=np.float64).reshape(reps, n_groups)
        effects = sums[:, live] / cells[live]
        spread = np.maximum(spread, effects.max(axis=1) - effects.min(axis=1))
    return float(spread.mean())
