"""The multi-prompt metrics of Mizrahi et al. (AvgP, MaxP, CPS), reproducing their tables."""

from __future__ import annotations

import numpy as np

from pytest_reliable.stats._validation import ArrayLike, _scores


def avgp(scores: ArrayLike) -> float:
    """AvgP of Mizrahi et al.: the mean score over paraphrases.

    Summed left to right (``numpy.cumsum``), then divided by the count: this is how the published
    tables were computed and reproduces them bit for bit (numpy's pairwise ``mean`` differs in the
    last bit on about 80% of the cells)."""
    x = _scores(scores)
    return float(np.cumsum(x)[-1]) / x.size


def maxp(scores: ArrayLike) -> float:
    """MaxP of Mizrahi et al.: the best score over paraphrases."""
    return float(np.max(_scores(scores)))


def cps(scores: ArrayLike) -> float:
    """CPS of Mizrahi et al.: ``MaxP * (1 - (MaxP - AvgP))`` (evaluated in exactly this order)."""
    best, mean = maxp(scores), avgp(scores)
    return best * (1 - (best - mean))
