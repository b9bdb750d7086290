"""Cell formatting shared by the terminal and Markdown tables (None-safe everywhere)."""

from __future__ import annotations

import os
from typing import Any

MISSING = "-"


def num(value: Any, digits: int = 2) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING
    return f"{value:.{digits}f}"


def get(entry: dict[str, Any], *path: str) -> Any:
    value: Any = entry
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def short_nodeids(nodeids: list[str]) -> dict[str, str]:
    """What differs between the nodeids: the test name alone when all share one file, else the
    path without the directories every file shares."""
    files = {nodeid.split("::", 1)[0] for nodeid in nodeids}
    if len(files) == 1:
        return {nodeid: nodeid.split("::", 1)[-1] for nodeid in nodeids}
    common = os.path.commonpath(sorted(files)) if files else ""
    prefix = common + "/" if common and common not in files else ""
    return {nodeid: nodeid[len(prefix):] if prefix and nodeid.startswith(prefix) else nodeid
            for nodeid in nodeids}


def middle_truncate(text: str, width: int) -> str:
    if len(text) <= width or width < 5:
        return text
    keep = width - 3
    return text[: keep // 2] + "..." + text[len(text) - (keep - keep // 2):]


def spread_cell(group: Any) -> str:
    """min/median/max of a range summary."""
    if not isinstance(group, dict):
        return MISSING
    return "/".join(num(group.get(key)) for key in ("min", "median", "max"))


def interval_cell(score: Any, low: Any, high: Any) -> str:
    if score is None:
        return MISSING
    return f"{num(score)} [{num(low)}, {num(high)}]"


def n_star_cell(entry: dict[str, Any]) -> str:
    n_star = entry.get("n_star")
    if n_star is None:
        return MISSING
    return f"{n_star}!" if entry.get("n_star_reliable") is False else str(n_star)


def reliable_row(entry: dict[str, Any], name: str) -> list[str]:
    mean, std = entry.get("mean"), entry.get("std")
    k = entry.get("k") or 1
    passes = "/".join(num(entry.get(key)) for key in ("pass_at_1", "pass_at_k", "pass_hat_k"))
    calls = entry.get("calls") or {}
    return [
        name,
        str(entry.get("n_resamplings") if entry.get("n_resamplings") is not None else MISSING),
        str(entry.get("mode") or MISSING),
        MISSING if mean is None else f"{num(mean)}±{num(std)}",
        interval_cell(get(entry, "canonical", "score"), get(entry, "canonical", "wilson_low"),
                      get(entry, "canonical", "wilson_high")),
        spread_cell(entry.get("formats")),
        spread_cell(entry.get("orders")),
        f"{passes} (k={k})",
        n_star_cell(entry),
        f"{calls.get('made', 0)}/{calls.get('cached', 0)}",
        str(entry.get("verdict") or MISSING),
    ]


BASELINE_COLUMN = "cand-base [CI]"


def baseline_cell(entry: dict[str, Any]) -> str:
    """Candidate - baseline with its interval (SPEC section 9)."""
    difference = get(entry, "baseline", "difference")
    if not isinstance(difference, dict) or difference.get("estimate") is None:
        return MISSING
    return (f"{difference['estimate']:+.2f} [{num(difference.get('low'))}, "
            f"{num(difference.get('high'))}]")


def with_baseline_column(
    header: list[str], rows: list[list[str]], entries: list[dict[str, Any]]
) -> tuple[list[str], list[list[str]]]:
    """The candidate - baseline column before the verdict, only when some test has a baseline."""
    if not any(entry.get("baseline") for entry in entries):
        return header, rows
    return ([*header[:-1], BASELINE_COLUMN, header[-1]],
            [[*row[:-1], baseline_cell(entry), row[-1]] for row, entry in zip(rows, entries)])


RELIABLE_HEADER = [
    "test", "n", "mode", "mean±sd", "canonical [95% CI]", "formats min/med/max",
    "orders min/med/max", "pass@1/@k/^k", "n*", "calls new/cached", "verdict",
]
CHECKLIST_HEADER = ["test", "kind", "rate [CI]", "pairs", "unparsed", "calls new/cached",
                    "verdict"]
RATE_NAMES = {"invariance": "flip rate", "directional": "fail rate", "mft": "pass rate"}


def checklist_row(entry: dict[str, Any], name: str) -> list[str]:
    interval = entry.get("interval") or [None, None]
    calls = entry.get("calls") or {}
    kind = str(entry.get("kind") or MISSING)
    return [
        name,
        kind,
        f"{RATE_NAMES.get(kind, 'rate')} " + interval_cell(entry.get("rate"), *interval[:2]),
        str(entry.get("pairs") if entry.get("pairs") is not None else MISSING),
        str(entry.get("unparsed") if entry.get("unparsed") is not None else MISSING),
        f"{calls.get('made', 0)}/{calls.get('cached', 0)}",
        str(entry.get("verdict") or MISSING),
    ]


def not_reliable_notes(entries: list[dict[str, Any]], names: dict[str, str]) -> list[str]:
    notes = []
    for entry in entries:
        if entry.get("kind") == "reliable" and entry.get("n_star_reliable") is False:
            notes.append(
                f"! {names.get(entry.get('nodeid', ''), entry.get('nodeid'))}: n* = "
                f"{entry.get('n_star')} is all the resamplings there were: not reliable at "
                f"(eps={entry.get('eps')}, delta={entry.get('delta')}); they vouch for "
                f"eps={num(entry.get('achievable_eps'), 4)}"
            )
    return notes
