"""The sizing figures of ``--reliable-plan`` (plan_report), checked against their own promises."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pytest_reliable.run import sizing as plan_report
from pytest_reliable.run.sizing import Design, RangeLayout, Resolution, TestPlan, resolve, solve
from pytest_reliable.stats import power, wilson_interval

Z95 = scipy_stats.norm.ppf(0.95)


def test_solve_finds_the_fixed_point_on_either_side() -> None:
    se = lambda p: math.sqrt(p * (1 - p) / 100)
    up = solve(0.6, se, 2.0, +1)
    down = solve(0.6, se, 2.0, -1)
    assert up is not None and down is not None
    assert up == pytest.approx(0.6 + 2.0 * se(up), abs=1e-9)
    assert down == pytest.approx(0.6 - 2.0 * se(down), abs=1e-9)
    assert down < 0.6 < up


def test_min_score_figure_matches_the_closed_form_without_correlation() -> None:
    design = Design(instances=100, resamplings=1, k=1)
    r = resolve("min_score", 0.6, design)
    assert r.value is not None
    z = Z95 + scipy_stats.norm.ppf(0.8)
    assert r.value == pytest.approx(0.6 + z * math.sqrt(r.value * (1 - r.value) / 100), abs=1e-6)
    # With one cell per instance the correlation does not matter.
    assert r.low == pytest.approx(r.value) and r.high == pytest.approx(r.value)


def test_more_resamplings_help_only_as_far_as_instances_allow() -> None:
    few = resolve("min_score", 0.6, Design(instances=100, resamplings=1)).value
    many = resolve("min_score", 0.6, Design(instances=100, resamplings=30))
    more_instances = resolve("min_score", 0.6, Design(instances=400, resamplings=30)).value
    assert many.value is not None and few is not None and more_instances is not None
    assert many.value < few and more_instances < many.value
    # Fully correlated cells (rho=1): resamplings add nothing.
    assert many.high == pytest.approx(few, abs=1e-6)


def test_policies_put_the_figure_on_the_side_they_need_evidence_for() -> None:
    passing = resolve("min_score", 0.6, Design(100, 10, decide="pass-on-evidence")).value
    failing = resolve("min_score", 0.6, Design(100, 10, decide="fail-on-evidence")).value
    estimate = resolve("min_score", 0.6, Design(100, 10, decide="estimate")).value
    assert failing is not None and passing is not None and estimate is not None
    assert failing < 0.6 < estimate < passing
    layout = RangeLayout("ilr", (2, 3))
    spread = resolve("max_spread", 0.2, Design(100, 30, layout=layout, decide="pass-on-evidence"))
    assert spread.value is not None and spread.value < 0.2


def test_holm_makes_fail_on_evidence_need_more_margin_with_more_hypotheses() -> None:
    one = resolve("min_score", 0.6, Design(100, 10, decide="fail-on-evidence", hypotheses=1))
    ten = resolve("min_score", 0.6, Design(100, 10, decide="fail-on-evidence", hypotheses=10))
    assert ten.value is not None and one.value is not None and ten.value < one.value


def test_min_lower_ci_figure_is_exact_for_the_wilson_rule() -> None:
    n, limit = 50, 0.5
    r = resolve("min_lower_ci", limit, Design(instances=n, resamplings=5))
    assert r.value is not None
    needed = next(x for x in range(n + 1) if wilson_interval(x, n)[0] >= limit)
    assert scipy_stats.binom.sf(needed - 1, n, r.value) == pytest.approx(0.8, abs=1e-6)
    assert f"needs {needed} of {n}" in r.note


def test_max_std_figure_passes_80_percent_of_simulated_runs() -> None:
    n, limit = 20, 0.05
    r = resolve("max_std", limit, Design(instances=100, resamplings=n))
    assert r.value is not None and r.value < limit
    rng = np.random.default_rng(0)
    runs = 4000
    s = rng.normal(0.6, r.value, size=(runs, n)).std(axis=1, ddof=1)
    upper = s * np.sqrt((n - 1) / scipy_stats.chi2.ppf(0.05, n - 1))
    rate = float(np.mean(upper <= limit))
    assert abs(rate - 0.8) < 4 * math.sqrt(0.16 / runs)


def test_min_score_figure_passes_about_80_percent_under_a_clustered_bound() -> None:
    """Instances with Beta-distributed accuracy (intra-instance correlation 0.5), 10 cells each,
    gated by the clustered normal bound: at the planned value about 80% of runs pass."""
    n_inst, n, limit = 100, 10, 0.6
    r = resolve("min_score", limit, Design(instances=n_inst, resamplings=n))
    assert r.value is not None
    rng = np.random.default_rng(1)
    runs, p = 3000, r.value
    # Beta(a, b) with a + b = 1 has intra-class correlation 1 / (a + b + 1) = 0.5.
    acc = rng.beta(p, 1 - p, size=(runs, n_inst))
    cells = rng.random((runs, n_inst, n)) < acc[..., None]
    per_instance = cells.mean(axis=2)
    mean = per_instance.mean(axis=1)
    se = per_instance.std(axis=1, ddof=1) / math.sqrt(n_inst)
    rate = float(np.mean(mean - Z95 * se >= limit))
    assert abs(rate - 0.8) < 0.04


def test_unreachable_thresholds_say_so() -> None:
    r = resolve("min_lower_ci", 0.99, Design(instances=10, resamplings=5))
    assert r.value is None
    assert "cannot pass on evidence at this size" in r.describe("pass-on-evidence")
    no_groups = resolve("min_worst", 0.5, Design(instances=10, resamplings=5))
    assert no_groups.value is None and "grouping" in no_groups.note


def test_a_plan_survives_the_trip_through_plain_data() -> None:
    plan = TestPlan("t.py::x", "reliable", 10, 110, "10 x 11", "estimate", "formats",
                    [Resolution("min_score", 0.5, 0.6, 0.55, 0.65)], ["a note"])
    again = TestPlan.from_dict(plan.as_dict())
    assert again == plan
    lines = plan_report.format_plans([plan])
    assert any("passes (estimate, no error control)" in line for line in lines)
    assert lines[-1].startswith("method: ")


def test_plan_uses_a_stored_n_star(tmp_path) -> None:
    # Under --reliable-n auto a stored n* sizes the plan (it used to index the entry as a dict).
    from pytest_reliable import Dataset, MultipleChoice, text_model
    from pytest_reliable.contract.markers import ReliableSpec
    from pytest_reliable.store.nstar import NStarEntry, NStarKey, NStarStore
    from pytest_reliable.run.session import ReliableSession, Settings
    from pytest_reliable.space import Space

    space = Space.from_mapping("wrappers", {"wrapper": ["({})", "[{}]"]})
    session = ReliableSession(Settings(rootdir=tmp_path, no_cache=True, n="auto"),
                              {"wrappers": space})
    data = Dataset.from_records([{"question": f"Q{i}?", "choices": ["a", "b"], "answer": 0}
                                 for i in range(20)])
    spec = ReliableSpec(space="wrappers")
    model = text_model(lambda prompt: "A", id="stored-model")
    key = NStarKey(nodeid="t.py::t", space_hash=space.hash, dataset_hash=data.hash,
                   reference_model="stored-model", mode=spec.mode, eps=spec.eps,
                   delta=spec.delta, seed=0, pilot_n=session.settings.pilot_n)
    NStarStore(session.settings.store_dir).put(key, NStarEntry(7, True, 0.01))
    plan = plan_report.plan_reliable(session, "t.py::t", data, MultipleChoice(), spec, model)
    assert plan.calls == 20 * (7 + 1)


# -- ranges: simulated through the gate's own bounds (issue 19 item 3) --------------------------
def test_fixed_max_spread_over_30_formats_cannot_pass_and_says_so() -> None:
    # 30 formats at n=30 in fixed mode: 435 pairs each need |d| + t*se <= 0.15. A model with no
    # format effect at all never passed (issue 19); the plan must not quote a value.
    design = Design(100, 30, layout=RangeLayout("fixed", formats=30), decide="pass-on-evidence")
    r = resolve("max_spread", 0.15, design)
    assert r.value is None
    text = r.describe("pass-on-evidence")
    assert "cannot pass on evidence at this size" in text
    assert "even a model with no effect at all passes only" in text and "435 pairs" in text


def test_range_figures_lie_on_the_side_each_policy_needs_evidence_for() -> None:
    layout = RangeLayout("ilr", (3, 2, 2, 2))
    for name, limit in (("min_worst", 0.5), ("min_median", 0.5)):
        passing = resolve(name, limit, Design(100, 10, layout=layout)).value
        failing = resolve(name, limit, Design(100, 10, layout=layout, decide="fail-on-evidence",
                                              hypotheses=9)).value
        assert failing is not None and passing is not None
        assert failing < limit < passing, name
    passing = resolve("max_spread", 0.2, Design(100, 10, layout=layout)).value
    failing = resolve("max_spread", 0.2, Design(100, 10, layout=layout, decide="fail-on-evidence",
                                                hypotheses=6)).value
    assert passing is not None and failing is not None and passing < 0.2 < failing


def test_the_plan_is_deterministic_and_grows_with_the_design() -> None:
    layout = RangeLayout("ilr", (2, 3))
    small = resolve("min_worst", 0.5, Design(50, 5, layout=layout))
    power.range_values.cache_clear()  # simulated afresh, not remembered
    again = resolve("min_worst", 0.5, Design(50, 5, layout=layout))
    large = resolve("min_worst", 0.5, Design(400, 5, layout=layout))
    assert small == again
    assert small.value is not None and large.value is not None and large.value < small.value


# -- ranges under several answer structures (issue 19 item 3, part C's misses) ------------------
def _real_gate_rate(layout: RangeLayout, design: Design, name: str, limit: float,
                    scores: np.ndarray, draws: object) -> float:
    """The share of simulated gates whose ``name`` goes the policy's way, decided by the gate
    itself (`stats.paired_group_effects` and `gate`'s evidence), one gate at a time."""
    from pytest_reliable import stats
    from pytest_reliable.verdict.gate import (
        decide_thresholds,
        group_evidence,
        median_evidence,
        spread_evidence,
    )

    sizes = (layout.formats,) if layout.formats else layout.sizes
    units, codes = draws.units, draws.codes  # type: ignore[attr-defined]
    labels = [units[:, d][codes] for d in range(len(sizes))]
    grouping = "formats" if layout.formats else "dimensions"
    went = []
    for r in range(scores.shape[0]):
        effects = [stats.paired_group_effects(
                       scores[r], lab[r], k, resamplings_sampled=layout.sampled,
                       spans_variants=not layout.formats,
                       averages_over=[(other[r], j) for o, (other, j)
                                      in enumerate(zip(labels, sizes)) if o != d])
                   for d, (lab, k) in enumerate(zip(labels, sizes))]
        values = np.concatenate([np.clip(e.estimates[e.live], 0, 1) for e in effects])
        unseen = [k - e.live.size for e, k in zip(effects, sizes)]
        if name == "min_worst":
            evidence = group_evidence(float(values.min()), effects, grouping, sum(unseen))
        elif name == "min_median":
            evidence = median_evidence(float(np.median(values)), effects, sum(unseen))
        else:
            spread = max(float(np.ptp(np.clip(e.estimates[e.live], 0, 1))) for e in effects)
            pairs = sum(u * e.live.size + u * (u - 1) // 2 for u, e in zip(unseen, effects))
            evidence = spread_evidence(spread, [e.pairs() for e in effects], pairs)
        [check] = decide_thresholds({name: (limit, evidence)}, design.decide, design.confidence)
        went.append(check.passed != (design.decide == "fail-on-evidence"))
    return float(np.mean(went))


@pytest.mark.parametrize(("layout", "name", "limit", "decide", "x", "n"), [
    (RangeLayout("ilr", (3, 2)), "min_worst", 0.6, "pass-on-evidence", 0.75, 5),
    (RangeLayout("ilr", (3, 2)), "max_spread", 0.1, "fail-on-evidence", 0.3, 5),
    (RangeLayout("fixed", formats=5, sampled=True), "min_worst", 0.6, "pass-on-evidence", 0.75,
     5),
    (RangeLayout("fixed", (3, 2), sampled=True), "max_spread", 0.3, "pass-on-evidence", 0.1, 5),
    # At n=5 a value of the 3-valued dimension is always drawn once: no median on evidence
    # (`test_a_thinly_drawn_dimension_leaves_the_plan_no_evidence_either`); n=6 draws each twice.
    (RangeLayout("fixed", (3, 2), sampled=True), "min_median", 0.6, "pass-on-evidence", 0.72,
     6),
    (RangeLayout("ilr", (3, 2)), "min_worst", 0.6, "estimate", 0.62, 5),
    (RangeLayout("ilr", (3, 2)), "max_spread", 0.1, "estimate", 0.05, 5),
    (RangeLayout("fixed", (3, 2), sampled=True), "min_median", 0.6, "estimate", 0.6, 5),
])
def test_the_plans_simulated_gate_decides_as_the_gate_does(layout: RangeLayout, name: str,
                                                             limit: float, decide: str,
                                                             x: float, n: int) -> None:
    # The plan's batched copy of the gate (df, resampling jackknife, pair skewness) against the
    # gate itself on the very same cells, under every structure: the rates must be equal.
    design = Design(60, n, decide=decide, layout=layout,
                    hypotheses=1 + (layout.pairs - 1 if name == "max_spread" else 0))
    draws = power._draws(layout, 60, n, 40, 11)
    effects, centre = power._configuration(layout, name, decide, limit, x)
    levels = power._unit_levels(layout, draws, effects, centre)
    for structure in power.STRUCTURES:
        scores = power._scores(draws, levels, structure)
        planned = power.range_outcome_rate(layout, design, name, limit, x, draws, structure)
        assert 0.0 < planned < 1.0 or name == "max_spread", structure  # a rate that can differ
        assert planned == _real_gate_rate(layout, design, name, limit, scores, draws), structure


def test_a_thinly_drawn_dimension_leaves_the_plan_no_evidence_either() -> None:
    # Sampled fixed mode, 3x2 values, n=5: one value of the first dimension is drawn by a single
    # resampling, so every value's score averages over a variant the run barely saw: the gate
    # bounds none of them, and the plan's simulated gate must agree (it passes none).
    layout = RangeLayout("fixed", (3, 2), sampled=True)
    design = Design(60, 5, decide="pass-on-evidence", layout=layout)
    draws = power._draws(layout, 60, 5, 40, 11)
    effects, centre = power._configuration(layout, "min_median", "pass-on-evidence", 0.6, 0.9)
    levels = power._unit_levels(layout, draws, effects, centre)
    for structure in power.STRUCTURES:
        scores = power._scores(draws, levels, structure)
        planned = power.range_outcome_rate(layout, design, "min_median", 0.6, 0.9, draws,
                                           structure)
        assert planned == 0.0 == _real_gate_rate(layout, design, "min_median", 0.6, scores,
                                                 draws), structure


def test_the_simulation_gives_one_answer_per_prompt() -> None:
    # ilr draws variants with replacement: an instance shown one variant twice answers the same
    # (temperature 0); the part C miss of min_worst came from simulating fresh answers.
    draws = power._draws(RangeLayout("ilr", (2,)), 30, 8, 5, 3)
    codes, u = draws.codes, draws.cell_u
    repeats = fresh = 0
    for rep in range(codes.shape[0]):
        for i in range(codes.shape[2]):
            for r in range(1, codes.shape[1]):
                earlier = np.flatnonzero(codes[rep, :r, i] == codes[rep, r, i])
                if earlier.size:
                    repeats += 1
                    assert u[rep, r, i] == u[rep, earlier[0], i]
                else:
                    fresh += 1
                    assert u[rep, r, i] not in u[rep, :r, i]
    assert repeats and fresh


def test_range_figure_is_the_least_favourable_structures_and_shows_their_span() -> None:
    layout = RangeLayout("ilr", (3, 2))
    design = Design(60, 5, layout=layout)
    found = power.range_values(layout, design, "min_median", 0.6)
    values = [v for v in found.per_structure if v is not None]
    assert len(values) == len(power.STRUCTURES)
    assert found.value == max(values) and found.low == min(values) and found.high == max(values)
    assert found.high - found.low > 0.01  # the structures do disagree here
    r = resolve("min_median", 0.6, design)
    assert (r.value, r.low, r.high) == (found.value, found.low, found.high)
    text = r.describe("pass-on-evidence")
    assert f"is >= {found.value:.2f} ({found.low:.2f}-{found.high:.2f} for the simulated answer " \
           "structures)" in text
    assert "least favourable of 3 answer structures" in text


@pytest.mark.parametrize(("name", "limit", "decide"), [
    ("min_worst", 0.6, "pass-on-evidence"),
    ("min_median", 0.6, "pass-on-evidence"),
    ("max_spread", 0.3, "pass-on-evidence"),
    ("max_spread", 0.1, "fail-on-evidence"),
    ("min_worst", 0.6, "estimate"),
])
def test_at_the_quoted_figure_a_structure_the_plan_does_not_simulate_goes_its_way(
        name: str, limit: float, decide: str) -> None:
    # Beta instances at icc 0.5 (between the plan's 0.2 and 0.8), on random numbers the plan did
    # not use: the outcome must still have at least 80% probability (less 2 MC errors). The
    # simulated gate is the gate (test above); bench part C checks the same end to end.
    layout = RangeLayout("ilr", (3, 2))
    design = Design(60, 5, decide=decide, layout=layout,
                    hypotheses=1 + (layout.pairs - 1 if name == "max_spread" else 0))
    r = resolve(name, limit, design)
    assert r.value is not None
    reps = 400
    draws = power._draws(layout, 60, 5, reps, power.RANGE_SEED + 1)
    rate = power.range_outcome_rate(layout, design, name, limit, r.value, draws,
                                    power.Structure("beta", 0.5))
    assert rate >= 0.8 - 2 * math.sqrt(0.16 / reps)


def test_no_figure_is_quoted_when_a_structure_cannot_reach_80_percent() -> None:
    # N=30, n=10: a model with no effect at all passes max_spread=0.45 in 72% of the gates when
    # instances are nearly all right or all wrong (beta 0.8: few instances carry the pairs'
    # evidence), in more than 80% under the other structures. No value holds whatever the
    # structure: the plan says so and gives the other structures' figure.
    design = Design(30, 10, layout=RangeLayout("ilr", (3, 2)))
    found = power.range_values(design.layout, design, "max_spread", 0.45)
    assert [s.label for s in found.unreachable] == ["beta 0.8"]
    assert found.value is not None  # the other structures do reach 80%
    r = resolve("max_spread", 0.45, design)
    assert r.value is None
    text = r.describe("pass-on-evidence")
    assert text.startswith("max_spread=0.45: cannot pass on evidence at this size; even a model "
                           "with no effect at all passes only ")
    assert "if answers hang together as beta 0.8; under beta 0.2 and mixture 0.5 it passes with " \
           f"80% probability only if the true spread is <= {found.value:.2f}" in text


def test_under_estimate_a_range_is_sized_on_the_point_estimate() -> None:
    # The plan had sized estimate gates on the bounds (the README example quoted ">= 1.00" for
    # min_worst=0.7 under estimate): the point estimate needs less than a bound does.
    layout = RangeLayout("ilr", (3, 2))
    estimate = resolve("min_worst", 0.6, Design(60, 5, decide="estimate", layout=layout))
    bound = resolve("min_worst", 0.6, Design(60, 5, decide="pass-on-evidence", layout=layout))
    assert estimate.value is not None and bound.value is not None
    assert 0.6 < estimate.value < bound.value - 0.03
    assert "through the gate's point estimates" in estimate.describe("estimate")
