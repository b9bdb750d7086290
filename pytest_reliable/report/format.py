"""Cell formatting shared by the terminal and Markdown tables (None-safe everywhere)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

MISSING = "-"


def num(value: Any, digits: int = 2) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING
    return f"{value:.{digits}f}"


def get(entry: Mapping[str, Any], *path: str) -> Any:
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


def _common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def _common_suffix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a[::-1], b[::-1]]))


MIN_HEAD = 4
"""Characters of a cut name kept before the "..." (the test function's first letters)."""


def fit_name(name: str, width: int, others: Sequence[str] = ()) -> str:
    """``name`` in ``width`` characters, told apart from ``others`` (the table's other names).

    Parametrized tests share everything but their parameter ids, which sit at the end, so a
    cut keeps the tail that distinguishes the name: the parameter id whole when it fits, at
    least the characters from the end to the last one that differs from every other name. When
    only the middle tells names apart, the part around the difference is shown."""
    if len(name) <= width or width < 2 * MIN_HEAD + 3:
        return middle_truncate(name, width)
    keep = width - 3
    rest = [other for other in others if other != name]
    prefix = max((_common_prefix(name, other) for other in rest), default=0)
    suffix = max((_common_suffix(name, other) for other in rest), default=0)
    bracket = name.rfind("[")
    parameter = len(name) - bracket if bracket > 0 and name.endswith("]") else 0
    tail = min(keep - MIN_HEAD, max(keep - keep // 2, parameter, suffix + 1 if rest else 0))
    head = keep - tail
    if not rest or prefix < head or suffix < tail:
        return name[:head] + "..." + name[len(name) - tail:]
    # The names differ only in the middle: show the window from just before the difference.
    start = min(max(0, prefix - MIN_HEAD), len(name) - (width - 6))
    return "..." + name[start:start + width - 6] + "..."


def fit_names(names: Sequence[str], width: int) -> list[str]:
    """Each of ``names`` in ``width`` characters (`fit_name`), distinct where they were."""
    return [fit_name(name, width, names) for name in names]


def spread_cell(group: Any) -> str:
    """min/median/max of a range summary."""
    if not isinstance(group, dict):
        return MISSING
    return "/".join(num(group.get(key)) for key in ("min", "median", "max"))


def interval_cell(score: Any, low: Any, high: Any) -> str:
    if score is None:
        return MISSING
    return f"{num(score)} [{num(low)}, {num(high)}]"


def n_star_cell(entry: Mapping[str, Any]) -> str:
    n_star = entry["n_star"]
    if n_star is None:
        return MISSING
    return f"{n_star}!" if entry["n_star_reliable"] is False else str(n_star)


# -- pytest's outcome beside the gate's verdict: the reports agree with the run's exit code --------
NOT_BLOCKING = frozenset({"passed", "xfailed", "xpassed", "skipped"})
"""pytest outcomes that do not fail the run (an expected failure is expected)."""
OUTCOME_NOTES = {"xfailed": "expected failure", "xpassed": "unexpected pass",
                 "failed": "test failed", "error": "test error", "skipped": "skipped"}


def blocks_release(entry: Mapping[str, Any]) -> bool:
    """Whether the test fails the run as pytest counted it (its ``outcome``); an entry without
    one (a report from a script or an earlier version) blocks unless its verdict passed."""
    outcome = entry.get("outcome")
    if isinstance(outcome, str) and outcome in OUTCOME_NOTES.keys() | NOT_BLOCKING:
        return outcome not in NOT_BLOCKING
    return entry.get("verdict") != "passed"


def verdict_text(entry: Mapping[str, Any]) -> str:
    """The gate's verdict, with pytest's outcome when it says more: ``failed (expected
    failure)`` for a strict xfail, ``passed (test failed)`` when the test's own assert failed."""
    verdict = MISSING if entry.get("verdict") is None else str(entry.get("verdict"))
    outcome = entry.get("outcome")
    if outcome == verdict or outcome not in OUTCOME_NOTES:
        return verdict
    return f"{verdict} ({OUTCOME_NOTES[str(outcome)]})"


def stopped_before_report(entry: Mapping[str, Any]) -> bool:
    """A test that stopped before it had a report (`entries.error_entry`): no calls counted."""
    return entry.get("verdict") == "error" and get(entry, "calls", "made") is None


class Column(NamedTuple):
    """One summary-table column (after the test name): header, the cell of one JSON entry, and
    ``keep``: stays at any terminal width (the others are dropped, last first, to fit)."""

    header: str
    cell: Callable[[Mapping[str, Any]], str]
    keep: bool = False


def _mean_cell(entry: Mapping[str, Any]) -> str:
    mean, std = entry["mean"], entry["std"]
    return MISSING if mean is None else f"{num(mean)}±{num(std)}"


def _passes_cell(entry: Mapping[str, Any]) -> str:
    passes = "/".join(num(entry[key]) for key in ("pass_at_1", "pass_at_k", "pass_hat_k"))
    return f"{passes} (k={entry['k'] or 1})"


def _calls_cell(entry: Mapping[str, Any]) -> str:
    calls = entry["calls"] or {}
    return f"{calls.get('made', 0)}/{calls.get('cached', 0)}"


BASELINE_COLUMN = "cand-base [CI]"
SPEND_COLUMN = "spend $"


def usd(value: Any) -> str:
    """Dollars to the hundredth of a cent (a gate's calls often cost fractions of a cent)."""
    return num(value, 4)


def spend_cell(entry: Mapping[str, Any]) -> str:
    """What the test's calls cost (SPEC section 13), ``~`` when tokens were estimated."""
    cost = entry["cost"]
    if not isinstance(cost, dict):
        return MISSING
    return ("~" if cost.get("estimated") else "") + usd(cost.get("usd"))


def has_spend(entries: Iterable[Mapping[str, Any]]) -> bool:
    """Some test cost or saved money (a price table was given): then the reports show spend."""
    return any(isinstance(e["cost"], dict)
               and (e["cost"].get("usd") or e["cost"].get("cached_usd_saved")) for e in entries)


def spend_note(cost: Any) -> str | None:
    """The run's spend in one line (the JSON report's top-level ``cost``), None when nothing
    was spent or saved."""
    if not isinstance(cost, dict) or not (cost.get("usd") or cost.get("cached_usd_saved")):
        return None
    estimated = "; estimated: some models report no usage" if cost.get("estimated") else ""
    return (f"spend: ${usd(cost.get('usd'))} ({cost.get('prompt_tokens', 0)} prompt + "
            f"{cost.get('completion_tokens', 0)} completion tokens paid); the cache saved "
            f"${usd(cost.get('cached_usd_saved'))}{estimated}")


def baseline_cell(entry: Mapping[str, Any]) -> str:
    """Candidate - baseline with its interval (SPEC section 9)."""
    difference = get(entry, "baseline", "difference")
    if not isinstance(difference, dict) or difference.get("estimate") is None:
        return MISSING
    return (f"{difference['estimate']:+.2f} [{num(difference.get('low'))}, "
            f"{num(difference.get('high'))}]")



WIN_RATE_COLUMN = "win rate [CI]"


def win_rate_cell(entry: Mapping[str, Any]) -> str:
    """A pairwise judge's win rate of the candidate over its baseline (SPEC section 12)."""
    win_rate = get(entry, "pairwise", "win_rate")
    if not isinstance(win_rate, dict) or win_rate.get("estimate") is None:
        return MISSING
    return interval_cell(win_rate["estimate"], win_rate.get("low"), win_rate.get("high"))


def _canonical_cell(entry: Mapping[str, Any], level_shown: bool = False) -> str:
    cell = interval_cell(get(entry, "canonical", "score"), get(entry, "canonical", "wilson_low"),
                         get(entry, "canonical", "wilson_high"))
    if level_shown and isinstance(entry["confidence"], float) and cell != MISSING:
        cell += f" {_percent(entry['confidence'])}"
    return cell


def _percent(level: float) -> str:
    return f"{100 * level:.4g}%"


def reliable_columns(entries: Sequence[Mapping[str, Any]],
                     columns: list[Column] | None = None) -> list[Column]:
    """``columns`` (default RELIABLE_COLUMNS) with the canonical interval's level in its header:
    the tests' confidence when they share one, else "CI" and each cell names its own level."""
    levels = {entry["confidence"] for entry in entries}
    level = levels.pop() if len(levels) == 1 else None
    if isinstance(level, float):
        canonical = Column(f"canonical [{_percent(level)} CI]", _canonical_cell, keep=True)
    else:
        canonical = Column("canonical [CI]", lambda e: _canonical_cell(e, True), keep=True)
    chosen = [canonical if c.header == "canonical [95% CI]" else c
              for c in (RELIABLE_COLUMNS if columns is None else columns)]
    if any(entry["baseline"] for entry in entries):
        # The candidate - baseline column, before the verdict, only when some test compares.
        chosen.insert(len(chosen) - 1, Column(BASELINE_COLUMN, baseline_cell, keep=True))
    if any(entry["pairwise"] for entry in entries):
        # A pairwise judge's win rate, before the verdict, only when some test has one.
        chosen.insert(len(chosen) - 1, Column(WIN_RATE_COLUMN, win_rate_cell, keep=True))
    if has_spend(entries) and not any(c.header == SPEND_COLUMN for c in chosen):
        chosen.insert(len(chosen) - 1, Column(SPEND_COLUMN, spend_cell))
    return chosen


def _text_cell(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda entry: MISSING if entry.get(key) is None else str(entry.get(key))


RELIABLE_COLUMNS: list[Column] = [
    Column("n", _text_cell("n_resamplings")),
    Column("mode", _text_cell("mode")),
    Column("mean±sd", _mean_cell, keep=True),
    Column("canonical [95% CI]", lambda e: _canonical_cell(e), keep=True),
    Column("formats min/med/max", lambda e: spread_cell(e["formats"]), keep=True),
    Column("orders min/med/max", lambda e: spread_cell(e["orders"])),
    Column("pass@1/@k/^k", _passes_cell),
    Column("n*", n_star_cell),
    Column("calls new/cached", _calls_cell),
    Column("verdict", verdict_text, keep=True),
]
"""The `reliable` table's columns; add one here (or with the pytest_reliable_table_columns hook)."""
NARROW = {"formats min/med/max": Column("worst format", lambda e: num(get(e, "formats", "min")),
                                         keep=True)}
"""Narrower stand-ins for kept columns when the terminal is narrow even without the others."""
RATE_NAMES = {"invariance": "flip rate", "directional": "fail rate", "mft": "pass rate"}
CHECKLIST_COLUMNS: list[Column] = [
    Column("kind", _text_cell("kind"), keep=True),
    Column("rate [CI]", lambda e: f"{RATE_NAMES.get(str(e.get('kind')), 'rate')} " + interval_cell(
        e["rate"], *((e["interval"] or [None, None])[:2])), keep=True),
    Column("pairs", _text_cell("pairs")),
    Column("unparsed", _text_cell("unparsed")),
    Column("calls new/cached", _calls_cell),
    Column("verdict", verdict_text, keep=True),
]


def row(entry: Mapping[str, Any], name: str, columns: list[Column]) -> list[str]:
    return [name, *(str(column.cell(entry)) for column in columns)]


def header(columns: list[Column]) -> list[str]:
    return ["test", *(column.header for column in columns)]


def checklist_row(entry: Mapping[str, Any], name: str) -> list[str]:
    return row(entry, name, CHECKLIST_COLUMNS)


CHECKLIST_HEADER = header(CHECKLIST_COLUMNS)


SMALL_PILOT = 30
"""A bootstrap pilot smaller than this is flagged: it often misses a rare failure mode
(`stats.MIN_BOOTSTRAP_PILOT`, repeated here: the viewers do not import numpy)."""
SMALL_PILOT_MEASURED = ("a pilot of 10 kept the mean within eps in 0.74 of runs where 0.90 was "
                        "promised")
"""benchmarks/bench_small_samples.py --n-star-only, 200 pilots each (eps 0.02, delta 0.1, a format
collapsing 4% of the time): pilot 10: 0.738 +- 0.016, 30: 0.883 +- 0.014, 100: 0.993 +- 0.004."""


def small_pilot_note(entry: Mapping[str, Any]) -> str | None:
    """Why a bootstrap n* from a pilot under `SMALL_PILOT` resamplings is not reliable (SPEC 7:
    ``n_star_reliable`` is false): a small pilot may see no rarely failing format, so its n* is
    small and the runs it sizes miss that format's share of the mean. A stored n* keeps its
    pilot's size, so a later run reading it says the same. None for other entries."""
    if entry.get("kind") != "reliable":
        return None
    pilot = entry["pilot_n"]
    if (entry["n_star_method"] != "bootstrap" or entry["n_star_source"] not in ("pilot", "store")
            or not isinstance(pilot, int) or isinstance(pilot, bool) or pilot >= SMALL_PILOT):
        return None
    return (f"n* = {entry['n_star']} from a bootstrap pilot of {pilot} resamplings: a pilot "
            f"under {SMALL_PILOT} can miss a rare failure mode (a format that seldom collapses), "
            f"and n* then runs too few resamplings (measured: {SMALL_PILOT_MEASURED}); raise "
            "--reliable-pilot-n")


def not_reliable_notes(entries: Sequence[Mapping[str, Any]], names: dict[str, str]) -> list[str]:
    notes = []
    for entry in entries:
        small = small_pilot_note(entry)
        if small is not None:
            notes.append(f"! {names.get(entry.get('nodeid', ''), entry.get('nodeid'))}: {small}")
        if entry.get("kind") == "reliable" and entry["n_star_reliable"] is False:
            if entry["n_star_method"] == "bootstrap":
                if small is not None and not _beyond_run(entry):
                    continue  # the small pilot is the reason, said above
                notes.append(
                    f"! {names.get(entry.get('nodeid', ''), entry.get('nodeid'))}: n* = "
                    f"{entry['n_star']} is beyond the cap (--reliable-n-max): ran "
                    f"{entry['n_resamplings']}, not reliable at (eps={entry['eps']}, "
                    f"delta={entry['delta']}); they vouch for "
                    f"eps={num(entry['achievable_eps'], 4)}"
                )
                continue
            notes.append(
                f"! {names.get(entry.get('nodeid', ''), entry.get('nodeid'))}: n* = "
                f"{entry['n_star']} is all the resamplings there were: not reliable at "
                f"(eps={entry['eps']}, delta={entry['delta']}); they vouch for "
                f"eps={num(entry['achievable_eps'], 4)}"
            )
    return notes


def _beyond_run(entry: Mapping[str, Any]) -> bool:
    """n* above the resamplings that ran: the cap (``--reliable-n-max``) stopped the run."""
    n_star, ran = entry["n_star"], entry["n_resamplings"]
    return isinstance(n_star, int) and isinstance(ran, int) and n_star > ran


def reliable_notes(entries: Sequence[Mapping[str, Any]], names: dict[str, str]) -> list[str]:
    """Notes under the table: n* not reliable, then each test's own notes (k at temperature 0,
    decide='estimate', ...)."""
    notes = not_reliable_notes(entries, names)
    for entry in entries:
        name = names.get(entry.get("nodeid", ""), entry.get("nodeid"))
        notes += [f"! {name}: {note}" for note in entry["notes"] or []]
    return notes


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (a model can answer one; UTF-8 cannot hold it) as U+FFFD."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences, other control characters as U+FFFD (newlines
    and tabs kept): what a page may show of a model's answer."""
    return _CONTROL.sub("\ufffd", _ANSI.sub("", text))
