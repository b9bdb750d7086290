"""The HTML page of ``--reliable-html PATH.html`` (SPEC section 8): the release decision as a page.

The page is built from the JSON report dict alone, so ``python -m pytest_reliable html REPORT.json``
rebuilds the same bytes later. It is a viewer: every number it shows or draws is a field of the
report (the n* curves too); it computes no statistic and imports no numpy. Charts are inline SVG
(`report.charts`): no JavaScript, no charting library, nothing fetched at view time; a
Content-Security-Policy forbids every script and every load, so even a text that escaped escaping
could run nothing. Any field may be missing (other versions write other subsets): it then reads
"not reported".

Every string that came from a model, a dataset or the JSON file goes through `_text`: lone
surrogates and control characters (ANSI escapes) are replaced, huge texts truncated with a note,
and the rest `html.escape`d, quotes included.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import quote

from pytest_reliable.files import write_atomic
from pytest_reliable.report.charts import (
    COLORS,
    distribution_chart,
    interval_chart,
    line_chart,
    tick_label,
)
from pytest_reliable.report.format import (
    OUTCOME_NOTES,
    RATE_NAMES,
    blocks_release,
    encodable,
    printable,
    short_nodeids,
    small_pilot_note,
    spend_note,
)
from pytest_reliable.schema.entries import json_safe

NOT_REPORTED = '<span class="na">not reported</span>'
LONG_TEXT_CHARS = 4000
"""Prompts and answers: enough for any real prompt; a 1 MB answer is cut with a note."""
CELL_CHARS = 300
MAX_GROUPS_SHOWN = 40
"""Groups per chart (worst first); the JSON report has every group."""
OPEN_BLOCKING_AT_MOST = 3
"""Blocking tests are shown open when there are this few; otherwise every test starts closed."""
ORP_D_MAX = 0.3
"""`stats.orp`'s default d_max, used when the report does not give the d grid."""

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



# -- text and numbers -------------------------------------------------------------------------
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


# -- sections of one test ---------------------------------------------------------------------
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


def thresholds_table(entry: Mapping[str, Any]) -> str:
    checks = _checks(entry)
    if not checks:
        return '<p class="na">no thresholds reported</p>'
    rows = [[
        _text(check.get("name", "?")),
        _num(check.get("observed"), 4),
        _num(check.get("bound"), 4),
        _num(check.get("limit"), 4),
        _word(check.get("decide", entry.get("decide"))),
        _word(check.get("method")),
        _threshold_passed(check),
    ] for check in checks]
    return _table(["threshold", "observed", "bound", "limit", "policy", "method", "result"],
                  rows, numeric=(1, 2, 3))


def why_blocked(entry: Mapping[str, Any]) -> str:
    """One line per failed threshold (or the error), for the summary table."""
    reasons = []
    for check in _checks(entry):
        if check.get("passed") is False:
            bound = check.get("bound")
            policy = check.get("decide", entry.get("decide"))
            reasons.append(
                f"<b>{_text(check.get('name', '?'))}</b>: observed {_num(check.get('observed'))}"
                + (f", bound {_num(bound)}" if _is_num(bound) else "")
                + f", limit {_num(check.get('limit'))}"
                + (f" ({_text(policy, 40)})" if policy else "")
            )
    if not reasons and entry.get("verdict") != "passed":
        message = entry.get("message")
        first = str(message).strip().splitlines()[-1] if message else "no reason reported"
        reasons.append(_text(first, 200))
    return "<br>".join(reasons)


def _limits_on_score_axis(entry: Mapping[str, Any]) -> list[tuple[str, float]]:
    names = ("min_score", "min_worst", "min_median", "min_lower_ci")
    return [(str(c.get("name")), float(c["limit"])) for c in _checks(entry)
            if c.get("name") in names and _is_num(c.get("limit")) and 0 <= c["limit"] <= 1]


def _group_scores(group_range: Any) -> list[float]:
    per_variant = _get(group_range, "per_variant")
    if not isinstance(per_variant, Mapping):
        return []
    return [float(g["score"]) for g in per_variant.values()
            if isinstance(g, Mapping) and _is_num(g.get("score"))]


def _bounds(group: Mapping[str, Any]) -> tuple[float | None, float | None]:
    for low_key, high_key in (("low", "high"), ("wilson_low", "wilson_high")):
        low, high = group.get(low_key), group.get(high_key)
        if _is_num(low) and _is_num(high):
            return float(low), float(high)
    return None, None


def distributions_section(entry: Mapping[str, Any]) -> str:
    formats, orders = entry.get("formats"), entry.get("orders")
    rows = [
        ("over resamplings", _numbers(entry.get("resampling_scores"))),
        (f"over formats ({_get(formats, 'grouping') or 'grouping not reported'})",
         _group_scores(formats)),
        (f"over orders ({_get(orders, 'grouping') or 'grouping not reported'})",
         _group_scores(orders)),
    ]
    chart = distribution_chart(rows, _limits_on_score_axis(entry),
                               f"score distributions of {entry.get('nodeid', 'the test')}")
    return ("<h3>Score distributions</h3>" + chart
            + '<p class="caption">Each dot is one resampling\'s score (top) or one group\'s mean '
            "score (formats, orders); boxes span the quartiles with whiskers from min to max where "
            "there are 5 or more values; the thick tick is the median; dashed red lines are the "
            "test's limits.</p>")


def _distinguishing_labels(descriptions: list[str]) -> tuple[list[str], str]:
    """Chart labels without the comma-separated parts every description shares (a format's long
    description differs in one or two values), and the shared parts, said once."""
    parts = [d.split(", ") for d in descriptions]
    if len(parts) < 2:
        return descriptions, ""
    common = set(parts[0]).intersection(*parts[1:])
    labels = [", ".join(p for p in these if p not in common) or d
              for these, d in zip(parts, descriptions)]
    return labels, ", ".join(p for p in parts[0] if p in common)


def groups_section(title: str, group_range: Any) -> str:
    if not isinstance(group_range, Mapping):
        return f"<h3>{title}</h3><p>{NOT_REPORTED}</p>"
    per_variant = group_range.get("per_variant")
    groups = [(str(key), g) for key, g in per_variant.items()
              if isinstance(g, Mapping) and _is_num(g.get("score"))] if isinstance(
        per_variant, Mapping) else []
    facts = _facts([
        ("grouping", _word(group_range.get("grouping"))),
        ("min / median / max", " / ".join(_num(group_range.get(k)) for k in ("min", "median",
                                                                                "max"))),
        ("noise floor", _num(group_range.get("noise_floor"))
         + (' <span class="note">(the spread a prompt-insensitive model would show here)</span>'
            if _is_num(group_range.get("noise_floor")) else "")),
        ("groups", str(len(groups))),
    ])
    if not groups:
        return f"<h3>{title}</h3>{facts}"
    groups.sort(key=lambda kv: float(kv[1]["score"]))
    shown = groups[:MAX_GROUPS_SHOWN]
    labels, shared = _distinguishing_labels([str(g.get("description") or key) for key, g in shown])
    if shared:
        facts += f'<p class="note">Every group shown has: {_text(shared, CELL_CHARS)}</p>'
    rows = []
    for label, (_, group) in zip(labels, shown):
        low, high = _bounds(group)
        cells = group.get("cells")
        note = (f"n={int(cells)}" if _is_num(cells) else "") + (" thin" if group.get("thin")
                                                                 else "")
        rows.append((label, float(group["score"]), low, high, note.strip()))
    chart = interval_chart(rows, f"{title} per group")
    more = (f'<p class="note">{len(groups) - len(shown)} more groups (better scores) are in the '
            "JSON report.</p>" if len(groups) > len(shown) else "")
    return (f"<h3>{title}</h3>{facts}{chart}"
            '<p class="caption">Worst group first; whiskers are each group\'s interval where '
            "reported; n is the group's cells, \"thin\" marks groups with fewer cells than "
            f"min_cells.</p>{more}")


def _marginal(entry: Mapping[str, Any], dim: str, value: str,
              raw: Any) -> tuple[float, float | None, float | None] | None:
    """A dimension value's mean and interval: from `dimensions` itself, else from a group of the
    ranges that stands for this value (grouping "dimensions")."""
    if isinstance(raw, Mapping):
        mean = next((raw[k] for k in ("mean", "score") if _is_num(raw.get(k))), None)
        if mean is None:
            return None
        low, high = _bounds(raw)
        return float(mean), low, high
    if not _is_num(raw):
        return None
    for group_range in (entry.get("formats"), entry.get("orders")):
        per_variant = _get(group_range, "per_variant")
        if not isinstance(per_variant, Mapping):
            continue
        for key, group in per_variant.items():
            if isinstance(group, Mapping) and f"{dim}={value}" in (key, group.get("description")):
                low, high = _bounds(group)
                return float(raw), low, high
    return float(raw), None, None


def dimensions_section(entry: Mapping[str, Any]) -> str:
    dimensions = entry.get("dimensions")
    if not isinstance(dimensions, Mapping) or not dimensions:
        return f"<h3>Per-dimension marginals</h3><p>{NOT_REPORTED}</p>"
    rows: list[tuple[str, float, float | None, float | None, str]] = []
    for dim, values in dimensions.items():
        if not isinstance(values, Mapping):
            continue
        for value, raw in values.items():
            found = _marginal(entry, str(dim), str(value), raw)
            if found is not None:
                rows.append((f"{dim} = {value}", *found, ""))
    if not rows:
        return f"<h3>Per-dimension marginals</h3><p>{NOT_REPORTED}</p>"
    with_intervals = any(low is not None for _, _, low, _, _ in rows)
    caption = ("whiskers are the value's interval" if with_intervals
               else "no intervals were reported for these means")
    return ("<h3>Per-dimension marginals</h3>"
            + interval_chart(rows[: MAX_GROUPS_SHOWN * 2], "mean score per dimension value")
            + f'<p class="caption">Mean score of the cells rendered with each value; {caption}.'
            "</p>")


def _curve_points(values: Any) -> list[tuple[float, float]]:
    """(n, value) for n = 1, 2, ...: index n - 1 of a stored curve (a null point is left out)."""
    if not isinstance(values, list):
        return []
    return [(float(i + 1), float(v)) for i, v in enumerate(values) if _is_num(v)]


N_STAR_METHODS = {
    "paper": "paper: ReliableEval's n*, from subsets of the scores (n* at most their number)",
    "bootstrap": "bootstrap: fresh resamplings drawn with replacement (n* may exceed the pilot)",
}
"""The n* methods in words (SPEC section 7; `stats.min_reliable_n`)."""
N_STAR_CAPTIONS = {
    "paper": ("the mean and the variance of n scores drawn without replacement from {scores} "
              "fall from those of all of them (ReliableEval's n*, method paper)"),
    "bootstrap": ("the mean and the standard deviation of n scores drawn with replacement, as "
                  "fresh resamplings, from {scores} (their deviations from the mean scaled up by "
                  "the pilot inflation, an upper confidence bound of a standard deviation) fall "
                  "from those of all of them (method bootstrap)"),
}
"""What the second curve bounds differs: the paper bounds the variance (squared units), the
bootstrap the standard deviation (the scores' units)."""


def _curve_scores(curve: Mapping[str, Any]) -> str:
    """Whose scores the curves are over, in words."""
    n_scores = _int(curve.get("n_scores"))
    return {"pilot": f"the pilot's {n_scores} per-resampling scores",
            "resamplings": f"this test's {n_scores} per-resampling scores",
            }.get(str(curve.get("computed_from")), f"{n_scores} per-resampling scores")


def n_star_section(entry: Mapping[str, Any]) -> str:
    curve = _mapping(entry.get("n_star_curve"))
    # The curves were drawn by the method that computed them; n_star_method names the one that
    # sized the run (older reports may lack one or the other).
    method = curve.get("method") or entry.get("n_star_method")
    facts = _facts([
        ("n*", _int(entry.get("n_star"))
         + ("" if entry.get("n_star_reliable") is not False else
            ' <span class="bad">not reliable at (eps, delta)</span>: the resamplings vouch for '
            f"eps = {_num(entry.get('achievable_eps'), 4)}")
         + ("" if (small := small_pilot_note(entry)) is None else
            f' <span class="bad">small pilot</span>: {_text(small, LONG_TEXT_CHARS)}')),
        ("source", _word(entry.get("n_star_source"))),
        ("method", _n_star_method(entry.get("n_star_method"))),
        *([("paper's n*", _int(entry.get("n_star_paper")))]
          if entry.get("n_star_method") == "bootstrap" else []),
        ("eps / delta", f"{_word(entry.get('eps'))} / {_word(entry.get('delta'))}"),
        ("pilot resamplings", _int(entry.get("pilot_n"))),
        ("curves over", f"{_curve_scores(curve)} ({_word(curve.get('method'))})" if curve
         else NOT_REPORTED),
    ])
    mean_upper, var_upper = _curve_points(curve.get("mean_upper")), _curve_points(
        curve.get("var_upper"))
    if not mean_upper and not var_upper:
        why = ("n* came from the n* store (an earlier run's pilot), which keeps n*, not the "
               "pilot's curves" if entry.get("n_star_source") == "store" else
               "the report carries no n* curve (n* needs two or more resamplings; reports of "
               "older versions do not store the curve)")
        return f"<h3>n* convergence</h3>{facts}<p class=\"note\">No curve: {why}.</p>"
    series = [
        ("mean deviation", mean_upper, COLORS["main"], False),
        ("sd deviation" if method == "bootstrap" else "variance deviation", var_upper,
         COLORS["second"], True),
    ]
    eps = entry.get("eps")
    hlines = [(f"eps = {tick_label(float(eps))}", float(eps))] if _is_num(eps) else []
    n_star = entry.get("n_star")
    last_n = max(n for n, _ in mean_upper + var_upper)
    # An n* beyond the curves (bootstrap, past the cap) is not marked: the facts above say it.
    vlines = [(f"n* = {int(n_star)}", float(n_star))] if _is_num(n_star) and n_star <= last_n \
        else []
    chart = line_chart(series, "resamplings n", "upper end of |deviation| (1 - delta/2 percentile)",
                       "n* convergence curve", hlines=hlines, vlines=vlines)
    drawn = N_STAR_CAPTIONS.get(method if isinstance(method, str) else "",
                                "the mean and the spread of n scores drawn from {scores} fall "
                                "from those of all of them")
    return (f"<h3>n* convergence</h3>{facts}{chart}"
            '<p class="caption">For each n, the (1 - delta/2) percentile of how far '
            f"{drawn.format(scores=_curve_scores(curve))}; n* is the first n where both are "
            "within eps.</p>")


def _n_star_method(method: Any) -> str:
    """``n_star_method`` in words (an unknown one as it is written)."""
    if isinstance(method, str) and method in N_STAR_METHODS:
        return _text(N_STAR_METHODS[method])
    return _word(method)


def _baseline_groups(groups: Any) -> list[tuple[str, float, float | None, float | None, str]]:
    items: list[tuple[str, Any]] = []
    if isinstance(groups, Mapping):
        items = [(str(k), v) for k, v in groups.items()]
    elif isinstance(groups, list):
        items = [(str(g.get("key") or g.get("description") or i), g)
                 for i, g in enumerate(groups) if isinstance(g, Mapping)]
    rows: list[tuple[str, float, float | None, float | None, str]] = []
    for key, group in items:
        if _is_num(group):
            rows.append((key, float(group), None, None, ""))
            continue
        if not isinstance(group, Mapping):
            continue
        estimate = next((group[k] for k in ("estimate", "difference", "mean", "score")
                         if _is_num(group.get(k))), None)
        if estimate is None:
            continue
        low, high = _bounds(group)
        rows.append((str(group.get("description") or key), float(estimate), low, high, ""))
    return sorted(rows, key=lambda row: row[1])


def baseline_section(entry: Mapping[str, Any]) -> str:
    baseline = entry.get("baseline")
    if not isinstance(baseline, Mapping):
        return ""
    difference = _mapping(baseline.get("difference"))
    max_regression = next((float(c["limit"]) for c in _checks(entry)
                           if c.get("name") == "max_regression" and _is_num(c.get("limit"))), None)
    orp = _mapping(baseline.get("orp"))
    parts = ["<h3>Against the baseline</h3>", _facts([
        ("baseline model", _word(baseline.get("model"))),
        ("baseline mean", _num(baseline.get("mean"))),
        ("candidate - baseline", _num(difference.get("estimate"))
         + _interval(difference.get("low"), difference.get("high"))),
        ("McNemar p (canonical)", _num(baseline.get("mcnemar_p"), 4)),
        ("ORP sigma_d / rho / area", " / ".join(_num(orp.get(k)) for k in ("sigma_d", "rho",
                                                                             "area"))),
    ])]
    rows: list[tuple[str, float, float | None, float | None, str]] = []
    if _is_num(difference.get("estimate")):
        low, high = _bounds(difference)
        rows.append(("overall", float(difference["estimate"]), low, high, ""))
    rows += _baseline_groups(baseline.get("groups"))[:MAX_GROUPS_SHOWN]
    if rows:
        values = [v for row in rows for v in row[1:4] if v is not None]
        references = [("0", 0.0, COLORS["zero"])]
        if max_regression is not None:
            references.append((f"-max_regression {tick_label(-max_regression)}",
                               -max_regression, COLORS["limit"]))
            values.append(-max_regression)
        lo, hi = min(values + [0.0]), max(values + [0.0])
        pad = max((hi - lo) * 0.08, 0.02)
        parts.append(interval_chart(rows, "paired differences candidate - baseline",
                                    domain=(lo - pad, hi + pad), references=references))
        parts.append('<p class="caption">Paired differences (candidate - baseline) over the same '
                     "cells, overall and per group, with their intervals; below zero the "
                     "candidate is worse.</p>")
    curve = _numbers(orp.get("curve"))
    if len(curve) >= 2:
        grid = _numbers(orp.get("d"))
        if len(grid) != len(curve):
            d_max = float(orp["d_max"]) if _is_num(orp.get("d_max")) else ORP_D_MAX
            grid = [d_max * i / (len(curve) - 1) for i in range(len(curve))]
        parts.append(line_chart([("ORP(d)", list(zip(grid, curve)), COLORS["main"], False)],
                                "true difference d", "observed reversal probability",
                                "ORP curve"))
        parts.append('<p class="caption">ILR\'s observed reversal probability: the chance that '
                     "one run ranks the two models the wrong way round when their true scores "
                     "differ by d.</p>")
    return "".join(parts)


def worst_variant_section(entry: Mapping[str, Any]) -> str:
    worst = entry.get("worst_variant")
    if not isinstance(worst, Mapping):
        return f"<h3>Worst variant</h3><p>{NOT_REPORTED}</p>"
    return ("<h3>Worst variant</h3>" + _facts([
        ("group", f"{_word(worst.get('key'))} ({_word(worst.get('grouping'))})"),
        ("description", _word(worst.get("description"))),
        ("score", _num(worst.get("score"))),
        ("could be the worst", _candidates(worst.get("key"), worst.get("candidates"))),
        ("instance shown", _instance_shown(worst)),
    ]) + "<p>Its rendered prompt for one instance:</p>"
        + f"<pre>{_text(worst.get('prompt', ''), LONG_TEXT_CHARS)}</pre>"
        + "<p>The model answered:</p>"
        + f"<pre>{_text(worst.get('answer', ''), LONG_TEXT_CHARS)}</pre>")


def _instance_shown(worst: Mapping[str, Any]) -> str:
    """Which record the worst group's prompt is (1-based, as the dataset counts) and how the
    model did on it (older reports do not say)."""
    record = worst.get("record")
    if not isinstance(record, str):
        return NOT_REPORTED
    resampling = worst.get("resampling")
    where = (" (the canonical pass)" if resampling is None else
             f" (resampling {resampling + 1})" if isinstance(resampling, int)
             and not isinstance(resampling, bool) else "")
    score = worst.get("answer_score")
    if worst.get("answer_parsed") is False:
        how = "its answer could not be read (unparsed)"
    elif not _is_num(score):
        how = ""
    elif score >= 1.0:
        how = "answered right: the group has no wrong answer"
    else:
        how = "answered wrong" if score == 0 else f"partly right ({_num(score)})"
    return _word(record + where) + (f": {how}" if how else "")


def _candidates(key: Any, candidates: Any) -> str:
    """The range's ``worst_candidates`` beside the worst group (older reports have none)."""
    if not isinstance(candidates, list):
        return NOT_REPORTED
    others = [c for c in candidates if c != key]
    if not others:
        return "only this group, at the test's confidence"
    return (", ".join(_word(c) for c in others)
            + ' <span class="note">(also, at the test\'s confidence: the lowest estimate is not '
              "a proven worst)</span>")


def message_section(entry: Mapping[str, Any]) -> str:
    message = entry.get("message")
    if not message:
        return ""
    return f"<h3>Failure message</h3><pre>{_text(message, LONG_TEXT_CHARS * 2)}</pre>"


def _spend(cost: Any) -> str:
    """A test's ``cost``: USD paid now, and what the cache saved (SPEC section 13)."""
    cost = _mapping(cost)
    if not cost:
        return _word(None)
    text = f"{_num(cost.get('usd'), 4)} (the cache saved {_num(cost.get('cached_usd_saved'), 4)})"
    return text + (" estimated: no usage reported" if cost.get("estimated") is True else "")


def reliable_facts(entry: Mapping[str, Any]) -> str:
    canonical = _mapping(entry.get("canonical"))
    calls = _mapping(entry.get("calls"))
    method = canonical.get("interval_method")
    return _facts([
        ("model", _word(entry.get("model"))),
        ("mode / resamplings", f"{_word(entry.get('mode'))} / {_int(entry.get('n_resamplings'))}"),
        ("mean &plusmn; sd", f"{_num(entry.get('mean'))} &plusmn; {_num(entry.get('std'))}"),
        ("canonical", _num(canonical.get("score"))
         + _interval(canonical.get("wilson_low"), canonical.get("wilson_high"))
         + (f" ({_text(method, 60)})" if method else " (Wilson 95%)"
            if _is_num(canonical.get("wilson_low")) else "")),
        ("pass@1 / pass@k / pass^k / maj@k", " / ".join(_num(entry.get(k)) for k in (
            "pass_at_1", "pass_at_k", "pass_hat_k", "maj_at_k")) + f" (k = {_int(entry.get('k'))})"),
        *([("circular (right under every shift)", _num(_mapping(entry.get("circular")).get(
            "score")) + _interval(_mapping(entry.get("circular")).get("low"),
                                  _mapping(entry.get("circular")).get("high")))]
          if entry.get("circular") else []),
        ("policy", _word(entry.get("decide"))),
        ("calls made / cached", f"{_int(calls.get('made'))} / {_int(calls.get('cached'))}"),
        ("spend (USD)", _spend(entry.get("cost"))),
        ("unparsed answers", _int(entry.get("unparsed"))),
        ("temperature", _word(entry.get("temperature"))),
        ("space / hash", (f"{_word(entry.get('space'))} / "
                         f"{_word(str(entry.get('space_hash'))[:12] if entry.get('space_hash') else None)}")),
        ("dataset hash", _word(str(entry.get("dataset_hash"))[:12]
                               if entry.get("dataset_hash") else None)),
    ])


def exploration_section(entry: Mapping[str, Any]) -> str:
    """``search="thompson"``'s exploration (SPEC section 14): shown as exploration, never as a
    verdict."""
    found = _mapping(entry.get("exploration"))
    if not found:
        return ""
    per_format = _mapping(found.get("per_format"))
    rows = [[_text(key), _text(_mapping(f).get("description")), _num(_mapping(f).get("score")),
             _int(_mapping(f).get("cells")), _int(_mapping(f).get("pulls"))]
            for key, f in per_format.items()]
    best, worst = _mapping(found.get("best")), _mapping(found.get("worst"))
    return ("<h3>Exploration (not a verdict)</h3><p>" + _text(found.get("label"), 400) + "</p>"
            + _facts([("best format found",
                       f"{_text(best.get('key'))} {_num(best.get('score'))}"),
                      ("worst format found",
                       f"{_text(worst.get('key'))} {_num(worst.get('score'))}"),
                      ("cells asked", _int(found.get("calls")))])
            + _table(["format", "description", "observed", "cells", "pulls"], rows,
                     numeric=(2, 3, 4), text=(1,)))


def judge_section(entry: Mapping[str, Any]) -> str:
    """The judge's votes and noise (SPEC section 12), when a judge graded the answers."""
    judge = _mapping(entry.get("judge"))
    if not judge:
        return ""
    calls = _mapping(judge.get("calls"))
    return "<h3>Judge</h3>" + _facts([
        ("judge", _word(judge.get("id"))),
        ("votes per answer / scale", f"{_int(judge.get('votes'))} / {_word(judge.get('scale'))}"),
        ("agreement (cells whose votes all agree)", _num(judge.get("agreement"))),
        ("judge variance share", _num(judge.get("judge_variance_share"))),
        ("unparsed votes", _int(judge.get("unparsed_votes"))),
        ("judge calls made / cached", f"{_int(calls.get('made'))} / {_int(calls.get('cached'))}"),
    ])


def pairwise_section(entry: Mapping[str, Any]) -> str:
    """A pairwise judge's comparison of the candidate with its baseline (SPEC section 12)."""
    pairwise = _mapping(entry.get("pairwise"))
    if not pairwise:
        return ""
    win_rate = _mapping(pairwise.get("win_rate"))
    return "<h3>Pairwise against the baseline</h3>" + _facts([
        ("baseline model", _word(pairwise.get("baseline_model"))),
        ("win / tie / loss (cells)", " / ".join(_int(pairwise.get(k))
                                                for k in ("win", "tie", "loss"))
         + f" of {_int(pairwise.get('cells'))}"),
        ("win rate", _num(win_rate.get("estimate"))
         + _interval(win_rate.get("low"), win_rate.get("high"))),
        ("position bias (picked first - 0.5)", _num(pairwise.get("position_bias"))),
    ])


def reliable_body(entry: Mapping[str, Any]) -> str:
    return "".join([
        reliable_facts(entry),
        judge_section(entry),
        pairwise_section(entry),
        "<h3>Thresholds</h3>", thresholds_table(entry),
        distributions_section(entry),
        groups_section("Formats", entry.get("formats")),
        exploration_section(entry),
        groups_section("Orders", entry.get("orders")),
        dimensions_section(entry),
        n_star_section(entry),
        baseline_section(entry),
        worst_variant_section(entry),
        message_section(entry),  # last: it repeats the above as the terminal printed it
    ])


def checklist_body(entry: Mapping[str, Any]) -> str:
    rate_name = RATE_NAMES.get(_kind(entry), "rate")
    interval = entry.get("interval")
    low, high = (interval[0], interval[1]) if isinstance(interval, list) and len(
        interval) == 2 else (None, None)
    calls = _mapping(entry.get("calls"))
    parts = [_facts([
        ("model", _word(entry.get("model"))),
        (rate_name, _num(entry.get("rate")) + _interval(low, high)),
        ("pairs / examples", _int(entry.get("pairs"))),
        ("unparsed predictions", _int(entry.get("unparsed"))),
        ("calls made / cached", f"{_int(calls.get('made'))} / {_int(calls.get('cached'))}"),
    ])]
    if _is_num(entry.get("rate")):
        ok_low, ok_high = (float(low), float(high)) if _is_num(low) and _is_num(high) else (
            None, None)
        references = [(f"{c.get('name')} {tick_label(float(c['limit']))}", float(c["limit"]),
                       COLORS["limit"]) for c in _checks(entry)
                      if _is_num(c.get("limit")) and 0 <= c["limit"] <= 1]
        parts.append(interval_chart([(rate_name, float(entry["rate"]), ok_low, ok_high, "")],
                                    f"{rate_name} with its interval", references=references))
    parts += ["<h3>Thresholds</h3>", thresholds_table(entry), message_section(entry)]
    failures = entry.get("failures")
    if isinstance(failures, list) and failures:
        rows = [[_text(f.get(k, ""), 1000) for k in ("original", "perturbed", "before", "after")]
                for f in failures if isinstance(f, Mapping)]
        parts += [f"<h3>Failing cases (first {len(rows)})</h3>",
                  _table(["original", "perturbed", "prediction before", "prediction after"],
                         rows, text=(0, 1, 2, 3))]
    return "".join(parts)


# -- the page ---------------------------------------------------------------------------------
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
