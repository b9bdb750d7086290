"""The HTML page of ``--reliable-html PATH.html`` (SPEC section 8): the release decision as a page.

The page is built from the JSON report dict alone, so ``python -m pytest_reliable html REPORT.json``
rebuilds the same bytes later. It is a viewer: every number it shows or draws is a field of the
report (the n* curves too); it computes no statistic and imports no numpy. Charts are inline SVG
(`report.charts`): no JavaScript, no charting library, nothing fetched at view time; a
Content-Security-Policy forbids every script and every load, so even a text that escaped escaping
could run nothing. Any field may be missing (other versions write other subsets): it then reads
"not reported".

This module assembles the page (the summary, one section per test, the fragments pytest-html
shows); its parts, one job each: `html_text` (escaping every string through `_text`, numbers,
tables, the style sheet and CSP), `html_charts` (the sections that draw), `html_sections` (the
other sections of a test).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_reliable.files import write_atomic
from pytest_reliable.report.format import RATE_NAMES, blocks_release, short_nodeids, spend_note
from pytest_reliable.report.html_charts import n_star_section
from pytest_reliable.report.html_sections import (
    checklist_body,
    message_section,
    reliable_body,
    thresholds_table,
    why_blocked,
    worst_variant_section,
)
from pytest_reliable.report.html_text import (
    CSP,
    CSS,
    LONG_TEXT_CHARS,
    NOT_REPORTED,
    _badge,
    _entry_class,
    _interval,
    _is_num,
    _kind,
    _mapping,
    _num,
    _outcome_badge,
    _table,
    _text,
    _word,
)
from pytest_reliable.schema.entries import json_safe

OPEN_BLOCKING_AT_MOST = 3
"""Blocking tests are shown open when there are this few; otherwise every test starts closed."""


def _key_result(entry: Mapping[str, Any]) -> str:
    if entry.get("verdict") == "error" and not _is_num(entry.get("mean")) and not _is_num(
            entry.get("rate")):
        return '<span class="na">no statistics: the evaluation did not complete</span>'
    if _kind(entry) == "reliable":
        canonical = _mapping(entry.get("canonical"))
        formats = _mapping(entry.get("formats"))
        # The practitioner's three release-gate numbers: the worst, typical and best format.
        spread = " / ".join(_num(formats.get(k)) for k in ("min", "median", "max"))
        return (f"mean {_num(entry.get('mean'))}; canonical {_num(canonical.get('score'))}"
                + _interval(canonical.get("wilson_low"), canonical.get("wilson_high"), 2)
                + f"; formats min / median / max {spread}")
    if _kind(entry) in RATE_NAMES:
        interval = entry.get("interval")
        low, high = (interval[0], interval[1]) if isinstance(interval, list) and len(
            interval) == 2 else (None, None)
        return (f"{RATE_NAMES[_kind(entry)]} {_num(entry.get('rate'))}"
                + _interval(low, high, 2))
    return NOT_REPORTED


def _banner(tests: list[Mapping[str, Any]]) -> str:
    """The page's decision: the one pytest's exit code made (an expected failure, pytest's
    xfail, does not block; a test whose own assert failed does)."""
    blocking = [t for t in tests if blocks_release(t)]
    plural = "s" if len(tests) != 1 else ""
    if not tests:
        return '<div class="banner passed">No pytest-reliable tests in this report.</div>'
    if blocking:
        return (f'<div class="banner failed">Release blocked: {len(blocking)} of {len(tests)} '
                f"test{plural} did not pass.</div>")
    expected = sum(t.get("verdict") != "passed" for t in tests)
    if expected:
        return (f'<div class="banner passed">Release not blocked: {len(tests) - expected} of '
                f"{len(tests)} test{plural} passed, {expected} failed as expected (xfail)."
                "</div>")
    return f'<div class="banner passed">All {len(tests)} test{plural} passed.</div>'


def _why(entry: Mapping[str, Any]) -> str:
    why = why_blocked(entry)
    if not why:
        return '<span class="ok">every threshold passed</span>'
    if not blocks_release(entry):
        return f'<span class="note">expected failure, does not block:</span><br>{why}'
    return why


def summary_section(tests: list[Mapping[str, Any]], names: dict[str, str]) -> str:
    banner = _banner(tests)
    numbered = list(enumerate(tests, start=1))
    # Blocking tests first, then expected failures, then the passed ones.
    ordered = sorted(numbered, key=lambda it: (not blocks_release(it[1]),
                                               it[1].get("verdict") == "passed"))
    rows = [[
        f'<a href="#test-{i}">{_text(names[str(t.get("nodeid", "?"))], 160)}</a>',
        _word(t.get("kind")),
        _badge(t.get("verdict")) + _outcome_badge(t),
        _key_result(t),
        _why(t),
    ] for i, t in ordered]
    table = (_table(["test", "kind", "verdict", "result", "why it blocks"], rows, text=(4,))
             if rows else "")
    return f"{banner}<h2>Summary</h2>{table}"


def entry_section(index: int, entry: Mapping[str, Any], name: str, *, opened: bool) -> str:
    verdict = entry.get("verdict")
    kind = _kind(entry)
    if verdict == "error" and not isinstance(entry.get("thresholds"), list):
        body = "<p>The evaluation did not complete: no statistics are reported.</p>" + \
               message_section(entry)
    elif kind == "reliable":
        body = reliable_body(entry)
    elif kind in RATE_NAMES:
        body = checklist_body(entry)
    else:
        body = message_section(entry) or f"<p>{NOT_REPORTED}</p>"
    return (f'<details class="test {_entry_class(entry)}" id="test-{index}"'
            f'{" open" if opened else ""}><summary>'
            f"{_badge(verdict)}{_outcome_badge(entry)} {_text(name, 300)} "
            f"<span class=\"note\">({_word(kind)})</span>"
            f"</summary>{body}</details>")


def render_html(report: Mapping[str, Any]) -> str:
    """The whole page, as text. Deterministic: the same report dict gives the same bytes."""
    data = json_safe(dict(report))
    tests = [t for t in data.get("tests") or [] if isinstance(t, Mapping)]
    names = short_nodeids([str(t.get("nodeid", "?")) for t in tests])
    failed = sum(blocks_release(t) for t in tests)
    expected = sum(t.get("verdict") != "passed" and not blocks_release(t) for t in tests)
    title = (f"pytest-reliable: {failed} of {len(tests)} tests blocking" if failed
             else f"pytest-reliable: {len(tests)} tests, none blocking ({expected} expected "
             "failures)" if expected else f"pytest-reliable: {len(tests)} tests passed")
    space_hash = data.get("space_hash")
    meta = " &middot; ".join([
        f"model {_word(data.get('model'))}",
        f"seed {_word(data.get('seed'))}",
        f"spaces {_word(space_hash[:12]) if isinstance(space_hash, str) else 'built-in default'}",
        f"created {_word(data.get('created'))}",
        f"pytest-reliable {_word(data.get('pytest_reliable_version'))}",
        f"report schema {_word(data.get('schema_version'))}",
    ] + ([_text(spent, 300)] if (spent := spend_note(data.get("cost"))) else []))
    style_hash = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
    # The blocking tests are what a reader opened the page for: shown open when few.
    open_blocking = 0 < failed <= OPEN_BLOCKING_AT_MOST
    sections = "".join(
        entry_section(i + 1, t, names[str(t.get("nodeid", "?"))],
                     opened=open_blocking and blocks_release(t))
        for i, t in enumerate(tests))
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{CSP.format(style_hash=style_hash)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_text(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>pytest-reliable release gate</h1><p class=\"meta\">{meta}</p>",
        summary_section(tests, names),
        ("<h2>Tests</h2>"
        '<p class="caption">Open a test for its thresholds, distributions, marginals, n* curve, '
        "baseline comparison and worst prompt.</p>"),
        sections,
        "</body></html>\n",
    ])


def write_html(report: Mapping[str, Any], path: str | Path) -> None:
    """Atomically, as the JSON report: a reader never sees half a page."""
    write_atomic(path, render_html(report))


def summary_fragment(report: Mapping[str, Any], link: str | None = None) -> str:
    """A short HTML block (banner and summary table) for other pages, e.g. pytest-html's report.
    Its links point into the full page at ``link`` (a URL relative to that page) when one was
    written."""
    data = json_safe(dict(report))
    tests = [t for t in data.get("tests") or [] if isinstance(t, Mapping)]
    names = short_nodeids([str(t.get("nodeid", "?")) for t in tests])
    block = summary_section(tests, names).replace("<h2>Summary</h2>", "")
    if link:
        href = html.escape(quote(link), quote=True)
        block = block.replace('href="#test-', f'href="{href}#test-')
        block += f'<p>Full pytest-reliable report: <a href="{href}">{_text(link)}</a></p>'
    else:
        block = re.sub(r'<a href="#test-\d+">(.*?)</a>', r"\1", block)
    return f'<div class="pytest-reliable"><h2>pytest-reliable</h2>{block}</div>'


def entry_fragment(entry: Mapping[str, Any]) -> str:
    """One test's verdict, key numbers and thresholds as a short HTML block (pytest-html extras)."""
    data = json_safe(dict(entry))
    return (f'<div class="pytest-reliable">{_badge(data.get("verdict"))}{_outcome_badge(data)} '
            f"{_key_result(data)}"
            f"{thresholds_table(data)}</div>")


__all__ = [  # the page's functions, and the parts importable from here as before the split
    "CSS",
    "LONG_TEXT_CHARS",
    "entry_fragment",
    "entry_section",
    "n_star_section",
    "render_html",
    "summary_fragment",
    "worst_variant_section",
    "write_html",
]
