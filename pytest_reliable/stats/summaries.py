"""Descriptive summaries of one score vector: moments, ranges and a bootstrap interval."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as _sps

from pytest_reliable.stats._validation import ArrayLike, _count, _open_unit, _scores


class Moments(NamedTuple):
    """Mean, population variance (ddof=0), its square root and the number of scores."""

    mean: float
    variance: float
    std: float
    n: int


def moments(scores: ArrayLike) -> Moments:
    """Mean, population variance (``ddof=0``), std (= sqrt of that variance) and n of ``scores``."""
    x = _scores(scores)
    var = float(np.var(x))
    return Moments(mean=float(np.mean(x)), variance=var, std=math.sqrt(var), n=int(x.size))


class Ranges(NamedTuple):
    """Five-number summary plus IQR (numpy linear percentiles)."""

    min: float
    q1: float
    median: float
    q3: float
    max: float
    iqr: float


def ranges(values: ArrayLike) -> Ranges:
    """min, 25th percentile, median, 75th percentile, max and IQR = q3 - q1 of ``values``
    (``numpy.percentile`` with its default linear interpolation)."""
    x = _scores(values, "values")
    lo, q1, med, q3, hi = (float(v) for v in np.percentile(x, [0.0, 25.0, 50.0, 75.0, 100.0]))
    return Ranges(min=lo, q1=q1, median=med, q3=q3, max=hi, iqr=q3 - q1)


def bootstrap_ci(
    values: ArrayLike,
    statistic: Callable[..., Any] = np.mean,
    confidence: float = 0.95,
    n_resamples: int = 9_999,
    seed: int | None = 0,
    method: str = "percentile",
) -> tuple[float, float]:
    """Two-sided bootstrap confidence interval ``(low, high)`` of ``statistic(values)``.

    ``scipy.stats.bootstrap`` with ``rng=numpy.random.default_rng(seed)``; ``method`` defaults to
    ``"percentile"`` (robust on the small, discrete score vectors we see; pass ``"BCa"`` or
    ``"basic"`` for scipy's others). ``statistic`` must accept an ``axis`` keyword (numpy
    reductions do). Degenerate input (all values equal, including a single value) returns
    ``(v, v)`` with ``v = statistic(values)`` and never a NaN or a warning. If scipy still
    returns a NaN end (e.g. BCa on nearly degenerate data) the percentile method is used instead.
    """
    x = _scores(values, "values")
    conf = _open_unit(confidence, "confidence")
    reps = _count(n_resamples, "n_resamples", minimum=1)
    if np.all(x == x[0]):
        v = float(statistic(x))
        return v, v

    def run(m: str) -> tuple[float, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = _sps.bootstrap(
                (x,),
                statistic,
                n_resamples=reps,
                confidence_level=conf,
                method=m,
                rng=np.random.default_rng(seed),
            )
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    low, high = run(method)
    if not (math.isfinite(low) and math.isfinite(high)) and method != "percentile":
        low, high = run("percentile")
    if not (math.isfinite(low) and math.isfinite(high)):
        v = float(statistic(x))
        return v, v
    return low, high
