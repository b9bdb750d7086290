"""The report page's text and numbers (`report.html`): every value the page shows goes through
these. Every string that came from a model, a dataset or the JSON file goes through `_text`: lone
surrogates and control characters (ANSI escapes) are replaced, huge texts truncated with a note,
and the rest `html.escape`d, quotes included. Also the page's style sheet and its
Content-Security-Policy (`CSS`, `CSP`), shared with the release history page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from pytest_reliable.report.format import OUTCOME_NOTES, encodable, printable

NOT_REPORTED = '<span class="na">not reported</span>'


LONG_TEXT_CHARS = 4000
"""Prompts and answers: enough for any real prompt; a 1 MB answer is cut with a note."""


CELL_CHARS = 300


CSS = """
:root{--pass:#1a7f37;--fail:#c62828;--error:#b26a00;--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;
--soft:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--ink);margin:0 auto;max-width:1120px;padding:20px 24px 60px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
h3{font-size:14px;margin:18px 0 6px}
.meta{color:var(--muted);margin:0 0 14px}
.banner{border-radius:6px;padding:10px 14px;font-size:16px;font-weight:600;margin:10px 0 16px}
.banner.failed{background:#fdecea;border:1px solid #f5c2c0;color:var(--fail)}
.banner.passed{background:#e9f6ec;border:1px solid #b7e1c1;color:var(--pass)}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
td.text{overflow-wrap:anywhere}
th{background:var(--soft);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;white-space:nowrap;border-radius:10px;padding:0 8px;font-size:12px;font-weight:700;
color:#fff;text-transform:uppercase;letter-spacing:.03em}
.badge.passed{background:var(--pass)}.badge.failed{background:var(--fail)}
.badge.error,.badge.other{background:var(--error)}.badge.expected{background:var(--muted)}
.ok{color:var(--pass);font-weight:600}.bad{color:var(--fail);font-weight:600}
.na{color:var(--muted);font-style:italic}
.note{color:var(--muted);font-style:italic}
details.test{border:1px solid var(--line);border-radius:6px;margin:10px 0;padding:0 12px}
details.test>summary{cursor:pointer;padding:8px 0;font-weight:600}
details.test[open]>summary{border-bottom:1px solid var(--line);margin-bottom:6px}
details.test.failed{border-left:4px solid var(--fail)}
details.test.passed{border-left:4px solid var(--pass)}
details.test.error,details.test.other{border-left:4px solid var(--error)}
details.test.expected{border-left:4px solid var(--muted)}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 14px;margin:6px 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}
pre{background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:8px;
white-space:pre-wrap;overflow-wrap:anywhere;max-height:420px;overflow:auto;margin:4px 0 10px;
font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
svg{display:block;max-width:100%;height:auto;margin:4px 0 2px}
svg text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:#1f2328}
svg text.muted{fill:#59636e}
.caption{color:var(--muted);font-size:12px;margin:0 0 10px}
a{color:#0b57d0}
""".strip()


CSP = (
    "default-src 'none'; style-src 'sha256-{style_hash}'; img-src data:; script-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)


def _text(value: Any, limit: int = CELL_CHARS) -> str:
    """Model or dataset text as safe HTML: cleaned, truncated with a note, escaped."""
    text = encodable(value if isinstance(value, str) else str(value))
    note = ""
    if len(text) > limit:
        note = (f' <span class="note">[{len(text) - limit:,} more characters not shown; the JSON '
                "report has the full text]</span>")
        text = text[:limit]
    text = printable(text.replace("\r\n", "\n"))
    return html.escape(text, quote=True) + note


def _is_num(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _num(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if _is_num(value) else NOT_REPORTED


def _int(value: Any) -> str:
    if _is_num(value) and float(value).is_integer():
        return str(int(value))
    return _num(value) if _is_num(value) else NOT_REPORTED


def _word(value: Any) -> str:
    """A short string field (mode, policy, method...) or "not reported"."""
    if value is None or value == "":
        return NOT_REPORTED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_num(value):
        return _num(value, 4).rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    return _text(value)


def _interval(low: Any, high: Any, digits: int = 3) -> str:
    if not (_is_num(low) and _is_num(high)):
        return ""
    return f" [{low:.{digits}f}, {high:.{digits}f}]"


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _mapping(value: Any) -> Mapping[str, Any]:
    """A sub-object of an entry, or an empty one when missing or of another type."""
    return value if isinstance(value, Mapping) else {}


def _numbers(values: Any) -> list[float]:
    if not isinstance(values, Sequence) or isinstance(values, str):
        return []
    return [float(v) for v in values if _is_num(v)]


def _kind(entry: Mapping[str, Any]) -> str:
    kind = entry.get("kind")
    return kind if isinstance(kind, str) else ""


def _verdict_class(verdict: Any) -> str:
    return verdict if verdict in ("passed", "failed", "error") else "other"


def _badge(verdict: Any) -> str:
    label = _text(verdict, 20) if verdict else "no verdict"
    return f'<span class="badge {_verdict_class(verdict)}">{label}</span>'


def _entry_class(entry: Mapping[str, Any]) -> str:
    """An expected failure (pytest's xfail) is drawn apart from a blocking one."""
    return "expected" if entry.get("outcome") == "xfailed" else _verdict_class(entry.get("verdict"))


def _outcome_badge(entry: Mapping[str, Any]) -> str:
    """pytest's outcome beside the gate's verdict when it says more (an expected failure does
    not block; a test whose own assert failed does), with the xfail reason."""
    outcome, verdict = entry.get("outcome"), entry.get("verdict")
    if outcome == verdict or not isinstance(outcome, str) or outcome not in OUTCOME_NOTES:
        return ""
    css = "expected" if outcome in ("xfailed", "xpassed") else _verdict_class(outcome)
    reason = entry.get("xfail_reason")
    why = f' <span class="note">(xfail: {_text(reason, 200)})</span>' if reason else ""
    return f' <span class="badge {css}">{OUTCOME_NOTES[outcome]}</span>{why}'


def _facts(items: Iterable[tuple[str, str]]) -> str:
    return ('<dl class="facts">' + "".join(f"<dt>{name}</dt><dd>{value}</dd>"
                                          for name, value in items) + "</dl>")


def _table(header: list[str], rows: list[list[str]], numeric: Sequence[int] = (),
           text: Sequence[int] = ()) -> str:
    """``numeric`` columns align right; ``text`` columns (model or dataset text) may break
    anywhere, so one unbroken megabyte of output cannot widen the page."""

    def cell(tag: str, index: int, content: str) -> str:
        css = ' class="num"' if index in numeric else ' class="text"' if index in text else ""
        return f"<{tag}{css}>{content}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _threshold_passed(check: Mapping[str, Any]) -> str:
    passed = check.get("passed")
    if passed is True:
        return '<span class="ok">passed</span>'
    if passed is False:
        return '<span class="bad">FAILED</span>'
    return NOT_REPORTED


def _checks(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    checks = entry.get("thresholds")
    return [c for c in checks if isinstance(c, Mapping)] if isinstance(checks, list) else []
