"""The report page's other sections of one test (`report.html`): the facts, thresholds and why a
test blocks, the worst variant, the judge, pairwise and exploration sections, and the bodies of a
reliable and a CheckList test (which take the drawn sections from `report.html_charts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_reliable.report.charts import COLORS, interval_chart, tick_label
from pytest_reliable.report.format import RATE_NAMES
from pytest_reliable.report.html_charts import (
    baseline_section,
    dimensions_section,
    distributions_section,
    groups_section,
    n_star_section,
)
from pytest_reliable.report.html_text import (
    LONG_TEXT_CHARS,
    NOT_REPORTED,
    _checks,
    _facts,
    _int,
    _interval,
    _is_num,
    _kind,
    _mapping,
    _num,
    _table,
    _text,
    _threshold_passed,
    _word,
)


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


def worst_variant_section(entry: Mapping[str, Any]) -> str:
    worst = entry["worst_variant"]
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
    message = entry["message"]
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
    canonical = _mapping(entry["canonical"])
    calls = _mapping(entry["calls"])
    method = canonical.get("interval_method")
    return _facts([
        ("model", _word(entry["model"])),
        ("mode / resamplings", f"{_word(entry['mode'])} / {_int(entry['n_resamplings'])}"),
        ("mean &plusmn; sd", f"{_num(entry['mean'])} &plusmn; {_num(entry['std'])}"),
        ("canonical", _num(canonical.get("score"))
         + _interval(canonical.get("wilson_low"), canonical.get("wilson_high"))
         + (f" ({_text(method, 60)})" if method else " (Wilson 95%)"
            if _is_num(canonical.get("wilson_low")) else "")),
        ("pass@1 / pass@k / pass^k / maj@k", " / ".join(_num(entry.get(k)) for k in (
            "pass_at_1", "pass_at_k", "pass_hat_k", "maj_at_k")) + f" (k = {_int(entry['k'])})"),
        *([("circular (right under every shift)", _num(_mapping(entry["circular"]).get(
            "score")) + _interval(_mapping(entry["circular"]).get("low"),
                                  _mapping(entry["circular"]).get("high")))]
          if entry["circular"] else []),
        ("policy", _word(entry["decide"])),
        ("calls made / cached", f"{_int(calls.get('made'))} / {_int(calls.get('cached'))}"),
        ("spend (USD)", _spend(entry["cost"])),
        ("unparsed answers", _int(entry["unparsed"])),
        ("temperature", _word(entry["temperature"])),
        ("space / hash", (f"{_word(entry['space'])} / "
                         f"{_word(str(entry['space_hash'])[:12] if entry['space_hash'] else None)}")),
        ("dataset hash", _word(str(entry["dataset_hash"])[:12]
                               if entry["dataset_hash"] else None)),
    ])


def exploration_section(entry: Mapping[str, Any]) -> str:
    """``search="thompson"``'s exploration (SPEC section 14): shown as exploration, never as a
    verdict."""
    found = _mapping(entry["exploration"])
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
    judge = _mapping(entry["judge"])
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
    pairwise = _mapping(entry["pairwise"])
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
        groups_section("Formats", entry["formats"]),
        exploration_section(entry),
        groups_section("Orders", entry["orders"]),
        dimensions_section(entry),
        n_star_section(entry),
        baseline_section(entry),
        worst_variant_section(entry),
        message_section(entry),  # last: it repeats the above as the terminal printed it
    ])


def checklist_body(entry: Mapping[str, Any]) -> str:
    rate_name = RATE_NAMES.get(_kind(entry), "rate")
    interval = entry["interval"]
    low, high = (interval[0], interval[1]) if isinstance(interval, list) and len(
        interval) == 2 else (None, None)
    calls = _mapping(entry["calls"])
    parts = [_facts([
        ("model", _word(entry["model"])),
        (rate_name, _num(entry["rate"]) + _interval(low, high)),
        ("pairs / examples", _int(entry["pairs"])),
        ("unparsed predictions", _int(entry["unparsed"])),
        ("calls made / cached", f"{_int(calls.get('made'))} / {_int(calls.get('cached'))}"),
    ])]
    if _is_num(entry["rate"]):
        ok_low, ok_high = (float(low), float(high)) if _is_num(low) and _is_num(high) else (
            None, None)
        references = [(f"{c.get('name')} {tick_label(float(c['limit']))}", float(c["limit"]),
                       COLORS["limit"]) for c in _checks(entry)
                      if _is_num(c.get("limit")) and 0 <= c["limit"] <= 1]
        parts.append(interval_chart([(rate_name, float(entry["rate"]), ok_low, ok_high, "")],
                                    f"{rate_name} with its interval", references=references))
    parts += ["<h3>Thresholds</h3>", thresholds_table(entry), message_section(entry)]
    failures = entry["failures"]
    if isinstance(failures, list) and failures:
        rows = [[_text(f.get(k, ""), 1000) for k in ("original", "perturbed", "before", "after")]
                for f in failures if isinstance(f, Mapping)]
        parts += [f"<h3>Failing cases (first {len(rows)})</h3>",
                  _table(["original", "perturbed", "prediction before", "prediction after"],
                         rows, text=(0, 1, 2, 3))]
    return "".join(parts)
