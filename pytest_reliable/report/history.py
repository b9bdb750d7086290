"""The release history page (``python -m pytest_reliable history``, SPEC section 10): per test,
across the kept runs in time order, the canonical score with its interval and the format min /
median / max, with the runs whose gate failed marked.

A viewer like the report page (`report.html`): it is drawn from kept JSON reports alone
(`store.reports` keeps them in a directory or the store) and computes no statistic; the same
page frame, Content-Security-Policy (no script, no load) and escaping. A run is one run id: the
parts its shards kept are read as one run (a test two parts both report: the later part's entry).

Every kept report is checked as it is read (`kept_in_dir`, `kept_in_texts`: `report.load`'s
checks, the same as for any report): one that is not a report (a stray ``*.json`` in the
directory, a crafted or damaged row in the store) is skipped with a note naming it, so one bad
file never stops the page. Inside a report, any field may be missing or odd (reports of other
versions, hand-edited files): it then shows as not reported.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_reliable.files import write_atomic
from pytest_reliable.report.charts import history_chart
from pytest_reliable.report.format import short_nodeids
from pytest_reliable.report.html_text import CSP, CSS, _badge, _is_num, _num, _table, _text
from pytest_reliable.schema.load import ReportFileError, load_report, parse_report

BLOCKING = ("failed", "error")
MAX_RUNS_DRAWN = 120
"""Runs per chart (the latest); the tables below each chart list every run."""
HISTORY_CSS = "tr.failed-run td{background:#fdecea}\ncode{font-size:12px}"


@dataclass
class Run:
    """One run id's kept reports, read as one run."""

    run_id: str
    created: str = ""
    models: set[str] = field(default_factory=set)
    commits: set[str] = field(default_factory=set)
    parts: int = 0
    tests: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(entry.get("verdict") in BLOCKING for entry in self.tests.values())

    def label(self) -> str:
        """The run under the chart's axis: its date, else its run id."""
        return self.created[:10] or self.run_id


IN_DIR_FIX = "move it out of the history directory (every *.json there is read as a kept report)"
IN_STORE_FIX = ("delete its row from the store's reliable_reports table (only pytest "
                "--reliable-history writes there)")


def kept_in_dir(directory: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The kept reports in ``directory`` (its ``*.json``, by name), each checked, and a note for
    each file skipped because it is not a report (naming it, the problem and the fix)."""
    reports: list[dict[str, Any]] = []
    skipped: list[str] = []
    for path in sorted(directory.glob("*.json")):
        try:
            reports.append(dict(load_report(path, fix=IN_DIR_FIX)))
        except ReportFileError as error:
            skipped.append(f"skipped {error}")
    return reports, skipped


def kept_in_texts(texts: Sequence[str], where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The kept reports whose JSON texts are ``texts`` (the store's rows, in the order kept), each
    checked, and a note for each one skipped (``where`` names the place: "the store at HOST")."""
    reports: list[dict[str, Any]] = []
    skipped: list[str] = []
    for number, text in enumerate(texts, 1):
        try:
            reports.append(dict(parse_report(text, f"kept report {number} in {where}",
                                             IN_STORE_FIX)))
        except ReportFileError as error:
            skipped.append(f"skipped {error}")
    return reports, skipped


def runs_of(reports: Iterable[Mapping[str, Any]]) -> list[Run]:
    """The kept reports as runs, oldest first (by date, then run id)."""
    # Only the fields read below are used, each checked as it is read (no json_safe copy of
    # every report: a history holds hundreds).
    parts = sorted((r for r in reports if isinstance(r, Mapping)),
                   key=lambda r: (_string(r.get("created")), _string(r.get("run_id"))))
    runs: dict[str, Run] = {}
    for report in parts:
        run_id = _string(report.get("run_id")) or _string(report.get("created")) or "unnamed"
        run = runs.setdefault(run_id, Run(run_id))
        run.parts += 1
        run.created = max(run.created, _string(report.get("created")))
        if _string(report.get("model")):
            run.models.add(_string(report.get("model")))
        if _string(report.get("git_commit")):
            run.commits.add(_string(report.get("git_commit")))
        for entry in report.get("tests") or []:
            if isinstance(entry, Mapping):
                run.tests[_string(entry.get("nodeid")) or "?"] = entry
    return sorted(runs.values(), key=lambda run: (run.created, run.run_id))


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _score(entry: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
    """The canonical score with its interval (a CheckList test: its rate with its interval)."""
    canonical = entry.get("canonical")
    if isinstance(canonical, Mapping):
        values = [canonical.get(k) for k in ("score", "wilson_low", "wilson_high")]
    else:
        interval = entry.get("interval")
        bounds = list(interval) if isinstance(interval, list) and len(interval) == 2 else [None] * 2
        values = [entry.get("rate"), *bounds]
    score, low, high = (float(v) if _is_num(v) else None for v in values)
    return score, low, high


def _formats(entry: Mapping[str, Any]) -> tuple[float, float, float] | None:
    formats = entry.get("formats")
    if not isinstance(formats, Mapping):
        return None
    values = [float(v) for k in ("min", "median", "max") if _is_num(v := formats.get(k))]
    return (values[0], values[1], values[2]) if len(values) == 3 else None


def _run_cells(run: Run) -> list[str]:
    blocking = sum(e.get("verdict") in BLOCKING for e in run.tests.values())
    return [
        _text(run.run_id, 80),
        _text(run.created or "not reported"),
        _text(", ".join(sorted(run.models)) or "not reported"),
        "<code>" + _text(", ".join(c[:12] for c in sorted(run.commits)) or "-") + "</code>",
        str(len(run.tests)),
        str(blocking),
        _badge("failed" if run.failed else "passed"),
    ]


def _runs_table(runs: Sequence[Run]) -> str:
    """Newest first; a failed run's row is marked (class ``failed-run``)."""
    header = ["run id", "date", "model", "git commit", "tests", "blocking", "gate"]
    numeric = ' class="num"'
    head = "".join(f"<th{numeric if i in (4, 5) else ''}>{h}</th>" for i, h in enumerate(header))
    rows = []
    for run in reversed(runs):
        cells = "".join(f"<td{numeric if i in (4, 5) else ''}>{cell}</td>"
                        for i, cell in enumerate(_run_cells(run)))
        rows.append(f'<tr class="{"failed-run" if run.failed else "passed-run"}">{cells}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _test_section(index: int, nodeid: str, name: str, runs: Sequence[Run]) -> str:
    kept = [run for run in runs if nodeid in run.tests]
    drawn = kept[-MAX_RUNS_DRAWN:]
    points = []
    for run in drawn:
        entry = run.tests[nodeid]
        score, low, high = _score(entry)
        points.append((run.label(), score, low, high, _formats(entry),
                       entry.get("verdict") in BLOCKING))
    failed_runs = sum(point[5] for point in points)
    chart = history_chart(points, f"release history of {nodeid}: {len(drawn)} runs, "
                                  f"{failed_runs} failed")
    note = (f'<p class="caption">The latest {MAX_RUNS_DRAWN} of {len(kept)} runs are drawn.</p>'
            if len(kept) > MAX_RUNS_DRAWN else "")
    rows = []
    for run in reversed(kept):
        entry = run.tests[nodeid]
        commit = ", ".join(c[:12] for c in sorted(run.commits)) or "-"
        score, low, high = _score(entry)
        formats = _formats(entry)
        interval = f" [{_num(low)}, {_num(high)}]" if low is not None and high is not None else ""
        rows.append([
            _text(run.created or "not reported"), _text(run.run_id, 80),
            f"<code>{_text(commit)}</code>", _badge(entry.get("verdict")),
            (_num(score) + interval) if score is not None else "-",
            "/".join(_num(v) for v in formats) if formats else "-",
        ])
    table = _table(["date", "run id", "git commit", "verdict", "canonical [interval]",
                    "formats min/median/max"], rows, numeric=(4, 5), text=(1,))
    latest = kept[-1].tests[nodeid].get("verdict") if kept else None
    return (f'<section class="history" id="test-{index}"><h2>{_text(name)} {_badge(latest)}</h2>'
            f'<p class="caption">{_text(nodeid)}: kept in {len(kept)} runs, the gate failed in '
            f"{sum(run.tests[nodeid].get('verdict') in BLOCKING for run in kept)}.</p>"
            f"{chart}{note}<details><summary>Every run</summary>{table}</details></section>")


def render_history(reports: Iterable[Mapping[str, Any]]) -> str:
    """The whole page, as text; the same kept reports give the same bytes."""
    runs = runs_of(reports)
    nodeids = sorted({nodeid for run in runs for nodeid in run.tests})
    try:
        names = short_nodeids(nodeids)
    except ValueError:  # node ids that mix absolute and relative paths (os.path.commonpath)
        names = {nodeid: nodeid for nodeid in nodeids}
    failed = sum(run.failed for run in runs)
    title = f"pytest-reliable release history: {len(runs)} runs, {failed} failed"
    css = f"{CSS}\n{HISTORY_CSS}"
    style_hash = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    span = f"from {_text(runs[0].created)} to {_text(runs[-1].created)}" if runs else "no runs"
    sections = "".join(_test_section(i + 1, nodeid, names[nodeid], runs)
                       for i, nodeid in enumerate(nodeids))
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP.format(style_hash=style_hash)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_text(title)}</title><style>{css}</style></head><body>",
        "<h1>pytest-reliable release history</h1>",
        f'<p class="meta">{len(runs)} kept runs {span}; the gate failed in {failed}.</p>',
        "<h2>Runs</h2>", _runs_table(runs) if runs else "<p>No kept runs.</p>",
        ('<h2>Tests</h2><p class="caption">Per test and run: the canonical score (dot) with its '
         "interval, and the format range (bar: min to max, tick: median). A shaded column marked "
         "\u2715 is a run whose gate failed for that test.</p>"),
        sections,
        "</body></html>\n",
    ])


def write_history(reports: Iterable[Mapping[str, Any]], path: str | Path) -> None:
    """Atomically, as the report page."""
    write_atomic(path, render_history(reports))
