"""The baseline comparison in the core (`pytest_reliable.verdict.baseline`, `ReliableSession`), no
pytest plugin: pairing on the candidate's plan, the stored-report checks, the decision under each
policy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from pytest_reliable import Dataset, MultipleChoice, stats, text_model
from pytest_reliable.calls.cache import cache_key
from pytest_reliable.calls.requests import number_samples
from pytest_reliable.contract.markers import MarkerArgumentError, ReliableSpec, parse_reliable
from pytest_reliable.evaluate.evaluation import EvaluationSettings, plan_cells
from pytest_reliable.plan.sampling import derive_seed
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.space import Space
from pytest_reliable.verdict.baseline import (
    BaselineScores,
    BaselineUsageError,
    StoredBaseline,
    choose_baseline,
    compare,
)
from pytest_reliable.verdict.gate import Evidence, decide_thresholds, regression_evidence

SPACE = Space.from_mapping("wrappers", {"wrapper": ["({})", "{}."], "temperature": [0.0, 0.7]})
DATA = Dataset.from_records([
    {"question": f"Question {i}?", "choices": ["wrong one", "right answer", "wrong two"][i % 3:]
     + ["wrong one", "right answer", "wrong two"][: i % 3], "answer": "right answer"}
    for i in range(12)
])
NODEID = "test_x.py::test_gate"


def always_right(prompt: str) -> str:
    found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.MULTILINE)
    return found.group(1) if found else "?"


def right_with_parentheses(prompt: str) -> str:
    found = re.search(r"^\((\w)\) right", prompt, re.MULTILINE)
    return found.group(1) if found else "?"


class Recording:
    """A text model that records every prompt it is sent."""

    def __init__(self, fn, name: str) -> None:
        self.fn, self.prompts = fn, []
        self.model = text_model(self, id=name)

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.fn(prompt)


def session(tmp_path: Path, **settings) -> ReliableSession:
    return ReliableSession(Settings(rootdir=tmp_path, no_cache=True, **settings),
                           {"wrappers": SPACE})


def test_baseline_runs_exactly_the_candidates_plan_with_its_own_identity(tmp_path: Path) -> None:
    candidate = Recording(right_with_parentheses, "candidate")
    baseline = Recording(always_right, "production")
    s = session(tmp_path)
    spec = ReliableSpec(space="wrappers", n=6, max_regression=0.5)
    report = s.run_reliable(NODEID, DATA, MultipleChoice(), spec, candidate.model, baseline.model)
    # The cache holds, for every request of the candidate's plan, the key with each identity.
    settings = EvaluationSettings(n=6, mode="ilr", seed=derive_seed(0, NODEID), nodeid=NODEID)
    cells = plan_cells(DATA, MultipleChoice(), SPACE, settings)
    requests = number_samples([(list(c.prompt.messages), c.params) for c in cells], NODEID)
    assert any(r.sample_index > 0 for r in requests)  # temperature 0.7 repeats are numbered
    keys = {who: {cache_key(who, r.messages, r.params, r.sample_index, r.scope)
                  for r in requests} for who in ("candidate", "production")}
    expected = keys["candidate"] | keys["production"]
    assert set(s.cache.get_many(sorted(expected))) == expected
    assert s.cache.count() == len(expected)
    assert sorted(candidate.prompts) == sorted(baseline.prompts)
    assert report.baseline is not None and report.baseline.model == "production"
    assert report.baseline.calls_made + report.baseline.calls_cached == len(requests)
    # Candidate calls are what they were before: the baseline's are reported on their own.
    assert report.calls_made + report.calls_cached == len(requests)


def test_comparison_numbers_groups_and_example(tmp_path: Path) -> None:
    candidate = Recording(right_with_parentheses, "candidate")
    baseline = Recording(always_right, "production")
    spec = ReliableSpec(space="wrappers", n=6, max_regression=0.1)
    report = session(tmp_path).run_reliable(NODEID, DATA, MultipleChoice(), spec,
                                            candidate.model, baseline.model)
    comparison = report.baseline
    assert comparison is not None
    cand, base = report.matrix.scores, np.ones_like(report.matrix.scores)
    assert comparison.mean == 1.0
    assert comparison.difference.estimate == pytest.approx(float((cand - base).mean()))
    assert comparison.grouping == "dimensions"
    worst = comparison.groups[0]
    assert worst.key == "wrapper={}." and worst.difference.estimate == -1.0
    assert comparison.groups[-1].difference.estimate == 0.0
    # Canonical variant is "({})": the candidate is right there too, McNemar sees no discord.
    assert comparison.mcnemar is not None and comparison.mcnemar.p_value == 1.0
    assert comparison.orp is not None and 0.0 <= comparison.orp.area <= 1.0
    assert comparison.example is not None
    assert comparison.example["baseline_score"] == 1.0
    assert comparison.example["candidate_score"] == 0.0
    assert "B. right answer" in comparison.example["prompt"] or ". right" in \
        comparison.example["prompt"]
    assert not report.passed
    message = report.failure_message()
    assert "max_regression" in message and "wrapper={}." in message
    assert "the baseline answered" in message
    entry = report.entry("failed")
    assert entry["baseline"]["groups"]["wrapper={}."]["regressed"] is True
    assert entry["thresholds"][-1]["name"] == "max_regression"
    assert len(entry["per_instance"]) == len(DATA)
    assert len(entry["resampling_scores"]) == 6 and entry["dataset_hash"] == DATA.hash


def _difference(estimate: float, half_width: float) -> stats.ClusteredDifference:
    """A difference whose bootstrap distribution is normal around ``estimate``, its one-sided 95%
    bounds ``half_width`` away."""
    z = norm.ppf(np.linspace(0.0005, 0.9995, 1000))
    replicates = estimate + half_width / norm.ppf(0.95) * z
    low, high = np.percentile(replicates, [5.0, 95.0])
    return stats.ClusteredDifference(estimate, float(low), float(high), 0.95, 40, 400,
                                     stats.CLUSTER_BOOTSTRAP, replicates)


@pytest.mark.parametrize(
    ("difference", "decide", "passed"),
    [
        ((-0.01, 0.02), "pass-on-evidence", False),  # lower bound -0.03 beyond -0.02
        ((-0.005, 0.01), "pass-on-evidence", True),
        ((0.05, 0.04), "pass-on-evidence", True),
        ((-0.01, 0.02), "fail-on-evidence", True),  # upper bound 0.01 does not breach
        ((-0.05, 0.02), "fail-on-evidence", False),
        ((-0.01, 0.02), "estimate", True),
        ((-0.03, 0.03), "estimate", False),
    ],
)
def test_max_regression_is_decided_under_the_policy(difference, decide, passed) -> None:
    claims = {"max_regression": (0.02, regression_evidence(_difference(*difference)))}
    (check,) = decide_thresholds(claims, decide, 0.95)
    assert check.passed is passed
    data = check.as_dict()
    assert data["name"] == "max_regression" and data["decide"] == decide
    assert data["observed"] == pytest.approx(-difference[0])
    assert "candidate worse than baseline by" in check.describe()
    assert "allowed <= 0.02" in check.describe()
    if decide == "pass-on-evidence":  # the regression's upper bound = -(difference's lower)
        assert data["bound"] == pytest.approx(-(difference[0] - difference[1]), abs=1e-3)


def test_max_regression_is_in_the_tests_holm_family_under_fail_on_evidence() -> None:
    """A regression with p = 0.04 fails alone at alpha 0.05, but not with a second claim in the
    family (Holm compares the smallest p with alpha / 2)."""
    replicates = np.array([-0.019] * 40 + [-0.03] * 960)  # 4% of replicates at or above -0.02
    difference = stats.ClusteredDifference(-0.0294, -0.03, -0.03, 0.95, 40, 400,
                                           stats.CLUSTER_BOOTSTRAP, replicates)
    assert difference.p_below(-0.02) == pytest.approx(0.04)
    regression = (0.02, regression_evidence(difference))
    (alone,) = decide_thresholds({"max_regression": regression}, "fail-on-evidence", 0.95)
    assert not alone.passed and "Holm over 1 claims" in alone.method
    comfortable = Evidence(0.9, "a clear pass", lambda c: np.array([0.85]),
                           lambda levels: np.array([0.95]), lambda limit: np.array([0.5]))
    checks = decide_thresholds({"min_score": (0.8, comfortable), "max_regression": regression},
                               "fail-on-evidence", 0.95)
    assert [c.name for c in checks] == ["min_score", "max_regression"]
    assert all(c.passed for c in checks)
    assert all("Holm over 2 claims" in (c.method or "") for c in checks)
    # Under pass-on-evidence each threshold stands alone (intersection-union): no correction.
    checks = decide_thresholds({"min_score": (0.8, comfortable), "max_regression": regression},
                               "pass-on-evidence", 0.95)
    assert not checks[1].passed and checks[1].bound == pytest.approx(0.03)


def test_the_gates_max_regression_check_is_the_comparisons(tmp_path: Path) -> None:
    """One owner: the report's thresholds hold the check the comparison passes or fails on."""
    spec = ReliableSpec(space="wrappers", n=4, max_regression=0.1, min_score=0.1,
                        decide="fail-on-evidence")
    report = session(tmp_path).run_reliable(
        NODEID, DATA, MultipleChoice(), spec, Recording(right_with_parentheses, "c").model,
        Recording(always_right, "production").model)
    assert report.baseline is not None and report.baseline.check is report.thresholds[-1]
    assert report.thresholds[-1].name == "max_regression"
    assert not report.baseline.passed and not report.passed
    assert "Holm over 2 claims" in (report.thresholds[-1].method or "")
    names = [t["name"] for t in report.entry("failed")["thresholds"]]
    assert names == ["min_score", "max_regression"]


def _write_report(path: Path, entry: dict, seed: int = 0) -> Path:
    path.write_text(json.dumps({"schema_version": 1, "seed": seed, "model": "production",
                                "tests": [entry]}))
    return path


ENTRY = {"nodeid": NODEID, "kind": "reliable", "verdict": "passed", "model": "production",
         "space_hash": SPACE.hash, "dataset_hash": DATA.hash, "mode": "ilr", "n_resamplings": 2,
         "k": 1, "per_instance": [{"mean": 1.0, "scores": [1.0, 1.0], "canonical": [1.0]}] * 12}
RUN = {"seed": 0, "space_hash": SPACE.hash, "dataset_hash": DATA.hash, "mode": "ilr", "n": 2,
       "n_instances": 12, "k": 1}


def test_stored_report_pairs_when_everything_matches(tmp_path: Path) -> None:
    stored = StoredBaseline.load(_write_report(tmp_path / "r.json", ENTRY))
    assert stored.differences(NODEID, **RUN) == []
    scores = stored.scores(NODEID)
    assert scores.scores.shape == (2, 12) and scores.source == "report"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"seed": 3}, "seed: stored 0, this run 3"),
        ({"space_hash": "f" * 64}, "space hash"),
        ({"dataset_hash": "0" * 64}, "dataset hash"),
        ({"mode": "fixed"}, "mode: stored 'ilr', this run 'fixed'"),
        ({"n": 5}, "n (resamplings): stored 2, this run 5"),
    ],
)
def test_stored_report_mismatch_names_the_test_and_what_differs(
    tmp_path: Path, change: dict, named: str
) -> None:
    stored = StoredBaseline.load(_write_report(tmp_path / "r.json", ENTRY))
    with pytest.raises(BaselineUsageError) as error:
        stored.check(NODEID, **{**RUN, **change})
    assert NODEID in str(error.value) and named in str(error.value)


def test_stored_report_missing_test_and_unreadable_file(tmp_path: Path) -> None:
    stored = StoredBaseline.load(_write_report(tmp_path / "r.json", ENTRY))
    with pytest.raises(BaselineUsageError, match="missing from it"):
        stored.check("test_x.py::test_other", **RUN)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(BaselineUsageError, match="not a readable JSON report"):
        StoredBaseline.load(tmp_path / "bad.json")
    with pytest.raises(BaselineUsageError, match="no such file"):
        StoredBaseline.load(tmp_path / "absent.json")


def test_stored_baseline_gives_the_live_baselines_numbers(tmp_path: Path) -> None:
    """A report written by the baseline's own run pairs exactly: same numbers, no call."""
    spec = ReliableSpec(space="wrappers", n=4, max_regression=0.1)
    production = Recording(always_right, "production")
    earlier = session(tmp_path).run_reliable(NODEID, DATA, MultipleChoice(), ReliableSpec(
        space="wrappers", n=4), production.model)
    path = _write_report(tmp_path / "prod.json", earlier.entry("passed"))
    live = session(tmp_path).run_reliable(
        NODEID, DATA, MultipleChoice(), spec, Recording(right_with_parentheses, "c").model,
        production.model)
    calls_before = len(production.prompts)
    stored = session(tmp_path, baseline_report=path).run_reliable(
        NODEID, DATA, MultipleChoice(), spec, Recording(right_with_parentheses, "c").model)
    assert len(production.prompts) == calls_before
    assert stored.baseline is not None and live.baseline is not None
    assert stored.baseline.source == "report" and stored.baseline.calls_made == 0
    assert stored.baseline.difference == live.baseline.difference
    assert [g.difference for g in stored.baseline.groups] == \
        [g.difference for g in live.baseline.groups]


def test_which_baseline_order_and_none_configured() -> None:
    stored = StoredBaseline(Path("r.json"), 0, None, {})
    assert choose_baseline("gpt-x", object(), "other", stored, NODEID).name == "gpt-x"
    assert choose_baseline(None, "fn", "other", stored, NODEID).kind == "fixture"
    assert choose_baseline(None, None, "other", stored, NODEID).name == "other"
    assert choose_baseline(None, None, None, stored, NODEID).kind == "report"
    with pytest.raises(BaselineUsageError, match=re.escape(NODEID)):
        choose_baseline(None, None, None, None, NODEID)


def test_fixed_mode_groups_are_formats_and_shape_mismatch_is_refused(tmp_path: Path) -> None:
    spec = ReliableSpec(space="wrappers", n=4, mode="fixed", baseline="x")
    report = session(tmp_path).run_reliable(
        NODEID, DATA, MultipleChoice(), ReliableSpec(space="wrappers", n=4, mode="fixed"),
        Recording(right_with_parentheses, "c").model)
    ones = BaselineScores("b", "model", np.ones((4, 12)), np.ones((1, 12)))
    result = compare(report.matrix, ones, report.summary.formats, mode=spec.mode)
    assert result.grouping == "formats"
    assert "two-way" in result.difference.method
    assert any('wrapper "{}."' in g.description and g.difference.estimate == -1.0
               for g in result.groups)
    with pytest.raises(BaselineUsageError, match="same plan"):
        compare(report.matrix, BaselineScores("b", "model", np.ones((3, 12)), np.ones((1, 12))),
                report.summary.formats, mode="fixed")


@pytest.mark.parametrize(
    ("kwargs", "has_baseline", "argument"),
    [
        ({"max_regression": 0.02}, False, "max_regression"),
        ({"max_regression": 1.5, "baseline": "x"}, True, "max_regression"),
        ({"baseline": 3}, True, "baseline"),
        ({"baseline": ""}, True, "baseline"),
        ({"decide": "sometimes"}, True, "decide"),
    ],
)
def test_marker_arguments_are_validated(kwargs: dict, has_baseline: bool, argument: str) -> None:
    with pytest.raises(MarkerArgumentError) as error:
        parse_reliable(kwargs, space_exists=lambda s: True, has_baseline=has_baseline)
    assert error.value.argument == argument


def test_marker_accepts_a_baseline_and_a_policy() -> None:
    spec = parse_reliable({"baseline": "local", "max_regression": 0.02,
                           "decide": "fail-on-evidence"}, space_exists=lambda s: True,
                          has_baseline=False)
    assert (spec.baseline, spec.max_regression, spec.decide) == ("local", 0.02,
                                                                 "fail-on-evidence")

