"""What a space declares, validated from a mapping (reliable.yaml or code) with errors that name
the file, the key path, the line and the fix. `Space` (core.py) is built from a `Declaration`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.space.dimensions import (
    DEFAULTS,
    FORMAT_DIMENSIONS,
    KEYS,
    VALUE_DIMENSIONS,
    display_value,
)
from pytest_reliable.space.labels import CASINGS, ENUMERATORS
from pytest_reliable.space.variant import Variant, violations

_NULLABLE = {"instruction", "system_message"}
_STRING_DIMS = {"instruction", "field_marker", "answer_sentinel", "field_spacing", "wrapper",
                "option_separator", "system_message"}

_FIX = {
    "instruction": "give a list of instruction strings (null = the task's default instruction)",
    "field_marker": 'give a list of strings, e.g. ["Question:", "Q:", ""]',
    "answer_sentinel": 'give a list of strings, e.g. ["Answer:", ""]',
    "casing": "use values among " + ", ".join(CASINGS),
    "field_spacing": 'give a list of strings, e.g. ["\\n", "\\n\\n"]',
    "enumerator": "use values among " + ", ".join(ENUMERATORS),
    "wrapper": 'give format strings with exactly one {}, e.g. ["({})", "{}.", "[{}]"]',
    "option_separator": 'give a list of strings, e.g. ["\\n", "; ", " | "]',
    "option_order": "write permute or fixed",
    "few_shot": "write e.g. {count: [0, 3], pool: 10, order: shuffle}",
    "system_message": 'give a list of strings or null, e.g. [null, "You are a careful assistant."]',
    "temperature": "give a list of numbers, e.g. [0.0, 0.7]",
    "canonical": "give a mapping of dimension -> one of its listed values, e.g. {enumerator: upper}",
}


class _Where:
    def __init__(self, source: str | None, lines: Mapping[str, int], prefix: str) -> None:
        self.source, self.lines, self.prefix = source, lines, prefix

    def path(self, *parts: str | int) -> str:
        out = self.prefix
        for part in parts:
            out += f"[{part}]" if isinstance(part, int) else f".{part}"
        return out

    def error(self, path: str, problem: str, fix: str) -> ReliableConfigError:
        line = self.lines.get(path)
        while line is None and ("." in path or "[" in path):
            path_up = path.rsplit("[", 1)[0] if path.endswith("]") else path.rsplit(".", 1)[0]
            if path_up == path:
                break
            path = path_up
            line = self.lines.get(path)
        where = self.source or "space declared in code"
        if line is not None:
            where += f", line {line}"
        return ReliableConfigError(f"{where}: {problem}. Fix: {fix}.")


@dataclass(frozen=True)
class FewShot:
    """Few-shot settings: demonstration counts (a dimension), pool size and demo order."""

    count: tuple[int, ...] = (0,)
    pool: int = 10
    order: str = "shuffle"


@dataclass(frozen=True)
class Declaration:
    """One space as declared, validated, with every default filled in."""

    name: str
    values: Mapping[str, tuple[Any, ...]]
    """Every value dimension but ``few_shot`` -> its values (``few_shot.count`` holds those)."""
    option_order: str
    few_shot: FewShot
    canonical: Mapping[str, Any]
    """The dimensions whose canonical value is not their first, -> that value."""
    source: str | None = None

    def canonical_values(self) -> dict[str, Any]:
        """The canonical value of every value dimension: the first unless ``canonical:`` says."""
        first = {**{d: v[0] for d, v in self.values.items()}, "few_shot": self.few_shot.count[0]}
        return {d: self.canonical.get(d, first[d]) for d in VALUE_DIMENSIONS}

    def canonical_variant(self) -> Variant:
        """The canonical values in the original option order."""
        c = self.canonical_values()
        return Variant(**{d: c[d] for d in FORMAT_DIMENSIONS}, few_shot=int(c["few_shot"]),
                       temperature=float(c["temperature"]), order=None)


def declare(name: str, mapping: Mapping[str, Any] | None, *, source: str | None,
            lines: Mapping[str, int], prefix: str) -> Declaration:
    """The validated declaration of space ``name`` (what `Space.from_mapping` is built from)."""
    where = _Where(source, lines, prefix)
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise where.error(prefix, f"{prefix} must be a mapping of dimension -> values, got "
                          f"{type(mapping).__name__}", "write e.g. `enumerator: [upper, number]`")
    for key in mapping:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"did you mean `{close[0]}`? " if close else ""
            raise where.error(where.path(str(key)), f"{where.path(str(key))}: unknown key "
                              f"{key!r}", f"{hint}allowed keys are " + ", ".join(KEYS))
    values: dict[str, tuple[Any, ...]] = {}
    for dim, default in DEFAULTS.items():
        values[dim] = _value_list(dim, mapping[dim], where) if dim in mapping else default
    option_order = mapping.get("option_order", "fixed")
    if option_order not in ("permute", "fixed"):
        path = where.path("option_order")
        raise where.error(path, f"{path}: {option_order!r} is not an option order", _FIX["option_order"])
    few_shot = _few_shot(mapping.get("few_shot"), where)
    canonical = _canonical(mapping.get("canonical"), {**values, "few_shot": few_shot.count}, where)
    declared = Declaration(name, values, str(option_order), few_shot, canonical, source)
    problems = violations(declared.canonical_variant(), values["casing"])
    if problems:
        path = where.path("canonical")
        raise where.error(path, f"{prefix}: the canonical variant is invalid ({'; '.join(problems)})",
                          "change the first values or `canonical:` so that they obey the rule")
    return declared


def _value_list(dim: str, raw: Any, where: _Where) -> tuple[Any, ...]:
    path = where.path(dim)
    if raw is None and dim in _NULLABLE:
        raw = [None]
    if not isinstance(raw, list | tuple):
        if isinstance(raw, Mapping):
            raise where.error(path, f"{path}: expected a list of values, got a mapping",
                              _FIX[dim])
        raw = [raw]
    if len(raw) == 0:
        raise where.error(path, f"{path}: the value list is empty", _FIX[dim]
                          + " (leave the key out for its default)")
    out: list[Any] = []
    for i, value in enumerate(raw):
        item = where.path(dim, i)
        out.append(_check_value(dim, value, item, where))
    seen: list[Any] = []
    for i, value in enumerate(out):
        if value in seen:
            item = where.path(dim, i)
            raise where.error(item, f"{item}: duplicate value {display_value(value)!r}",
                              "list each value once")
        seen.append(value)
    return tuple(out)


def _check_value(dim: str, value: Any, path: str, where: _Where) -> Any:
    if value is None and dim in _NULLABLE:
        return None
    if dim == "temperature":
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                -1 < value < 3 and 0.0 <= float(value) <= 2.0):  # a 400-digit int: no float
            raise where.error(path, f"{path}: {value!r} is not a temperature", _FIX[dim]
                              + " between 0 and 2")
        return float(value)
    if dim in _STRING_DIMS:
        if not isinstance(value, str):
            raise where.error(path, f"{path}: {value!r} is a {type(value).__name__}, not a string",
                              _FIX[dim] + ' (quote it, e.g. "' + str(value) + '")')
        if dim == "wrapper" and value.count("{}") != 1:
            raise where.error(path, f"{path}: wrapper {value!r} must contain exactly one {{}}",
                              _FIX[dim])
        if dim == "wrapper":
            try:
                value.format("A")
            except (IndexError, KeyError, ValueError):
                raise where.error(path, f"{path}: wrapper {value!r} is not a format string",
                                  _FIX[dim] + " (write {{ and }} for literal braces)") from None
        if dim == "instruction" and not value.strip():
            raise where.error(path, f"{path}: an instruction may not be empty", _FIX[dim])
        return value
    allowed = ENUMERATORS if dim == "enumerator" else CASINGS
    if not isinstance(value, str) or value not in allowed:
        close = difflib.get_close_matches(str(value), allowed, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise where.error(path, f"{path}: unknown {dim} {value!r}", hint + _FIX[dim])
    return value


def _few_shot(raw: Any, where: _Where) -> FewShot:
    path = where.path("few_shot")
    if raw is None:
        return FewShot()
    if not isinstance(raw, Mapping):
        raise where.error(path, f"{path}: expected a mapping", _FIX["few_shot"])
    for key in raw:
        if key not in ("count", "pool", "order"):
            raise where.error(where.path("few_shot", str(key)),
                              f"{where.path('few_shot', str(key))}: unknown key {key!r}",
                              "few_shot takes count, pool and order")
    counts_raw = raw.get("count", [0])
    if not isinstance(counts_raw, list | tuple):
        counts_raw = [counts_raw]
    cpath = where.path("few_shot", "count")
    if not counts_raw:
        raise where.error(cpath, f"{cpath}: the value list is empty", "e.g. count: [0, 3]")
    counts: list[int] = []
    for i, c in enumerate(counts_raw):
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            ipath = where.path("few_shot", "count", i)
            raise where.error(ipath, f"{ipath}: {c!r} is not a count", "use integers >= 0")
        if c in counts:
            ipath = where.path("few_shot", "count", i)
            raise where.error(ipath, f"{ipath}: duplicate value {c}", "list each value once")
        counts.append(int(c))
    pool = raw.get("pool", max(10, max(counts)))
    ppath = where.path("few_shot", "pool")
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < max(counts):
        raise where.error(ppath, f"{ppath}: {pool!r} is not a pool size of at least "
                          f"{max(counts)} (the largest count)", "use an integer >= every count")
    order = raw.get("order", "shuffle")
    if order not in ("shuffle", "fixed"):
        opath = where.path("few_shot", "order")
        raise where.error(opath, f"{opath}: {order!r} is not a demonstration order",
                          "write shuffle or fixed")
    return FewShot(tuple(counts), int(pool), str(order))


def _canonical(raw: Any, values: Mapping[str, tuple[Any, ...]], where: _Where) -> dict[str, Any]:
    path = where.path("canonical")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise where.error(path, f"{path}: expected a mapping", _FIX["canonical"])
    out = {}
    for dim, value in raw.items():
        dpath = where.path("canonical", str(dim))
        if dim not in values:
            raise where.error(dpath, f"{dpath}: {dim!r} is not a dimension with values",
                              "use one of " + ", ".join(VALUE_DIMENSIONS))
        if dim == "temperature" and isinstance(value, int | float) and not isinstance(value, bool):
            value = float(value)
        if value not in values[dim]:
            listed = ", ".join(display_value(v) for v in values[dim])
            raise where.error(dpath, f"{dpath}: {display_value(value)!r} is not among the listed "
                              f"values of {dim} ({listed})", f"pick one of: {listed}, or add it "
                              f"to `{dim}`")
        out[str(dim)] = value
    return out

