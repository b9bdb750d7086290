"""ILR's Observed Reversal Probability of two models scored under the same resamplings."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _sps

from pytest_reliable.stats._validation import ArrayLike, FloatArray, _count, _paired, _positive


_ORP_ZERO_RTOL = 1e-12
"""sigma_d^2 below this fraction of s_a^2 + s_b^2 is round-off: sigma_d is taken as 0."""


@dataclass(frozen=True, eq=False)
class ORPResult:
    """ILR's Observed Reversal Probability curve of two models (see :func:`orp`)."""

    sigma_d: float
    rho: float
    d: FloatArray
    curve: FloatArray
    area: float
    d_max: float


def _trapezoid(y: FloatArray, x: FloatArray) -> float:
    try:
        integrate = np.trapezoid
    except AttributeError:  # numpy < 2.0
        integrate = np.trapz  # type: ignore[attr-defined,unused-ignore]
    return float(integrate(y, x))


def orp(scores_a: ArrayLike, scores_b: ArrayLike, d_max: float = 0.3, grid: int = 101) -> ORPResult:
    """Observed Reversal Probability (ILR) of models a and b scored under the same resamplings.

    ``sigma_d^2 = s_a^2 + s_b^2 - 2 rho s_a s_b`` with sample standard deviations (ddof=1) and
    Pearson's rho; ``d = numpy.linspace(0, d_max, grid)``; ``curve = Phi(-|d| / sigma_d)``
    (``scipy.stats.norm.cdf``); ``area`` = trapezoid rule of the curve over ``d``, / ``d_max``.

    Degenerate cases (never NaN, never a division warning):
    - a constant vector has standard deviation exactly 0; rho is 0.0 when either standard
      deviation is 0 (no spread, no correlation to speak of);
    - sigma_d^2 within round-off of 0 (|sigma_d^2| <= 1e-12 * (s_a^2 + s_b^2), either sign, e.g.
      identical or perfectly shifted vectors) is taken as sigma_d = 0; then there is no observed
      spread, so ORP(d) = 0 for every d > 0 and ORP(0) = 0.5, the limit Phi(0).

    Both vectors need the same length >= 2; ``d_max > 0``; ``grid >= 2``.
    """
    a, b = _paired(scores_a, scores_b, "scores_a", "scores_b")
    if a.size < 2:
        raise ValueError(
            f"scores_a and scores_b need at least 2 scores each (ddof=1), got {a.size}"
        )
    d_max_f = _positive(d_max, "d_max")
    n_grid = _count(grid, "grid", minimum=2)

    # A constant vector has s = 0 exactly (np.std can return ~1e-17 from the mean's round-off).
    s_a = 0.0 if np.ptp(a) == 0.0 else float(np.std(a, ddof=1))
    s_b = 0.0 if np.ptp(b) == 0.0 else float(np.std(b, ddof=1))
    if s_a > 0.0 and s_b > 0.0:
        ca, cb = a - np.mean(a), b - np.mean(b)
        denom = math.sqrt(float(np.dot(ca, ca))) * math.sqrt(float(np.dot(cb, cb)))
        rho = float(np.dot(ca, cb)) / denom if denom > 0.0 else 0.0
        rho = min(max(rho, -1.0), 1.0)
    else:
        rho = 0.0
    scale = s_a * s_a + s_b * s_b
    var_d = scale - 2.0 * rho * s_a * s_b
    sigma_d = 0.0 if var_d <= _ORP_ZERO_RTOL * scale else math.sqrt(var_d)

    d = np.linspace(0.0, d_max_f, n_grid)
    if sigma_d == 0.0:
        curve = np.where(d == 0.0, 0.5, 0.0)
    else:
        curve = _sps.norm.cdf(-np.abs(d) / sigma_d)
    curve = np.asarray(curve, dtype=np.float64)
    return ORPResult(
        sigma_d=sigma_d,
        rho=rho,
        d=d,
        curve=curve,
        area=_trapezoid(curve, d) / d_max_f,
        d_max=d_max_f,
    )
