"""The threshold table: one row per ``@reliable`` threshold, saying how it is decided.

A row holds what the rest of the engine needs to know about a threshold, so that none of it
branches on a threshold's name:

- ``direction`` (from `vocabulary.RELIABLE_THRESHOLDS`: the vocabulary stays the one home of
  names and directions);
- ``reads``: the statistic of the test's summary it is decided on (`Statistic`); a statistic a
  side evaluation gives (maj@k, circular) is absent when that evaluation did not run, and the
  threshold is then not decided;
- ``evidence``: how its claims are bounded (`EvidenceKind`, built by `verdict.gate`: one
  builder per kind, not per threshold);
- ``stopping``: whether early stopping can settle it (`evaluate.stopping`): by the confidence
  sequence on the mean over resamplings, as a statistic of the canonical pass (settled after the
  first batch: more resamplings never change it), or not at all (the test runs all n);
- ``adaptive``: how ``search="adaptive"`` settles it (SPEC section 14).

A new threshold is a name in the vocabulary, a row here, a marker argument and the statistic it
reads: a side evaluation's frozen result offers its statistics to the summary by name
(`verdict.sides`), so a threshold on a new proportion needs no new code in the gate, the summary
or early stopping.

Numpy-free, like the rest of `contract`: early stopping (`evaluate`) reads the table as well as
the gate (`verdict`), so it sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pytest_reliable.contract.vocabulary import RELIABLE_THRESHOLDS, Direction, ReliableThreshold

MeanStatistic = Literal["mean", "pass_at_k", "pass_hat_k", "maj_at_k", "circular"]
"""The summary's means with a `stats.MeanBound`, by the name a row reads them by
(`verdict.summary.Summary.means`): the mean over resamplings (a pairwise judge's win rate too),
the canonical pass's per-instance pass@k and pass^k, and the side evaluations' maj@k and
circular score."""
Statistic = Literal[MeanStatistic, "canonical_interval", "formats", "std"]
"""What a threshold reads from the summary: a mean with its bound (`MeanStatistic`), the
canonical pass's interval, the format range, or the spread over resamplings."""
MEANS: tuple[MeanStatistic, ...] = get_args(MeanStatistic)

EvidenceKind = Literal["interval", "mean", "groups", "median", "pairs", "std"]
"""How a threshold's claims are bounded (SPEC section 11), one builder each in `verdict.gate`:

- ``interval``: already a bound (the canonical interval's lower end), compared as it is under
  every policy;
- ``mean``: one claim on a mean, bounded at any N (`stats.MeanBound`);
- ``groups``: one claim per group of the format range, paired within instance;
- ``median``: the median group, from the groups' bounds;
- ``pairs``: one claim per pair of groups of one labelling;
- ``std``: the standard deviation over resamplings (`stats.SpreadBound`).
"""

Stopping = Literal["sequence", "canonical", "never"]
"""How early stopping settles a threshold: ``sequence`` (anytime-valid bounds on the mean over
resamplings), ``canonical`` (a statistic of the canonical pass only: settled after the first
batch), ``never`` (no anytime-valid bound: the test runs all n resamplings)."""
Adaptive = Literal["sequence", "canonical", "cells", "claims", "plan order", "refused"]
"""How ``search="adaptive"`` settles a threshold: as early stopping does (``sequence``,
``canonical``), group by group with single cells spent on open groups over the formats grouping
and claim by claim otherwise (``cells``, `evaluate.cell_rounds`), claim by claim with rounds of
resamplings spent on open groups (``claims``), not adaptively (the test runs all n resamplings
in plan order), or ``refused`` before the run."""


@dataclass(frozen=True)
class ThresholdRow:
    """How one ``@reliable`` threshold is decided (module docstring)."""

    name: ReliableThreshold
    reads: Statistic
    evidence: EvidenceKind
    stopping: Stopping
    adaptive: Adaptive

    @property
    def direction(self) -> Direction:
        return RELIABLE_THRESHOLDS[self.name]


_ROWS = (
    ThresholdRow("min_score", "mean", "mean", "sequence", "sequence"),
    ThresholdRow("min_lower_ci", "canonical_interval", "interval", "canonical", "canonical"),
    ThresholdRow("min_median", "formats", "median", "never", "plan order"),
    ThresholdRow("min_worst", "formats", "groups", "never", "cells"),
    ThresholdRow("max_spread", "formats", "pairs", "never", "claims"),
    ThresholdRow("max_std", "std", "std", "never", "refused"),
    ThresholdRow("min_pass_at_k", "pass_at_k", "mean", "canonical", "canonical"),
    ThresholdRow("min_pass_hat_k", "pass_hat_k", "mean", "canonical", "canonical"),
    ThresholdRow("min_maj_at_k", "maj_at_k", "mean", "canonical", "canonical"),
    # A pairwise judge's matrix holds the win values: its mean is the win rate.
    ThresholdRow("min_win_rate", "mean", "mean", "sequence", "sequence"),
    ThresholdRow("min_circular", "circular", "mean", "canonical", "canonical"),
)
THRESHOLD_TABLE: dict[ReliableThreshold, ThresholdRow] = {row.name: row for row in _ROWS}
"""Every ``@reliable`` threshold's row, in report order (`vocabulary.RELIABLE_THRESHOLDS`'
order; tests/test_threshold_table.py checks that every name has exactly one row)."""


def settled_by(stopping: Stopping) -> frozenset[str]:
    """The thresholds early stopping settles in the way ``stopping`` says."""
    return frozenset(row.name for row in _ROWS if row.stopping == stopping)


def adaptive(how: Adaptive) -> frozenset[str]:
    """The thresholds ``search="adaptive"`` settles in the way ``how`` says."""
    return frozenset(row.name for row in _ROWS if row.adaptive == how)
