"""The dimensions of a space, their defaults, the listing limits, and how a value is displayed."""

from __future__ import annotations

from typing import Any

FORMAT_DIMENSIONS: tuple[str, ...] = (
    "instruction", "field_marker", "answer_sentinel", "casing", "field_spacing", "enumerator",
    "wrapper", "option_separator", "system_message",
)
"""Dimensions that make up a *format* (all but option order, few-shot and temperature)."""

VALUE_DIMENSIONS: tuple[str, ...] = (*FORMAT_DIMENSIONS, "few_shot", "temperature")
"""Dimensions with a list of values; ``few_shot`` here is the demonstration count."""

KEYS: tuple[str, ...] = (
    "instruction", "field_marker", "answer_sentinel", "casing", "field_spacing", "enumerator",
    "wrapper", "option_separator", "option_order", "few_shot", "system_message", "temperature",
    "canonical",
)
"""The keys of one space in reliable.yaml, in their normalized order."""

DEFAULTS: dict[str, tuple[Any, ...]] = {
    "instruction": (None,),
    "field_marker": ("Question:",),
    "answer_sentinel": ("Answer:",),
    "casing": ("identity",),
    "field_spacing": ("\n",),
    "enumerator": ("upper",),
    "wrapper": ("({})",),
    "option_separator": ("\n",),
    "system_message": (None,),
    "temperature": (0.0,),
}
PERMUTE_LISTED_MAX = 4
"""Up to this many options every permutation is a variant; beyond, permutations are sampled."""
LIST_LIMIT = 2_000_000
"""A space with more (format x count x temperature x order) combinations is sampled, not listed."""


def display_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace(
            "\r", "\\r")
    return str(value)
