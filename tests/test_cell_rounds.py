"""An adaptive search by cells (SPEC section 14; `evaluate.cell_rounds`, `stats.looks`): each
format's bound read at its looks holds whatever the search fed it, the search spends its cells
on the format that may breach the limit, and the gate decides on the same bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.evaluate import cell_rounds
from pytest_reliable.stats.looks import FINAL_SHARE, LookedGroup, LookedMeans, look_points
from pytest_reliable.verdict.gate import reliable_thresholds
from tests.benchmark_scripts import load_benchmark


def test_looks_are_every_chunk_and_the_end() -> None:
    assert look_points(45, 10) == [10, 20, 30, 40, 45]
    assert look_points(40, 10) == [10, 20, 30, 40]
    assert look_points(7, 10) == [7]
    assert look_points(0, 10) == []
    with pytest.raises(ValueError, match="chunk"):
        look_points(10, 0)


def test_a_bound_reads_the_sequence_up_to_its_last_look_at_that_looks_share() -> None:
    values = np.array([1.0] * 25)
    group = LookedGroup("f", values, length=40, chunk=10)
    assert group.used == 20 and group.looks == 4
    assert group.share() == pytest.approx((1 - FINAL_SHARE) / 3)
    assert group.bound is not None and group.bound.n == 20
    # Twenty right answers at confidence 1 - 0.05 x share: Clopper-Pearson's lower bound.
    alpha = 0.05 * group.share()
    assert group.lower(0.95) == pytest.approx(alpha ** (1 / 20))
    whole = LookedGroup("f", np.ones(40), length=40, chunk=10)
    assert whole.share() == FINAL_SHARE and whole.lower(0.95) > group.lower(0.95)
    unlooked = LookedGroup("g", np.ones(9), length=40, chunk=10)
    assert unlooked.bound is None and (unlooked.lower(0.95), unlooked.upper(0.95)) == (0.0, 1.0)
    assert unlooked.p_below(0.5) == 1.0


@settings(max_examples=25, deadline=None)
@given(p=st.floats(0.05, 0.95), length=st.integers(12, 80), chunk=st.integers(3, 20),
       seed=st.integers(0, 2**31))
def test_every_look_at_once_leaves_the_truth_out_at_most_alpha_of_the_time(
    p: float, length: int, chunk: int, seed: int,
) -> None:
    """The adversary's stop: look after every chunk and stop at the first look whose upper
    bound falls below the truth. The union over looks caps that at alpha (0.1 here); 400
    sequences give a Monte Carlo SE of at most 0.015."""
    rng = np.random.default_rng(seed)
    reps, misses = 400, 0
    for _ in range(reps):
        x = (rng.random(length) < p).astype(float)
        if any(LookedGroup("f", x[:m], length, chunk).upper(0.9) < p
               for m in look_points(length, chunk)):
            misses += 1
    assert misses / reps <= 0.1 + 3 * 0.015


def test_each_format_has_one_cell_per_instance_in_the_seeded_order() -> None:
    rank = cell_rounds.instance_order(6, seed=3)
    assert sorted(rank.tolist()) == list(range(6))
    assert not np.array_equal(rank, cell_rounds.instance_order(6, seed=4))
    keys = [["a"] * 6, ["b", "a", "b", "a", "b", "a"], ["b"] * 6]
    found = cell_rounds.sequences(keys, rank)
    assert [i for _, i in found["a"]] == sorted(range(6), key=lambda i: rank[i])
    assert all(r == 0 for r, _ in found["a"])  # row 1's "a" cells repeat instances of row 0
    b_first = sorted((0, 2, 4), key=lambda i: rank[i])
    assert found["b"][:3] == [(1, i) for i in b_first]
    assert found["b"][3:] == [(2, i) for i in sorted((1, 3, 5), key=lambda i: rank[i])]


@pytest.mark.parametrize("decide", ["fail-on-evidence", "pass-on-evidence"])
def test_the_search_feeds_the_bad_format_and_the_gate_fails_it_on_the_same_bounds(
    decide: str,
) -> None:
    bench = load_benchmark("bench_adaptive")
    space = bench.space_of(8)
    by_key = bench._variants_by_key(space)
    keys = list(by_key)
    index = {k: j for j, k in enumerate(keys)}
    rng = np.random.default_rng(1)
    table = (rng.random((200, 8)) < 0.9).astype(float)
    table[:, 5] = (rng.random(200) < 0.3)  # one format far below the limit
    spec = ReliableSpec(min_worst=0.6, n=16, mode="fixed", group_by="formats", decide=decide)  # type: ignore[arg-type]
    summary, calls, _ = bench.run_search(space, spec, decide, 16, "fixed", 0, table, index,
                                         "adaptive")
    uniform, uniform_calls, _ = bench.run_search(space, spec, decide, 16, "fixed", 0, table,
                                                 index, "uniform")
    looked = summary.formats.looked
    assert looked is not None and uniform.formats.looked is None
    assert calls < uniform_calls / 2
    checks = reliable_thresholds(spec, summary, decide)  # type: ignore[arg-type]
    assert [c.passed for c in checks] == [False]
    assert "one cell per instance" in checks[0].method
    bad = keys[5]
    per_variant = summary.formats.groups
    # The bad format was brought to a look (row 0 is another format's, whole) and is the worst.
    assert per_variant[bad].cells >= cell_rounds.chunk_for(200)
    assert sum(g.cells for g in per_variant.values()) < 16 * 200 / 4
    assert summary.formats.worst is per_variant[bad]
    assert summary.formats.as_dict()["estimator"] == looked.method
    # The same cells, the same choices: a rerun served from a cache asks for the same cells.
    again, calls_again, _ = bench.run_search(space, spec, decide, 16, "fixed", 0, table, index,
                                             "adaptive")
    assert calls_again == calls
    assert {k: g.cells for k, g in again.formats.groups.items()} == {
        k: g.cells for k, g in per_variant.items()}


def test_formats_clear_of_the_limit_settle_at_their_first_look() -> None:
    bench = load_benchmark("bench_adaptive")
    space = bench.space_of(8)
    index = {k: j for j, k in enumerate(bench._variants_by_key(space))}
    table = np.ones((200, 8))
    spec = ReliableSpec(min_worst=0.5, n=16, mode="fixed", group_by="formats")
    summary, calls, _ = bench.run_search(space, spec, "pass-on-evidence", 16, "fixed", 0, table,
                                         index, "adaptive")
    chunk = cell_rounds.chunk_for(200)
    # Row 0 whole (200 cells of one format, shared with the canonical pass's), then one look
    # of each other format.
    assert calls <= 200 + 7 * chunk + 200
    assert all(c.passed for c in reliable_thresholds(spec, summary, "pass-on-evidence"))
    looked = summary.formats.looked
    assert isinstance(looked, LookedMeans) and len(looked.live) == 8
