"""CheckList thresholds decided in gate.py (SPEC sections 4 and 11): bounds, policies, zero
tolerance, and a seeded error-rate check of the proportion bounds through the real code."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_confint

from pytest_reliable import stats
from pytest_reliable.verdict.gate import checklist_bound, checklist_thresholds

POLICIES = ("pass-on-evidence", "fail-on-evidence", "estimate")


@given(st.lists(st.integers(0, 4), min_size=2, max_size=30), st.integers(4, 4))
def test_clustered_proportion_is_clustered_mean_for_equal_clusters(
    bad: list[int], size: int
) -> None:
    matrix = np.zeros((size, len(bad)))
    for i, count in enumerate(bad):
        matrix[:count, i] = 1.0
    ours = stats.clustered_proportion(bad, [size] * len(bad))
    theirs = stats.clustered_mean(matrix)
    assert ours.estimate == pytest.approx(theirs.estimate)
    assert ours.se == pytest.approx(theirs.se)
    assert (ours.clusters, ours.cells) == (theirs.clusters, theirs.cells)


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_wilson_bound_is_statsmodels_wilson(counts: tuple[int, int], confidence: float) -> None:
    """One-sided bounds at c are the ends of the two-sided interval at 2c - 1."""
    k, n = counts
    bound = stats.wilson_bound(k, n)
    low, high = stats.wilson_interval(k, n, 2 * confidence - 1)
    assert bound.lower(confidence) == pytest.approx(low, abs=1e-9)
    assert bound.upper(confidence) == pytest.approx(high, abs=1e-9)
    # p-values invert the bounds: "rate >= upper(c)" is rejected at exactly 1 - c.
    if 0 < high < 1:
        assert bound.p_below(high) == pytest.approx(1 - confidence, abs=1e-6)
    if 0 < low < 1:
        assert bound.p_above(low) == pytest.approx(1 - confidence, abs=1e-6)


def test_bound_is_exact_for_one_pair_per_example_else_clustered() -> None:
    one = checklist_bound([1, 0, 0], [1, 1, 1])
    assert isinstance(one, stats.BoundedMean) and one.method.startswith("Clopper-Pearson")
    assert isinstance(checklist_bound([0, 0, 0], [1, 0, 1]), stats.BoundedMean)
    clustered = checklist_bound([2, 0, 0, 0], [2, 2, 1, 2])
    assert isinstance(clustered, stats.ProportionBound)
    assert clustered.method.startswith("clustered by example")
    # As many pairs from every example: Gaffke's bound on the examples' own rates.
    equal = checklist_bound([2, 1, 0, 0], [3, 3, 3, 3])
    assert isinstance(equal, stats.BoundedMean) and equal.method.startswith("Gaffke")
    assert equal.estimate == pytest.approx(3 / 12)
    assert clustered.estimate == pytest.approx(2 / 7) and clustered.clusters == 4


def test_clustering_widens_the_bound_when_flips_come_in_examples() -> None:
    """10 examples x 3 pairs, 6 flips all in 2 examples: clustered, the upper bound is far
    above what 30 independent pairs would give."""
    counts, sizes = [3, 3] + [0] * 8, [3] * 10
    clustered = checklist_bound(counts, sizes).upper(0.95)
    independent = stats.wilson_bound(6, 30).upper(0.95)
    assert clustered > independent + 0.05


@pytest.mark.parametrize("decide", POLICIES)
def test_no_pairs_fails_every_threshold(decide: str) -> None:
    (check,) = checklist_thresholds({"max_flip_rate": 0.2}, [], [], decide, 0.95)
    assert check.observed is None and not check.passed
    (exact,) = checklist_thresholds({"max_flip_rate": 0.0}, [0], [0], decide, 0.95)
    assert not exact.passed


def test_unset_limits_make_no_check_and_names_keep_their_order() -> None:
    assert checklist_thresholds({"min_pass": None}, [1], [1], "estimate", 0.95) == []
    checks = checklist_thresholds({"max_fail_rate": 0.5, "max_flip_rate": 0.5},
                                  [0, 1], [1, 1], "fail-on-evidence", 0.95)
    assert [c.name for c in checks] == ["max_flip_rate", "max_fail_rate"]
    assert all("Holm over 2 claims" in str(c.method) for c in checks)


def test_describe_names_bound_policy_and_method() -> None:
    (check,) = checklist_thresholds({"max_flip_rate": 0.1}, [0] * 20, [1] * 20,
                                    "pass-on-evidence", 0.95)
    text = check.describe()
    assert "max_flip_rate: observed 0.0000, required <= 0.1; upper bound" in text
    assert ("(pass-on-evidence, Clopper-Pearson exact binomial bound on the 20 independent "
            "pairs)") in text
    # No flip in 20: the exact upper bound at 95% is 1 - 0.05^(1/20).
    assert check.bound == pytest.approx(1 - 0.05 ** (1 / 20))


def _exact_error(n: int, p: float, bound: Callable[[int, int], stats.MeanBound]) -> float:
    """P(a fail-on-evidence min_pass=p fails | true rate p), summed over the binomial."""
    return sum(scipy_stats.binom.pmf(k, n, p) * (bound(k, n).p_below(p) <= 0.05)
               for k in range(n + 1))


@pytest.mark.parametrize(("n", "p"), [(8, 0.99), (10, 0.95), (16, 0.99), (50, 0.99),
                                      (100, 0.99), (100, 0.9)])
def test_the_exact_bound_keeps_its_level_near_one_where_wilson_did_not(n: int, p: float) -> None:
    """Issue 31 item 2, computed exactly: a compliant model (rate at the limit) fails on evidence
    more often than 5% under Wilson's bound, at most 5% under the exact one."""
    assert _exact_error(n, p, stats.wilson_bound) > 0.05
    assert _exact_error(n, p, stats.binomial_bound) <= 0.05
    (check,) = checklist_thresholds({"min_pass": p}, [1] * (n - 1) + [0], [1] * n,
                                    "fail-on-evidence", 0.95)
    assert "Clopper-Pearson" in str(check.method)


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_binomial_bound_is_clopper_pearson_and_its_p_values_invert_it(
    counts: tuple[int, int], confidence: float
) -> None:
    k, n = counts
    bound = stats.binomial_bound(k, n)
    low, high = proportion_confint(k, n, alpha=2 * (1 - confidence), method="beta")
    assert bound.lower(confidence) == pytest.approx(low if k else 0.0, abs=1e-9)
    assert bound.upper(confidence) == pytest.approx(high if k < n else 1.0, abs=1e-9)
    if 0 < high < 1:
        assert bound.p_below(high) == pytest.approx(1 - confidence, abs=1e-6)
    if 0 < low < 1:
        assert bound.p_above(low) == pytest.approx(1 - confidence, abs=1e-6)


@pytest.mark.parametrize(
    ("decide", "rate", "expect_pass_rate"),
    [
        ("pass-on-evidence", 0.10, "at most"),  # at the limit: passes <= 5%
        ("fail-on-evidence", 0.10, "at least"),  # meets the limit: fails <= 5%
    ],
)
def test_error_rates_at_the_limit_are_controlled(decide: str, rate: float,
                                                 expect_pass_rate: str) -> None:
    """A small seeded simulation through the real code: 40 examples x 1-3 pairs, flips
    correlated within an example; the true flip rate equals max_flip_rate=0.1. The full table is
    benchmarks/bench_checklist_gate.py."""
    rng = np.random.default_rng(7)
    runs, passed = 400, 0
    for _ in range(runs):
        sizes = rng.integers(1, 4, size=40)
        # Each example has its own flip propensity (mean `rate`): pairs of one example correlate.
        propensity = rng.beta(1.0, (1 - rate) / rate, size=40)
        counts = rng.binomial(sizes, propensity)
        (check,) = checklist_thresholds({"max_flip_rate": rate}, counts.tolist(),
                                        sizes.tolist(), decide, 0.95)
        passed += check.passed
    se = (0.05 * 0.95 / runs) ** 0.5
    if expect_pass_rate == "at most":
        assert passed / runs <= 0.05 + 3 * se
    else:
        assert passed / runs >= 0.95 - 3 * se


def test_three_pairs_per_example_keep_the_fail_on_evidence_promise() -> None:
    """Three perturbations of every example, flips concentrated in few examples (50 examples,
    intra-example correlation 0.5, a flip rate of 0.05 at the limit): a compliant model fails on
    evidence at most 5% of the time (the clustered normal bound it replaced: about 5.7%)."""
    rng = np.random.default_rng(11)
    runs, failed = 1500, 0
    strength = (1 - 0.5) / 0.5
    for _ in range(runs):
        propensity = rng.beta(0.05 * strength, 0.95 * strength, size=50)
        counts = rng.binomial(3, propensity)
        (check,) = checklist_thresholds({"max_flip_rate": 0.05}, counts.tolist(), [3] * 50,
                                        "fail-on-evidence", 0.95)
        failed += not check.passed
    assert failed / runs <= 0.05 + 2 * (0.05 * 0.95 / runs) ** 0.5
