"""pytest_reliable.stats: proportions, pass@k, summaries, bootstrap, paired comparison, ORP and
argument validation. n* is in test_stats_nstar.py, the published multi-prompt tables in
test_stats_multiprompt.py."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import binom, norm

from pytest_reliable import stats
from pytest_reliable.stats import (
    bootstrap_ci,
    mcnemar_exact,
    moments,
    orp,
    paired_comparison,
    pass_at_k,
    pass_hat_k,
    ranges,
    wilson_interval,
)


@st.composite
def n_c(draw: st.DrawFn, max_n: int = 80) -> tuple[int, int]:
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n))


# --------------------------------------------------------------------------- pass@k, pass^k


@given(n_c(), st.data())
def test_pass_at_k_non_decreasing_in_k(nc: tuple[int, int], data: st.DataObject) -> None:
    n, c = nc
    assume(n >= 2)
    k = data.draw(st.integers(1, n - 1))
    assert pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1)


@given(n_c(), st.data())
def test_pass_at_k_non_decreasing_in_c(nc: tuple[int, int], data: st.DataObject) -> None:
    n, c = nc
    assume(c < n)
    k = data.draw(st.integers(1, n))
    assert pass_at_k(n, c, k) <= pass_at_k(n, c + 1, k)


@given(n_c(), st.data())
def test_pass_hat_k_at_most_pass_at_k(nc: tuple[int, int], data: st.DataObject) -> None:
    n, c = nc
    k = data.draw(st.integers(1, n))
    hat, at = pass_hat_k(n, c, k), pass_at_k(n, c, k)
    assert 0.0 <= hat <= at <= 1.0


@given(n_c(max_n=500))
def test_pass_at_1_is_the_success_rate(nc: tuple[int, int]) -> None:
    n, c = nc
    assert pass_at_k(n, c, 1) == c / n == pass_hat_k(n, c, 1)


@given(n_c(max_n=60), st.data())
def test_pass_at_k_matches_definition(nc: tuple[int, int], data: st.DataObject) -> None:
    n, c = nc
    k = data.draw(st.integers(1, n))
    expected = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == float(expected)
    assert pass_hat_k(n, c, k) == float(Fraction(math.comb(c, k), math.comb(n, k)))


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(10, 3, 1) == 0.3
    assert pass_at_k(10, 3, 8) == 1.0  # fewer than k failures: some draw succeeds
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)
    assert pass_hat_k(5, 1, 2) == 0.0


@pytest.mark.parametrize(("n", "c", "k"), [(6000, 37, 5), (20000, 9000, 40), (10001, 1, 10001)])
def test_large_n_product_form_matches_exact(n: int, c: int, k: int) -> None:
    exact_at = float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
    exact_hat = float(Fraction(math.comb(c, k), math.comb(n, k)))
    assert pass_at_k(n, c, k) == pytest.approx(exact_at, rel=1e-9, abs=1e-300)
    assert pass_hat_k(n, c, k) == pytest.approx(exact_hat, rel=1e-9, abs=1e-300)


# --------------------------------------------------------------------------- Wilson


@given(n_c(max_n=400), st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99]))
def test_wilson_contains_the_proportion(nc: tuple[int, int], confidence: float) -> None:
    n, c = nc
    low, high = wilson_interval(c, n, confidence)
    assert 0.0 <= low <= c / n <= high <= 1.0


@given(n_c(max_n=200), st.integers(2, 6))
def test_wilson_narrows_as_n_grows(nc: tuple[int, int], factor: int) -> None:
    n, c = nc
    low, high = wilson_interval(c, n)
    low2, high2 = wilson_interval(c * factor, n * factor)
    assert high2 - low2 < high - low


def test_wilson_matches_formula() -> None:
    c, n, z = 7, 20, norm.ppf(0.975)
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert wilson_interval(c, n) == pytest.approx((centre - half, centre + half), abs=1e-12)


@pytest.mark.parametrize("p", [0.05, 0.5, 0.95])
@pytest.mark.parametrize("n", [20, 100])
def test_wilson_coverage_by_simulation(p: float, n: int) -> None:
    """Coverage of the nominal 95% Wilson interval over 20,000 binomial draws.

    Tolerance: the simulated coverage must lie in [0.915, 0.99]. Wilson's coverage oscillates
    around the nominal level and is known to dip below it for extreme p at small n: at p = 0.05
    (or 0.95) and n = 20 the EXACT coverage is 0.9245 (checked below from the binomial pmf), so
    "close to 95%" honestly means about 0.92 there. The simulation's standard error is
    sqrt(0.925 * 0.075 / 20000) ~= 0.0019, so 0.915 leaves ~5 SE below that worst case; for the
    other cells the exact coverage is 0.943..0.966 and we require >= 0.93. The upper bound 0.99
    says the interval is not grossly conservative either. The seed is fixed, so the test is
    deterministic; the simulation must also agree with the exact coverage within 4 SE.
    """
    intervals = [wilson_interval(c, n, 0.95) for c in range(n + 1)]
    low = np.array([iv[0] for iv in intervals])
    high = np.array([iv[1] for iv in intervals])
    covered = (low <= p) & (p <= high)
    exact = float(np.sum(binom.pmf(np.arange(n + 1), n, p)[covered]))
    draws = np.random.default_rng(20240601).binomial(n, p, size=20_000)
    simulated = float(np.mean(covered[draws]))
    se = math.sqrt(exact * (1 - exact) / 20_000)
    assert abs(simulated - exact) <= 4 * se
    lower = 0.915 if (n == 20 and p != 0.5) else 0.93
    assert lower <= simulated <= 0.99


# --------------------------------------------------------------------------- summaries


def test_moments_population_variance() -> None:
    m = moments([0.2, 0.4, 0.6, 0.8])
    assert m.mean == pytest.approx(0.5)
    assert m.variance == pytest.approx(0.05)  # ddof = 0
    assert m.std == pytest.approx(math.sqrt(0.05))
    assert m.n == 4
    assert moments([0.3]).variance == 0.0


def test_ranges_linear_percentiles() -> None:
    r = ranges([0.1, 0.2, 0.3, 0.4, 1.0])
    assert (r.min, r.q1, r.median, r.q3, r.max) == pytest.approx((0.1, 0.2, 0.3, 0.4, 1.0))
    assert r.iqr == pytest.approx(0.2)
    r2 = ranges([0.0, 1.0])
    assert (r2.q1, r2.median, r2.q3, r2.iqr) == pytest.approx((0.25, 0.5, 0.75, 0.5))


def test_bootstrap_ci_contains_mean_and_is_deterministic() -> None:
    x = np.random.default_rng(1).uniform(0.3, 0.7, size=60)
    low, high = bootstrap_ci(x, seed=3)
    assert low < float(np.mean(x)) < high
    assert bootstrap_ci(x, seed=3) == (low, high)
    wide = bootstrap_ci(x, confidence=0.99, seed=3)
    assert wide[0] <= low and wide[1] >= high
    med = bootstrap_ci(x, statistic=np.median, seed=3)
    assert med[0] <= float(np.median(x)) <= med[1]


@pytest.mark.parametrize("method", ["percentile", "BCa", "basic"])
@pytest.mark.parametrize("values", [[0.5], [0.7, 0.7, 0.7], [1.0] * 30])
def test_bootstrap_ci_degenerate(values: list[float], method: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = bootstrap_ci(values, method=method)
    assert low == high == pytest.approx(values[0])


def test_bootstrap_ci_nearly_degenerate_never_nan() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = bootstrap_ci([0.0] * 19 + [1.0], method="BCa")
    assert math.isfinite(low) and math.isfinite(high) and low <= high


# --------------------------------------------------------------------------- paired comparison


def test_paired_comparison_detects_shift() -> None:
    rng = np.random.default_rng(5)
    b = rng.uniform(0.2, 0.8, size=50)
    a = b + 0.05 + rng.normal(0, 0.01, size=50)
    result = paired_comparison(a, b, seed=1)
    assert result.mean_difference == pytest.approx(float(np.mean(a - b)))
    assert 0 < result.low < result.mean_difference < result.high
    assert result.n == 50 and result.confidence == 0.95 and result.mcnemar is None
    # the paired interval is far narrower than the spread of either model
    assert result.high - result.low < 0.02


def test_paired_comparison_identical_vectors() -> None:
    x = [0.1, 0.5, 0.9, 0.3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = paired_comparison(x, x)
    assert (result.mean_difference, result.low, result.high) == (0.0, 0.0, 0.0)


def test_paired_comparison_binary_includes_mcnemar() -> None:
    a = [1] * 10 + [0] * 2 + [1] * 5 + [0] * 3
    b = [0] * 10 + [1] * 2 + [1] * 5 + [0] * 3
    result = paired_comparison(a, b)
    assert result.mcnemar is not None
    assert (result.mcnemar.a_only, result.mcnemar.b_only, result.mcnemar.n) == (10, 2, 20)
    assert result.mean_difference == pytest.approx(8 / 20)


def test_mcnemar_exact_known_value() -> None:
    a = [1] * 10 + [0] * 2 + [1] * 5 + [0] * 3
    b = [0] * 10 + [1] * 2 + [1] * 5 + [0] * 3
    result = mcnemar_exact(a, b)
    # two-sided exact binomial on 12 discordant pairs, 2 in the minority: 2 * (1 + 12 + 66) / 2^12
    assert result.p_value == pytest.approx(2 * 79 / 4096)
    assert (result.a_only, result.b_only) == (10, 2)
    swapped = mcnemar_exact(b, a)
    assert swapped.p_value == pytest.approx(result.p_value)
    assert (swapped.a_only, swapped.b_only) == (2, 10)


def test_mcnemar_no_discordant_pairs() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = mcnemar_exact([True, False, True], [True, False, True])
    assert result.p_value == 1.0 and result.a_only == result.b_only == 0


def test_mcnemar_rejects_non_binary() -> None:
    with pytest.raises(ValueError, match="outcomes_a"):
        mcnemar_exact([0.5, 1.0], [1.0, 0.0])


# --------------------------------------------------------------------------- ORP

grid_scores = st.lists(st.integers(0, 100), min_size=2, max_size=30)


@given(grid_scores, st.data(), st.floats(0.01, 1.0), st.integers(2, 60))
def test_orp_curve_non_increasing_within_half(
    a_cents: list[int], data: st.DataObject, d_max: float, grid: int
) -> None:
    b_cents = data.draw(st.lists(st.integers(0, 100), min_size=len(a_cents), max_size=len(a_cents)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = orp(np.array(a_cents) / 100, np.array(b_cents) / 100, d_max=d_max, grid=grid)
    assert result.d.shape == result.curve.shape == (grid,)
    assert np.all(np.isfinite(result.curve)) and math.isfinite(result.area)
    assert np.all(np.diff(result.curve) <= 0)
    assert np.all((result.curve >= 0) & (result.curve <= 0.5))
    assert 0.0 <= result.area <= 0.5
    assert -1.0 <= result.rho <= 1.0 and result.sigma_d >= 0.0


@given(grid_scores, st.integers(-50, 50))
def test_orp_zero_sigma_identical_or_shifted(cents: list[int], shift: int) -> None:
    a = np.array(cents) / 100
    b = a + shift / 100
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = orp(a, b, d_max=0.3, grid=7)
    assert result.sigma_d == 0.0
    assert result.curve[0] == 0.5 and np.all(result.curve[1:] == 0.0)
    assert result.area == pytest.approx(0.5 * (0.3 / 6) / 2 / 0.3)
    assert not math.isnan(result.rho)


def test_orp_matches_formula_on_real_scale_data() -> None:
    rng = np.random.default_rng(11)
    a = rng.uniform(0.4, 0.6, size=40)
    b = 0.5 * a + rng.uniform(0.2, 0.3, size=40)
    result = orp(a, b)
    s_a, s_b = np.std(a, ddof=1), np.std(b, ddof=1)
    rho = np.corrcoef(a, b)[0, 1]
    sigma = math.sqrt(s_a**2 + s_b**2 - 2 * rho * s_a * s_b)
    assert result.rho == pytest.approx(rho, abs=1e-12)
    assert result.sigma_d == pytest.approx(sigma, rel=1e-12)
    d = np.linspace(0, 0.3, 101)
    np.testing.assert_array_equal(result.d, d)
    np.testing.assert_allclose(result.curve, norm.cdf(-d / sigma), rtol=1e-12)
    assert result.area == pytest.approx(np.trapezoid(norm.cdf(-d / sigma), d) / 0.3, rel=1e-12)


def test_orp_constant_vector_has_rho_zero() -> None:
    a = [0.4, 0.4, 0.4, 0.4]
    b = [0.1, 0.3, 0.2, 0.6]
    result = orp(a, b)
    assert result.rho == 0.0
    assert result.sigma_d == pytest.approx(float(np.std(b, ddof=1)))


# --------------------------------------------------------------------------- validation

Call = Callable[[], Any]
INVALID: list[tuple[str, Call, str, str]] = [
    ("wilson confidence 0", lambda: wilson_interval(3, 10, 0.0), "confidence", "(0, 1)"),
    ("wilson confidence 1", lambda: wilson_interval(3, 10, 1.0), "confidence", "(0, 1)"),
    ("wilson successes > n", lambda: wilson_interval(11, 10), "successes", "[0, 10]"),
    ("wilson negative", lambda: wilson_interval(-1, 10), "successes", ">= 0"),
    ("wilson n 0", lambda: wilson_interval(0, 0), "n", ">= 1"),
    (
        "wilson fractional",
        lambda: wilson_interval(2.5, 10),  # type: ignore[arg-type]
        "successes",
        "integer",
    ),
    ("pass@k k > n", lambda: pass_at_k(5, 2, 6), "k", "[1, 5]"),
    ("pass@k c > n", lambda: pass_at_k(5, 6, 1), "c", "[0, 5]"),
    ("pass@k k < 1", lambda: pass_at_k(5, 2, 0), "k", ">= 1"),
    ("pass@k negative c", lambda: pass_at_k(5, -1, 1), "c", ">= 0"),
    ("pass@k negative n", lambda: pass_at_k(-5, 0, 1), "n", ">= 1"),
    ("pass^k k > n", lambda: pass_hat_k(5, 2, 6), "k", "[1, 5]"),
    ("pass^k c > n", lambda: pass_hat_k(5, 6, 1), "c", "[0, 5]"),
    ("pass^k k < 1", lambda: pass_hat_k(5, 2, 0), "k", ">= 1"),
    ("moments empty", lambda: moments([]), "scores", "empty"),
    ("moments NaN", lambda: moments([0.1, float("nan")]), "scores", "NaN"),
    ("moments inf", lambda: moments([0.1, float("inf")]), "scores", "finite"),
    ("ranges empty", lambda: ranges([]), "values", "empty"),
    ("avgp empty", lambda: stats.avgp([]), "scores", "empty"),
    ("maxp NaN", lambda: stats.maxp([float("nan")]), "scores", "NaN"),
    ("cps empty", lambda: stats.cps([]), "scores", "empty"),
    (
        "bootstrap confidence",
        lambda: bootstrap_ci([0.1, 0.2], confidence=1.2),
        "confidence",
        "(0, 1)",
    ),
    ("bootstrap empty", lambda: bootstrap_ci([]), "values", "empty"),
    ("bootstrap resamples", lambda: bootstrap_ci([0.1, 0.2], n_resamples=0), "n_resamples", ">= 1"),
    ("paired lengths", lambda: paired_comparison([0.1, 0.2], [0.1]), "scores_a", "same length"),
    (
        "paired confidence",
        lambda: paired_comparison([0.1], [0.2], confidence=0),
        "confidence",
        "(0, 1)",
    ),
    ("paired NaN", lambda: paired_comparison([0.1], [float("nan")]), "scores_b", "NaN"),
    ("mcnemar lengths", lambda: mcnemar_exact([1, 0], [1]), "outcomes_a", "same length"),
    ("orp lengths", lambda: orp([0.1, 0.2, 0.3], [0.1, 0.2]), "scores_b", "same length"),
    ("orp too short", lambda: orp([0.1], [0.2]), "scores_a", "at least 2"),
    ("orp d_max 0", lambda: orp([0.1, 0.2], [0.2, 0.1], d_max=0.0), "d_max", "> 0"),
    ("orp d_max negative", lambda: orp([0.1, 0.2], [0.2, 0.1], d_max=-1), "d_max", "> 0"),
    ("orp grid 1", lambda: orp([0.1, 0.2], [0.2, 0.1], grid=1), "grid", ">= 2"),
    ("orp empty", lambda: orp([], []), "scores_a", "empty"),
    ("n* eps", lambda: stats.min_reliable_n([0.1, 0.2], eps=0.0), "eps", "> 0"),
    ("n* delta", lambda: stats.min_reliable_n([0.1, 0.2], delta=0.0), "delta", "(0, 1)"),
    ("n* subsets", lambda: stats.min_reliable_n([0.1, 0.2], subsets=0), "subsets", ">= 1"),
    ("n* empty", lambda: stats.min_reliable_n([]), "scores", "empty"),
    ("n* NaN", lambda: stats.min_reliable_n([float("nan")]), "scores", "NaN"),
]


@pytest.mark.parametrize(
    ("call", "name", "allowed"), [i[1:] for i in INVALID], ids=[i[0] for i in INVALID]
)
def test_invalid_input_raises_value_error_naming_the_argument(
    call: Call, name: str, allowed: str
) -> None:
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert message.startswith(name) or f" {name} " in message, message
    assert allowed in message, message


@settings(max_examples=30)
@given(st.floats(allow_nan=True).filter(lambda v: not (0.0 < v < 1.0)))
def test_out_of_range_probabilities_rejected(value: float) -> None:
    # eps is on the scores' own scale (SPEC section 7): any eps > 0, so only eps <= 0 and NaN
    # are out of range.
    if not value > 0.0 or math.isinf(value):
        with pytest.raises(ValueError, match="eps"):
            stats.min_reliable_n([0.1, 0.3], eps=value)
    for call, name in (
        (lambda: stats.min_reliable_n([0.1, 0.3], delta=value), "delta"),
        (lambda: wilson_interval(1, 2, value), "confidence"),
    ):
        with pytest.raises(ValueError, match=name):
            call()
