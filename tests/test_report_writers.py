"""The report writers over plain entries: table, Markdown, JSON, JUnit properties."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_reliable.report import (
    append_github_step_summary,
    build_report,
    junit_properties,
    markdown_summary,
    summary_table,
    write_report,
)
from pytest_reliable.schema.migrate import complete_entry


def reliable_entry(nodeid: str, **fields: Any) -> dict[str, Any]:
    entry = {
        "nodeid": nodeid, "kind": "reliable", "verdict": "passed", "model": "m", "space": "s",
        "space_hash": "ab" * 32, "mode": "ilr", "n_resamplings": 10, "mean": 0.625,
        "std": 0.125, "canonical": {"score": 0.75, "wilson_low": 0.41, "wilson_high": 0.93},
        "formats": {"min": 0.25, "median": 0.5, "max": 0.875, "grouping": "formats"},
        "orders": {"min": 0.4, "median": 0.5, "max": 0.6, "grouping": "gold_position"},
        "pass_at_1": 0.75, "pass_at_k": 0.9, "pass_hat_k": 0.6, "k": 3, "n_star": 7,
        "n_star_reliable": True, "eps": 0.01, "delta": 0.1, "achievable_eps": 0.004,
        "calls": {"made": 80, "cached": 8}, "thresholds": [], "message": None,
    }
    entry.update(fields)
    return complete_entry(entry)  # complete, as the engine writes entries and load reads them


ENTRIES = [
    reliable_entry("tests/gates/test_a.py::test_passes"),
    reliable_entry("tests/gates/test_b.py::test_fails", verdict="failed", n_star=10,
                   n_star_reliable=False, achievable_eps=0.031,
                   message="min_worst: observed 0.2500, required >= 0.4"),
    complete_entry({"nodeid": "tests/gates/test_b.py::test_inv", "kind": "invariance",
                    "verdict": "failed", "rate": 0.5, "interval": [0.19, 0.81], "pairs": 8,
                    "unparsed": 1, "calls": {"made": 16, "cached": 0},
                    "message": "flip rate 0.50"}),
    reliable_entry("tests/gates/test_b.py::test_errored|pipe", verdict="error", mean=None,
                   std=None, canonical=None, formats=None, n_star=None),
]


def test_table_has_a_row_per_test_with_aligned_columns() -> None:
    lines = summary_table(ENTRIES)
    assert len([line for line in lines if "test_a.py::test_passes" in line]) == 1
    assert any("0.62±0.12" in line and "0.75 [0.41, 0.93]" in line for line in lines)
    assert any("0.25/0.50/0.88" in line for line in lines)
    assert any("10!" in line for line in lines)
    assert any("not reliable" in line and "eps=0.0310" in line for line in lines)
    assert any("flip rate 0.50 [0.19, 0.81]" in line for line in lines)
    header = lines[0]
    first_table = lines[: lines.index("")] if "" in lines else lines
    rows = [line for line in first_table if not line.startswith("!")]
    # Columns line up: every cell starts where its header starts.
    verdict_at = header.index("verdict")
    for row in rows[2:]:
        assert row[verdict_at:].split()[0] in ("passed", "failed", "error"), row


@pytest.mark.parametrize(("pilot", "source", "method", "flagged"), [
    (10, "pilot", "bootstrap", True), (29, "pilot", "bootstrap", True),
    (30, "pilot", "bootstrap", False), (10, "pilot", "paper", False),
    (10, "store", "bootstrap", True), (None, "store", "bootstrap", False),
    (None, "resamplings", None, False),
])
def test_an_n_star_from_a_small_bootstrap_pilot_says_what_it_can_miss(
    pilot: int | None, source: str, method: str | None, flagged: bool,
) -> None:
    # SPEC 7: a bootstrap pilot under 30 sets n_star_reliable false, and the note says why (a
    # pilot under 30 can miss a rarely failing format); a stored n* keeps its pilot's size, so
    # a later run reading it says the same.
    entry = reliable_entry("tests/test_a.py::test_auto", n_star=11, n_star_reliable=not flagged,
                           n_star_source=source, n_star_method=method, pilot_n=pilot,
                           n_resamplings=11)
    lines = summary_table([entry])
    text = " ".join(line.strip() for line in lines)  # notes wrap at the table's width
    assert ("from a bootstrap pilot" in text) is flagged, lines
    if flagged:
        assert (f"! test_auto: n* = 11 from a bootstrap pilot of {pilot} resamplings: a pilot "
                "under 30 can miss a rare failure mode (a format that seldom collapses), and n* "
                "then runs too few resamplings (measured: a pilot of 10 kept the mean within eps "
                "in 0.74 of runs where 0.90 was promised); raise --reliable-pilot-n") in text
        assert "beyond the cap" not in text  # the small pilot is the reason, said once
    report = build_report([entry], seed=0, model=None, space_hash=None)
    assert ("from a bootstrap pilot of" in markdown_summary(report)) is flagged


def test_markdown_escapes_pipes_and_lists_failures() -> None:
    report = build_report(ENTRIES, seed=3, model=None, space_hash=None)
    text = markdown_summary(report)
    assert "test_errored\\|pipe" in text
    assert text.count("\n| ") >= 4
    assert "### Failures" in text and "min_worst" in text


def test_github_step_summary_appends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    report = build_report(ENTRIES[:1], seed=0, model=None, space_hash=None)
    append_github_step_summary(report)
    append_github_step_summary(report)
    assert target.read_text().count("## pytest-reliable") == 2


def test_json_report_is_sorted_nan_free_and_atomic(tmp_path: Path) -> None:
    entries = [ENTRIES[1], dict(ENTRIES[0], mean=math.nan)]
    report = build_report(entries, seed=1, model=None, space_hash="h")
    path = tmp_path / "deep" / "report.json"
    write_report(report, path)
    loaded = json.loads(path.read_text())
    assert [t["nodeid"] for t in loaded["tests"]] == sorted(e["nodeid"] for e in entries)
    assert loaded["tests"][0]["mean"] is None
    for key in ("schema_version", "seed", "model", "space_hash", "tests"):
        assert key in loaded
    assert loaded["model"] == "m"
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_junit_properties_are_strings() -> None:
    properties = dict(junit_properties(ENTRIES[0]))
    assert properties["reliable_mean"] == "0.6250"
    assert properties["reliable_n_star"] == "7"
    assert all(isinstance(v, str) for v in properties.values())
    assert dict(junit_properties(ENTRIES[2]))["reliable_rate"] == "0.5000"


NUMERIC = ["mean", "std", "n_star", "pass_at_1", "pass_at_k", "pass_hat_k", "n_resamplings"]


@given(st.dictionaries(st.sampled_from(NUMERIC), st.none() | st.floats(allow_nan=True)),
       st.sampled_from(["reliable", "invariance", "mft", "weird"]))
def test_table_never_crashes_on_missing_numbers(overrides: dict, kind: str) -> None:
    entry = reliable_entry("t.py::x", kind=kind, **overrides)
    for key in ("canonical", "formats", "calls"):
        entry[key] = None
    assert summary_table([entry])


def test_json_report_keeps_a_lone_surrogate_as_an_escape(tmp_path: Path) -> None:
    """A model may answer a lone surrogate: the report is still written, as valid JSON."""
    from pytest_reliable.report.json_report import write_report

    path = tmp_path / "report.json"
    write_report({"tests": [{"nodeid": "t", "answer": "A\ud800 é"}]}, path)
    assert json.loads(path.read_text(encoding="utf-8"))["tests"][0]["answer"] == "A\ud800 é"


def test_json_safe_turns_numpy_values_into_json_without_importing_numpy(tmp_path: Path) -> None:
    """The writers recognise numpy by duck typing (``tolist``), so report/ never imports numpy;
    what a run hands them (numpy scalars and arrays, tuples, NaN) is written as plain JSON."""
    np = pytest.importorskip("numpy")
    from pytest_reliable.schema.entries import json_safe

    value = {"mean": np.float64(0.5), "n": np.int64(3), "ok": np.bool_(True),
             "nan": np.float32("nan"), "curve": np.array([0.25, np.inf]),
             "matrix": np.arange(4).reshape(2, 2), "pair": (np.float64(1.0), None), 7: "key"}
    safe = json_safe(value)
    assert safe == {"mean": 0.5, "n": 3, "ok": True, "nan": None, "curve": [0.25, None],
                    "matrix": [[0, 1], [2, 3]], "pair": [1.0, None], "7": "key"}
    assert [type(safe[k]) for k in ("mean", "n", "ok")] == [float, int, bool]
    path = tmp_path / "report.json"
    write_report({"tests": [value]}, path)
    assert json.loads(path.read_text(encoding="utf-8"))["tests"][0] == safe
