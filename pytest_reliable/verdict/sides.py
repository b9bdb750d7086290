"""Side evaluations' frozen results (SPEC section 12), built once and taken at construction.

A test's side evaluations run beside its score matrix: maj@k (`majority_at_k`, from the canonical
pass's k samples), the circular evaluation (`evaluate.circular.CircularResult`: its own calls),
the judge's noise (`JudgeNoise`) and a pairwise judge's comparison (`Pairwise`). Each is a
frozen result: those a threshold is decided on give the summary their means by name
(`summary.SideMeans`: ``min_maj_at_k``, ``min_circular``), and the report takes the others
(`SideResults`) when it is made; nothing is patched in afterwards.

`FROM_MATRIX` lists the side evaluations computed from the score matrix alone (no call): every
reliable test runs them, so a threshold on a new statistic of the matrix is one function there
and one row of the threshold table (`contract.thresholds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_reliable import stats
from pytest_reliable.contract.thresholds import MeanStatistic
from pytest_reliable.evaluate.circular import CircularResult
from pytest_reliable.evaluate.evaluation import Calls, ScoreMatrix
from pytest_reliable.verdict.judged import judge_entry, pairwise_entry, unread_judge
from pytest_reliable.verdict.summary import SideMeans

if TYPE_CHECKING:
    from pytest_reliable.schema.entries import JudgeEntry, PairwiseEntry
    from pytest_reliable.tasks.judge import Judge
    from pytest_reliable.verdict.summary import Summary


@dataclass(frozen=True)
class MajorityAtK:
    """maj@k of the canonical pass (`majority_at_k`): per instance, and its bound."""

    values: np.ndarray
    bound: stats.MeanBound

    @property
    def score(self) -> float:
        return float(self.values.mean())

    def means(self) -> Mapping[MeanStatistic, tuple[float, stats.MeanBound]]:
        return {"maj_at_k": (self.score, self.bound)}


def maj_at_k(matrix: ScoreMatrix) -> MajorityAtK:
    """maj@k of ``matrix``'s canonical pass (SPEC section 12)."""
    return MajorityAtK(*majority_at_k(matrix))


def majority_at_k(matrix: ScoreMatrix) -> tuple[np.ndarray, stats.MeanBound]:
    """maj@k per instance and its bound: the majority prediction of the instance's k canonical
    samples, scored as its cells were (a tie for the most votes, or an unparsed majority, is
    wrong). The bound is `stats.bounded_mean` of the per-instance values: exact (Clopper-Pearson)
    when every value is 0 or 1 (one independent 0/1 outcome per instance; Wilson's errs more
    often than its level near 0 and 1), Gaffke's for partial credit, as for pass@k."""
    _, n_instances = matrix.canonical_scores.shape
    samples: list[list[Any]] = [[] for _ in range(n_instances)]
    for cell in matrix.canonical_cells():
        samples[cell.instance].append(cell)
    values = np.zeros(n_instances)
    for i, cells in enumerate(samples):
        votes: dict[Any, list[float]] = {}
        for cell in cells:
            if cell.parsed:
                votes.setdefault(_vote_key(cell.prediction), []).append(float(cell.score))
        unparsed = len(cells) - sum(len(v) for v in votes.values())
        counts = sorted((len(v) for v in votes.values()), reverse=True)
        if not counts or (len(counts) > 1 and counts[0] == counts[1]) or counts[0] <= unparsed:
            continue  # no answer, a tie, or as many unparsed samples: wrong
        top = max(votes.values(), key=len)
        values[i] = float(np.mean(top))
    return values, stats.bounded_mean(values, of="per-instance maj@k values")


def _vote_key(prediction: Any) -> Any:
    try:
        hash(prediction)
    except TypeError:
        return repr(prediction)
    return prediction


FROM_MATRIX: tuple[Callable[[ScoreMatrix], SideMeans], ...] = (maj_at_k,)
"""The side evaluations of the score matrix alone, run for every reliable test."""


def from_matrix(matrix: ScoreMatrix) -> list[SideMeans]:
    """`FROM_MATRIX`'s results on ``matrix``, for the summary to take."""
    return [side(matrix) for side in FROM_MATRIX]


@dataclass(frozen=True)
class JudgeNoise:
    """What a judged test reports about its judge (`judged.judge_entry`) and, when more of its
    votes came back unread than it allows, the test's error (`judged.unread_judge`)."""

    entry: JudgeEntry
    unread: str | None


def judge_noise(judge: Judge, identity: str, matrix: ScoreMatrix) -> JudgeNoise:
    """The judge's noise over every judged cell of ``matrix``; ``identity``: the judge model's."""
    calls = matrix.judge_calls or Calls()
    return JudgeNoise(judge_entry(judge, identity, matrix.cells, calls.made, calls.cached),
                      unread_judge(judge, identity, matrix.cells))


@dataclass(frozen=True)
class Pairwise:
    """A pairwise judge's comparison of the candidate with its baseline (`judged.pairwise_entry`)."""

    entry: PairwiseEntry


def pairwise(judge: Judge, matrix: ScoreMatrix, summary: Summary, baseline_model: str
             ) -> Pairwise | None:
    """The comparison over ``matrix``'s resampling cells (win values), with the win rate's
    interval from the summary's mean bound at its confidence; None without a bound."""
    if summary.mean_bound is None:
        return None
    low, high = summary.mean_bound.interval(summary.confidence)
    return Pairwise(pairwise_entry(judge, matrix.resampling_cells(), summary.mean, low, high,
                                   baseline_model))


@dataclass(frozen=True)
class SideResults:
    """The side evaluations one test ran that its report shows beside the summary (None: not
    run); those of the matrix alone (`FROM_MATRIX`: maj@k) are the summary's."""

    circular: CircularResult | None = None
    judge: JudgeNoise | None = None
    pairwise: Pairwise | None = None

    def problems(self, own: list[str]) -> list[str]:
        """The test's problems: an unreadable judge's first (the judge's failure explains the
        rest), then the evaluation's ``own``, then the circular calls' that did not complete."""
        unread = [] if self.judge is None or self.judge.unread is None else [self.judge.unread]
        circular = [] if self.circular is None else [
            f"circular: {p}" for p in self.circular.calls.problems]
        return [*unread, *own, *circular]


__all__ = ["FROM_MATRIX", "JudgeNoise", "MajorityAtK", "Pairwise", "SideResults", "from_matrix",
           "judge_noise", "maj_at_k", "majority_at_k", "pairwise"]
