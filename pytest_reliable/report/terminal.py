"""The terminal summary table, the header line and the progress line."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_reliable.report.format import (
    CHECKLIST_COLUMNS,
    NARROW,
    Column,
    fit_names,
    header,
    middle_truncate,
    reliable_columns,
    reliable_notes,
    row,
    short_nodeids,
    spend_note,
    stopped_before_report,
    verdict_text,
)
from pytest_reliable.schema.text import cut_text

if TYPE_CHECKING:
    from pytest_reliable.schema.entries import Entry

GAP = "  "
MIN_NAME_WIDTH = 16


def _render(header_cells: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cells[i]) for cells in [header_cells, *rows])
              for i in range(len(header_cells))]

    def line(cells: list[str]) -> str:
        return GAP.join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    return [line(header_cells), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _fit(entries: Sequence[Entry], names: list[str], columns: list[Column],
         width: int) -> list[str]:
    """The table in ``width`` columns: optional columns dropped (the last first), kept columns
    narrowed, then test names shortened in the middle."""
    columns = list(columns)

    def table_width(cols: list[Column], name_width: int) -> int:
        cells = [[c.header, *(str(c.cell(e)) for e in entries)] for c in cols]
        return name_width + sum(len(GAP) + max(map(len, column)) for column in cells)

    name_width = max(len("test"), *map(len, names))
    while table_width(columns, name_width) > width and any(not c.keep for c in columns):
        drop = max(i for i, c in enumerate(columns) if not c.keep)
        del columns[drop]
    if table_width(columns, name_width) > width:
        columns = [NARROW.get(c.header, c) for c in columns]
    spare = width - table_width(columns, 0)
    name_width = max(MIN_NAME_WIDTH, min(name_width, spare))
    shown = fit_names(names, name_width)
    return _render(header(columns), [row(e, n, columns) for e, n in zip(entries, shown)])


def summary_table(entries: Sequence[Entry], *, width: int = 200,
                  columns: list[Column] | None = None) -> list[str]:
    """One row per test: `reliable` tests in one table, CheckList tests in a second; every line
    fits in ``width`` characters (notes are wrapped, error messages cut)."""
    names = short_nodeids([str(entry.get("nodeid", "?")) for entry in entries])
    reliable = [e for e in entries if e.get("kind") == "reliable"
                and not stopped_before_report(e)]
    checklist = [e for e in entries if e.get("kind") in ("invariance", "directional", "mft")
                 and not stopped_before_report(e)]
    errors = [e for e in entries if e not in reliable and e not in checklist]
    lines: list[str] = []

    def name(entry: Entry) -> str:
        return names[str(entry.get("nodeid", "?"))]

    if reliable:
        lines += _fit(reliable, [name(e) for e in reliable],
                      reliable_columns(reliable, columns), width)
        for note in reliable_notes(reliable, names):
            lines += textwrap.wrap(note, width, subsequent_indent="  ") or [note]
    if checklist:
        if lines:
            lines.append("")
        lines += _fit(checklist, [name(e) for e in checklist], CHECKLIST_COLUMNS, width)
    for entry in errors:
        message = str(entry["message"] or "").strip()
        first = message.splitlines()[0] if message else ""
        line = f"{name(entry)}: {verdict_text(entry)}: {first}"
        lines.append(cut_text(line, max(width - 40, 20)) if len(line) > width else line)
    from pytest_reliable.report.json_report import total_cost

    spent = spend_note(total_cost(entries))
    if spent is not None:
        lines += textwrap.wrap(spent, width) or [spent]
    return lines


def progress_line(nodeid: str, done: int, total: int, cached: int, made: int,
                  width: int = 120) -> str:
    percent = 100 * done // total if total else 100
    counts = f": {done}/{total} calls ({percent}%), {made} made, {cached} cached"
    widest = f": {total}/{total} calls (100%), {total} made, {total} cached"  # a steady name
    room = max(width - 1 - len("reliable ") - len(widest), 12)
    return f"reliable {middle_truncate(nodeid, min(room, 60))}{counts}"[: max(width - 1, 20)]
