"""search="adaptive" (SPEC section 14): when a range is settled, which groups stay open, and the
benchmark's replay of a score matrix (benchmarks/bench_adaptive.py) on a small synthetic file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pytest_reliable.evaluate.adaptive import Claim, range_status, rounds, row_keys
from pytest_reliable.evaluate.schedules import Adaptive
from pytest_reliable.evaluate.stopping import batch_size
from pytest_reliable.space import Space
from tests.benchmark_scripts import BENCHMARKS, load_benchmark


def claim(key: str, low: float, high: float) -> Claim:
    return Claim(frozenset({key}), low, high)


def test_a_range_is_open_on_its_unsettled_groups_and_on_groups_no_cell_reached() -> None:
    claims = [claim("a", 0.7, 0.9), claim("b", 0.55, 0.8)]
    universe = frozenset({"a", "b", "c"})
    # "a" clears 0.6; "b" straddles it; "c" has no cell yet.
    assert range_status("min", 0.6, claims, universe, "pass-on-evidence") == {"b", "c"}
    assert range_status("min", 0.6, claims, frozenset({"a", "b"}), "estimate") == {"b"}
    # Every group clears the limit: settled (passing).
    assert range_status("min", 0.5, claims, frozenset({"a", "b"}), "pass-on-evidence") is None


def test_one_group_surely_below_the_limit_settles_the_range_failing() -> None:
    claims = [claim("a", 0.1, 0.3), claim("b", 0.2, 0.9)]
    assert range_status("min", 0.5, claims, frozenset({"a", "b", "c"}),
                        "fail-on-evidence") is None


def test_a_spread_is_open_on_both_groups_of_an_unsettled_pair() -> None:
    pairs = [Claim(frozenset({"x", "y"}), 0.0, 0.3), Claim(frozenset({"x", "z"}), 0.0, 0.05)]
    assert range_status("max", 0.1, pairs, frozenset({"x", "y", "z"}),
                        "pass-on-evidence") == {"x", "y"}
    assert range_status("max", 0.1, [Claim(frozenset({"x", "y"}), 0.2, 0.4)],
                        frozenset({"x", "y"}), "pass-on-evidence") is None


def test_row_keys_name_groups_as_the_ranges_per_variant_does() -> None:
    space = Space.from_mapping("s", {"wrapper": ["({})", "{}."], "enumerator": ["upper",
                                                                              "number"]})
    variant = space.canonical_variant()
    assert row_keys(space, "dimensions", [variant]) == {"wrapper=({})", "enumerator=upper"}
    assert row_keys(space, ("wrapper",), [variant]) == {"wrapper=({})"}
    assert row_keys(space, "formats", [variant]) == {variant.format_key}


def test_the_first_round_is_what_batch_mode_sends_ahead_and_peeks_share_alpha() -> None:
    strategy = Adaptive(40, {"min_worst": ("min", 0.5), "max_spread": ("max", 0.2)},
                        "pass-on-evidence", 0.95, peek=lambda m, u, c: {},
                        keys_of=lambda vs: frozenset())
    first = strategy.first_round()
    assert not strategy.by_cells
    assert first.first_stage == batch_size(40) and not first.size_known and first.n == 40
    assert rounds(40, batch_size(40)) == math.ceil(40 / batch_size(40))


def test_a_search_by_cells_sends_one_row_ahead_unless_a_mean_needs_its_rows() -> None:
    worst = Adaptive(40, {"min_worst": ("min", 0.5)}, "pass-on-evidence", 0.95,
                     peek=lambda m, u, c: {}, keys_of=lambda vs: frozenset())
    assert worst.by_cells and worst.first_round().first_stage == 1
    with_mean = Adaptive(40, {"min_worst": ("min", 0.5), "min_score": ("min", 0.5)},
                         "pass-on-evidence", 0.95, peek=lambda m, u, c: {},
                         keys_of=lambda vs: frozenset())
    assert with_mean.by_cells and with_mean.first_round().first_stage == batch_size(40)
    other_grouping = Adaptive(40, {"min_worst": ("min", 0.5)}, "pass-on-evidence", 0.95,
                              peek=lambda m, u, c: {}, keys_of=lambda vs: frozenset(),
                              grouping="dimensions")
    assert not other_grouping.by_cells


def test_the_benchmark_replays_both_searches_on_a_score_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_benchmark("bench_adaptive")
    space = bench.space_of(8)
    variants = list(bench._variants_by_key(space).values())
    dims = ("instruction", "enumerator", "wrapper")
    formats = [json.dumps({d: v.value(d) for d in dims}) for v in variants]
    rng = np.random.default_rng(0)
    scores = (rng.random((60, len(formats))) < 0.97).astype(float)
    scores[:, 3] = (rng.random(60) < 0.5)  # one bad format, about 0.5
    path = tmp_path / "matrix.npz"
    np.savez(path, scores=scores, formats=np.array(formats),
             instance_ids=np.array([f"r{i}" for i in range(60)]))
    assert bench.main(["--replay", str(path), "--reps", "2", "--limits", "0.2,0.9"]) == 0
    out = capsys.readouterr().out
    assert "60 instances x 8 formats" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("ilr", "fixed"))]
    assert len(rows) == 2 * 2 * 2  # modes x limits x policies
    for mode, limit, decide, uniform, adaptive, agree, calls, ratio in rows:
        if limit == "0.90":  # the bad format is far below: both searches fail it
            assert float(uniform) == float(adaptive) == 0.0
        used_u, used_a = (int(c) for c in calls.split("/"))
        assert used_a <= used_u and float(ratio) >= 1.0


def test_the_benchmark_replays_the_shipped_matrix_a_sample_of_its_space(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped matrix holds 49 of the sentiment space's 128 formats (and an `order` key no
    space declares): the replay treats each column as one format, as measured."""
    shipped = BENCHMARKS / "data" / "matrix_smollm2_reviews.npz"
    assert load_benchmark("bench_adaptive").main(["--replay", str(shipped), "--reps", "1", "--limits", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "60 instances x 49 formats" in out
    assert len([line for line in out.splitlines() if line.startswith(("ilr", "fixed"))]) == 4
