"""The shard merge (`report.merge`) and the release history page (`report.history`) as functions:
what the acceptance tests (tests/acceptance/test_shards.py, test_history.py) leave to edge cases.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_reliable.report.history import kept_in_dir, kept_in_texts, render_history, runs_of
from pytest_reliable.report.merge import (
    ExpectedTestsError,
    ShardMismatch,
    blocking_tests,
    check_expected,
    decision_text,
    entry_problem,
    exit_code,
    merge_reports,
    read_expected_tests,
)
from pytest_reliable.schema.entries import PYTEST_OUTCOMES, VERDICTS
from pytest_reliable.schema.load import MAX_NESTING
from pytest_reliable.schema.migrate import complete_entry
from pytest_reliable.store.reports import keep_in_dir, kept_report

OUTCOME_OF = {"passed": "passed", "failed": "failed", "error": "failed"}


def entry(nodeid: str, verdict: str = "passed", score: float = 0.5, *,
          outcome: str | None = None, model: str = "m", usd: float = 0.0) -> dict[str, Any]:
    """A test's entry as pytest writes it: the outcome follows the verdict unless given."""
    return {"nodeid": nodeid, "kind": "reliable", "verdict": verdict, "model": model,
            "outcome": outcome or OUTCOME_OF[verdict], "xfail_reason": None,
            "canonical": {"score": score, "wilson_low": score - 0.1, "wilson_high": score + 0.1},
            "formats": {"min": score - 0.2, "median": score, "max": score + 0.2},
            "thresholds": [{"name": "min_score", "limit": 0.4, "observed": score,
                            "passed": verdict == "passed"}],
            "calls": {"made": 4, "cached": 0},
            "cost": {"usd": usd, "prompt_tokens": 40, "completion_tokens": 4,
                     "cached_usd_saved": 0.0, "estimated": True}}


def shard(path: Path, tests: list[dict[str, Any]], created: str = "2026-01-01T00:00:00+00:00",
          *, outcomes: dict[str, str] | None = None, **top: Any) -> Path:
    """A shard's report: its ``outcomes`` are its entries' unless given; its ``model`` and
    ``cost`` follow its entries as a run writes them."""
    models = sorted({t["model"] for t in tests if t.get("model")})
    report = {"schema_version": 1, "pytest_reliable_version": "0.1.0", "created": created,
              "seed": 0, "model": models[0] if len(models) == 1 else ("mixed" if models else None),
              "space_hash": None,
              "cost": {"usd": sum(t["cost"]["usd"] for t in tests if t.get("cost")),
                       "prompt_tokens": 0, "completion_tokens": 0, "cached_usd_saved": 0.0,
                       "estimated": False},
              "tests": tests,
              "outcomes": {t["nodeid"]: t["outcome"] for t in tests} if outcomes is None
              else outcomes, **top}
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_merged_report_is_dated_by_its_latest_shard_and_lists_its_shards(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::b", usd=0.25)], "2026-01-02T10:00:00+00:00")
    b = shard(tmp_path / "b.json", [entry("t.py::a", "error")], "2026-01-02T09:00:00+00:00")
    merged = merge_reports([a, b])
    assert merged["created"] == "2026-01-02T10:00:00+00:00"
    assert [e["nodeid"] for e in merged["tests"]] == ["t.py::a", "t.py::b"]
    assert merged["outcomes"] == {"t.py::a": "failed", "t.py::b": "passed"}
    assert [{k: s[k] for k in ("file", "created", "tests")} for s in merged["shards"]] == \
        [{"file": str(a), "created": "2026-01-02T10:00:00+00:00", "tests": 1},
         {"file": str(b), "created": "2026-01-02T09:00:00+00:00", "tests": 1}]
    assert [s["cost"]["usd"] for s in merged["shards"]] == [0.25, 0]
    assert merged["pytest_reliable_version"] == "0.1.0"
    assert exit_code(merged) == 1 and blocking_tests(merged) == ["t.py::a"]


def test_a_field_one_shard_lacks_is_a_mismatch_named_absent(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::a")])
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
    a = shard(tmp_path / "a.json", [first])
    b = shard(tmp_path / "b.json", [cached], "2026-01-01T00:00:01+00:00")
    c = shard(tmp_path / "c.json", [fewer], "2026-01-01T00:00:01+00:00")
    # The merged entry is the shard's as read (`load_report` completes an entry it wrote).
    assert merge_reports([a, b])["tests"] == [complete_entry(first)]
    with pytest.raises(ShardMismatch, match=r"calls\.made \+ cached: 4 vs 3"):
        merge_reports([a, c])


# -- the decision: pytest's outcome, cross-checked -------------------------------------------

@pytest.mark.parametrize("verdict, outcome, blocks", [
    ("passed", "passed", False),
    ("passed", "xpassed", False),   # xfail(strict=False) whose gate passed
    ("failed", "xfailed", False),   # a strict xfail that failed as expected: pytest passes it
    ("failed", "failed", True),     # a strict xfail that passed is failed by pytest
    ("error", "failed", True),
    ("error", "xfailed", False),
    ("failed", "skipped", False),   # pytest.skip() in the body after the evaluation
])
def test_the_decision_is_pytests_outcome(tmp_path: Path, verdict: str, outcome: str,
                                         blocks: bool) -> None:
    test = entry("t.py::a", verdict, outcome=outcome)
    assert entry_problem(test) is None
    assert exit_code(merge_reports([shard(tmp_path / "a.json", [test])])) == int(blocks)


def test_a_gate_whose_body_failed_after_its_thresholds_passed_blocks(tmp_path: Path) -> None:
    # The test's own assert failed: every threshold passed, the verdict and outcome are failed.
    test = dict(entry("t.py::a", "failed"),
                thresholds=[dict(entry("t.py::a")["thresholds"][0], passed=True)])
    assert exit_code(merge_reports([shard(tmp_path / "a.json", [test])])) == 1


@pytest.mark.parametrize("edit, field", [
    ({"verdict": "passed"}, "verdict is \"passed\", but outcome is \"failed\""),
    ({"verdict": None}, "verdict is null"),
    ({"verdict": "pased"}, "verdict is \"pased\""),
    ({"verdict": "PASSED"}, "verdict is \"PASSED\""),
    ({"outcome": "passed"}, "outcome is \"passed\", but verdict is \"failed\""),
    ({"outcome": None}, "outcome is null"),
    ({"outcome": "xfail"}, "outcome is \"xfail\""),
    ({"verdict": "passed", "outcome": "passed"},
     "verdict is \"passed\", but thresholds[0] (\"min_score\") has passed: false"),
    ({"thresholds": None}, "thresholds is null"),
    ({"thresholds": [{"name": "min_score", "passed": "yes"}]}, "thresholds[0].passed is \"yes\""),
    ({"kind": "relaible"}, "kind is \"relaible\""),
])
def test_an_edited_entry_is_refused_naming_shard_test_and_field(
        tmp_path: Path, edit: dict[str, Any], field: str) -> None:
    test = dict(entry("t.py::a", "failed"), **edit)
    path = shard(tmp_path / "edited.json", [test], outcomes={"t.py::a": "failed"})
    with pytest.raises(ShardMismatch) as raised:
        merge_reports([path])
    assert f"{path}: test 't.py::a' (tests[0]): {field}" in str(raised.value)


@pytest.mark.parametrize("field", ["verdict", "outcome", "kind", "thresholds"])
def test_a_deleted_field_is_refused_as_absent(tmp_path: Path, field: str) -> None:
    test = entry("t.py::a", "failed")
    del test[field]
    with pytest.raises(ShardMismatch, match=rf"tests\[0\]\): {field} is absent"):
        merge_reports([shard(tmp_path / "a.json", [test], outcomes={"t.py::a": "failed"})])


def test_the_shards_outcomes_must_hold_each_entry_with_its_outcome(tmp_path: Path) -> None:
    test = entry("t.py::a", "failed")
    for outcomes, said in (({}, "outcomes has no outcome for it"),
                           ({"t.py::a": "passed"}, "the shard's outcomes has \"passed\""),
                           ({"t.py::a": "fine"}, "outcomes[\"t.py::a\"] is \"fine\"")):
        with pytest.raises(ShardMismatch, match=re.escape(said)):
            merge_reports([shard(tmp_path / "a.json", [test], outcomes=outcomes)])
    # A teardown that failed after the test: pytest counts an error, and so does the gate.
    passed = entry("t.py::a")
    merged = merge_reports([shard(tmp_path / "a.json", [passed],
                                  outcomes={"t.py::a": "error"})])
    assert exit_code(merged) == 1
    assert decision_text(merged) == \
        "1 of 1 tests failed or errored: the gate blocks the release (exit 1)"


def test_two_entries_of_one_test_share_its_outcome(tmp_path: Path) -> None:
    one, two = entry("t.py::a", "failed"), entry("t.py::a", "failed", outcome="xfailed")
    with pytest.raises(ShardMismatch, match="another entry of this test has \"failed\""):
        merge_reports([shard(tmp_path / "a.json", [one, two], outcomes={"t.py::a": "failed"})])


def test_a_plain_test_that_failed_in_a_shard_blocks_the_gate(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::a")])
    plain = shard(tmp_path / "b.json", [], outcomes={"t.py::test_data": "failed",
                                                      "t.py::test_other": "passed"})
    merged = merge_reports([a, plain])
    assert exit_code(merged) == 1 and blocking_tests(merged) == ["t.py::test_data"]
    assert decision_text(merged) == (
        "0 of 1 tests failed or errored; 1 of 2 other tests (without a reliable entry) failed "
        "or errored: t.py::test_data: the gate blocks the release (exit 1)")
    assert exit_code(merge_reports([a])) == 0


def test_empty_shards_and_a_gate_without_a_test_are_refused(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::a")])
    empty = shard(tmp_path / "empty.json", [], outcomes={})
    with pytest.raises(ShardMismatch, match=r"empty\.json: tests is empty and it has no pytest"):
        merge_reports([a, empty])
    plain = shard(tmp_path / "plain.json", [], outcomes={"t.py::test_data": "passed"})
    with pytest.raises(ShardMismatch, match="no shard has a test of pytest-reliable"):
        merge_reports([plain])


def test_shards_of_another_model_or_version_are_refused(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::a")])
    other = shard(tmp_path / "other.json", [entry("t.py::b", model="m2")])
    with pytest.raises(ShardMismatch, match=r"other\.json: model is \"m2\", but .*a\.json has "
                                            r"\"m\": merge only the shards of one gate run"):
        merge_reports([a, other])
    mixed = shard(tmp_path / "mixed.json", [entry("t.py::c"), entry("t.py::d", model="judge")])
    with pytest.raises(ShardMismatch, match=r"model is \"mixed\" \(\"judge\", \"m\"\)"):
        merge_reports([a, mixed])
    newer = shard(tmp_path / "newer.json", [entry("t.py::b")], pytest_reliable_version="0.2.0")
    with pytest.raises(ShardMismatch, match=r"newer\.json: pytest_reliable_version is \"0\.2\.0\""):
        merge_reports([a, newer])
    # A shard whose only test stopped before it had a model names none: it belongs.
    errored = dict(entry("t.py::e", "error"), model=None)
    assert exit_code(merge_reports([a, shard(tmp_path / "e.json", [errored])])) == 1


def test_a_top_level_model_that_its_tests_do_not_say_is_refused(tmp_path: Path) -> None:
    edited = shard(tmp_path / "a.json", [entry("t.py::a", model="m2")], model="m")
    with pytest.raises(ShardMismatch, match=r"a\.json: model is \"m\", but its tests ran \"m2\""):
        merge_reports([edited])


def test_the_gates_cost_adds_every_shards_including_a_test_two_ran(tmp_path: Path) -> None:
    shared = entry("t.py::a", usd=0.5)
    a = shard(tmp_path / "a.json", [shared, entry("t.py::b", usd=0.25)])
    # The second shard ran t.py::a again without the first one's cache: it paid again.
    b = shard(tmp_path / "b.json", [shared])
    merged = merge_reports([a, b])
    assert merged["cost"]["usd"] == 1.25
    assert [e["nodeid"] for e in merged["tests"]] == ["t.py::a", "t.py::b"]
    # A shard of an earlier version without a top-level cost: its tests' costs.
    old = json.loads(b.read_text(encoding="utf-8"))
    del old["cost"]
    b.write_text(json.dumps(old), encoding="utf-8")
    assert merge_reports([a, b])["cost"]["usd"] == 1.25
    bad = shard(tmp_path / "c.json", [shared])
    data = json.loads(bad.read_text(encoding="utf-8"))
    data["cost"]["usd"] = "NaN"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ShardMismatch, match=r"c\.json: cost\.usd is \"NaN\", not a number"):
        merge_reports([a, bad])


def test_a_shard_whose_model_had_no_price_makes_the_gates_spend_unknown(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::a", usd=0.5)])
    b = shard(tmp_path / "b.json", [entry("t.py::b")])
    data = json.loads(b.read_text(encoding="utf-8"))
    data["cost"].update(usd=None, priced=False, unpriced_models=["gpt-x"])
    b.write_text(json.dumps(data), encoding="utf-8")
    cost = merge_reports([a, b])["cost"]
    assert cost["usd"] is None and cost["priced"] is False
    assert cost["unpriced_models"] == ["gpt-x"]
    # A null spend says "unknown" only with priced false: otherwise it is an edited shard.
    data["cost"]["priced"] = True
    b.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ShardMismatch, match=r"b\.json: cost\.usd is null"):
        merge_reports([a, b])


def test_a_plain_test_two_shards_ran_with_different_outcomes_is_refused(tmp_path: Path) -> None:
    a = shard(tmp_path / "a.json", [entry("t.py::a")], outcomes={"t.py::a": "passed",
                                                                 "t.py::p": "passed"})
    b = shard(tmp_path / "b.json", [entry("t.py::b")], outcomes={"t.py::b": "passed",
                                                                 "t.py::p": "failed"})
    with pytest.raises(ShardMismatch, match=r"test 't\.py::p' is also in .*another outcome"):
        merge_reports([a, b])


# Generated corruptions: an entry as pytest writes it, then fields edited at random.
CONSISTENT = [  # (verdict, outcome, thresholds passed), as `plugin.pytest_runtest_makereport`
    ("passed", "passed", True), ("passed", "xpassed", True), ("failed", "failed", False),
    ("failed", "failed", True), ("failed", "xfailed", False), ("failed", "skipped", True),
    ("error", "failed", False), ("error", "xfailed", True)]
ODD = st.sampled_from([None, "", "pass", "Passed", "ok", 1, True, [], {}])
ABSENT = object()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.sampled_from(CONSISTENT),
       verdict=st.one_of(st.none(), st.sampled_from(VERDICTS), ODD, st.just(ABSENT)),
       outcome=st.one_of(st.none(), st.sampled_from(PYTEST_OUTCOMES), ODD, st.just(ABSENT)),
       flips=st.lists(st.one_of(st.booleans(), ODD), max_size=3))
def test_no_edit_of_verdict_or_thresholds_changes_the_decision_or_passes_a_failure(
        tmp_path_factory: pytest.TempPathFactory, start: tuple[str, str, bool],
        verdict: Any, outcome: Any, flips: list[Any]) -> None:
    verdict0, outcome0, passed0 = start
    test = entry("t.py::a", verdict0, outcome=outcome0)
    test["thresholds"] = [dict(test["thresholds"][0], passed=passed0)]
    truth = exit_code(merge_reports([shard(tmp_path_factory.mktemp("s") / "a.json", [test])]))
    assert truth == int(outcome0 in ("failed", "error"))

    edited = dict(test)
    for field, value in (("verdict", verdict), ("outcome", outcome)):
        if value is ABSENT:
            del edited[field]
        elif value is not None or field == "verdict":  # None: verdict null, outcome unedited
            edited[field] = value
    edited["thresholds"] = [dict(test["thresholds"][0], passed=flip) for flip in flips] \
        or test["thresholds"]
    path = shard(tmp_path_factory.mktemp("s") / "a.json", [edited],
                 outcomes={"t.py::a": outcome0})
    try:
        merged = merge_reports([path])
    except ShardMismatch as error:
        assert str(path) in str(error) and "t.py::a" in str(error)
        return
    # Accepted: the entry is consistent, and the decision is pytest's, as before the edit.
    decided = merged["tests"][0]
    assert decided["verdict"] in VERDICTS and decided["outcome"] == outcome0
    if decided["verdict"] == "passed":
        assert decided["outcome"] in ("passed", "xpassed")
        assert all(t["passed"] is True for t in decided["thresholds"])
    assert exit_code(merged) == truth


# -- the tests the gate must have -------------------------------------------------------------

COLLECTED = """test_gate.py::test_p[a b]
test_gate.py::test_p[c::d]
test_gate.py::test_q

=============================== warnings summary ===============================
test_gate.py:2
  /tmp/test_gate.py:2: UserWarning: at import

-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html
3 tests collected in 0.05s
"""


@pytest.mark.parametrize("text, nodeids", [
    (COLLECTED, ["test_gate.py::test_p[a b]", "test_gate.py::test_p[c::d]",
                 "test_gate.py::test_q"]),
    ("t.py::a\r\n\r\n1/3 tests collected (2 deselected) in 0.01s\r\n", ["t.py::a"]),
    ("# the gate\nt.py::b\n\nt.py::a\nt.py::a\n", ["t.py::a", "t.py::b"]),
])
def test_expected_tests_read_pytests_collected_list(tmp_path: Path, text: str,
                                                    nodeids: list[str]) -> None:
    (tmp_path / "tests.txt").write_text(text, encoding="utf-8")
    assert read_expected_tests(tmp_path / "tests.txt") == nodeids


@pytest.mark.parametrize("text, said", [
    ("t.py: 3\n\n", r"line 1: \"t.py: 3\" is not a test's node id .*that is `-qq` output"),
    ("t.py::a\n\n=== ERRORS ===\n___ ERROR collecting u.py ___\n1 test collected, 1 error in 0.1s",
     r"pytest could not collect every test \(1 test collected, 1 error in 0\.1s\)"),
    ("no tests collected in 0.01s\n", "lists no test"),
    ("", "lists no test"),
    ("  t.py::a\n", r"line 1: .* is not a test's node id"),
    ("{not json", "is not valid JSON"),
])
def test_a_list_of_expected_tests_that_is_not_one_is_refused(tmp_path: Path, text: str,
                                                              said: str) -> None:
    (tmp_path / "tests.txt").write_text(text, encoding="utf-8")
    with pytest.raises(ExpectedTestsError, match=f"--expect-tests {tmp_path}/tests.txt.*{said}"):
        read_expected_tests(tmp_path / "tests.txt")
    with pytest.raises(ExpectedTestsError, match="cannot be read"):
        read_expected_tests(tmp_path / "absent.txt")


def test_expected_tests_from_a_json_report_and_from_standard_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = shard(tmp_path / "full.json", [entry("t.py::a")],
                   outcomes={"t.py::a": "passed", "t.py::plain": "passed"})
    assert read_expected_tests(report) == ["t.py::a", "t.py::plain"]
    monkeypatch.setattr("sys.stdin", io.StringIO("t.py::a\n\n1 test collected in 0.01s\n"))
    assert read_expected_tests("-") == ["t.py::a"]


def test_a_test_no_shard_reported_is_refused(tmp_path: Path) -> None:
    merged = merge_reports([shard(tmp_path / "a.json", [entry("t.py::a")],
                                  outcomes={"t.py::a": "passed", "t.py::plain": "passed"})])
    check_expected(merged, ["t.py::a", "t.py::plain"], "tests.txt")
    expected = ["t.py::a", "t.py::plain", *(f"t.py::lost{i:02}" for i in range(12))]
    with pytest.raises(ShardMismatch, match=r"12 of the 14 tests that --expect-tests tests\.txt "
                                            r"lists are in no shard: 't\.py::lost00', .*"
                                            r"'t\.py::lost09' and 2 more\. A shard's report"):
        check_expected(merged, expected, "tests.txt")


# -- the history ------------------------------------------------------------------------------

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
    reports, skipped = kept_in_dir(tmp_path)
    runs = runs_of(reports)
    assert skipped == []
    assert [(r.run_id, r.parts, sorted(r.tests)) for r in runs] == \
        [("early", 2, ["t.py::a", "t.py::b"]), ("late", 1, ["t.py::a"])]
    # The later part's entry of a test two parts both report.
    assert runs[0].tests["t.py::a"]["verdict"] == "failed" and runs[0].failed
    assert runs[0].created == "2026-01-01T01:00:00+00:00" and runs[0].commits == {"c" * 40}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["early.2.json", "early.json",
                                                          "late.json"]


def test_a_stray_or_damaged_kept_report_is_skipped_with_a_note_naming_it(tmp_path: Path) -> None:
    keep_in_dir(tmp_path, kept_report({"schema_version": 1, "created": "2026-01-01",
                                       "tests": [entry("t.py::a")]}, run_id="r1", commit=None))
    (tmp_path / "package.json").write_text('{"name": "web"}', encoding="utf-8")
    (tmp_path / "broken.json").write_text('{"tests": [', encoding="utf-8")
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    (tmp_path / "latin1.json").write_bytes(b'{"tests": ["\xe9"]}')
    (tmp_path / "dir.json").mkdir()
    reports, skipped = kept_in_dir(tmp_path)
    assert [r["run_id"] for r in reports] == ["r1"]
    assert [re.sub(r" .*", "", note.removeprefix(f"skipped {tmp_path}/")) for note in skipped] \
        == ["broken.json", "deep.json", "dir.json", "latin1.json", "package.json"]
    assert all(note.endswith("move it out of the history directory (every *.json there is "
                             "read as a kept report).") for note in skipped), skipped


def test_a_crafted_row_of_the_store_is_skipped_not_a_recursion_error() -> None:
    good = json.dumps(kept_report({"schema_version": 1, "tests": [entry("t.py::a")]},
                                  run_id="r1", commit=None))
    rows = [good, "[" * 100_000 + "]" * 100_000, '{"tests": ' + "[" * (MAX_NESTING + 5)
            + "]" * (MAX_NESTING + 5) + ', "schema_version": 1}', "null", '{"tests": 1}']
    reports, skipped = kept_in_texts(rows, "the store at db:5432/reliable")
    assert [r["run_id"] for r in reports] == ["r1"]
    assert [note.split(":")[0] for note in skipped] == [
        f"skipped kept report {n} in the store at db" for n in (2, 3, 4, 5)]
    assert "nests arrays or objects more than 100 deep" in skipped[0]
    assert all("reliable_reports" in note for note in skipped)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.text(max_size=6), children, max_size=3), max_leaves=8)
ENTRY_FIELDS = st.sampled_from(["nodeid", "verdict", "canonical", "formats", "interval", "rate",
                                "model", "kind"])


@settings(max_examples=80, deadline=None)
@given(tests=st.lists(st.dictionaries(ENTRY_FIELDS, JSON_VALUES, max_size=6), max_size=4),
       top=st.dictionaries(st.sampled_from(["run_id", "git_commit", "part", "cost", "outcomes"]),
                           JSON_VALUES, max_size=3))
def test_any_report_the_checks_let_through_draws_a_page(tests: list[dict[str, Any]],
                                                        top: dict[str, Any]) -> None:
    text = json.dumps({"schema_version": 1, "created": "2026-01-01", "tests": tests, **top})
    reports, _ = kept_in_texts([text], "the store")
    page = render_history(reports)
    assert page.startswith("<!DOCTYPE html>")


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
