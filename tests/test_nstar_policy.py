"""The ``--reliable-n auto`` policy (`pytest_reliable.evaluate.nstar.run_auto`) with a simulated model.

The model's per-resampling scores are a fixed seeded stream (plan order: resampling r always
scores the same), so a pilot, its extension and a later full run must agree cell for cell.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_reliable import stats
from pytest_reliable.evaluate.evaluation import ScoreMatrix, append_resamplings
from pytest_reliable.evaluate.nstar import run_auto
from pytest_reliable.store.nstar import NStarEntry, NStarKey, NStarStore

N_INSTANCES = 4
STREAM = 0.7 + 0.05 * np.random.default_rng(5).standard_normal(5000)


class SimulatedModel:
    """Counts the resamplings each call runs; resampling r of the plan scores STREAM[r]."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, int, bool]] = []  # (start, stop, on_reference)

    def matrix(self, start: int, stop: int, canonical: bool) -> ScoreMatrix:
        rows = np.repeat(STREAM[start:stop, None], N_INSTANCES, axis=1)
        calls = N_INSTANCES * ((stop - start) + (1 if canonical else 0))
        return ScoreMatrix(
            scores=rows, parsed=np.ones_like(rows, dtype=bool),
            canonical_scores=np.ones((1, N_INSTANCES)),
            canonical_parsed=np.ones((1, N_INSTANCES), dtype=bool),
            cells=[], calls_made=calls,
        )

    def run(self, n: int, on_reference: bool) -> ScoreMatrix:
        self.runs.append((0, n, on_reference))
        return self.matrix(0, n, canonical=True)

    def extend(self, head: ScoreMatrix, n: int) -> ScoreMatrix:
        self.runs.append((head.n_resamplings, n, False))
        return append_resamplings(head, self.matrix(head.n_resamplings, n, canonical=False))


def key(method: str = "bootstrap", n_max: int = 1000, pilot_n: int = 10, eps: float = 0.01) -> NStarKey:
    return NStarKey("t.py::t", "s", "d", "sim", "ilr", eps, 0.1, 0, pilot_n, method, n_max)


def test_bootstrap_extends_the_pilot_and_calls_only_the_new_resamplings(tmp_path: Path) -> None:
    model = SimulatedModel()
    outcome = run_auto(key(), NStarStore(tmp_path), reference_is_model=True,
                       run=model.run, extend=model.extend)
    expected = stats.min_reliable_n(STREAM[:10], 0.01, 0.1, method="bootstrap").n_star
    # A bootstrap pilot under 30 cannot vouch for its n* (SPEC 7): not reliable, but it gates.
    assert outcome.n_star == expected > 10 and not outcome.reliable
    assert outcome.source == "pilot" and outcome.pilot_n == 10 and outcome.method == "bootstrap"
    assert outcome.n_star_paper == stats.min_reliable_n(STREAM[:10], 0.01, 0.1).n_star <= 10
    assert model.runs == [(0, 10, True), (10, expected, False)]
    np.testing.assert_array_equal(outcome.matrix.resampling_scores(), STREAM[:expected])
    assert outcome.matrix.calls_made == N_INSTANCES * (expected + 1)


def test_a_stored_n_star_is_reused_without_a_pilot(tmp_path: Path) -> None:
    store = NStarStore(tmp_path)
    first = run_auto(key(), store, reference_is_model=True,
                     run=SimulatedModel().run, extend=SimulatedModel().extend)
    model = SimulatedModel()
    again = run_auto(key(), store, reference_is_model=True, run=model.run, extend=model.extend)
    # A stored n* keeps its pilot's size, and so says the same: not reliable from 10 (SPEC 7).
    assert again.source == "store" and again.pilot_n == 10 and not again.reliable
    assert model.runs == [(0, first.n_star, False)]
    assert (again.n_star, again.n_star_paper) == (first.n_star, first.n_star_paper)
    np.testing.assert_array_equal(again.matrix.scores, first.matrix.scores)


def test_at_the_cap_the_gate_runs_the_cap_and_reports_the_uncapped_estimate(tmp_path: Path) -> None:
    model = SimulatedModel()
    outcome = run_auto(key(n_max=15, eps=0.002), NStarStore(tmp_path), reference_is_model=True,
                       run=model.run, extend=model.extend)
    assert outcome.n_star > 15 and not outcome.reliable
    assert outcome.matrix.n_resamplings == 15
    assert outcome.achievable_eps > 0.002


def test_paper_gates_on_a_prefix_of_the_pilot(tmp_path: Path) -> None:
    model = SimulatedModel()
    outcome = run_auto(key("paper", pilot_n=30, eps=0.03), NStarStore(tmp_path),
                       reference_is_model=True, run=model.run, extend=model.extend)
    assert outcome.n_star_paper is None and outcome.method == "paper"
    assert outcome.n_star < 30 and outcome.matrix.n_resamplings == outcome.n_star
    assert model.runs == [(0, 30, True)]
    assert outcome.matrix.calls_made == N_INSTANCES * 31  # every pilot call counts


def test_another_reference_model_pilots_then_runs_the_model_under_test(tmp_path: Path) -> None:
    model = SimulatedModel()
    outcome = run_auto(key(), NStarStore(tmp_path), reference_is_model=False,
                       run=model.run, extend=model.extend)
    assert model.runs == [(0, 10, True), (0, outcome.n_star, False)]
    assert outcome.extra_made == N_INSTANCES * 11


@pytest.mark.parametrize("method", ["paper", "bootstrap"])
def test_method_and_cap_are_part_of_the_key(tmp_path: Path, method: str) -> None:
    store = NStarStore(tmp_path)
    run_auto(key(method), store, reference_is_model=True,
             run=SimulatedModel().run, extend=SimulatedModel().extend)
    other = "paper" if method == "bootstrap" else "bootstrap"
    model = SimulatedModel()
    outcome = run_auto(key(other), store, reference_is_model=True, run=model.run,
                       extend=model.extend)
    assert outcome.source == "pilot" and outcome.method == other


def test_a_stored_n_star_from_a_small_pilot_stays_not_reliable_whatever_was_stored(
    tmp_path: Path,
) -> None:
    """An entry an older version stored (reliable, no pilot size) from a bootstrap pilot of 10:
    a later run reads it with the key's pilot size and as not reliable; from 30 it stands."""
    store = NStarStore(tmp_path)
    store.put(key(pilot_n=10), NStarEntry(12, True, 0.004, 9))
    store.put(key(pilot_n=30), NStarEntry(12, True, 0.004, 9))
    small = run_auto(key(pilot_n=10), store, reference_is_model=True,
                     run=SimulatedModel().run, extend=SimulatedModel().extend)
    assert small.source == "store" and small.pilot_n == 10 and not small.reliable
    enough = run_auto(key(pilot_n=30), store, reference_is_model=True,
                      run=SimulatedModel().run, extend=SimulatedModel().extend)
    assert enough.pilot_n == 30 and enough.reliable
    paper = NStarStore(tmp_path / "paper")
    paper.put(key("paper", pilot_n=10), NStarEntry(8, True, 0.004))
    assert run_auto(key("paper", pilot_n=10), paper, reference_is_model=True,
                    run=SimulatedModel().run, extend=SimulatedModel().extend).reliable


def test_the_pilot_size_is_stored_with_n_star(tmp_path: Path) -> None:
    store = NStarStore(tmp_path)
    run_auto(key(pilot_n=30), store, reference_is_model=True, run=SimulatedModel().run,
             extend=SimulatedModel().extend)
    stored = store.get(key(pilot_n=30))
    assert stored is not None and stored.pilot_n == 30
