"""Plans: reproducibility, prefix consistency, ILR uniformity, fixed-mode enumeration, few-shot."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.plan.data import Dataset
from pytest_reliable.plan.sampling import derive_seed, make_plan, n_listed_units, restrict_order
from pytest_reliable.space import Space, iter_variants

ALPHA = 0.001
"""Level of the chi-square uniformity tests (fixed seeds: deterministic, not flaky)."""


def mcq(n: int, n_options: int = 4) -> Dataset:
    return Dataset.from_records([
        {"question": f"q{i}", "choices": [f"c{i}-{k}" for k in range(n_options)], "answer": 0}
        for i in range(n)
    ])


SMALL = Space.from_mapping("small", {"enumerator": ["upper", "number", "roman"],
                                     "wrapper": ["({})", "{}."]})
PERMUTE = Space.from_mapping("permute", {"enumerator": ["upper", "number"],
                                         "option_order": "permute",
                                         "temperature": [0.0, 0.7]})
FEW = Space.from_mapping("few", {"few_shot": {"count": [0, 2], "pool": 5, "order": "shuffle"},
                                 "enumerator": ["upper", "lower"]})


def plan_variants(plan, n, n_inst):  # type: ignore[no-untyped-def]
    return [[plan.cell(r, i) for i in range(n_inst)] for r in range(n)]


def test_derive_seed_is_stable_and_depends_on_both() -> None:
    assert derive_seed(0, "t.py::a") == derive_seed(0, "t.py::a")
    assert derive_seed(0, "t.py::a") != derive_seed(0, "t.py::b")
    assert derive_seed(0, "t.py::a") != derive_seed(1, "t.py::a")
    assert 0 <= derive_seed(123, "x") < 2**63
    # pinned: sha256-based, so it never changes between runs, processes or Python versions
    assert derive_seed(0, "t.py::a") == 4470664570872216306


@settings(max_examples=30, deadline=None)
@given(mode=st.sampled_from(["ilr", "fixed"]), n=st.integers(1, 8), extra=st.integers(1, 30),
       seed=st.integers(0, 2**32), space=st.sampled_from([SMALL, PERMUTE, FEW]))
def test_prefix_consistency(mode: str, n: int, extra: int, seed: int, space: Space) -> None:
    data = mcq(7)
    short = make_plan(space, data, n, mode=mode, seed=seed)
    long = make_plan(space, data, n + extra, mode=mode, seed=seed)
    assert plan_variants(short, n, 7) == plan_variants(long, n, 7)


@pytest.mark.parametrize("mode", ["ilr", "fixed"])
def test_same_seed_same_plan_other_nodeid_other_plan(mode: str) -> None:
    data = mcq(20)
    a = make_plan(PERMUTE, data, 10, mode=mode, seed=derive_seed(0, "t.py::a"))
    b = make_plan(PERMUTE, data, 10, mode=mode, seed=derive_seed(0, "t.py::a"))
    c = make_plan(PERMUTE, data, 10, mode=mode, seed=derive_seed(0, "t.py::c"))
    assert plan_variants(a, 10, 20) == plan_variants(b, 10, 20)
    assert plan_variants(a, 10, 20) != plan_variants(c, 10, 20)


@settings(max_examples=20, deadline=None)
@given(mode=st.sampled_from(["ilr", "fixed"]), seed=st.integers(0, 2**32),
       n_options=st.integers(2, 6))
def test_every_planned_variant_is_valid(mode: str, seed: int, n_options: int) -> None:
    space = Space.from_mapping("v", {
        "field_spacing": ["\n", " "], "option_separator": ["\n", "; "],
        "field_marker": ["Q:", ""], "answer_sentinel": ["", "A:"],
        "casing": ["identity", "upper", "lower"], "option_order": "permute",
    })
    plan = make_plan(space, mcq(5, n_options), 12, mode=mode, seed=seed)
    for r in range(12):
        for i in range(5):
            v = plan.cell(r, i).variant
            assert space.is_valid(v, n_options)
            assert sorted(v.order or ()) == list(range(n_options))
    assert space.is_valid(plan.canonical_cell(0).variant, n_options)


def test_ilr_marginals_are_uniform() -> None:
    space = PERMUTE  # 2 enumerators x 2 temperatures x 24 orders, all valid
    plan = make_plan(space, mcq(500), 20, mode="ilr", seed=derive_seed(0, "uniform"))
    variants = [plan.cell(r, i).variant for r in range(20) for i in range(500)]
    for values in (
        Counter(v.enumerator for v in variants),
        Counter(v.temperature for v in variants),
        Counter(v.order for v in variants),
    ):
        counts = np.array(list(values.values()))
        assert chisquare(counts).pvalue > ALPHA
    assert len(Counter(v.order for v in variants)) == 24


def test_ilr_instances_get_independent_variants() -> None:
    plan = make_plan(SMALL, mcq(50), 3, mode="ilr", seed=1)
    assert len({plan.cell(0, i).variant for i in range(50)}) > 1


@pytest.mark.parametrize("n", [1, 5, 6, 7, 13, 30])
def test_fixed_mode_shares_a_variant_and_enumerates_a_small_space(n: int) -> None:
    size = SMALL.n_valid_variants(4)
    assert size == 6 == n_listed_units(SMALL, 4)
    plan = make_plan(SMALL, mcq(9), n, mode="fixed", seed=derive_seed(0, "fixed"))
    per_resampling = []
    for r in range(n):
        variants = {plan.cell(r, i).variant for i in range(9)}
        assert len(variants) == 1
        per_resampling.append(variants.pop())
    counts = Counter(per_resampling)
    for variant in iter_variants(SMALL, 4):
        assert counts[variant] in (n // size, n // size + 1)
    # each pass is a permutation of the whole space
    full = n // size
    for p in range(full):
        assert len(set(per_resampling[p * size:(p + 1) * size])) == size


def test_fixed_mode_with_orders_and_temperatures() -> None:
    size = PERMUTE.n_valid_variants(4)
    assert size == 2 * 2 * 24
    plan = make_plan(PERMUTE, mcq(3), size, mode="fixed", seed=5)
    assert len({plan.cell(r, 0).variant for r in range(size)}) == size


def test_fixed_mode_large_orders_rejects_repeats() -> None:
    space = Space.from_mapping("big", {"option_order": "permute"})
    plan = make_plan(space, mcq(4, 7), 50, mode="fixed", seed=3)
    seen = [plan.cell(r, 0).variant for r in range(50)]
    assert len(set(seen)) == 50
    longer = make_plan(space, mcq(4, 7), 60, mode="fixed", seed=3)
    assert seen == [longer.cell(r, 0).variant for r in range(50)]


def test_fewer_options_keep_the_relative_order() -> None:
    assert restrict_order((3, 0, 2, 1), 3) == (0, 2, 1)
    assert restrict_order((3, 0, 2, 1), 2) == (0, 1)
    assert restrict_order(None, 3) == (0, 1, 2)


def test_few_shot_pool_excludes_self_and_follows_counts() -> None:
    data = mcq(30)
    for mode in ("ilr", "fixed"):
        plan = make_plan(FEW, data, 10, mode=mode, seed=11)
        pool = {int(p) for p in plan.pool}
        assert len(pool) == 5
        for r in range(10):
            demos_r = set()
            for i in range(30):
                cell = plan.cell(r, i)
                assert len(cell.demos) == cell.variant.few_shot
                assert i not in cell.demos
                assert set(cell.demos) <= pool
                assert len(set(cell.demos)) == len(cell.demos)
                if cell.variant.few_shot and i not in pool:
                    demos_r.add(cell.demos)
            if mode == "fixed":  # picks drawn per resampling
                assert len(demos_r) <= 1
        canonical = plan.canonical_cell(0)
        assert canonical.variant.few_shot == 0 and canonical.demos == ()


def test_canonical_few_shot_and_fixed_order() -> None:
    space = Space.from_mapping("c", {"few_shot": {"count": [3], "pool": 6, "order": "fixed"}})
    plan = make_plan(space, mcq(20), 4, mode="ilr", seed=2)
    pool = [int(p) for p in plan.pool]
    cell = plan.cell(1, 7)
    assert list(cell.demos) == sorted(cell.demos, key=pool.index)
    canonical = plan.canonical_cell(pool[0])
    assert canonical.demos == tuple(pool[1:4])


def test_unicode_roman_canonical_too_many_options_is_a_config_error() -> None:
    space = Space.from_mapping("u", {"enumerator": ["unicode_roman", "upper"]})
    with pytest.raises(ReliableConfigError, match="R2"):
        make_plan(space, mcq(2, 13), 1)
    plan = make_plan(Space.from_mapping("u2", {"enumerator": ["upper", "unicode_roman"]}),
                     mcq(3, 13), 20, mode="ilr")
    assert {plan.cell(r, i).variant.enumerator for r in range(20) for i in range(3)} == {"upper"}


def test_ilr_is_uniform_over_valid_formats_when_rules_remove_some() -> None:
    space = Space.from_mapping("r1", {"field_spacing": ["\n", " "],
                                      "option_separator": ["\n", "; "]})
    plan = make_plan(space, mcq(300), 10, mode="ilr", seed=derive_seed(0, "r1"))
    counts = Counter((plan.cell(r, i).variant.field_spacing, plan.cell(r, i).variant.option_separator)
                     for r in range(10) for i in range(300))
    assert (" ", "\n") not in counts and len(counts) == 3
    assert chisquare(np.array(list(counts.values()))).pvalue > ALPHA


def test_plan_sized_by_the_task_covers_many_labels() -> None:
    from pytest_reliable.plan.render import render
    from pytest_reliable.tasks.builtin import Classification

    labels = [f"class{k}" for k in range(6)]
    task = Classification(labels=labels)
    data = Dataset.from_records([{"text": f"t{i}", "label": labels[i % 6]} for i in range(5)])
    space = Space.from_mapping("p", {"option_order": "permute"})
    plan = make_plan(space, data, 3, seed=1, task=task)
    assert plan.n_options == 6
    prompt = render(space, plan.cell(0, 0).variant, data[0], task, [])
    assert sorted(prompt.displayed) == list(range(6))
    # a plan sized for fewer options still shows every option
    small = make_plan(space, data, 3, seed=1)
    assert sorted(render(space, small.cell(0, 0).variant, data[0], task, []).displayed) == list(
        range(6))
    assert restrict_order((1, 0), 4) == (1, 0, 2, 3)
