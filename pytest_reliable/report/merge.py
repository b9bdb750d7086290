"""One release decision from many shards (SPEC section 10): the JSON reports of the shards of one
gate (a CI matrix, pytest-split groups, several runners) combined into one report, and whether
the release may go (`exit_code`).

A viewer's job, like the rest of `pytest_reliable.report`: the tests' entries are copied as the
shards wrote them, never recomputed. But merge decides, so it reads nothing on trust: a shard is
refused (`ShardMismatch`, naming the shard, the test and the field) unless it is consistent.

**Decided on pytest's outcome.** A test blocks the release when pytest counted it ``failed`` or
``error`` (`BLOCKING_OUTCOMES`): a strict xfail that failed as expected (verdict ``failed``,
outcome ``xfailed``) does not block, as it does not fail pytest; a strict xfail that passed is
``failed`` by pytest and blocks. The shard's top-level ``outcomes`` (every test pytest ran,
reliable or not) decides too, so a plain test that failed in a shard, or a reliable test whose
teardown failed, blocks the merged gate as it failed its shard.

**Cross-checked** (`entry_problem`): ``verdict`` is one of passed/failed/error, ``outcome`` one of
pytest's, ``thresholds`` a list whose ``passed`` are true or false; a ``passed`` verdict needs a
passing outcome (passed, xpassed) and every threshold passed, and a passing outcome needs a
``passed`` verdict (pytest passes a reliable test only when its gate passed); a test's entries
agree on the outcome, and the shard's ``outcomes`` holds each entry's test with the same outcome
(or ``error``: a teardown that failed after it). So a verdict edited to "passed", deleted, null
or misspelt, or a threshold flipped, is refused rather than read. What consistency cannot show is
an entry forged whole (a failed outcome edited to ``xfailed`` with nothing else): a shard is
checked, not signed.

**One gate run.** The shards share ``schema_version``, ``seed``, ``space_hash`` and
``pytest_reliable_version`` (`MATCHED_FIELDS`), and ran the same model(s): each shard's
``model`` must be what its entries say (one name, ``mixed`` or null) and the models of any two
shards that name one must be the same. A shard that ran no test at all (``tests`` empty and no
``outcomes``) is refused, and so is a merge in which no shard has a reliable test's entry. A test
may appear in two shards (a split that overlaps) only with the same entries and outcome; one
whose entries differ is refused, since the merged report could not say which one decided. "The
same" is `entries.independent_of_run_order`: it leaves out what depends on what ran first (the
made/cached split of ``calls`` and of ``cost``), so a test run again where its answers were cached
is the same test; its cells (made + cached) must still agree. The first shard's entry is kept.

**Expected tests** (`read_expected_tests`, `missing_tests`): with the ids of the tests the gate
must have (``pytest --collect-only -q`` output, one node id per line, or a JSON report), a test
that no shard reported (a shard whose report never arrived) is refused, not passed.

The merged report has the same top-level fields a single run writes:

- ``schema_version``, ``seed``, ``space_hash``, ``pytest_reliable_version``: the shards' (equal);
- ``model``: from the entries, as a run decides it (one model's name, ``mixed`` or null);
- ``created``: the latest shard's, so the report is dated by when the gate finished, not by when
  it was merged (re-merging the same shards writes the same bytes);
- ``cost``: every shard's top-level ``cost`` added up (what the gate paid: a test that two shards
  both ran was paid by both, and counts in both); each test's entry keeps its first shard's;
- ``tests``: every shard's entries, sorted by node id as a run sorts them;
- ``outcomes``: every shard's, when the shards carry them;
- ``shards``: added, one ``{"file", "created", "tests", "cost"}`` per shard in the order given, so
  the report says what it was made of.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from pytest_reliable.report.format import NOT_BLOCKING, blocks_release
from pytest_reliable.report.json_report import build_report, model_of, models_of, total_cost
from pytest_reliable.schema.entries import (
    KINDS,
    PYTEST_OUTCOMES,
    VERDICTS,
    CostEntry,
    Entry,
    ReportDocument,
    independent_of_run_order,
)
from pytest_reliable.schema.load import ReportFileError, load_report, parse_report

MATCHED_FIELDS = {
    "schema_version": "run every shard with the same pytest-reliable version",
    "seed": "give every shard the same --reliable-seed",
    "space_hash": "run every shard with the same reliable.yaml",
    "pytest_reliable_version": "run every shard with the same pytest-reliable version",
}
"""Top-level fields every shard of one gate shares (SPEC section 10), with the fix."""
BLOCKING_OUTCOMES = frozenset(PYTEST_OUTCOMES) - NOT_BLOCKING
"""pytest outcomes that fail the run, and so block the release: ``failed``, ``error``."""
PASSING_OUTCOMES = frozenset({"passed", "xpassed"})
"""Outcomes of a test whose body and gate passed: its verdict is ``passed``, and only theirs."""
COST_NUMBERS = ("usd", "prompt_tokens", "completion_tokens", "cached_usd_saved")
UNKNOWN_WHEN_UNPRICED = ("usd", "cached_usd_saved")
"""The cost numbers that are null when some model had no price (``priced`` false)."""
UNEDITED = "merge the reports pytest wrote, unedited (or run the shard again)"
SHOWN_MISSING = 10
"""Missing tests named in the error (the rest are counted)."""


class ShardMismatch(Exception):
    """Shards that are not one consistent gate run; the message names the shard and the field."""


class ExpectedTestsError(Exception):
    """A list of expected tests that cannot be read; the message names the file and the fix."""


def merge_reports(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The shards at ``paths`` (each checked by `load_report`, whose `ReportFileError` names a
    malformed file) as one report; `ShardMismatch` when one is inconsistent or they do not
    belong together."""
    shards = [(Path(path), load_report(path)) for path in paths]
    if not shards:
        raise ShardMismatch("no shard given: name the JSON reports of the shards to merge")
    for path, shard in shards:
        check_shard(path, shard)
    first_path, first = shards[0]
    for path, shard in shards[1:]:
        for field, fix in MATCHED_FIELDS.items():
            if shard.get(field, _MISSING) != first.get(field, _MISSING):
                theirs, ours = shard.get(field, _MISSING), first.get(field, _MISSING)
                raise ShardMismatch(
                    f"{path}: {field} is {_shown(theirs, 80)}, but {first_path} has "
                    f"{_shown(ours, 80)}: merge only the shards of one gate run ({fix}).")
    _check_models(shards)
    tests = _combined_tests(shards)
    if not tests:
        raise ShardMismatch(
            "no shard has a test of pytest-reliable (every 'tests' list is empty): there is "
            "no gate to decide; check the shards' selection (-k, -m, --group) and merge the "
            "reports of the shards that ran the gate's tests.")
    seed = first.get("seed")
    report = build_report(tests, seed=seed if isinstance(seed, int) else 0, model=None,
                          space_hash=first.get("space_hash"), outcomes=_combined_outcomes(shards))
    if "seed" not in first:
        del report["seed"]
    if "pytest_reliable_version" in first:
        report["pytest_reliable_version"] = first["pytest_reliable_version"]
    report["schema_version"] = first["schema_version"]
    latest = _latest_created(shard.get("created") for _, shard in shards)
    if latest is not None:
        report["created"] = latest
    costs = [_shard_cost(shard) for _, shard in shards]
    report["cost"] = _added_up(costs)
    report["shards"] = [{"file": str(path), "created": shard.get("created"),
                         "tests": len(shard["tests"]), "cost": cost}
                        for (path, shard), cost in zip(shards, costs)]
    return report


def exit_code(report: ReportDocument | Mapping[str, Any]) -> int:
    """1 when any test blocks the release (pytest counted it failed or errored), else 0."""
    return int(bool(blocking_tests(report)))


def blocking_tests(report: ReportDocument | Mapping[str, Any]) -> list[str]:
    """The node ids of the tests that block the release, sorted: a test entry whose outcome does
    (`format.blocks_release`: without an outcome, a verdict other than passed), and a test of
    the report's ``outcomes`` that pytest counted failed or errored."""
    blocking = {str(entry.get("nodeid")) for entry in report["tests"] if blocks_release(entry)}
    outcomes = report.get("outcomes")
    if isinstance(outcomes, Mapping):
        blocking.update(str(nodeid) for nodeid, outcome in outcomes.items()
                        if outcome in BLOCKING_OUTCOMES)
    return sorted(blocking)


def decision_text(report: ReportDocument | Mapping[str, Any]) -> str:
    """The decision in one line, as ``merge`` prints it: "1 of 2 tests failed or errored (1 more
    failed as expected: xfail); 1 of 2 other tests (without a reliable entry) failed or errored:
    test_data.py::test_x: the gate blocks the release (exit 1)"."""
    outcomes: Mapping[str, Any] = report.get("outcomes") or {}
    tests = report["tests"]

    def blocks(entry: Mapping[str, Any]) -> bool:
        return blocks_release(entry) or outcomes.get(str(entry.get("nodeid"))) \
            in BLOCKING_OUTCOMES

    blocking = sum(blocks(entry) for entry in tests)
    expected = sum(entry.get("verdict") != "passed" and not blocks(entry) for entry in tests)
    said = f"{blocking} of {len(tests)} tests failed or errored"
    if expected:
        said += f" ({expected} more failed as expected: xfail)"
    with_entries = {str(entry.get("nodeid")) for entry in tests}
    others = {nodeid: outcome for nodeid, outcome in outcomes.items()
              if nodeid not in with_entries}
    if others:
        failed = sorted(nodeid for nodeid, outcome in others.items()
                        if outcome in BLOCKING_OUTCOMES)
        said += (f"; {len(failed)} of {len(others)} other tests (without a reliable entry) "
                 "failed or errored" + (f": {', '.join(failed[:5])}" if failed else "")
                 + (" ..." if len(failed) > 5 else ""))
    code = exit_code(report)
    return said + ": the gate " + ("blocks the release (exit 1)" if code else "passes (exit 0)")


# -- one shard, checked -----------------------------------------------------------------------

def check_shard(path: Path, shard: ReportDocument) -> None:
    """`ShardMismatch` naming the shard, the test and the field when ``shard`` is not
    consistent (see the module docstring); else nothing."""
    outcomes = shard.get("outcomes")
    if not shard["tests"] and not outcomes:
        raise ShardMismatch(
            f"{path}: tests is empty and it has no pytest outcome: the shard ran no test, so it "
            "adds nothing to the gate and may stand for one that never ran; check its selection "
            "(-k, -m, --group), or leave it out of the merge.")
    if outcomes is not None:
        for nodeid, outcome in outcomes.items():
            if outcome not in PYTEST_OUTCOMES:
                raise ShardMismatch(
                    f"{path}: test {nodeid!r}: outcomes[{_shown(nodeid)}] is {_shown(outcome)}, "
                    f"not one of {', '.join(PYTEST_OUTCOMES)}: {UNEDITED}.")
    by_test: dict[str, str] = {}
    for index, entry in enumerate(shard["tests"]):
        nodeid = entry.get("nodeid")
        if not isinstance(nodeid, str) or not nodeid:
            raise ShardMismatch(f"{path}: tests[{index}]: nodeid is {_shown(nodeid)}, not a test's "
                                f"node id: {UNEDITED}.")
        problem = entry_problem(entry)
        if problem is None:
            outcome = str(entry["outcome"])
            if by_test.setdefault(nodeid, outcome) != outcome:
                problem = (f"outcome is {_shown(outcome)}, but another entry of this test has "
                           f"{_shown(by_test[nodeid])} (one test, one outcome)")
            elif outcomes is not None and nodeid not in outcomes:
                problem = ("outcomes has no outcome for it, though the shard has its entry "
                           "(pytest ran it)")
            elif outcomes is not None and outcomes[nodeid] not in (outcome, "error"):
                problem = (f"outcome is {_shown(outcome)}, but the shard's outcomes has "
                           f"{_shown(outcomes[nodeid])} for it")
        if problem is not None:
            raise ShardMismatch(f"{path}: test {nodeid!r} (tests[{index}]): {problem}: "
                                f"{UNEDITED}.")
    model = shard.get("model", _MISSING)
    if model is not _MISSING and model != model_of(shard["tests"]):
        raise ShardMismatch(
            f"{path}: model is {_shown(model)}, but its tests ran "
            f"{_models_text(models_of(shard['tests']))}: {UNEDITED}.")
    cost: Mapping[str, Any] | None = shard.get("cost")
    if cost is not None:
        for name in COST_NUMBERS:
            value = cost.get(name)
            if value is None and name in UNKNOWN_WHEN_UNPRICED and cost.get("priced") is False:
                continue  # a model without a price: its spend is unknown, not zero
            if not _is_number(value) or value < 0:
                raise ShardMismatch(f"{path}: cost.{name} is {_shown(value)}, not a number >= 0: "
                                    f"{UNEDITED}.")
        if not isinstance(cost.get("estimated"), bool):
            raise ShardMismatch(f"{path}: cost.estimated is {_shown(cost.get('estimated'))}, not "
                                f"true or false: {UNEDITED}.")


def entry_problem(entry: Mapping[str, Any]) -> str | None:
    """What makes one test's entry inconsistent, naming the field (None: consistent). The
    entries pytest writes are consistent by construction (`plugin.pytest_runtest_makereport`:
    verdict ``passed`` exactly when the test's report passed, which needs every threshold)."""
    kind, verdict, outcome, thresholds = (entry.get(field, _MISSING) for field in
                                          ("kind", "verdict", "outcome", "thresholds"))
    if kind not in KINDS:
        return f"kind is {_shown(kind)}, not one of {', '.join(KINDS)}"
    if verdict not in VERDICTS:
        return f"verdict is {_shown(verdict)}, not one of {', '.join(VERDICTS)}"
    if outcome not in PYTEST_OUTCOMES:
        return (f"outcome is {_shown(outcome)}, not one of {', '.join(PYTEST_OUTCOMES)} "
                "(pytest's outcome, which merge decides on)")
    if not isinstance(thresholds, list):
        return f"thresholds is {_shown(thresholds)}, not a list"
    failed = []
    for index, threshold in enumerate(thresholds):
        passed = threshold.get("passed", _MISSING) if isinstance(threshold, dict) else _MISSING
        if not isinstance(passed, bool):
            return f"thresholds[{index}].passed is {_shown(passed)}, not true or false"
        if not passed:
            failed.append(f"thresholds[{index}] ({_shown(threshold.get('name'))})")
    if verdict == "passed" and outcome not in PASSING_OUTCOMES:
        return (f"verdict is \"passed\", but outcome is {_shown(outcome)} (pytest passes the "
                "test of a gate that passed)")
    if verdict == "passed" and failed:
        return f"verdict is \"passed\", but {failed[0]} has passed: false"
    if outcome in PASSING_OUTCOMES and verdict != "passed":
        return (f"outcome is {_shown(outcome)}, but verdict is {_shown(verdict)} (pytest fails "
                "a test whose gate did not pass)")
    reason = entry.get("xfail_reason")
    if reason is not None and not isinstance(reason, str):
        return f"xfail_reason is {_shown(reason)}, not a string or null"
    return None


def _check_models(shards: list[tuple[Path, ReportDocument]]) -> None:
    """Shards that name models must name the same ones (a shard of errors only names none)."""
    named = [(path, models) for path, shard in shards if (models := models_of(shard["tests"]))]
    for path, models in named[1:]:
        first_path, first = named[0]
        if models != first:
            raise ShardMismatch(
                f"{path}: model is {_models_text(models)}, but {first_path} has "
                f"{_models_text(first)}: merge only the shards of one gate run (run every shard "
                "against the same model: the same reliable_model fixture or --reliable-model).")


def _models_text(models: list[str]) -> str:
    if not models:
        return "none (null)"
    shown = ", ".join(_shown(model) for model in models)
    return shown if len(models) == 1 else f"\"mixed\" ({shown})"


# -- the shards together ----------------------------------------------------------------------

def _combined_tests(shards: list[tuple[Path, ReportDocument]]) -> list[Entry]:
    """Every shard's entries; a node id two shards both report counts once when its entries are
    the same in both and is refused otherwise."""
    seen: dict[str, tuple[Path, list[Entry]]] = {}
    for path, shard in shards:
        mine: dict[str, list[Entry]] = {}
        for entry in shard["tests"]:
            mine.setdefault(str(entry.get("nodeid")), []).append(entry)
        for nodeid, entries in mine.items():
            if nodeid not in seen:
                seen[nodeid] = (path, entries)
                continue
            other_path, other = seen[nodeid]
            if _comparable(entries) != _comparable(other):
                raise ShardMismatch(
                    f"{path}: test {nodeid!r} is also in {other_path} with a different entry "
                    f"({_difference(other, entries)}): a test must run in one shard only "
                    "(fix the split, e.g. pytest-split's --group or -k expressions that do not "
                    "overlap), or its shards must agree.")
    return [entry for _, entries in seen.values() for entry in entries]


def _combined_outcomes(shards: list[tuple[Path, ReportDocument]]) -> dict[str, str] | None:
    """Every shard's ``outcomes`` (None when no shard has them); a test two shards both ran must
    have one outcome."""
    combined: dict[str, tuple[Path, str]] = {}
    for path, shard in shards:
        for nodeid, outcome in (shard.get("outcomes") or {}).items():
            other_path, other = combined.setdefault(nodeid, (path, outcome))
            if other != outcome:
                raise ShardMismatch(
                    f"{path}: test {nodeid!r} is also in {other_path} with another outcome "
                    f"(outcomes: {_shown(other)} vs {_shown(outcome)}): a test must run in one "
                    "shard only, or its shards must agree.")
    if not any("outcomes" in shard for _, shard in shards):
        return None
    return {nodeid: outcome for nodeid, (_, outcome) in combined.items()}


def _shard_cost(shard: ReportDocument) -> CostEntry:
    """What the shard paid: its top-level ``cost`` (checked by `check_shard`), else (a report
    of an earlier version) its tests' costs added up."""
    cost = shard.get("cost")
    return _as_cost(total_cost(shard["tests"]) if cost is None else cost)


def _added_up(costs: Iterable[CostEntry]) -> CostEntry:
    """The shards' costs added up as a report adds up its tests' (`total_cost`): unknown (null)
    where some shard's is."""
    return _as_cost(total_cost([{"cost": dict(cost)} for cost in costs]))  # type: ignore[misc]


def _as_cost(values: Mapping[str, Any]) -> CostEntry:
    return {"usd": values["usd"], "prompt_tokens": values["prompt_tokens"],
            "completion_tokens": values["completion_tokens"],
            "cached_usd_saved": values["cached_usd_saved"], "estimated": values["estimated"],
            "priced": values.get("priced", True),
            "unpriced_models": list(values.get("unpriced_models") or [])}


# -- the tests the gate must have -------------------------------------------------------------

NODE_ID_FIX = ("give one node id per line (the output of `pytest --collect-only -q`, run with "
               "the shards' selection), or a JSON report of the gate")
COLLECTED_SUMMARY = re.compile(
    r"(no tests|\d+(/\d+)? tests?) collected\b.*|\d+ (deselected|errors?|warnings?)\b.*")
"""pytest's last line under ``--collect-only -q``: "3 tests collected in 0.01s", ..."""


def read_expected_tests(path: str | Path) -> list[str]:
    """The node ids of the tests the gate must have, from ``path`` ("-": standard input): the
    output of ``pytest --collect-only -q`` (or any list of one node id per line; blank lines and
    ``#`` comments are skipped), or a JSON report (its tests and ``outcomes``).
    `ExpectedTestsError` names the file and the line that is not a node id, a collection that
    had errors (its list is not the gate), or a file that lists no test."""
    name = "standard input" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ExpectedTestsError(f"--expect-tests {name} is not UTF-8 text ({error.reason} at "
                                 f"byte {error.start}): {NODE_ID_FIX}.") from None
    except OSError as error:
        raise ExpectedTestsError(f"--expect-tests {name} cannot be read "
                                 f"({error.strerror or error}): {NODE_ID_FIX}.") from None
    if text.lstrip().startswith("{"):
        try:
            report = parse_report(text, f"--expect-tests {name}", NODE_ID_FIX)
        except ReportFileError as error:
            raise ExpectedTestsError(str(error)) from None
        nodeids = [str(entry.get("nodeid")) for entry in report["tests"]]
        nodeids += list(report.get("outcomes") or {})
    else:
        nodeids = _node_ids(text, name)
    if not nodeids:
        raise ExpectedTestsError(f"--expect-tests {name} lists no test: {NODE_ID_FIX}.")
    return sorted(set(nodeids))


def _node_ids(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    if any(re.fullmatch(r"=+ ERRORS =+", line.strip()) for line in lines) or \
            re.search(r"\b\d+ errors?\b", last):
        raise ExpectedTestsError(
            f"--expect-tests {name}: pytest could not collect every test ({last}): fix the "
            "collection errors and collect the list again, or the list is not the gate.")
    nodeids = []
    for number, line in enumerate(lines, 1):
        line = line.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith(("=", "!")):
            break  # pytest's sections after the list (warnings summary, ...)
        if COLLECTED_SUMMARY.fullmatch(line):
            continue
        if "::" not in line or line[0].isspace():
            hint = " (that is `-qq` output: use `-q`)" if re.fullmatch(r".+: \d+", line) else ""
            raise ExpectedTestsError(
                f"--expect-tests {name}, line {number}: {_shown(line)} is not a test's node id "
                f"(FILE.py::test_name){hint}: {NODE_ID_FIX}.")
        nodeids.append(line)
    return nodeids


def missing_tests(report: ReportDocument | Mapping[str, Any], expected: Collection[str]) \
        -> list[str]:
    """The expected tests that no shard reported (no entry and no outcome), sorted."""
    reported = {str(entry.get("nodeid")) for entry in report["tests"]}
    reported.update(report.get("outcomes") or {})
    return sorted(set(expected) - reported)


def unexpected_tests(report: ReportDocument | Mapping[str, Any], expected: Collection[str]) \
        -> list[str]:
    """The tests the shards reported that ``expected`` does not list, sorted."""
    reported = {str(entry.get("nodeid")) for entry in report["tests"]}
    reported.update(report.get("outcomes") or {})
    return sorted(reported - set(expected))


def check_expected(report: ReportDocument | Mapping[str, Any], expected: Collection[str],
                   source: str) -> None:
    """`ShardMismatch` naming the expected tests no shard reported."""
    missing = missing_tests(report, expected)
    if not missing:
        return
    shown = ", ".join(repr(nodeid) for nodeid in missing[:SHOWN_MISSING])
    more = f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else ""
    raise ShardMismatch(
        f"{len(missing)} of the {len(set(expected))} tests that --expect-tests {source} lists "
        f"are in no shard: {shown}{more}. A shard's report is missing (a job that stopped before "
        "writing it?) or the shards ran another selection: merge every shard's report, or "
        "collect the list with the shards' selection (the same paths, -m and -k).")


# -- helpers ----------------------------------------------------------------------------------

def _comparable(entries: list[Entry]) -> list[str]:
    return sorted(json.dumps(independent_of_run_order(entry), sort_keys=True) for entry in entries)


def _difference(left: list[Entry], right: list[Entry]) -> str:
    if len(left) == len(right) == 1:
        return _first_difference(independent_of_run_order(left[0]),
                                 independent_of_run_order(right[0]))
    return _first_difference([independent_of_run_order(e) for e in left],
                             [independent_of_run_order(e) for e in right])


def _first_difference(left: Any, right: Any, where: str = "") -> str:
    """Where two JSON values first differ, as a path such as ``calls.made``."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right), key=str):
            if left.get(key, _MISSING) != right.get(key, _MISSING):
                return _first_difference(left.get(key, _MISSING), right.get(key, _MISSING),
                                         f"{where}.{key}" if where else str(key))
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right)):
            if a != b:
                return _first_difference(a, b, f"{where}[{index}]")
    if where == "":
        return "a different number of entries" if isinstance(left, list) else "it differs"
    return f"{where}: {_shown(left)} vs {_shown(right)}"


_MISSING: Any = object()


def _shown(value: Any, limit: int = 60) -> str:
    """A JSON value as an error quotes it (``absent`` for a missing one), cut at ``limit``."""
    if value is _MISSING:
        return "absent"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(value: Any) -> TypeGuard[float]:
    """A finite JSON number (json.loads takes NaN and Infinity)."""
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _latest_created(values: Any) -> str | None:
    dated: list[tuple[_dt.datetime, str]] = []
    for value in values:
        if isinstance(value, str):
            try:
                moment = _dt.datetime.fromisoformat(value)
            except ValueError:
                continue
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_dt.timezone.utc)
            dated.append((moment, value))
    return max(dated)[1] if dated else None
