"""Power before any call: the true value at which a threshold goes the way its policy promises with
80% probability, for a design of N instances x n resamplings (``--reliable-plan``).

`pytest_reliable.plan_report` plans the calls and writes the text; the numbers are here, beside
the bounds they anticipate, so a change to a gate's bound and to its sizing is one change in one
package. The method, in brief (`plan_report` prints it with every plan):

- Means: a normal approximation with a design effect for cells of one instance being correlated.
  For N instances with c cells each at true score p and intra-instance correlation rho,
  ``Var(mean) = p (1 - p) (1 + (c - 1) rho) / (N c)`` (`mean_se`). Group effects are paired
  within instance: a group's estimate carries the overall mean's variance plus
  ``p (1 - p) (1 - rho) / m`` for its m cells (`group_se`); a paired difference of two groups
  ``p (1 - p) (1 - rho) (1/m_a + 1/m_b)`` (`pair_se`). rho is unknown before any call: the main
  figure assumes `ASSUMED_RHO`, and the range beside it spans rho from 0 to 1.
- The canonical interval (``min_lower_ci``): exact, from the binomial distribution of the
  canonical pass's N first samples through the Wilson lower bound; no assumption about rho.
- A standard deviation (``max_std``): exact under normality of the per-resampling scores, from
  the chi-square distribution of the sample variance (ddof=1) with n - 1 degrees of freedom.
- The margin (`margin_multiplier`): under pass-on-evidence ``z_conf + z_0.8`` standard errors
  toward the passing side; under fail-on-evidence ``z_h + z_0.8`` toward the failing side, with
  z_h Holm's critical value at its worst case (Bonferroni over every hypothesis of the test);
  under estimate ``z_0.8``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from scipy import stats as _sps

from pytest_reliable.stats.proportions import wilson_interval
from pytest_reliable.vocabulary import DEFAULT_POLICY

POWER = 0.8
"""The probability the resolvable values are quoted at."""
ASSUMED_RHO = 0.5
"""Intra-instance correlation assumed for the main figure (the range spans 0 to 1)."""
RHOS = (ASSUMED_RHO, 0.0, 1.0)
"""The rhos a mean-like value is quoted at: the main figure's, then the range's ends."""


@dataclass(frozen=True)
class Design:
    """The shape of one evaluation, as far as its uncertainty is concerned."""

    instances: int
    resamplings: int
    k: int = 1
    confidence: float = 0.95
    decide: str = DEFAULT_POLICY
    group_cells: float | None = None
    """Cells of the smallest group of the test's grouping (None: no grouping known)."""
    groups: int = 0
    pairs: int = 0
    hypotheses: int = 1
    """What Holm corrects over under fail-on-evidence (thresholds, plus groups / pairs)."""


def _z(probability: float) -> float:
    return float(_sps.norm.ppf(probability))


def mean_se(p: float, instances: int, cells_per_instance: float, rho: float) -> float:
    """Standard error of a mean over ``instances`` x ``cells_per_instance`` correlated cells."""
    c = max(cells_per_instance, 1.0)
    return math.sqrt(max(p * (1 - p), 0.0) * (1 + (c - 1) * rho) / (instances * c))


def group_se(p: float, design: Design, rho: float) -> float:
    """A group's paired estimate: the overall mean's error plus its within-instance deviations."""
    assert design.group_cells is not None
    overall = mean_se(p, design.instances, design.resamplings, rho) ** 2
    within = max(p * (1 - p), 0.0) * (1 - rho) / max(design.group_cells, 1.0)
    return math.sqrt(overall + within)


def pair_se(design: Design, rho: float) -> float:
    """A paired difference of two smallest groups, at score 0.5 (the largest variance)."""
    assert design.group_cells is not None
    return math.sqrt(0.25 * (1 - rho) * 2 / max(design.group_cells, 1.0))


def margin_multiplier(decide: str, confidence: float, hypotheses: int) -> float:
    """How many standard errors the 80%-probability value lies from the limit, toward the side
    the policy needs evidence for (negative: toward the other side)."""
    alpha = 1 - confidence
    if decide == "fail-on-evidence":
        return _z(1 - alpha / max(hypotheses, 1)) + _z(POWER)
    if decide == "estimate":
        return _z(POWER)
    return _z(confidence) + _z(POWER)


def solve(limit: float, se: Callable[[float], float], multiplier: float, toward: int) -> float | None:
    """The x in [0, 1] with ``x = limit + toward * multiplier * se(x)`` (bisection).

    ``toward`` is +1 (the value lies above the limit) or -1 (below). None: no such x in [0, 1]."""

    def gap(x: float) -> float:
        return toward * (x - limit) - multiplier * se(x)

    end = 1.0 if toward > 0 else 0.0
    if gap(end) < 0:
        return None
    lo, hi = (limit, end) if toward > 0 else (end, limit)
    if gap(limit) >= 0:
        return limit
    for _ in range(60):
        mid = (lo + hi) / 2
        if (gap(mid) >= 0) == (toward > 0):
            hi = mid
        else:
            lo = mid
    return hi if toward > 0 else lo


def _at_rho(se_at: Callable[[float, float], float], rho: float, p: float) -> float:
    return se_at(p, rho)


def mean_values(limit: float, se_at: Callable[[float, float], float], multiplier: float,
                toward: int) -> list[float | None]:
    """A mean-like threshold's value (`solve`) at each of `RHOS`, for ``se_at(p, rho)``."""
    return [solve(limit, functools.partial(_at_rho, se_at, rho), multiplier, toward)
            for rho in RHOS]


def spread_values(limit: float, design: Design, multiplier: float,
                  toward: int) -> list[float | None]:
    """``max_spread``'s value at each of `RHOS`: the true difference between the two furthest
    groups, at score 0.5 (the largest variance); None outside [0, 1]."""
    values: list[float | None] = []
    for rho in RHOS:
        value = limit + toward * multiplier * pair_se(design, rho)
        values.append(value if 0.0 <= value <= 1.0 else None)
    return values


def lower_ci_needed(limit: float, design: Design) -> int | None:
    """How many of the N canonical answers must be right for the Wilson lower bound to reach
    ``limit`` (None: not even N)."""
    n = design.instances
    return next((x for x in range(n + 1)
                 if wilson_interval(x, n, design.confidence)[0] >= limit - 1e-12), None)


def lower_ci_value(needed: int, design: Design) -> float:
    """The true score at which ``needed`` of the N canonical answers are right with 80%
    probability (at most 20% under fail-on-evidence): the same rule under every policy."""
    n = design.instances
    target = 1 - POWER if design.decide == "fail-on-evidence" else POWER
    # P(X >= needed) is increasing in p: bisection for the p where it equals the target.
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if float(_sps.binom.sf(needed - 1, n, mid)) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def std_value(limit: float, design: Design) -> float | None:
    """``max_std``: the true std of the per-resampling scores at which the policy's outcome has
    80% probability (chi-square, n - 1 dof); None with one resampling (no std)."""
    dof = design.resamplings - 1
    if dof < 1:
        return None
    alpha = 1 - design.confidence
    chi2 = _sps.chi2.ppf
    if design.decide == "pass-on-evidence":
        # passes when s * sqrt(dof / chi2_alpha) <= limit
        value = limit * math.sqrt(chi2(alpha, dof) / chi2(POWER, dof))
    elif design.decide == "fail-on-evidence":
        # fails when s * sqrt(dof / chi2_{1 - alpha_h}) > limit
        level = 1 - alpha / max(design.hypotheses, 1)
        value = limit * math.sqrt(chi2(level, dof) / chi2(1 - POWER, dof))
    else:
        value = limit * math.sqrt(dof / chi2(POWER, dof))
    return float(value)
