"""The SVG chart kit of the HTML page: box plots, interval dots, line charts.

Each chart is a function of the numbers it is given and returns one ``<svg>`` element as text:
no JavaScript, no charting library, nothing fetched, coordinates with one decimal so the same
numbers give the same bytes. The charts compute no statistic: a box plot's quartiles are where the
given values lie (drawing), every estimate, interval and curve comes from the caller (the JSON
report). Every label goes through `svg_label` (cleaned, cut, escaped).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from pytest_reliable.report.format import encodable, printable

COLORS = {"main": "#0b57d0", "second": "#c55a11", "limit": "#c62828", "grid": "#d1d9e0",
          "box": "#dbe7fb", "dot": "#0b57d0", "zero": "#59636e"}
LABEL_CHARS = 60
MAX_POINTS_DRAWN = 300
"""Above this many values a distribution is drawn as a box alone, without its dots."""


def svg_label(value: object, limit: int = LABEL_CHARS) -> str:
    """A short label for SVG text: cleaned, cut with an ellipsis, escaped."""
    text = printable(encodable(value if isinstance(value, str) else str(value))).replace("\n", " ")
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return html.escape(text, quote=True)


def _f(value: float) -> str:
    """SVG coordinates with one decimal: deterministic and short."""
    return f"{value:.1f}"


class _Scale:
    """A linear map from a data domain to pixels."""

    def __init__(self, lo: float, hi: float, start: float, end: float) -> None:
        if hi <= lo:
            hi = lo + 1.0
        self.lo, self.hi, self.start, self.end = lo, hi, start, end

    def __call__(self, value: float) -> float:
        clipped = min(max(value, self.lo), self.hi)
        return self.start + (clipped - self.lo) / (self.hi - self.lo) * (self.end - self.start)


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def tick_label(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{svg_label(label, 200)}">'
            + "".join(body) + "</svg>")


def _x_axis(scale: _Scale, top: float, bottom: float, ticks: list[float]) -> list[str]:
    parts = []
    for tick in ticks:
        x = _f(scale(tick))
        parts.append(f'<line x1="{x}" y1="{_f(top)}" x2="{x}" y2="{_f(bottom)}" '
                     f'stroke="{COLORS["grid"]}" stroke-width="1"/>')
        parts.append(f'<text x="{x}" y="{_f(bottom + 13)}" text-anchor="middle" '
                     f'class="muted">{tick_label(tick)}</text>')
    return parts


def _vline(scale: _Scale, value: float, top: float, bottom: float, label: str,
           color: str) -> list[str]:
    x = _f(scale(value))
    return [(f'<line x1="{x}" y1="{_f(top)}" x2="{x}" y2="{_f(bottom)}" stroke="{color}" '
            f'stroke-width="1.5" stroke-dasharray="5 3"/>'),
            (f'<text x="{x}" y="{_f(top - 3)}" text-anchor="middle" fill="{color}">'
            f"{svg_label(label, 40)}</text>")]


def _quantile(sorted_values: list[float], q: float) -> float:
    """numpy's linear percentile, without numpy (a handful of values)."""
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def distribution_chart(rows: list[tuple[str, list[float]]], limits: list[tuple[str, float]],
                       label: str) -> str:
    """One row per distribution on a shared 0-1 axis: a box (quartiles, whiskers min to max) where
    there are 5 or more values, and every value as a dot (up to `MAX_POINTS_DRAWN`)."""
    label_width, width, row_height = 210, 860, 44
    top = 16 + 13 * max(len(limits), 1)
    height = top + row_height * len(rows) + 24
    scale = _Scale(0.0, 1.0, label_width + 10, width - 20)
    bottom = top + row_height * len(rows)
    body = _x_axis(scale, top, bottom, _ticks(0, 1, 4))
    for index, (name, values) in enumerate(rows):
        middle = top + row_height * index + row_height / 2
        body.append(f'<text x="{label_width}" y="{_f(middle)}" text-anchor="end">'
                    f"{svg_label(name, 36)}</text>")
        body.append(f'<text x="{label_width}" y="{_f(middle + 13)}" text-anchor="end" '
                    f'class="muted">{len(values)} values</text>')
        if not values:
            body.append(f'<text x="{_f(scale(0))}" y="{_f(middle + 4)}" class="muted">'
                        "not reported</text>")
            continue
        ordered = sorted(values)
        low, high = _f(scale(ordered[0])), _f(scale(ordered[-1]))
        median = _f(scale(_quantile(ordered, 0.5)))
        if len(values) >= 5:
            q1, q3 = scale(_quantile(ordered, 0.25)), scale(_quantile(ordered, 0.75))
            body += [
                (f'<line x1="{low}" y1="{_f(middle)}" x2="{high}" y2="{_f(middle)}" '
                f'stroke="{COLORS["zero"]}"/>'),
                (f'<line x1="{low}" y1="{_f(middle - 7)}" x2="{low}" y2="{_f(middle + 7)}" '
                f'stroke="{COLORS["zero"]}"/>'),
                (f'<line x1="{high}" y1="{_f(middle - 7)}" x2="{high}" y2="{_f(middle + 7)}" '
                f'stroke="{COLORS["zero"]}"/>'),
                (f'<rect x="{_f(q1)}" y="{_f(middle - 12)}" width="{_f(max(q3 - q1, 1.0))}" '
                f'height="24" fill="{COLORS["box"]}" stroke="{COLORS["main"]}"/>'),
            ]
        body.append(f'<line x1="{median}" y1="{_f(middle - 13)}" x2="{median}" '
                    f'y2="{_f(middle + 13)}" stroke="{COLORS["main"]}" stroke-width="2.5"/>')
        if len(values) <= MAX_POINTS_DRAWN:
            for i, value in enumerate(values):
                jitter = ((i * 0.6180339887) % 1.0 - 0.5) * 16  # deterministic spread
                body.append(f'<circle cx="{_f(scale(value))}" cy="{_f(middle + jitter)}" r="2.6" '
                            f'fill="{COLORS["dot"]}" fill-opacity="0.55"/>')
    for index, (name, value) in enumerate(sorted(limits, key=lambda item: item[1])):
        body += _vline(scale, value, top - 4 - 13 * index, bottom,
                       f"{name} {tick_label(value)}", COLORS["limit"])
    return _svg(width, height, label, body)


def interval_chart(rows: list[tuple[str, float, float | None, float | None, str]],
                   label: str, *, domain: tuple[float, float] = (0.0, 1.0),
                   references: Sequence[tuple[str, float, str]] = ()) -> str:
    """A dot per group with its interval as a whisker: rows of (label, estimate, low, high, note).
    ``references`` are dashed vertical lines (a limit, zero)."""
    label_width, width, row_height = 330, 860, 22
    top = 12 + 13 * max(len(references), 1)
    height = top + row_height * len(rows) + 22
    scale = _Scale(domain[0], domain[1], label_width + 10, width - 100)
    bottom = top + row_height * len(rows)
    body = _x_axis(scale, top, bottom, _ticks(domain[0], domain[1], 4))
    for index, (name, value, color) in enumerate(references):
        body += _vline(scale, value, top - 4 - 13 * index, bottom, name, color)
    for index, (name, estimate, low, high, note) in enumerate(rows):
        middle = top + row_height * index + row_height / 2
        body.append(f'<text x="{label_width}" y="{_f(middle + 4)}" text-anchor="end">'
                    f"{svg_label(name)}</text>")
        if low is not None and high is not None:
            body.append(f'<line x1="{_f(scale(low))}" y1="{_f(middle)}" x2="{_f(scale(high))}" '
                        f'y2="{_f(middle)}" stroke="{COLORS["main"]}" stroke-width="2"/>')
        body.append(f'<circle cx="{_f(scale(estimate))}" cy="{_f(middle)}" r="4" '
                    f'fill="{COLORS["main"]}"/>')
        shown = tick_label(round(estimate, 3)) + (f" {note}" if note else "")
        body.append(f'<text x="{width - 92}" y="{_f(middle + 4)}" class="muted">'
                    f"{svg_label(shown, 22)}</text>")
    return _svg(width, height, label, body)


def line_chart(series: list[tuple[str, list[tuple[float, float]], str, bool]],
               x_label: str, y_label: str, label: str, *,
               hlines: Sequence[tuple[str, float]] = (), vlines: Sequence[tuple[str, float]] = (),
               y_min: float = 0.0) -> str:
    """Curves of (name, points, color, dashed) with labelled reference lines."""
    width, height, left, right, top, bottom = 860, 280, 60, 20, 50, 240
    xs = [x for _, points, _, _ in series for x, _ in points] + [v for _, v in vlines]
    ys = [y for _, points, _, _ in series for _, y in points] + [v for _, v in hlines]
    x_scale = _Scale(min(xs), max(xs), left, width - right)
    y_hi = max(ys) * 1.08 if ys and max(ys) > y_min else y_min + 1.0
    y_scale = _Scale(y_min, y_hi, bottom, top)
    body: list[str] = []
    for tick in _ticks(y_min, y_hi, 4):
        y = _f(y_scale(tick))
        body.append(f'<line x1="{left}" y1="{y}" x2="{width - right}" y2="{y}" '
                    f'stroke="{COLORS["grid"]}"/>')
        body.append(f'<text x="{left - 6}" y="{_f(y_scale(tick) + 4)}" text-anchor="end" '
                    f'class="muted">{tick_label(tick)}</text>')
    for tick in _ticks(x_scale.lo, x_scale.hi, 8):
        x = _f(x_scale(tick))
        body.append(f'<text x="{x}" y="{bottom + 14}" text-anchor="middle" class="muted">'
                    f"{tick_label(tick)}</text>")
    body.append(f'<text x="{_f((left + width - right) / 2)}" y="{height - 8}" '
                f'text-anchor="middle" class="muted">{svg_label(x_label, 80)}</text>')
    body.append(f'<text x="{left}" y="14" class="muted">{svg_label(y_label, 80)}</text>')
    for name, value in hlines:
        y = _f(y_scale(value))
        body.append(f'<line x1="{left}" y1="{y}" x2="{width - right}" y2="{y}" '
                    f'stroke="{COLORS["limit"]}" stroke-width="1.5" stroke-dasharray="5 3"/>')
        body.append(f'<text x="{width - right}" y="{_f(y_scale(value) - 4)}" text-anchor="end" '
                    f'fill="{COLORS["limit"]}">{svg_label(name, 60)}</text>')
    for name, value in vlines:
        x = _f(x_scale(value))
        body.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{bottom}" stroke="{COLORS["zero"]}" '
                    'stroke-width="1.5" stroke-dasharray="2 3"/>')
        body.append(f'<text x="{_f(x_scale(value) + 4)}" y="{top + 10}">{svg_label(name, 60)}</text>')
    legend_x = left + 10
    for name, points, color, dashed in series:
        if not points:
            continue
        coords = " ".join(f"{_f(x_scale(x))},{_f(y_scale(y))}" for x, y in points)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        body.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                    f'stroke-width="2"{dash}/>')
        body.append(f'<line x1="{legend_x}" y1="{top - 18}" x2="{legend_x + 22}" y2="{top - 18}" '
                    f'stroke="{color}" stroke-width="2"{dash}/>')
        body.append(f'<text x="{legend_x + 26}" y="{top - 14}">{svg_label(name, 50)}</text>')
        legend_x += 40 + 7 * len(name)
    return _svg(width, height, label, body)


def history_chart(runs: Sequence[tuple[str, float | None, float | None, float | None,
                                       tuple[float, float, float] | None, bool]],
                  label: str) -> str:
    """The release history of one test: a column per run in time order of (run label, canonical
    score, its interval low, high, the format range (min, median, max), the gate failed). The
    canonical score is a dot with its interval as a whisker; the format range a bar from min to
    max with a tick at the median, beside it; a failed run's column is shaded and marked."""
    width, height, left, right, top, bottom = 860, 300, 44, 16, 34, 236
    step = (width - left - right) / max(len(runs), 1)
    y = _Scale(0.0, 1.0, bottom, top)
    body: list[str] = []
    for tick in _ticks(0.0, 1.0, 4):
        body.append(f'<line x1="{left}" y1="{_f(y(tick))}" x2="{width - right}" '
                    f'y2="{_f(y(tick))}" stroke="{COLORS["grid"]}"/>')
        body.append(f'<text x="{left - 6}" y="{_f(y(tick) + 4)}" text-anchor="end" '
                    f'class="muted">{tick_label(tick)}</text>')
    legend = [("canonical score and its interval", COLORS["main"]),
              ("formats min / median / max", COLORS["second"]),
              ("gate failed", COLORS["limit"])]
    legend_x = left
    for name, color in legend:
        body.append(f'<rect x="{legend_x}" y="8" width="10" height="10" fill="{color}"/>')
        body.append(f'<text x="{legend_x + 14}" y="17">{svg_label(name)}</text>')
        legend_x += 30 + 6 * len(name)
    every = max(1, math.ceil(len(runs) / 12))  # at most about 12 run labels under the axis
    for index, (name, score, low, high, formats, failed) in enumerate(runs):
        x0 = left + step * index
        middle = x0 + step / 2
        offset = min(step / 5, 8.0)
        if failed:
            body.append(f'<rect class="failed-run" x="{_f(x0 + 1)}" y="{top}" '
                        f'width="{_f(max(step - 2, 1.0))}" height="{bottom - top}" '
                        f'fill="{COLORS["limit"]}" fill-opacity="0.10"/>')
            body.append(f'<text class="failed-mark" x="{_f(middle)}" y="{top + 11}" '
                        f'text-anchor="middle" fill="{COLORS["limit"]}">\u2715</text>')
        if formats is not None:
            lo, median, hi = formats
            x = _f(middle + offset)
            body.append(f'<line x1="{x}" y1="{_f(y(lo))}" x2="{x}" y2="{_f(y(hi))}" '
                        f'stroke="{COLORS["second"]}" stroke-width="4" stroke-opacity="0.6"/>')
            body.append(f'<line x1="{_f(middle + offset - 5)}" y1="{_f(y(median))}" '
                        f'x2="{_f(middle + offset + 5)}" y2="{_f(y(median))}" '
                        f'stroke="{COLORS["second"]}" stroke-width="2"/>')
        if score is not None:
            x = _f(middle - offset)
            if low is not None and high is not None:
                body.append(f'<line x1="{x}" y1="{_f(y(low))}" x2="{x}" y2="{_f(y(high))}" '
                            f'stroke="{COLORS["main"]}" stroke-width="1.5"/>')
            body.append(f'<circle cx="{x}" cy="{_f(y(score))}" r="3.5" fill="{COLORS["main"]}"/>')
        elif formats is None:
            body.append(f'<text x="{_f(middle)}" y="{_f(bottom - 6)}" text-anchor="middle" '
                        'class="muted">-</text>')
        if index % every == 0:
            body.append(f'<text x="{_f(middle)}" y="{bottom + 14}" text-anchor="middle" '
                        f'class="muted">{svg_label(name, 14)}</text>')
    body.append(f'<text x="{_f((left + width - right) / 2)}" y="{height - 8}" '
                'text-anchor="middle" class="muted">kept runs, oldest first</text>')
    return _svg(width, height, label, body)
