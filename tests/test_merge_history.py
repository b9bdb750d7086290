"""The shard merge (`report.merge`) and the release history page (`report.history`) as functions:
what the acceptance tests (tests/acceptance/test_shards.py, test_history.py) leave to edge cases.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable.report.history import render_history, runs_of
from pytest_reliable.report.merge import ShardMismatch, exit_code, merge_reports
from pytest_reliable.store.reports import keep_in_dir, kept_report, read_dir


def entry(nodeid: str, verdict: str = "passed", score: float = 0.5) -> dict[str, Any]:
    return {"nodeid": nodeid, "kind": "reliable", "verdict": verdict, "model": "m",
            "canonical": {"score": score, "wilson_low": score - 0.1, "wilson_high": score + 0.1},
            "formats": {"min": score - 0.2, "median": score, "max": score + 0.2},
            "calls": {"made": 4, "cached": 0}}


def shard(path: Path, tests: list[dict[str, Any]], created: str, **top: Any) -> Path:
    report = {"schema_version": 1, "pytest_reliable_version": "0.1.0", "created": created,
              "seed": 0, "model": "m", "space_hash": None, "tests": tests, **top}
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_merged_report_is_dated_by_its_latest_shard_and_lists_its_shards(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::b")], "2026-01-02T10:00:00+00:00")
    b = shard(tmp_path / "b.json", [entry("t.py::a", "error")], "2026-01-02T09:00:00+00:00")
    merged = merge_reports([a, b])
    assert merged["created"] == "2026-01-02T10:00:00+00:00"
    assert [e["nodeid"] for e in merged["tests"]] == ["t.py::a", "t.py::b"]
    assert merged["shards"] == [{"file": str(a), "created": "2026-01-02T10:00:00+00:00",
                                 "tests": 1},
                                {"file": str(b), "created": "2026-01-02T09:00:00+00:00",
                                 "tests": 1}]
    assert exit_code(merged) == 1


def test_a_field_one_shard_lacks_is_a_mismatch_named_absent(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [], "2026-01-01T00:00:00+00:00")
    b = tmp_path / "b.json"
    data = json.loads(a.read_text(encoding="utf-8"))
    del data["seed"]
    b.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ShardMismatch, match=r"b\.json: seed is absent, but .*a\.json has 0"):
        merge_reports([a, b])


def test_the_made_cached_split_is_free_but_the_cells_are_not(tmp_path: Path) -> None:
    first = entry("t.py::a")
    cached = dict(first, calls={"made": 0, "cached": 4})
    fewer = dict(first, calls={"made": 0, "cached": 3})
    a = shard(tmp_path / "a.json", [first], "2026-01-01T00:00:00+00:00")
    b = shard(tmp_path / "b.json", [cached], "2026-01-01T00:00:01+00:00")
    c = shard(tmp_path / "c.json", [fewer], "2026-01-01T00:00:01+00:00")
    assert merge_reports([a, b])["tests"] == [first]
    with pytest.raises(ShardMismatch, match=r"calls\.made \+ cached: 4 vs 3"):
        merge_reports([a, c])


def test_runs_of_reads_the_parts_of_one_run_id_as_one_run_in_time_order(tmp_path: Path) -> None:
    def report(created: str, *tests: dict[str, Any]) -> dict[str, Any]:
        return {"schema_version": 1, "created": created, "model": "m", "tests": list(tests)}

    kept = [
        kept_report(report("2026-01-03T00:00:00+00:00", entry("t.py::a", score=0.9)),
                    run_id="late", commit=None),
        kept_report(report("2026-01-01T00:00:00+00:00", entry("t.py::a", score=0.1)),
                    run_id="early", commit="c" * 40),
        kept_report(report("2026-01-01T01:00:00+00:00", entry("t.py::a", "failed", 0.2),
                           entry("t.py::b")), run_id="early", commit="c" * 40),
    ]
    for report_ in kept:
        keep_in_dir(tmp_path, report_)
    runs = runs_of(read_dir(tmp_path))
    assert [(r.run_id, r.parts, sorted(r.tests)) for r in runs] == \
        [("early", 2, ["t.py::a", "t.py::b"]), ("late", 1, ["t.py::a"])]
    # The later part's entry of a test two parts both report.
    assert runs[0].tests["t.py::a"]["verdict"] == "failed" and runs[0].failed
    assert runs[0].created == "2026-01-01T01:00:00+00:00" and runs[0].commits == {"c" * 40}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["early.2.json", "early.json",
                                                          "late.json"]


ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table",
                "thead", "tbody", "tr", "th", "td", "span", "code", "section", "details",
                "summary", "svg", "line", "text", "rect", "circle"}


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(min_size=1, max_size=30), min_size=4, max_size=4),
       score=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)))
def test_no_text_of_a_kept_report_becomes_markup(texts: list[str], score: float | None) -> None:
    nodeid, run_id, model, commit = texts
    test = dict(entry(nodeid), model=model)
    test["canonical"] = dict(test["canonical"], score=score)
    report = kept_report({"schema_version": 1, "created": model, "model": model,
                          "tests": [test, {"nodeid": model, "verdict": nodeid}]},
                         run_id=run_id, commit=commit)
    page = render_history([report])
    tags = {tag.lower() for tag in re.findall(r"<\s*/?\s*([A-Za-z][\w-]*)", page)}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
