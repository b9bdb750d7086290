"""Statistics of score vectors (SPEC section 6). Pure numpy / scipy / statsmodels, no I/O.

Conventions, in brief (each function's docstring states its own):

- A *score vector* is a non-empty 1-D sequence of finite floats (one score per resampling /
  paraphrase / variant). NaN or infinite scores raise ``ValueError``; so do empty vectors and, for
  paired functions, vectors of different lengths.
- Variances are population variances (``ddof=0``) everywhere except in :func:`orp`, which follows
  ILR and uses sample standard deviations (``ddof=1``) and Pearson's rho.
- Percentiles are numpy's default (``method="linear"``).
- Randomness only ever comes from ``numpy.random.default_rng(seed)``; global random state is never
  touched, so the same seed gives the same result.
- Invalid arguments raise ``ValueError`` whose message names the argument and its allowed range.

Where each topic lives (one module each; every public name is importable from here):

- ``_validation``: the argument checkers above, shared by every module (private).
- ``proportions``: Wilson's interval, pass@k, pass^k.
- ``summaries``: moments, ranges, bootstrap_ci.
- ``bounded``: the gates' bounds on means of bounded values, valid at any N (``bounded_mean``:
  Gaffke's bound, Clopper-Pearson on 0/1 values; ``binomial_bound``: k of n independent 0/1
  outcomes, exactly; ``mean_bound`` of a score matrix, with a second source of error when fixed
  mode sampled its variants).
- ``bounds``: clustered means and proportions (``ProportionBound``), ``WilsonBound``, the
  bounds of ``max_std`` (``StdBound``: chi-square; ``CellStdBound``: ilr, from the cells),
  Holm's step-down.
- ``groups``: group effects paired within instance (least squares with instance fixed effects),
  their bounds and pairs, the groups that could be the worst, and the noise floor of a range.
- ``multiprompt``: AvgP, MaxP, CPS (Mizrahi et al.).
- ``paired``: two models on the same cells: McNemar, the paired bootstrap, the clustered
  difference behind ``max_regression``.
- ``reliable_n``: ReliableEval's n* (``min_reliable_n``).
- ``reversal``: ILR's Observed Reversal Probability, ``orp`` (a module named ``orp`` would be
  shadowed here by the function).
- ``sequential``: confidence sequences for stopping early.
- ``looks``: each group's bound read at a few pre-registered looks (an adaptive search by cells).
- ``power``: what a gate can resolve before any call (``--reliable-plan``); not re-exported here,
  import ``pytest_reliable.stats.power``.
"""

from __future__ import annotations

from pytest_reliable.stats.bounded import (
    BoundedMean,
    MeanBound,
    TwoSourceMean,
    binomial_bound,
    bounded_mean,
    mean_bound,
)
from pytest_reliable.stats.bounds import (
    CellStdBound,
    ProportionBound,
    SpreadBound,
    StdBound,
    WilsonBound,
    cell_std_bound,
    clustered_mean,
    clustered_proportion,
    holm,
    sample_std_bound,
    wilson_bound,
)
from pytest_reliable.stats.groups import (
    GroupEffects,
    Pairs,
    noise_floor,
    paired_group_effects,
    worst_candidates,
)
from pytest_reliable.stats.multiprompt import avgp, cps, maxp
from pytest_reliable.stats.paired import (
    ClusteredDifference,
    McNemarResult,
    PairedComparison,
    mcnemar_exact,
    paired_comparison,
    paired_difference,
    paired_group_differences,
)
from pytest_reliable.stats.proportions import pass_at_k, pass_hat_k, wilson_interval
from pytest_reliable.stats.reliable_n import NStarResult, min_reliable_n
from pytest_reliable.stats.reversal import ORPResult, orp
from pytest_reliable.stats.looks import LOOKED_METHOD, LookedGroup, LookedMeans, look_points
from pytest_reliable.stats.sequential import ConfidenceSequence, asymptotic_cs, betting_cs
from pytest_reliable.stats.summaries import Moments, Ranges, bootstrap_ci, moments, ranges

# Constants other modules read as ``stats.NAME`` (outside ``__all__``, as in the single module
# this package replaced).
from pytest_reliable.stats.groups import LEVEL_METHOD as LEVEL_METHOD
from pytest_reliable.stats.groups import PAIRED_METHOD as PAIRED_METHOD
from pytest_reliable.stats.paired import CLUSTER_BOOTSTRAP as CLUSTER_BOOTSTRAP
from pytest_reliable.stats.reliable_n import MIN_BOOTSTRAP_PILOT as MIN_BOOTSTRAP_PILOT
from pytest_reliable.stats.reliable_n import N_STAR_METHODS as N_STAR_METHODS

__all__ = [
    "BoundedMean",
    "CellStdBound",
    "ClusteredDifference",
    "ConfidenceSequence",
    "GroupEffects",
    "McNemarResult",
    "MeanBound",
    "Moments",
    "NStarResult",
    "ORPResult",
    "PairedComparison",
    "Pairs",
    "ProportionBound",
    "Ranges",
    "SpreadBound",
    "StdBound",
    "TwoSourceMean",
    "WilsonBound",
    "asymptotic_cs",
    "avgp",
    "betting_cs",
    "LOOKED_METHOD",
    "LookedGroup",
    "LookedMeans",
    "look_points",
    "binomial_bound",
    "bootstrap_ci",
    "bounded_mean",
    "cell_std_bound",
    "clustered_mean",
    "clustered_proportion",
    "cps",
    "holm",
    "maxp",
    "mean_bound",
    "mcnemar_exact",
    "min_reliable_n",
    "moments",
    "noise_floor",
    "orp",
    "paired_comparison",
    "paired_difference",
    "paired_group_differences",
    "paired_group_effects",
    "pass_at_k",
    "pass_hat_k",
    "ranges",
    "sample_std_bound",
    "wilson_bound",
    "wilson_interval",
    "worst_candidates",
]
