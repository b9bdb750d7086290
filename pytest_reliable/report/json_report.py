"""The JSON report of ``--reliable-report PATH.json`` (SPEC section 8)."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_reliable import __version__
from pytest_reliable.files import write_atomic
from pytest_reliable.schema.entries import SCHEMA_VERSION, json_safe

if TYPE_CHECKING:
    from pytest_reliable.schema.entries import Entry


def build_report(
    entries: Sequence[Entry], *, seed: int, model: str | None, space_hash: str | None,
    outcomes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Tests sorted by nodeid, so the report is the same whatever order xdist ran them in.
    ``outcomes``: every test the session ran with pytest's outcome (the report's ``outcomes``,
    left out when None: a report built outside pytest)."""
    tests = sorted(entries, key=lambda e: (str(e.get("nodeid")), str(e.get("kind"))))
    if model is None:
        model = model_of(tests)
    # Entries are JSON-safe already (`results`); `write_report` is where it is enforced.
    report = {
        "schema_version": SCHEMA_VERSION,
        "pytest_reliable_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": seed,
        "model": model,
        "space_hash": space_hash,
        "cost": total_cost(tests),
        "tests": tests,
    }
    if outcomes is not None:
        report["outcomes"] = dict(sorted(outcomes.items()))
    return report


def model_of(entries: Sequence[Entry]) -> str | None:
    """The report's ``model``: the tests' one model, ``mixed`` for several, None for none (a test
    that stopped before it had a model has a null ``model``)."""
    models = models_of(entries)
    return models[0] if len(models) == 1 else ("mixed" if models else None)


def models_of(entries: Sequence[Entry]) -> list[str]:
    """The models the tests ran against, sorted."""
    return sorted({str(name) for e in entries if (name := e.get("model"))})


def total_cost(entries: Sequence[Entry]) -> dict[str, Any]:
    """The ``cost`` of every test added up (an error entry has none). A sum with an unknown
    part (a model without a price: the test's ``usd`` is null) is unknown: null, ``priced``
    false, and ``unpriced_models`` names the models."""
    total: dict[str, Any] = {"usd": 0.0, "prompt_tokens": 0, "completion_tokens": 0,
                             "cached_usd_saved": 0.0, "estimated": False, "priced": True,
                             "unpriced_models": []}
    unknown: set[str] = set()
    unpriced: set[str] = set()
    for entry in entries:
        cost = entry.get("cost")
        if not isinstance(cost, dict):
            continue
        for name in ("usd", "cached_usd_saved"):
            if cost.get(name) is None and cost.get("priced") is False:
                unknown.add(name)
        for name in ("usd", "prompt_tokens", "completion_tokens", "cached_usd_saved"):
            total[name] += cost.get(name) or 0
        total["estimated"] = bool(total["estimated"] or cost.get("estimated"))
        unpriced.update(str(m) for m in cost.get("unpriced_models") or ())
    for name in ("usd", "cached_usd_saved"):
        total[name] = None if name in unknown else round(total[name], 6)
    total["priced"] = not unpriced
    total["unpriced_models"] = sorted(unpriced)
    return total


def write_report(report: dict[str, Any], path: str | Path) -> None:
    """Atomically: a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    safe = json_safe(report)
    text = json.dumps(safe, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # A model answered a lone surrogate, which UTF-8 cannot hold: escape it (valid JSON).
        data = (json.dumps(safe, indent=2, allow_nan=False, ensure_ascii=True) + "\n").encode()
    write_atomic(target, data)
