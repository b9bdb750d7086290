"""Proportions of 0/1 outcomes: Wilson's interval, pass@k (Chen et al. 2021), pass^k (tau-bench)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from pytest_reliable.stats._validation import _count, _open_unit


_EXACT_COMB_LIMIT = 5_000
"""pass@k / pass^k use exact rational arithmetic up to this n, a float product form above."""


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` trials (two-sided, ``confidence``).

    Computed by ``statsmodels.stats.proportion.proportion_confint(method="wilson")`` and clipped
    to [0, 1] (and to contain successes / n) against floating-point round-off.
    ``n >= 1``, ``0 <= successes <= n``, ``confidence`` in (0, 1).
    """
    n_i = _count(n, "n", minimum=1)
    c_i = _count(successes, "successes", minimum=0)
    if c_i > n_i:
        raise ValueError(f"successes must be in [0, n] = [0, {n_i}], got {successes!r}")
    conf = _open_unit(confidence, "confidence")
    low, high = proportion_confint(c_i, n_i, alpha=1.0 - conf, method="wilson")
    p = c_i / n_i
    low_f = min(max(float(low), 0.0), p)
    high_f = max(min(float(high), 1.0), p)
    return low_f, high_f


def _check_nck(n: Any, c: Any, k: Any) -> tuple[int, int, int]:
    n_i = _count(n, "n", minimum=1)
    c_i = _count(c, "c", minimum=0)
    k_i = _count(k, "k", minimum=1)
    if c_i > n_i:
        raise ValueError(f"c must be in [0, n] = [0, {n_i}], got {c!r}")
    if k_i > n_i:
        raise ValueError(f"k must be in [1, n] = [1, {n_i}], got {k!r}")
    return n_i, c_i, k_i


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    ``n`` samples of which ``c`` are correct; ``1 <= k <= n``, ``0 <= c <= n``. Exact rational
    arithmetic (then rounded once to float) for ``n <= 5000``, so pass@1 == c / n exactly and the
    estimator is monotone in k and c; above that the stable product form
    ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``.
    """
    n_i, c_i, k_i = _check_nck(n, c, k)
    if n_i - c_i < k_i:
        return 1.0
    if c_i == 0:
        return 0.0
    if n_i <= _EXACT_COMB_LIMIT:
        return float(1 - Fraction(math.comb(n_i - c_i, k_i), math.comb(n_i, k_i)))
    factors = 1.0 - k_i / np.arange(n_i - c_i + 1, n_i + 1, dtype=np.float64)
    return float(1.0 - np.exp(np.sum(np.log(factors))))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of tau-bench: ``C(c, k) / C(n, k)``, the chance that k draws (without replacement)
    from the n samples are all correct. Same argument ranges as :func:`pass_at_k`; exact rational
    arithmetic for ``n <= 5000``, a float product form ``prod_{i=0}^{k-1} (c-i)/(n-i)`` above."""
    n_i, c_i, k_i = _check_nck(n, c, k)
    if c_i < k_i:
        return 0.0
    if n_i <= _EXACT_COMB_LIMIT:
        return float(Fraction(math.comb(c_i, k_i), math.comb(n_i, k_i)))
    i = np.arange(k_i, dtype=np.float64)
    return float(np.exp(np.sum(np.log((c_i - i) / (n_i - i)))))
