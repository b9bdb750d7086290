"""`load_report` brings reports of earlier versions up to this version's shape (`schema.migrate`):
the fixtures in tests/data/old_reports are minimal reports as earlier writers of schema_version 1
wrote them (before the entry shape was typed, before spend, judges and pytest's outcomes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from pytest_reliable.schema.entries import (
    SCHEMA_VERSION,
    CanonicalEntry,
    ChecklistEntry,
    GroupEntry,
    RangeEntry,
    ReliableEntry,
    WorstVariantEntry,
    error_entry,
)
from pytest_reliable.schema.load import ReportFileError, load_report, parse_report
from pytest_reliable.schema.migrate import DECIDED_ON, complete_entry

OLD = Path(__file__).parent / "data" / "old_reports"


def fields(shape: type) -> set[str]:
    return set(get_type_hints(shape))


@pytest.mark.parametrize("name", sorted(p.name for p in OLD.glob("*.json")))
def test_an_old_report_loads_with_every_field_of_the_current_shape(name: str) -> None:
    report = load_report(OLD / name)
    assert report["tests"]
    for entry in report["tests"]:
        data: dict[str, Any] = dict(entry)
        shape = ReliableEntry if data["kind"] == "reliable" else ChecklistEntry
        assert fields(shape) - DECIDED_ON <= set(data), name
        if data["kind"] != "reliable":
            continue
        assert set(data["canonical"]) >= fields(CanonicalEntry)
        if data["verdict"] != "error":
            assert set(data["formats"]) >= fields(RangeEntry)
            for group in data["formats"]["per_variant"].values():
                assert set(group) >= fields(GroupEntry)
            assert set(data["worst_variant"]) >= fields(WorstVariantEntry)


def test_old_fields_keep_their_values_and_new_ones_read_as_documented() -> None:
    raw = json.loads((OLD / "first_writer.json").read_text(encoding="utf-8"))
    report = load_report(OLD / "first_writer.json")
    passed, errored = report["tests"][0], report["tests"][1]
    for key, value in raw["tests"][0].items():
        assert passed[key] == value or key in ("formats", "orders", "worst_variant",
                                               "canonical", "calls")
    assert passed["formats"]["min"] == raw["tests"][0]["formats"]["min"]
    assert passed["search"] == "uniform" and passed["model_cache"] == "store"
    assert passed["pass_criterion"] == "score == 1 (full credit)"
    assert passed["cost"] is None and passed["judge"] is None and passed["circular"] is None
    assert passed["formats"]["worst_candidates"] is None
    assert passed["formats"]["per_variant"]["a"]["observed"] is None
    assert passed["worst_variant"]["candidates"] is None
    # An error entry of a writer before entries carried every field: objects of nulls.
    assert errored["mean"] is None and errored["pass_criterion"] is None
    assert errored["canonical"] == dict.fromkeys(fields(CanonicalEntry))
    assert errored["formats"]["min"] is None and errored["formats"]["per_variant"] == {}
    assert "thresholds" not in errored and "outcome" not in errored  # merge decides on these


def test_an_entry_this_version_writes_reads_back_unchanged() -> None:
    for kind in ("reliable", "mft"):
        entry = dict(error_entry("t.py::a", kind, "boom"), outcome="failed", xfail_reason=None,
                     cost=None)
        assert complete_entry(entry) == entry
        assert list(complete_entry(entry)) == list(entry)


def test_a_report_of_a_newer_schema_is_refused_naming_the_fix() -> None:
    newer = json.dumps({"schema_version": SCHEMA_VERSION + 1, "tests": []})
    with pytest.raises(ReportFileError, match="upgrade pytest-reliable"):
        parse_report(newer, "new.json")


def test_odd_values_pass_through_as_found() -> None:
    """The checks let through any JSON inside an entry; completing never breaks on it."""
    odd = {"nodeid": "t", "kind": "reliable", "verdict": "passed", "canonical": [[]],
           "formats": "wide", "orders": {"per_variant": [1]}, "calls": 3, "cost": [],
           "worst_variant": 7}
    done = complete_entry(odd)
    assert {k: done[k] for k in odd} == odd | {"orders": done["orders"]}
    assert done["orders"]["per_variant"] == [1]
