"""The report page's sections that draw (`report.html`): score distributions, the groups of a
range, per-dimension marginals, the n* convergence curves and the baseline comparison, as inline
SVG (`report.charts`) from the numbers the entry stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_reliable.report.charts import (
    COLORS,
    distribution_chart,
    interval_chart,
    line_chart,
    tick_label,
)
from pytest_reliable.report.format import small_pilot_note
from pytest_reliable.report.html_text import (
    CELL_CHARS,
    LONG_TEXT_CHARS,
    NOT_REPORTED,
    _checks,
    _facts,
    _get,
    _int,
    _interval,
    _is_num,
    _mapping,
    _num,
    _numbers,
    _text,
    _word,
)

MAX_GROUPS_SHOWN = 40
"""Groups per chart (worst first); the JSON report has every group."""


ORP_D_MAX = 0.3
"""`stats.orp`'s default d_max, used when the report does not give the d grid."""


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
    formats, orders = entry["formats"], entry["orders"]
    rows = [
        ("over resamplings", _numbers(entry["resampling_scores"])),
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
    for group_range in (entry["formats"], entry["orders"]):
        per_variant = _get(group_range, "per_variant")
        if not isinstance(per_variant, Mapping):
            continue
        for key, group in per_variant.items():
            if isinstance(group, Mapping) and f"{dim}={value}" in (key, group.get("description")):
                low, high = _bounds(group)
                return float(raw), low, high
    return float(raw), None, None


def dimensions_section(entry: Mapping[str, Any]) -> str:
    dimensions = entry["dimensions"]
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
    curve = _mapping(entry["n_star_curve"])
    # The curves were drawn by the method that computed them; n_star_method names the one that
    # sized the run (older reports may lack one or the other).
    method = curve.get("method") or entry["n_star_method"]
    facts = _facts([
        ("n*", _int(entry["n_star"])
         + ("" if entry["n_star_reliable"] is not False else
            ' <span class="bad">not reliable at (eps, delta)</span>: the resamplings vouch for '
            f"eps = {_num(entry['achievable_eps'], 4)}")
         + ("" if (small := small_pilot_note(entry)) is None else
            f' <span class="bad">small pilot</span>: {_text(small, LONG_TEXT_CHARS)}')),
        ("source", _word(entry["n_star_source"])),
        ("method", _n_star_method(entry["n_star_method"])),
        *([("paper's n*", _int(entry["n_star_paper"]))]
          if entry["n_star_method"] == "bootstrap" else []),
        ("eps / delta", f"{_word(entry['eps'])} / {_word(entry['delta'])}"),
        ("pilot resamplings", _int(entry["pilot_n"])),
        ("curves over", f"{_curve_scores(curve)} ({_word(curve.get('method'))})" if curve
         else NOT_REPORTED),
    ])
    mean_upper, var_upper = _curve_points(curve.get("mean_upper")), _curve_points(
        curve.get("var_upper"))
    if not mean_upper and not var_upper:
        why = ("n* came from the n* store (an earlier run's pilot), which keeps n*, not the "
               "pilot's curves" if entry["n_star_source"] == "store" else
               "the report carries no n* curve (n* needs two or more resamplings; reports of "
               "older versions do not store the curve)")
        return f"<h3>n* convergence</h3>{facts}<p class=\"note\">No curve: {why}.</p>"
    series = [
        ("mean deviation", mean_upper, COLORS["main"], False),
        ("sd deviation" if method == "bootstrap" else "variance deviation", var_upper,
         COLORS["second"], True),
    ]
    eps = entry["eps"]
    hlines = [(f"eps = {tick_label(float(eps))}", float(eps))] if _is_num(eps) else []
    n_star = entry["n_star"]
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
    baseline = entry["baseline"]
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
