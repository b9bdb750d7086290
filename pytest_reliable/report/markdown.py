"""The Markdown summary, appended to ``$GITHUB_STEP_SUMMARY`` in GitHub Actions."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from pytest_reliable.report.format import (
    CHECKLIST_HEADER,
    Column,
    blocks_release,
    checklist_row,
    header,
    reliable_columns,
    reliable_notes,
    row,
    short_nodeids,
    spend_note,
)
from pytest_reliable.schema.text import cut_message


def _escape(cell: str) -> str:
    return cell.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_escape(c) for c in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return lines


SUMMARY_LIMIT = 512 * 1024
"""Characters of one step summary: GitHub rejects a step's summary over 1 MiB."""


def markdown_summary(report: dict[str, Any], columns: list[Column] | None = None,
                     html_path: str | Path | None = None) -> str:
    entries = list(report.get("tests") or [])
    names = short_nodeids([str(e.get("nodeid", "?")) for e in entries])
    space_hash = report.get("space_hash")
    lines = [
        "## pytest-reliable",
        "",
        (
            f"seed `{report.get('seed')}` · model `{report.get('model')}` · spaces "
            f"`{space_hash[:12] if space_hash else 'built-in default'}`"
        ),
        "",
    ]
    spent = spend_note(report.get("cost"))
    if spent is not None:
        lines += [spent, ""]
    reliable = [e for e in entries if e.get("kind") == "reliable"]
    checklist = [e for e in entries if e.get("kind") in ("invariance", "directional", "mft")]
    if reliable:
        columns = reliable_columns(reliable, columns)
        lines += _table(header(columns), [row(e, names[str(e.get("nodeid", "?"))], columns)
                                          for e in reliable])
        lines += [""] + [f"{note}  " for note in reliable_notes(reliable, names)]
    if checklist:
        lines += [""] + _table(CHECKLIST_HEADER, [checklist_row(e, names[str(e.get("nodeid", "?"))])
                                                  for e in checklist])
    if html_path is not None:
        shown = Path(html_path)
        if shown.is_absolute() and shown.is_relative_to(Path.cwd()):
            shown = shown.relative_to(Path.cwd())
        name = str(shown).replace("`", "'")
        lines += ["", (f"The HTML report (charts, prompts, answers) was written to `{name}`: "
                      "attach it to the run as an artifact to read it.")]
    blocking = sum(blocks_release(e) for e in entries)
    expected = sum(e.get("verdict") != "passed" and not blocks_release(e) for e in entries)
    if entries:
        lines += ["", (f"**Release blocked**: {blocking} of {len(entries)} tests did not pass."
                       if blocking else "**Release not blocked**: no test failed unexpectedly.")
                  + (f" {expected} failed as expected (xfail)." if expected else "")]
    failures = [e for e in entries if e.get("verdict") != "passed" and e.get("message")]
    if failures:
        lines += ["", "### Failures", ""]
        for entry in failures:
            name = _escape(names[str(entry.get("nodeid", "?"))])
            if not blocks_release(entry):
                reason = entry["xfail_reason"]
                name += " (expected failure" + (f": {html.escape(_escape(str(reason)))}" if reason else "") + ")"
            message = cut_message(str(entry["message"])).replace("```", "'''")
            details = [f"<details><summary>{name}</summary>", "", "```", message, "```", "",
                       "</details>", ""]
            if sum(map(len, lines)) + sum(map(len, details)) > SUMMARY_LIMIT:
                lines.append("(further failures left out: the summary would exceed "
                             f"{SUMMARY_LIMIT // 1024} KiB; see the JSON report)")
                break
            lines += details
    return "\n".join(lines).rstrip() + "\n"


def append_github_step_summary(report: dict[str, Any], path: str | Path | None = None,
                               columns: list[Column] | None = None, *,
                               html_path: str | Path | None = None) -> None:
    target = path or os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markdown_summary(report, columns, html_path) + "\n")
