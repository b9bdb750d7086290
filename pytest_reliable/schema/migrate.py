"""Bringing a saved report up to the shape this version writes (`upgrade_report`), so the viewers
(terminal, HTML, Markdown, ``merge``, ``history``) and a stored baseline read complete entries.

As inspect_ai's log reader does, a report runs through a chain of upgrades keyed by its
``schema_version``: ``UPGRADES[v]`` takes a report of version ``v`` (as any release that wrote
``v`` wrote it) to the next version, or for the current version to what this release writes.

Version 1 is the only version so far, and its field set grew without a bump (``schema_version``
stays 1 in every report: users and the acceptance tests read it). Its upgrade therefore
completes it: every field of an entry's kind (`ReliableEntry`, `ChecklistEntry`) and of the
objects inside it (``canonical``, the ranges and their groups, ``worst_variant``, ``calls``,
``cost``) that the report lacks gets the default `ADDED_DEFAULTS` documents for it
(the fields added since the entry shape was first declared, what a report written before each
meant), else null as `entries.error_entry` fills an entry it knows nothing of (SPEC section 8:
every field present, null where unknown), but for the fields ``merge`` decides on
(`DECIDED_ON`). Top-level fields stay as written: a missing
``outcomes`` means "written before pytest's outcomes were kept", which ``merge`` reads.

A field present is never changed, so a report this version wrote reads back identical.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pytest_reliable.schema.entries import (
    CanonicalEntry,
    ChecklistEntry,
    CostEntry,
    GroupEntry,
    RangeEntry,
    ReliableEntry,
    UnknownRangeEntry,
    WorstVariantEntry,
    _CallsRequired,
)

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]

ADDED_DEFAULTS: dict[str, Any] = {
    # ReliableEntry / ChecklistEntry
    "model_cache": "store",      # before callables could be cached per run, every answer was
    "search": "uniform",         # before search="adaptive"/"thompson"
    "notes": [],
    "failures": [],
    "interval": [None, None],
    # CostEntry (a report written before pricing has ``cost`` null: not known)
    "unpriced_models": [],
}
"""What a missing field reads as where null would say less than is known (what every report
before the field meant) or would not fit its type (a list); every other missing field reads
null. (``pass_criterion``: `PASS_CRITERION_V1` where the entry has pass@k.)"""
DECIDED_ON = frozenset({"nodeid", "kind", "verdict", "outcome", "thresholds"})
"""Fields never filled: ``merge`` decides on them and refuses an entry without one ("verdict is
absent"), so a viewer reads them as it finds them."""
PASS_CRITERION_V1 = "score == 1 (full credit)"
"""The only pass criterion a version-1 report has had (`verdict.summary.PASS_CRITERION`)."""


def upgrade_report(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a checked report of a version in `UPGRADES`) in this version's shape."""
    for version in sorted(v for v in UPGRADES if v >= data["schema_version"]):
        data = UPGRADES[version](data)
    return data


def _complete_version_1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "tests": [complete_entry(entry) for entry in data["tests"]]}


UPGRADES: dict[int, Upgrade] = {1: _complete_version_1}
"""``schema_version`` -> its upgrade (see the module docstring)."""


def complete_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One test's entry with every field of its kind (missing ones: `ADDED_DEFAULTS` or null),
    but for `DECIDED_ON`."""
    reliable = entry.get("kind", "reliable") not in ("invariance", "directional", "mft")
    done = _complete(entry, ReliableEntry if reliable else ChecklistEntry)
    if reliable:
        if done["pass_criterion"] is None and done["pass_at_1"] is not None:
            done["pass_criterion"] = PASS_CRITERION_V1
        canonical = done["canonical"]
        done["canonical"] = _complete(canonical, CanonicalEntry) if canonical is None \
            or isinstance(canonical, Mapping) else canonical
        done["formats"] = _range(done["formats"])
        done["orders"] = _range(done["orders"])
        if isinstance(done["worst_variant"], Mapping):
            done["worst_variant"] = _complete(done["worst_variant"], WorstVariantEntry)
    if done["calls"] is None or isinstance(done["calls"], Mapping):
        done["calls"] = _complete(done["calls"], _CallsRequired)
    if isinstance(done["cost"], Mapping):
        done["cost"] = _complete(done["cost"], CostEntry)
    return done


def _range(value: Any) -> Any:
    """A range with every field: a range with numbers as `RangeEntry`, one without (the test's
    calls did not complete) as `UnknownRangeEntry`; its groups as `GroupEntry`."""
    if value is not None and not isinstance(value, Mapping):
        return value
    shape = RangeEntry if isinstance(value, Mapping) and value.get("min") is not None \
        else UnknownRangeEntry
    done = _complete(value, shape)
    groups = done["per_variant"]
    if groups is None:
        done["per_variant"] = {}
    elif isinstance(groups, Mapping):
        done["per_variant"] = {key: _complete(group, GroupEntry) if isinstance(group, Mapping)
                               else group for key, group in groups.items()}
    return done


def _complete(value: Mapping[str, Any] | None, shape: type) -> dict[str, Any]:
    """``value`` (its keys in their order, a field of another version too; None: no keys) with
    each key ``shape`` (a TypedDict) declares and it lacks added at the end, but `DECIDED_ON`."""
    done = dict(value or {})
    for key in shape.__annotations__:
        if key not in done and key not in DECIDED_ON:
            done[key] = _default(key)
    return done


def _default(key: str) -> Any:
    default = ADDED_DEFAULTS.get(key)
    return list(default) if isinstance(default, list) else default
