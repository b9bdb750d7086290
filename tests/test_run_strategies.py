"""Run strategies (`pytest_reliable.evaluate.schedules`) as the session chooses and runs them."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable import Dataset, MultipleChoice, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.evaluate.evaluation import Evaluator
from pytest_reliable.evaluate.schedules import (
    AutoN,
    FirstRound,
    FixedN,
    GateRun,
    RunStrategy,
    StopEarly,
)
from pytest_reliable.run.session import ReliableSession, ReliableTest, Settings
from pytest_reliable.space import Space
from pytest_reliable.store.nstar import NStarEntry
from pytest_reliable.testing import ScriptedServer

SPACE = Space.from_mapping("wrappers", {"wrapper": ["({})", "{}.", "[{}]"]})
DATA = Dataset.from_records([
    {"question": f"Question {i}?", "choices": ["wrong", "right", "other"], "answer": "right"}
    for i in range(8)
])
NODEID = "test_x.py::test_gate"


def right(prompt: str) -> str:
    found = re.search(r"^\W*(\w)\W+\s*right$", prompt, re.MULTILINE)
    return found.group(1) if found else "?"


def session(tmp_path: Path, **settings: Any) -> ReliableSession:
    return ReliableSession(Settings(rootdir=tmp_path, no_cache=True, **settings),
                           {"wrappers": SPACE})


def chosen(s: ReliableSession, spec: ReliableSpec) -> RunStrategy:
    test = s.reliable_test(NODEID, DATA, MultipleChoice(), spec, text_model(right, id="m"))
    return s.strategy_for(test)


def test_the_session_chooses_one_strategy_per_test(tmp_path: Path) -> None:
    assert chosen(session(tmp_path), ReliableSpec(space="wrappers")) == FixedN(10)
    assert chosen(session(tmp_path, n=4), ReliableSpec(space="wrappers", n=7)) == FixedN(7)
    early = chosen(session(tmp_path, stop_early=True),
                   ReliableSpec(space="wrappers", n=30, min_score=0.5, max_std=0.2))
    assert isinstance(early, StopEarly) and early.gate_bound is not None
    assert early == StopEarly(30, {"min_score": ("min", 0.5), "max_std": ("max", 0.2)},
                              decide="pass-on-evidence", confidence=0.95,
                              gate_bound=early.gate_bound)
    # A stop asks the gate's own bound on the mean: ilr mode's, on the test's space.
    bound = early.gate_bound
    assert isinstance(bound, functools.partial) and bound.keywords["mode"] == "ilr"
    # The marker's stop_early=False wins over the option.
    assert chosen(session(tmp_path, stop_early=True),
                  ReliableSpec(space="wrappers", n=5, stop_early=False)) == FixedN(5)
    auto = chosen(session(tmp_path, n="auto", pilot_n=6),
                  ReliableSpec(space="wrappers", stop_early=True))
    assert isinstance(auto, AutoN)
    assert auto.key.pilot_n == 6 and auto.key.reference_model == "m"
    assert auto.stop_reason == "not under --reliable-n auto: n* sizes the run"
    # A marker's own n is not sized by n*.
    assert chosen(session(tmp_path, n="auto"), ReliableSpec(space="wrappers", n=3)) == FixedN(3)


@dataclasses.dataclass(frozen=True)
class FirstHalf:
    """A strategy of its own: runs n resamplings and gates on the first half of them."""

    n: int
    n_star: NStarEntry | None = None

    def run(self, evaluator: Evaluator) -> GateRun:
        matrix = evaluator.run(self.n)
        return GateRun(matrix.head(self.n // 2), n_star=self.n_star, n_star_source="store",
                       n_star_method="bootstrap", stop_reason="half")

    def first_round(self) -> FirstRound:
        return FirstRound(self.n)


class HalfSession(ReliableSession):
    strategy: FirstHalf

    def strategy_for(self, test: ReliableTest) -> RunStrategy:
        return self.strategy


@pytest.mark.parametrize("n_star", [None, NStarEntry(37, False, 0.25, 12)])
def test_a_new_strategy_is_one_class_and_its_n_star_reaches_the_report(
    tmp_path: Path, n_star: NStarEntry | None
) -> None:
    s = HalfSession(Settings(rootdir=tmp_path, no_cache=True), {"wrappers": SPACE})
    s.strategy = FirstHalf(8, n_star)
    report = s.run_reliable(NODEID, DATA, MultipleChoice(), ReliableSpec(space="wrappers"),
                            text_model(right, id="m"))
    assert report.n_resamplings == 4 and report.matrix.scores.shape == (4, len(DATA))
    # Every call made counts (those the gate does not use too); at temperature 0 a repeated
    # prompt is served from the run's own cache.
    assert report.calls_made + report.calls_cached == (8 + 1) * len(DATA)
    assert report.stop_reason == "half" and not report.stopped_early
    if n_star is None:  # the summary's own n*, from the 4 resamplings it gates on
        assert report.n_star is not None and report.n_star <= 4
        assert report.entry("passed")["n_star_paper"] is None
    else:  # the strategy's n*, as it decided it: never patched over by the summary's
        assert (report.n_star, report.n_star_reliable, report.achievable_eps) == (37, False, 0.25)
        assert report.n_star_paper == 12
    assert report.n_star_source == "store" and report.n_star_method == "bootstrap"


def test_a_pilot_on_a_reference_model_sizes_the_gate_on_the_model_under_test(
    tmp_path: Path,
) -> None:
    with ScriptedServer(lambda messages, params: "A") as reference:
        s = ReliableSession(Settings(rootdir=tmp_path, no_cache=True, n="auto", pilot_n=5,
                                     reference_model="scripted", base_url=reference.base_url),
                            {"wrappers": SPACE})
        try:
            spec = ReliableSpec(space="wrappers", eps=0.2, delta=0.1)
            first = s.run_reliable(NODEID, DATA, MultipleChoice(), spec, text_model(right, id="m"))
            piloted = reference.completed
            assert piloted > 0
            second = s.run_reliable(NODEID, DATA, MultipleChoice(), spec,
                                    text_model(right, id="m"))
            assert reference.completed == piloted  # n* is stored: no pilot again
        finally:
            s.close()
    assert first.n_star_source == "pilot" and first.pilot_n == 5
    # A stored n* keeps its pilot's size (SPEC 7): the later run reports it, not reliable at 5.
    assert second.n_star_source == "store" and second.pilot_n == 5
    assert second.summary.n_star_reliable is False
    # The gate ran on the model under test (always right), the pilot (always "A") did not.
    assert first.mean == 1.0 and first.n_resamplings == min(first.n_star or 0, 1000)
    pilot_calls = 5 * len(DATA) + len(DATA)
    gate_calls = (first.n_resamplings + 1) * len(DATA)
    assert first.calls_made + first.calls_cached == pilot_calls + gate_calls
    assert second.calls_made + second.calls_cached == gate_calls
