"""The terminal summary table, the header line and the progress line."""

from __future__ import annotations

from typing import Any

from pytest_reliable.report.format import (
    CHECKLIST_HEADER,
    RELIABLE_HEADER,
    checklist_row,
    middle_truncate,
    not_reliable_notes,
    reliable_row,
    short_nodeids,
    with_baseline_column,
)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(row) for row in rows)]


def summary_table(entries: list[dict[str, Any]], *, width: int = 120) -> list[str]:
    """One row per test: `reliable` tests in one table, CheckList tests in a second."""
    names = short_nodeids([str(entry.get("nodeid", "?")) for entry in entries])
    name_width = max(48, width // 3)
    reliable = [e for e in entries if e.get("kind") == "reliable"]
    checklist = [e for e in entries if e.get("kind") in ("invariance", "directional", "mft")]
    errors = [e for e in entries if e not in reliable and e not in checklist]
    lines: list[str] = []
    if reliable:
        rows = [reliable_row(e, middle_truncate(names[str(e.get("nodeid", "?"))], name_width))
                for e in reliable]
        lines += _table(*with_baseline_column(RELIABLE_HEADER, rows, reliable))
        lines += not_reliable_notes(reliable, names)
    if checklist:
        if lines:
            lines.append("")
        rows = [checklist_row(e, middle_truncate(names[str(e.get("nodeid", "?"))], name_width))
                for e in checklist]
        lines += _table(CHECKLIST_HEADER, rows)
    for entry in errors:
        lines.append(f"{names[str(entry.get('nodeid', '?'))]}: {entry.get('verdict', 'error')}: "
                     f"{str(entry.get('message', '')).splitlines()[0] if entry.get('message') else ''}")
    return lines


def header_line(seed: int, model: str, space_hash: str | None) -> str:
    spaces = space_hash[:12] if space_hash else "built-in default space"
    return f"reliable: seed={seed}, model={model}, spaces={spaces}"


def progress_line(nodeid: str, done: int, total: int, cached: int, made: int) -> str:
    percent = 100 * done // total if total else 100
    return (f"reliable {middle_truncate(nodeid, 60)}: {done}/{total} calls ({percent}%), "
            f"{made} made, {cached} cached")
