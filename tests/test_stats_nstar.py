"""ReliableEval's n* (``min_reliable_n``) against a brute-force implementation written here.

Score vectors are cut from the real Mizrahi et al. per-paraphrase accuracies
(tests/data/multiprompt, CDLA-Permissive-2.0): each paraphrase is one resampling of the prompt.
With small N (6..10) every subset of every size is enumerated by both implementations.
"""

from __future__ import annotations

import csv
import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable.stats import NStarResult, min_reliable_n
from pytest_reliable.stats.reliable_n import pilot_inflation

DATA = Path(__file__).parent / "data" / "multiprompt" / "paraphrases_accuracies" / "BBH"
ALL_SUBSETS = 1_000_000  # > C(N, n) for every N <= 10 (and 16): the exact path everywhere


def real(task: str, model: str, start: int = 0, size: int | None = None) -> np.ndarray:
    with (DATA / f"{task}.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    col = rows[0].index(f"{model}_acc")
    values = np.array([float(row[col]) for row in rows[1:]])
    return values[start:] if size is None else values[start : start + size]


def tol(eps: float) -> float:
    return eps + 1e-12 * max(1.0, eps)


def brute_curves(x: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The recipe, literally: every size-n subset, its own mean and population variance."""
    ref_mean, ref_var = float(np.mean(x)), float(np.var(x))
    q = 100 * (1 - delta / 2)
    mean_upper, var_upper = [], []
    for n in range(1, len(x) + 1):
        mean_devs, var_devs = [], []
        for subset in itertools.combinations(x.tolist(), n):
            sub = np.array(subset)
            mean_devs.append(abs(float(np.mean(sub)) - ref_mean))
            var_devs.append(abs(float(np.var(sub)) - ref_var))
        mean_upper.append(float(np.percentile(mean_devs, q)))
        var_upper.append(float(np.percentile(var_devs, q)))
    return np.array(mean_upper), np.array(var_upper)


def first_crossing(curve: np.ndarray, eps: float) -> int:
    for i, value in enumerate(curve):
        if value <= tol(eps):
            return i + 1
    raise AssertionError("curve never crosses eps")  # pragma: no cover


def last_crossing(curve: np.ndarray, eps: float) -> int:
    """First n from which the curve stays <= eps (what a monotone search would report)."""
    n = len(curve)
    while n > 1 and curve[n - 2] <= tol(eps):
        n -= 1
    return n


def check_against_brute(x: np.ndarray, eps: float, delta: float) -> NStarResult:
    result = min_reliable_n(x, eps, delta, subsets=ALL_SUBSETS)
    mean_upper, var_upper = brute_curves(x, delta)
    np.testing.assert_allclose(result.mean_upper, mean_upper, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.var_upper, var_upper, rtol=0, atol=1e-12)
    assert result.n_star_mean == first_crossing(mean_upper, eps)
    assert result.n_star_var == first_crossing(var_upper, eps)
    assert result.n_star == max(result.n_star_mean, result.n_star_var)
    assert result.N == len(x) and result.eps == eps and result.delta == delta
    assert result.reliable == (result.n_star < len(x))
    assert result.mean_upper[-1] == 0.0 and result.var_upper[-1] == 0.0
    if len(x) >= 2:
        assert result.achievable_eps == pytest.approx(max(mean_upper[-2], var_upper[-2]), abs=1e-12)
    return result


REAL_WINDOWS = [
    ("causal_judgement", "flan-t5-xl", 0, 6),
    ("navigate", "vicuna-13b", 10, 7),
    ("snarks", "alpaca-13b", 0, 8),
    ("hyperbaton", "falcon-7b-instruct", 20, 9),
    ("ruin_names", "flan-t5-xxl", 0, 10),
    ("geometric_shapes", "minotaur-15b", 5, 10),
]


@pytest.mark.parametrize(("task", "model", "start", "size"), REAL_WINDOWS)
@pytest.mark.parametrize(("eps", "delta"), [(0.01, 0.1), (0.03, 0.05), (0.005, 0.2)])
def test_matches_brute_force_on_real_vectors(
    task: str, model: str, start: int, size: int, eps: float, delta: float
) -> None:
    check_against_brute(real(task, model, start, size), eps, delta)


def test_non_monotone_curve_uses_first_crossing() -> None:
    # formal_fallacies / flan-t5-xl, first 8 paraphrases: the mean curve goes
    # 0.293, 0.137, 0.150, 0.098, ... so at eps = 0.14 it dips below at n=2, rises above at n=3
    # and stays below only from n=4.
    x = real("formal_fallacies", "flan-t5-xl", 0, 8)
    eps = 0.14
    mean_upper, _ = brute_curves(x, 0.1)
    assert first_crossing(mean_upper, eps) == 2
    assert last_crossing(mean_upper, eps) == 4
    result = check_against_brute(x, eps, 0.1)
    assert result.n_star_mean == 2


def test_non_monotone_curve_second_real_case() -> None:
    x = real("logical_deduction_five_objects", "alpaca-13b", 0, 8)
    eps = 0.0127  # mean curve ... 0.0125 (n=4), 0.0130 (n=5), 0.0083 (n=6) ...
    mean_upper, _ = brute_curves(x, 0.1)
    assert first_crossing(mean_upper, eps) != last_crossing(mean_upper, eps)
    assert check_against_brute(x, eps, 0.1).n_star_mean == first_crossing(mean_upper, eps)


def test_tiny_eps_is_not_reliable_and_reports_achievable_eps() -> None:
    x = real("movie_recommendation", "flan-t5-xl", 0, 9)
    mean_upper, var_upper = brute_curves(x, 0.1)
    result = check_against_brute(x, 1e-4, 0.1)
    assert result.n_star == 9 and not result.reliable
    achievable = max(mean_upper[-2], var_upper[-2])
    assert result.achievable_eps == pytest.approx(achievable, abs=1e-12)
    assert result.achievable_eps > 1e-4
    # at the eps the data vouches for, n* drops below N
    again = min_reliable_n(x, result.achievable_eps, 0.1, subsets=ALL_SUBSETS)
    assert again.reliable and again.n_star <= 8


def test_upper_end_equal_to_eps_on_the_grid_counts() -> None:
    # causal_judgement / falcon-7b-instruct, paraphrases 31..36 (0.48 0.51 0.47 0.49 0.55 0.48):
    # the upper end of the mean deviation at n=3 is 0.02 exactly in real arithmetic, but
    # 0.02000000000000002 in floating point; n = 1, 2 are clearly above.
    x = real("causal_judgement", "falcon-7b-instruct", 30, 6)
    mean_upper, _ = brute_curves(x, 0.1)
    assert mean_upper[2] == pytest.approx(0.02, abs=1e-12)
    assert mean_upper[2] > 0.02  # a strict "<= eps" would miss it
    assert (mean_upper[:2] > 0.02 + 1e-6).all()
    result = check_against_brute(x, 0.02, 0.1)
    assert result.n_star_mean == 3


def test_upper_end_equal_to_eps_constructed() -> None:
    # Two scores 0.01 either side of 0.51: every single-score deviation is 0.01 (up to round-off).
    x = np.array([0.50, 0.52])
    assert abs(0.50 - np.mean(x)) != 0.01  # round-off really is there
    result = check_against_brute(x, 0.01, 0.1)
    assert result.n_star_mean == 1 and result.n_star == 1 and result.reliable


def test_variance_decides_on_a_ten_point_scale() -> None:
    # disambiguation_qa / minotaur-15b on a 0-10 scale: the variance curve crosses later.
    x = real("disambiguation_qa", "minotaur-15b", 0, 8) * 10
    result = check_against_brute(x, 0.3, 0.1)
    assert result.n_star_var > result.n_star_mean
    assert result.n_star == result.n_star_var and result.reliable


@settings(max_examples=60, deadline=None)
@given(
    cents=st.lists(st.integers(0, 100), min_size=1, max_size=7),
    eps=st.sampled_from([0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]),
    delta=st.sampled_from([0.05, 0.1, 0.2, 0.5]),
)
def test_matches_brute_force_property(cents: list[int], eps: float, delta: float) -> None:
    x = np.array(cents, dtype=float) / 100
    check_against_brute(x, eps, delta)


def test_single_score() -> None:
    result = min_reliable_n([0.7])
    assert result.n_star == 1 and result.N == 1 and not result.reliable
    assert math.isinf(result.achievable_eps)
    assert result.mean_upper.tolist() == [0.0] and result.var_upper.tolist() == [0.0]


def test_constant_scores_are_reliable_at_once() -> None:
    result = min_reliable_n([0.4] * 12)
    assert result.n_star == 1 and result.reliable
    assert result.achievable_eps == pytest.approx(0.0, abs=1e-15)  # round-off of the mean


def test_same_seed_same_result_and_no_global_state() -> None:
    x = real("sports_understanding", "vicuna-13b", 0, 40)
    np.random.seed(1234)
    expected_draw = np.random.random()
    np.random.seed(1234)
    first = min_reliable_n(x, 0.01, 0.1, subsets=500, seed=7)
    assert np.random.random() == expected_draw  # the global RNG was not consumed
    second = min_reliable_n(x, 0.01, 0.1, subsets=500, seed=7)
    assert np.array_equal(first.mean_upper, second.mean_upper)
    assert np.array_equal(first.var_upper, second.var_upper)
    assert (first.n_star, first.n_star_mean, first.n_star_var) == (
        second.n_star,
        second.n_star_mean,
        second.n_star_var,
    )
    other = min_reliable_n(x, 0.01, 0.1, subsets=500, seed=8)
    assert not np.array_equal(first.mean_upper, other.mean_upper)


def test_random_subsets_close_to_exact() -> None:
    # N = 16: with subsets = 4000 sizes 5..11 use random subsets (C(16,5) = 4368 > 4000),
    # the others are enumerated. 4000 draws estimate a 95th percentile to a few percent.
    x = real("navigate", "falcon-7b-instruct", 0, 16)
    exact = min_reliable_n(x, subsets=ALL_SUBSETS)
    sampled = min_reliable_n(x, subsets=4000, seed=3)
    np.testing.assert_allclose(sampled.mean_upper, exact.mean_upper, rtol=0.1, atol=1e-12)
    np.testing.assert_allclose(sampled.var_upper, exact.var_upper, rtol=0.1, atol=1e-12)
    enumerated = [n for n in range(1, 17) if math.comb(16, n) <= 4000]
    for n in enumerated:  # identical where both enumerate
        assert sampled.mean_upper[n - 1] == pytest.approx(exact.mean_upper[n - 1], abs=1e-12)


def test_random_subsets_on_long_real_vector_match_brute_sampling_in_distribution() -> None:
    # N = 100 (the pilot size): compare with a plain loop over independent random subsets.
    x = real("causal_judgement", "vicuna-13b", 0, 100)
    result = min_reliable_n(x, subsets=10_000, seed=0)
    rng = np.random.default_rng(99)
    ref_mean, ref_var = float(np.mean(x)), float(np.var(x))
    for n in (5, 20, 50, 90):
        subs = [x[rng.choice(100, n, replace=False)] for _ in range(4000)]
        mean_up = np.percentile([abs(s.mean() - ref_mean) for s in subs], 95)
        var_up = np.percentile([abs(s.var() - ref_var) for s in subs], 95)
        assert result.mean_upper[n - 1] == pytest.approx(mean_up, rel=0.1)
        assert result.var_upper[n - 1] == pytest.approx(var_up, rel=0.1)


def test_no_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        min_reliable_n([0.1, 0.1, 0.1])
        min_reliable_n(real("snarks", "t0pp", 0, 30), subsets=100)


@pytest.mark.parametrize(
    ("kwargs", "name", "allowed"),
    [
        ({"eps": 0.0}, "eps", "> 0"),
        ({"eps": -0.1}, "eps", "> 0"),
        ({"eps": float("nan")}, "eps", "> 0"),
        ({"eps": float("inf")}, "eps", "> 0"),
        ({"method": "exact"}, "method", "'paper' or 'bootstrap'"),
        ({"method": "bootstrap", "n_max": 0}, "n_max", ">= 1"),
        ({"delta": 0.0}, "delta", "(0, 1)"),
        ({"delta": 1.5}, "delta", "(0, 1)"),
        ({"subsets": 0}, "subsets", ">= 1"),
        ({"subsets": 2.5}, "subsets", ">= 1"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, float], name: str, allowed: str) -> None:
    with pytest.raises(ValueError) as info:
        min_reliable_n([0.1, 0.2, 0.3], **kwargs)  # type: ignore[arg-type]
    assert name in str(info.value) and allowed in str(info.value)


@pytest.mark.parametrize(
    ("scores", "fragment"),
    [([], "not be empty"), ([0.1, float("nan")], "NaN"), ([[0.1, 0.2]], "1-D")],
)
def test_invalid_scores(scores: list[object], fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        min_reliable_n(scores)  # type: ignore[arg-type]
    assert "scores" in str(info.value) and fragment in str(info.value)


# --------------------------------------------------------------------------- eps on any scale


def test_eps_is_on_the_scores_scale() -> None:
    """Percent scores with eps in points give exactly the n* of [0, 1] scores with eps / 100."""
    x = real("snarks", "alpaca-13b", 0, 30)
    for method in ("paper", "bootstrap"):
        unit = min_reliable_n(x, 0.02, 0.1, subsets=2_000, method=method)
        percent = min_reliable_n(100 * x, 2.0, 0.1, subsets=2_000, method=method)
        assert percent.n_star_mean == unit.n_star_mean, method
        np.testing.assert_allclose(percent.mean_upper, 100 * unit.mean_upper, rtol=1e-9)


def test_paper_is_still_the_default() -> None:
    x = real("navigate", "vicuna-13b", 0, 40)
    assert min_reliable_n(x).method == "paper"
    default, paper = min_reliable_n(x), min_reliable_n(x, method="paper")
    assert default.n_star == paper.n_star and default.n_max is None
    np.testing.assert_array_equal(default.mean_upper, paper.mean_upper)


# --------------------------------------------------------------------------- bootstrap


def brute_bootstrap_upper(x: np.ndarray, n: int, delta: float, draws: int, seed: int) -> float:
    """The bootstrap recipe literally, for one size: draws of n scores with replacement, the
    (1 - delta/2) percentile of the mean's absolute deviation (SPEC section 7)."""
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(draws, n))].mean(axis=1)
    return float(np.percentile(np.abs(means - x.mean()), 100 * (1 - delta / 2)))


def test_bootstrap_curve_matches_a_literal_resampling_in_distribution() -> None:
    x = real("causal_judgement", "flan-t5-xxl", 0, 50)
    result = min_reliable_n(x, 0.002, 0.1, subsets=20_000, method="bootstrap", n_max=60)
    assert result.method == "bootstrap" and result.n_max == 60
    # The recipe resamples the pilot's deviations inflated to their upper confidence bound.
    inflated = x.mean() + (x - x.mean()) * pilot_inflation(len(x), 0.1)
    for n in (1, 5, 20, 60):
        literal = brute_bootstrap_upper(inflated, n, 0.1, 20_000, seed=99)
        assert result.mean_upper[n - 1] == pytest.approx(literal, rel=0.05), n


def test_bootstrap_may_exceed_the_pilot_and_paper_may_not() -> None:
    rng = np.random.default_rng(7)
    x = 0.7 + 0.032 * rng.standard_normal(10)
    paper = min_reliable_n(x, 0.01, 0.1)
    boot = min_reliable_n(x, 0.01, 0.1, method="bootstrap")
    assert paper.n_star <= 10
    # The fresh-resampling answer: (z_{0.975} * sd / eps)^2 at this pilot's sd inflated to its
    # upper 90% bound (a pilot of 10 may have missed the tail: about 2.2 times the resamplings).
    expected = (1.96 * float(np.std(x)) * pilot_inflation(10, 0.1) / 0.01) ** 2
    # A pilot under 30 cannot vouch for it (SPEC 7): not reliable, n* all the same.
    assert not boot.reliable and boot.pilot_too_small and boot.n_star > 10
    assert boot.n_star == pytest.approx(expected, rel=0.2)
    assert boot.n_star == max(boot.n_star_mean, boot.n_star_var)


def test_bootstrap_at_the_cap_gives_the_uncapped_estimate_and_the_eps_the_cap_vouches_for() -> None:
    rng = np.random.default_rng(8)
    x = 0.7 + 0.1 * rng.standard_normal(100)
    result = min_reliable_n(x, 0.002, 0.1, subsets=4_000, method="bootstrap", n_max=50)
    assert not result.reliable and result.n_star > 50
    assert len(result.mean_upper) == 50
    assert result.achievable_eps == pytest.approx(
        max(result.mean_upper[-1], result.var_upper[-1])
    )
    # The estimate extrapolates the curve at the cap as 1/sqrt(n): about (1.96 sd / eps)^2 at
    # the pilot's inflated sd.
    inflated = float(np.std(x)) * pilot_inflation(100, 0.1)
    assert result.n_star == pytest.approx((1.96 * inflated / 0.002) ** 2, rel=0.1)


def test_bootstrap_edge_cases() -> None:
    constant = min_reliable_n([0.5] * 30, method="bootstrap")
    assert constant.n_star == 1 and constant.reliable
    three = min_reliable_n([0.5, 0.5, 0.5], method="bootstrap")
    assert three.n_star == 1 and not three.reliable  # a pilot of 3 vouches for nothing
    single = min_reliable_n([0.5], method="bootstrap")
    assert not single.reliable and single.achievable_eps == math.inf
    a = min_reliable_n(real("snarks", "t0pp", 0, 30), method="bootstrap", seed=3)
    b = min_reliable_n(real("snarks", "t0pp", 0, 30), method="bootstrap", seed=3)
    np.testing.assert_array_equal(a.mean_upper, b.mean_upper)


def _fresh_coverage(method: str, sd: float, pilot: int, pilots: int, seed: int) -> tuple[float, float]:
    """Share of fresh runs of n* resamplings within eps=0.01 of the true mean, and its MC error.

    The model is format-sensitive: a resampling's score is its format's accuracy, drawn from
    N(0.7, sd^2) over a large space of formats. Each pilot is followed by 200 fresh runs of n*.
    """
    rng = np.random.default_rng(seed)
    rates = []
    for p in range(pilots):
        x = 0.7 + sd * rng.standard_normal(pilot)
        n = min_reliable_n(x, 0.01, 0.1, subsets=2_000, seed=p, method=method).n_star
        means = (0.7 + sd * rng.standard_normal((200, n))).mean(axis=1)
        rates.append(float(np.mean(np.abs(means - 0.7) <= 0.01)))
    # Runs of one pilot share its n*: the pilots are the independent units.
    return float(np.mean(rates)), float(np.std(rates, ddof=1) / math.sqrt(pilots))


@pytest.mark.slow
def test_bootstrap_keeps_its_promise_for_fresh_resamplings_and_paper_does_not() -> None:
    """Issue 12: on a 10-resampling pilot the paper's n* holds about 62% of the time (promised 90%)."""
    boot, boot_se = _fresh_coverage("bootstrap", 0.032, 10, 150, seed=1)
    paper, paper_se = _fresh_coverage("paper", 0.032, 10, 150, seed=1)
    print(f"fresh-run coverage, promised >= 0.90: bootstrap {boot:.3f} +- {boot_se:.3f}, "
          f"paper {paper:.3f} +- {paper_se:.3f}")
    assert boot >= 0.90 - 3 * boot_se
    assert paper < 0.75


@pytest.mark.slow
def test_bootstrap_keeps_its_promise() -> None:
    """SPEC section 7's recipe (the (1 - delta/2) percentile, the pilot inflation, n* the larger
    of the two criteria) keeps the mean within eps of the space's in fresh runs of n* at least
    1 - delta of the time, from pilots of 100. It overshoots (about 0.97): a (1 - delta)
    percentile would cost fewer resamplings, a SPEC question (issue 31 item 3)."""
    boot, se = _fresh_coverage("bootstrap", 0.032, 100, 60, seed=2)
    print(f"fresh-run coverage from pilots of 100: {boot:.3f} +- {se:.3f}")
    assert boot >= 0.90 - 3 * se


def test_bootstrap_n_star_does_not_depend_on_the_scores_scale() -> None:
    # SPEC 7: the bootstrap's spread criterion compares standard deviations, so percents with
    # 100 x eps ask the same resamplings as fractions with eps (variances differed 100-fold).
    x = 0.7 + 0.05 * np.random.default_rng(3).standard_normal(50)
    fractions = min_reliable_n(x, 0.02, 0.1, method="bootstrap")
    percents = min_reliable_n(100 * x, 2.0, 0.1, method="bootstrap")
    assert (fractions.n_star_mean, fractions.n_star_var) == (percents.n_star_mean,
                                                              percents.n_star_var)
    assert fractions.var_upper[9] == pytest.approx(percents.var_upper[9] / 100)
    # The paper's recipe keeps its squared units.
    assert min_reliable_n(x, 0.02, 0.1).n_star_var != min_reliable_n(100 * x, 2.0, 0.1).n_star_var


def test_a_small_pilot_is_inflated_to_its_upper_spread_bound() -> None:
    assert pilot_inflation(10, 0.1) == pytest.approx(math.sqrt(9 / 4.168159), rel=1e-5)
    assert 1.0 < pilot_inflation(100, 0.1) < 1.11 and pilot_inflation(1, 0.1) == 1.0
