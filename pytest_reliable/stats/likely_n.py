"""The n* a ``--reliable-n auto`` pilot is likely to find, before the pilot runs (``--reliable-plan``).

A bootstrap n* (SPEC section 7) depends on how much the pilot's per-resampling scores vary, which
depends on the model: unknown before any call. The plan therefore simulates pilots of the
test's real design and asks the real n* method (`stats.min_reliable_n`, ``method="bootstrap"``)
what each would give:

- the design is the pilot's own plan: which cells share one prompt (``answer_ids``: cells with
  one id get one answer, as at temperature 0 an instance shown the same variant twice answers
  the same), over N instances and the pilot's resamplings;
- the model answers 0/1 at a true score ``score`` under each of `power.STRUCTURES` (how one
  instance's answers hang together: Beta-distributed instance accuracies at intra-instance
  correlation 0.2 and 0.8, and a mixture of instances that answer by difficulty alone with
  instances that answer afresh), with no effect of the format: a model whose score depends on
  the format varies more between resamplings in fixed mode, and its n* is larger;
- per structure, `SIMULATED` pilots are drawn and the one of median spread (n* grows with the
  spread) is handed to `stats.min_reliable_n`; the likely n* is the middle of the structures'
  figures. The range is what a pilot may find: from the pilot at the `RANGE_QUANTILE` of spread
  under the structure with the smallest figure to the pilot at 1 - `RANGE_QUANTILE` under the
  one with the largest (a pilot of 30 estimates the spread to about 13%, and n* goes with its
  square: the range is wide because the pilot's own draw moves n*).

It is an estimate of what a pilot will find, not a promise: the pilot's own answers decide.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_reliable.stats.power import STRUCTURES, Structure
from pytest_reliable.stats.reliable_n import min_reliable_n

SIMULATED = 64
"""Pilots simulated per structure (fewer for a very large design, at least 8)."""
SIMULATED_CELLS = 4_000_000
"""Cells simulated per structure at most."""
SUBSETS = 2_000
"""Bootstrap rows of the n* of each structure's median pilot (the run uses 10,000: the
estimate's own Monte Carlo error, a few percent, is far below what the model leaves open)."""
SEED = 20_240_007
"""Fixed: a plan is deterministic."""
RANGE_QUANTILE = 0.1
"""The range spans the pilots between this quantile of spread and its complement: 80%."""


@dataclass(frozen=True)
class LikelyNStar:
    """What the simulated pilots say about n* (uncapped, as `stats.min_reliable_n` gives it)."""

    n_star: int
    """The middle of the structures' figures."""
    low: int
    high: int
    """What 80% of simulated pilots find, over the structures (see the module docstring)."""
    per_structure: tuple[int, ...]
    """Each structure's figure (its pilot of median spread), in `power.STRUCTURES` order."""
    score: float
    """The true score the pilots were simulated at."""


def simulated_pilots(answer_ids: npt.NDArray[np.int64], score: float, structure: Structure,
                     reps: int, seed: int) -> npt.NDArray[np.float64]:
    """(reps, n) per-resampling scores of ``reps`` simulated pilots whose cell (r, i) has the
    answer ``answer_ids[r, i]`` of instance i (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n, instances = answer_ids.shape
    distinct, inverse = np.unique(answer_ids, return_inverse=True)
    per_answer = rng.random((reps, distinct.size))[:, inverse.reshape(n, instances)]
    difficulty = rng.random((reps, 1, instances))
    if structure.kind == "mixture":
        by_difficulty = rng.random((reps, 1, instances)) < structure.icc
        u = np.where(by_difficulty, difficulty, per_answer)
        right = u < score
    else:
        concentration = 1.0 / structure.icc - 1.0
        accuracy = rng.beta(score * concentration, (1.0 - score) * concentration,
                            size=(reps, 1, instances))
        right = per_answer < accuracy
    scores: npt.NDArray[np.float64] = right.mean(axis=2)
    return scores


def likely_n_star(answer_ids: npt.ArrayLike, *, eps: float, delta: float, n_max: int,
                  score: float = 0.5, seed: int = SEED) -> LikelyNStar:
    """The bootstrap n* that pilots of this design are likely to give (module docstring)."""
    ids = np.asarray(answer_ids, dtype=np.int64)
    if ids.ndim != 2 or ids.shape[0] < 2 or ids.shape[1] < 1:
        raise ValueError("answer_ids must be (resamplings >= 2, instances >= 1)")
    score = min(max(float(score), 0.01), 0.99)
    reps = max(8, min(SIMULATED, SIMULATED_CELLS // ids.size))

    def n_star(pilot: npt.NDArray[np.float64]) -> int:
        return int(min_reliable_n(pilot, eps=eps, delta=delta, method="bootstrap", n_max=n_max,
                                  subsets=SUBSETS, seed=seed).n_star)

    by_spread = []
    for index, structure in enumerate(STRUCTURES):
        pilots = simulated_pilots(ids, score, structure, reps, seed + index)
        by_spread.append(pilots[np.argsort(pilots.std(axis=1), kind="stable")])
    found = [n_star(pilots[len(pilots) // 2]) for pilots in by_spread]
    smallest, largest = by_spread[int(np.argmin(found))], by_spread[int(np.argmax(found))]
    low = n_star(smallest[int(RANGE_QUANTILE * (len(smallest) - 1))])
    high = n_star(largest[round((1 - RANGE_QUANTILE) * (len(largest) - 1))])
    middle = sorted(found)[len(found) // 2]
    return LikelyNStar(middle, min(low, middle), max(high, middle), tuple(found), score)


__all__ = ["LikelyNStar", "likely_n_star", "simulated_pilots"]
