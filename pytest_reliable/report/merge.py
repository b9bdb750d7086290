"""One release decision from many shards (SPEC section 10): the JSON reports of the shards of one
gate (a CI matrix, pytest-split groups, several runners) combined into one report.

A viewer's job, like the rest of `pytest_reliable.report`: the tests' entries are copied as the
shards wrote them, never recomputed. The shards must belong to one run of one gate: the same
``schema_version``, ``seed`` and ``space_hash`` (else `ShardMismatch` names the shard and the
field). A test may appear in two shards (a split that overlaps) only with the same entries; one
whose entries differ is refused, since the merged report could not say which one decided. "The
same" is `entries.independent_of_run_order`: it leaves out what depends on what ran first (the
made/cached split of ``calls`` and of ``cost``), so a test run again where its answers were cached
is the same test; its cells (made + cached) must still agree. The first shard's entry is kept.

The merged report has the same top-level fields a single run writes:

- ``schema_version``, ``seed``, ``space_hash``: the shards' (equal by the check above);
- ``model``: from the entries, as a run decides it (one model's name, ``mixed`` or null);
- ``created``: the latest shard's, so the report is dated by when the gate finished, not by when
  it was merged (re-merging the same shards writes the same bytes);
- ``pytest_reliable_version``: the shards' when they agree, else this version's;
- ``tests``: every shard's entries, sorted by node id as a run sorts them;
- ``shards``: added, one ``{"file", "created", "tests"}`` per shard in the order given, so the
  report says what it was made of.

The per-test ``calls`` (made/cached, tokens) stay per test: a report has no top-level totals,
so there is nothing to add up (a test in two identical shards counts once).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_reliable import __version__
from pytest_reliable.report.entries import Entry, ReportDocument, independent_of_run_order
from pytest_reliable.report.json_report import build_report
from pytest_reliable.report.load import load_report

MATCHED_FIELDS = {
    "schema_version": "run every shard with the same pytest-reliable version",
    "seed": "give every shard the same --reliable-seed",
    "space_hash": "run every shard with the same reliable.yaml",
}
"""Top-level fields every shard of one gate shares (SPEC section 10), with the fix."""
BLOCKING_VERDICTS = frozenset({"failed", "error"})


class ShardMismatch(Exception):
    """Shards that are not parts of one gate run; the message names the shard and the field."""


def merge_reports(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The shards at ``paths`` (each checked by `load_report`, whose `ReportFileError` names a
    malformed file) as one report; `ShardMismatch` when they do not belong together."""
    shards = [(Path(path), load_report(path)) for path in paths]
    if not shards:
        raise ShardMismatch("no shard given: name the JSON reports of the shards to merge")
    first_path, first = shards[0]
    for path, shard in shards[1:]:
        for field, fix in MATCHED_FIELDS.items():
            if shard.get(field, _MISSING) != first.get(field, _MISSING):
                theirs, ours = shard.get(field, _MISSING), first.get(field, _MISSING)
                raise ShardMismatch(
                    f"{path}: {field} is {_shown(theirs, 80)}, but {first_path} has "
                    f"{_shown(ours, 80)}: merge only the shards of one gate run ({fix}).")
    tests = _combined_tests(shards)
    seed = first.get("seed")
    report = build_report(tests, seed=seed if isinstance(seed, int) else 0, model=None,
                          space_hash=first.get("space_hash"))
    if "seed" not in first:
        del report["seed"]
    versions = {shard.get("pytest_reliable_version") for _, shard in shards}
    shared_version = versions.pop() if len(versions) == 1 else None
    report["pytest_reliable_version"] = shared_version or __version__
    report["schema_version"] = first["schema_version"]
    latest = _latest_created(shard.get("created") for _, shard in shards)
    if latest is not None:
        report["created"] = latest
    report["shards"] = [{"file": str(path), "created": shard.get("created"),
                         "tests": len(shard["tests"])} for path, shard in shards]
    return report


def exit_code(report: ReportDocument | dict[str, Any]) -> int:
    """1 when any test failed or errored (the gate blocks the release), else 0."""
    return int(any(entry.get("verdict") in BLOCKING_VERDICTS for entry in report["tests"]))


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


_MISSING = object()


def _shown(value: Any, limit: int = 60) -> str:
    if value is _MISSING:
        return "absent"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
