"""The pre-registered perturbation space: dimensions, values, validity rules, hash, YAML, lock.

A `Space` lists, per dimension, the values a prompt format may take (SPEC section 3). A `Variant`
is one value per dimension plus an option-order permutation. Validity rules (after FormatSpread):

- R1: if ``field_spacing`` has no newline, neither ``option_separator`` nor ``field_marker`` nor
  ``answer_sentinel`` may contain one.
- R2: an enumerator must have a label for every option: ``unicode_roman`` only up to 12 options
  (also ``greek`` up to 24 and ``keyboard`` up to 10; letters and numbers have no limit).
- R3: variants that render identically count once: a casing that turns the marker and the
  sentinel into the same strings as an earlier casing of the list is not a variant of its own
  (e.g. every casing when both are empty). The first casing of such a group represents it.

An invalid variant is never produced by sampling. This module never renders prompts.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_reliable.errors import LockError, ReliableConfigError
from pytest_reliable.files import content_hash, write_atomic

ENUMERATORS: tuple[str, ...] = (
    "upper", "lower", "number", "roman", "lower_roman", "unicode_roman", "greek", "keyboard",
)
CASINGS: tuple[str, ...] = ("identity", "upper", "lower", "title")
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
KEYBOARD = "!@#$%^&*~+"
ENUMERATOR_CAPACITY: dict[str, int | None] = {
    "upper": None, "lower": None, "number": None, "roman": None, "lower_roman": None,
    "unicode_roman": 12, "greek": len(GREEK), "keyboard": len(KEYBOARD),
}

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
DEFAULT_FEW_SHOT: dict[str, Any] = {"count": [0], "pool": 10, "order": "shuffle"}
PERMUTE_LISTED_MAX = 4
"""Up to this many options every permutation is a variant; beyond, permutations are sampled."""
LIST_LIMIT = 2_000_000
"""A space with more (format x count x temperature x order) combinations is sampled, not listed."""

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


# --------------------------------------------------------------------------------------------
# Enumerators and casing


def _roman(n: int) -> str:
    out = []
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
                           (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"),
                           (4, "IV"), (1, "I")):
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


def _letters(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def enumerator_label(enumerator: str, i: int) -> str:
    """The label of option ``i`` (0-based) under ``enumerator``; ValueError past its capacity."""
    capacity = ENUMERATOR_CAPACITY[enumerator]
    if capacity is not None and i >= capacity:
        raise ValueError(f"enumerator {enumerator} has only {capacity} labels")
    if enumerator == "upper":
        return _letters(i)
    if enumerator == "lower":
        return _letters(i).lower()
    if enumerator == "number":
        return str(i + 1)
    if enumerator == "roman":
        return _roman(i + 1)
    if enumerator == "lower_roman":
        return _roman(i + 1).lower()
    if enumerator == "unicode_roman":
        return chr(0x2160 + i)
    if enumerator == "greek":
        return GREEK[i]
    if enumerator == "keyboard":
        return KEYBOARD[i]
    raise ValueError(f"unknown enumerator {enumerator!r}")


def enumerator_labels(enumerator: str, n: int) -> tuple[str, ...]:
    return tuple(enumerator_label(enumerator, i) for i in range(n))


def apply_casing(casing: str, text: str) -> str:
    if casing == "upper":
        return text.upper()
    if casing == "lower":
        return text.lower()
    if casing == "title":
        return text.title()
    return text


# --------------------------------------------------------------------------------------------
# Variant


@dataclass(frozen=True)
class Variant:
    """One prompt variant: a value per format dimension, few-shot count, temperature, order.

    ``instruction`` None means the task's default instruction; ``order`` is a permutation of
    option positions (display position -> original position) or None for the original order.
    """

    instruction: str | None = None
    field_marker: str = "Question:"
    answer_sentinel: str = "Answer:"
    casing: str = "identity"
    field_spacing: str = "\n"
    enumerator: str = "upper"
    wrapper: str = "({})"
    option_separator: str = "\n"
    system_message: str | None = None
    few_shot: int = 0
    temperature: float = 0.0
    order: tuple[int, ...] | None = None

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.format_values, self.few_shot, self.temperature, self.order))
            object.__setattr__(self, "_hash", cached)
        return cached

    def value(self, dimension: str) -> Any:
        """The value of ``dimension`` (``few_shot`` is the demonstration count)."""
        if dimension not in VALUE_DIMENSIONS and dimension != "order":
            raise KeyError(dimension)
        return getattr(self, dimension)

    @property
    def format_values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, d) for d in FORMAT_DIMENSIONS)

    @property
    def format_key(self) -> str:
        """A stable short string identifying the format (the format dimensions' values)."""
        return "f" + content_hash(self.format_values, sort_keys=False)[:10]

    @property
    def marker(self) -> str:
        """The field marker after casing."""
        return apply_casing(self.casing, self.field_marker)

    @property
    def sentinel(self) -> str:
        """The answer sentinel after casing."""
        return apply_casing(self.casing, self.answer_sentinel)

    def describe(self) -> str:
        """Human-readable, e.g. ``marker "Q:" (upper), sentinel "Answer:", enumerator number ...``."""
        parts = [
            "instruction " + ("(task default)" if self.instruction is None
                              else _quote(_short(self.instruction))),
            f"marker {_quote(self.field_marker)} ({self.casing})",
            f"sentinel {_quote(self.answer_sentinel)}",
            f"spacing {_quote(self.field_spacing)}",
            f"enumerator {self.enumerator}",
            f"wrapper {_quote(self.wrapper)}",
            f"separator {_quote(self.option_separator)}",
            "system " + ("none" if self.system_message is None
                         else _quote(_short(self.system_message))),
        ]
        if self.few_shot:
            parts.append(f"{self.few_shot}-shot")
        parts.append(f"temperature {self.temperature:g}")
        if self.order is not None:
            parts.append("order " + ",".join(str(p + 1) for p in self.order))
        return ", ".join(parts)


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# Space


@dataclass(frozen=True)
class FewShot:
    """Few-shot settings: demonstration counts (a dimension), pool size and demo order."""

    count: tuple[int, ...] = (0,)
    pool: int = 10
    order: str = "shuffle"


class Space:
    """An immutable, pre-registered perturbation space (SPEC section 3).

    Build one with `Space.from_mapping`, `load_spaces` (reliable.yaml), `Space.default()` or
    `Space.plain()`. A key left out has one value, its default.
    """

    __slots__ = (
        "_canonical",
        "_few_shot",
        "_hash",
        "_name",
        "_normalized",
        "_option_order",
        "_plain",
        "_source",
        "_tables",
        "_values",
    )

    def __init__(
        self,
        name: str,
        values: Mapping[str, tuple[Any, ...]],
        option_order: str,
        few_shot: FewShot,
        canonical: Mapping[str, Any],
        *,
        source: str | None = None,
        plain: bool = False,
    ) -> None:
        self._name = name
        self._values = {d: tuple(values[d]) for d in VALUE_DIMENSIONS if d != "few_shot"}
        self._values["few_shot"] = tuple(few_shot.count)
        self._option_order = option_order
        self._few_shot = few_shot
        self._canonical = dict(canonical)
        self._source = source
        self._plain = plain
        self._normalized: dict[str, Any] | None = None
        self._hash: str | None = None
        self._tables: dict[int, Any] = {}

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_tables") and key != "_normalized" and key != "_hash":
            raise AttributeError("Space is immutable")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"Space({self._name!r}, hash={self.hash[:12]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and other.hash == self.hash and other.name == self.name

    def __hash__(self) -> int:
        return hash((self._name, self.hash))

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_mapping(
        cls,
        name: str,
        mapping: Mapping[str, Any] | None,
        *,
        source: str | None = None,
        lines: Mapping[str, int] | None = None,
        path_prefix: str | None = None,
    ) -> Space:
        """Validate and normalize one space declaration (the mapping under ``spaces.<name>``).

        ``source`` names the file for error messages, ``lines`` maps key paths to YAML lines.
        """
        return _build(name, mapping, source=source, lines=lines or {},
                      prefix=path_prefix if path_prefix is not None else f"spaces.{name}")

    @classmethod
    def default(cls) -> Space:
        """The built-in modest space used when a test names none.

        Values: instruction = the task's default; field_marker ["Question:", "Q:", ""];
        answer_sentinel ["Answer:"]; casing [identity, lower]; field_spacing ["\\n", "\\n\\n"];
        enumerator [upper, lower, number]; wrapper ["({})", "{}.", "{})"]; option_separator
        ["\\n", "; "]; option_order permute; no few-shot; no system message; temperature [0.0].
        That is 216 formats (x 24 option orders for up to 4 options).
        """
        return cls.from_mapping("default", {
            "field_marker": ["Question:", "Q:", ""],
            "answer_sentinel": ["Answer:"],
            "casing": ["identity", "lower"],
            "field_spacing": ["\n", "\n\n"],
            "enumerator": ["upper", "lower", "number"],
            "wrapper": ["({})", "{}.", "{})"],
            "option_separator": ["\n", "; "],
            "option_order": "permute",
        }, source="built-in default space")

    @classmethod
    def plain(cls) -> Space:
        """A one-variant space that renders the task's own prompt (used by CheckList tests
        without ``space=``): a `Classification` with a template renders the template, without
        one the text followed by a line listing the labels; other tasks the default format."""
        base = cls.from_mapping("plain", {}, source="built-in plain space")
        return cls(base._name, {d: base._values[d] for d in VALUE_DIMENSIONS if d != "few_shot"},
                   base._option_order, base._few_shot, base._canonical, source=base._source,
                   plain=True)

    # -- properties -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def is_plain(self) -> bool:
        return self._plain

    @property
    def option_order(self) -> str:
        return self._option_order

    @property
    def few_shot(self) -> FewShot:
        return self._few_shot

    @property
    def dimensions(self) -> dict[str, tuple[Any, ...]]:
        """Every value dimension -> its values (``few_shot`` = demonstration counts)."""
        return dict(self._values)

    @property
    def variant_dimensions(self) -> tuple[str, ...]:
        """The dimensions a `Variant` carries a value for (reports marginalize over these)."""
        return VALUE_DIMENSIONS

    @property
    def format_dimensions(self) -> dict[str, tuple[Any, ...]]:
        """The format dimensions -> values (all but option order, few-shot and temperature)."""
        return {d: self._values[d] for d in FORMAT_DIMENSIONS}

    @property
    def canonical(self) -> dict[str, Any]:
        """The canonical value of every value dimension."""
        return {d: self._canonical.get(d, self._values[d][0]) for d in VALUE_DIMENSIONS}

    def normalized(self) -> dict[str, Any]:
        """The declaration with defaults filled in, as plain JSON-able data (what the hash covers)."""
        if self._normalized is None:
            out: dict[str, Any] = {}
            for key in KEYS:
                if key == "option_order":
                    out[key] = self._option_order
                elif key == "few_shot":
                    out[key] = {"count": list(self._few_shot.count), "pool": self._few_shot.pool,
                                "order": self._few_shot.order}
                elif key == "canonical":
                    out[key] = {d: v for d, v in self.canonical.items()}
                else:
                    out[key] = list(self._values[key])
            self._normalized = out
        return json.loads(json.dumps(self._normalized))

    @property
    def hash(self) -> str:
        """sha256 hex of the canonical JSON of `normalized` (independent of YAML formatting)."""
        if self._hash is None:
            self._hash = content_hash(self.normalized())
        return self._hash

    def display_value(self, dimension: str, value: Any) -> str:
        """A value as a report key: strings as written ("({})", "upper"; control characters
        escaped, e.g. "\\n"), numbers as YAML writes them ("0.0", "3"), None as "null"."""
        return display_value(value)

    def canonical_variant(self) -> Variant:
        """The first value of every dimension unless ``canonical:`` says; original order."""
        c = self.canonical
        return Variant(**{d: c[d] for d in FORMAT_DIMENSIONS}, few_shot=int(c["few_shot"]),
                       temperature=float(c["temperature"]), order=None)

    # -- validity -------------------------------------------------------------------------
    def is_valid(self, variant: Variant, n_options: int | None = None) -> bool:
        """Whether ``variant`` obeys R1-R3 (R2 needs ``n_options``)."""
        return not self.violations(variant, n_options)

    def violations(self, variant: Variant, n_options: int | None = None) -> list[str]:
        """The validity rules ``variant`` breaks, one sentence each."""
        problems = []
        if "\n" not in variant.field_spacing:
            for dim in ("option_separator", "field_marker", "answer_sentinel"):
                if "\n" in getattr(variant, dim):
                    problems.append(f"R1: field_spacing {_quote(variant.field_spacing)} has no "
                                    f"newline but {dim} {_quote(getattr(variant, dim))} has one")
        capacity = ENUMERATOR_CAPACITY.get(variant.enumerator)
        if n_options is not None and capacity is not None and n_options > capacity:
            problems.append(f"R2: enumerator {variant.enumerator} has labels for at most "
                            f"{capacity} options, the data has {n_options}")
        casings = self._values["casing"]
        if variant.casing in casings:
            mine = (variant.marker, variant.sentinel)
            for casing in casings[: casings.index(variant.casing)]:
                if (apply_casing(casing, variant.field_marker),
                        apply_casing(casing, variant.answer_sentinel)) == mine:
                    problems.append(f"R3: casing {variant.casing} renders as casing {casing}")
                    break
        return problems

    def valid_formats(self, n_options: int) -> np.ndarray | None:
        """Rows of value indexes (one column per FORMAT_DIMENSIONS) of every valid format, or
        None when the raw product is too large to list."""
        return self._table(n_options)[0]

    def n_valid_formats(self, n_options: int = 4) -> int:
        table = self._table(n_options)
        return int(table[0].shape[0]) if table[0] is not None else int(table[1])

    def n_valid_variants(self, n_options: int = 4) -> int:
        """Valid variants for data with ``n_options`` options: formats x few-shot counts x
        temperatures x option orders (n! with ``permute``, counted even when sampled)."""
        orders = math.factorial(n_options) if self._option_order == "permute" else 1
        return (self.n_valid_formats(n_options) * len(self._values["few_shot"])
                * len(self._values["temperature"]) * orders)

    def format_validity_mask(self, idx: np.ndarray, n_options: int) -> np.ndarray:
        """Vectorised R1-R3 over rows of format value indexes (shape (k, len(FORMAT_DIMENSIONS)))."""
        flags = self._flags(n_options)
        col = {d: idx[:, j] for j, d in enumerate(FORMAT_DIMENSIONS)}
        newline_ok = flags["spacing_nl"][col["field_spacing"]] | ~(
            flags["sep_nl"][col["option_separator"]] | flags["marker_nl"][col["field_marker"]]
            | flags["sentinel_nl"][col["answer_sentinel"]]
        )
        enum_ok = flags["enum_ok"][col["enumerator"]]
        rep = flags["representative"][col["casing"], col["field_marker"], col["answer_sentinel"]]
        return newline_ok & enum_ok & rep

    def format_variant(self, row: Sequence[int]) -> dict[str, Any]:
        """Format dimension -> value for a row of value indexes."""
        return {d: self._values[d][int(k)] for d, k in zip(FORMAT_DIMENSIONS, row)}

    def _flags(self, n_options: int) -> dict[str, np.ndarray]:
        v = self._values

        def nl(dim: str) -> np.ndarray:
            return np.array(["\n" in s for s in v[dim]], dtype=bool)

        enum_ok = np.array([
            ENUMERATOR_CAPACITY[e] is None or n_options <= int(ENUMERATOR_CAPACITY[e] or 0)
            for e in v["enumerator"]], dtype=bool)
        rep = np.ones((len(v["casing"]), len(v["field_marker"]), len(v["answer_sentinel"])),
                      dtype=bool)
        for m, marker in enumerate(v["field_marker"]):
            for a, sentinel in enumerate(v["answer_sentinel"]):
                seen: set[tuple[str, str]] = set()
                for c, casing in enumerate(v["casing"]):
                    key = (apply_casing(casing, marker), apply_casing(casing, sentinel))
                    rep[c, m, a] = key not in seen
                    seen.add(key)
        return {"spacing_nl": nl("field_spacing"), "sep_nl": nl("option_separator"),
                "marker_nl": nl("field_marker"), "sentinel_nl": nl("answer_sentinel"),
                "enum_ok": enum_ok, "representative": rep}

    def _table(self, n_options: int) -> tuple[np.ndarray | None, int]:
        cached = self._tables.get(n_options)
        if cached is not None:
            return cached
        sizes = [len(self._values[d]) for d in FORMAT_DIMENSIONS]
        raw = math.prod(sizes)
        if raw <= LIST_LIMIT:
            grid = np.indices(sizes).reshape(len(sizes), -1).T
            rows = grid[self.format_validity_mask(grid, n_options)]
            result: tuple[np.ndarray | None, int] = (rows, int(rows.shape[0]))
        else:
            rng = np.random.default_rng(12345)
            probe = np.stack([rng.integers(0, s, 20_000) for s in sizes], axis=1)
            share = float(self.format_validity_mask(probe, n_options).mean())
            result = (None, max(1, int(raw * share)))
        self._tables[n_options] = result
        return result


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


# --------------------------------------------------------------------------------------------
# Building a space from a mapping, with errors that name file, key path, line and fix


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


def _build(name: str, mapping: Mapping[str, Any] | None, *, source: str | None,
           lines: Mapping[str, int], prefix: str) -> Space:
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
    space = Space(name, values, str(option_order), few_shot, canonical, source=source)
    problems = space.violations(space.canonical_variant())
    if problems:
        path = where.path("canonical")
        raise where.error(path, f"{prefix}: the canonical variant is invalid ({'; '.join(problems)})",
                          "change the first values or `canonical:` so that they obey the rule")
    return space


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


# --------------------------------------------------------------------------------------------
# reliable.yaml


MAX_CONFIG_BYTES = 1_000_000
"""A reliable.yaml is a few hundred lines; anything near this size is a mistake or an attack."""
MAX_CONFIG_NODES = 100_000
"""YAML nodes after alias expansion: stops an alias bomb ("billion laughs") in milliseconds."""


def _node_lines(node: Any, path: str, lines: dict[str, int], source: str,
                budget: list[int] | None = None) -> None:
    """Line of every key path; rejects duplicate keys and runaway alias expansion."""
    import yaml

    budget = budget if budget is not None else [MAX_CONFIG_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise ReliableConfigError(
            f"{source}: more than {MAX_CONFIG_NODES:,} YAML nodes once aliases are expanded "
            "(an alias bomb?). Fix: write the spaces out without nested aliases."
        )
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                where = f"{path}." if path else ""
                raise ReliableConfigError(
                    f"{source}, line {line}: duplicate key {where}{key} (first on line "
                    f"{seen[key]}); YAML would silently keep only the last. Fix: remove one."
                )
            seen[key] = line
            child = f"{path}.{key}" if path else key
            lines[child] = line
            _node_lines(value_node, child, lines, source, budget)
            lines[child] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, f"{path}[{i}]", lines, source, budget)


def parse_spaces(text: str, *, source: str = "reliable.yaml") -> dict[str, Space]:
    """The spaces declared in ``text`` (the content of a reliable.yaml)."""
    import yaml

    lines: dict[str, int] = {}
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                # Before constructing: duplicate keys and alias bombs are caught on the node graph.
                _node_lines(node, "", lines, source)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        start = getattr(error, "context_mark", None)
        if start is not None and mark is not None and start.line != mark.line:
            line += f" (the construct began on line {start.line + 1})"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        context = getattr(error, "context", None)
        detail = f"{context}: {problem}" if context else problem
        raise ReliableConfigError(
            f"{source}{line}: broken YAML ({detail}). Fix: check the brackets, quotes and "
            "indentation there (strings with special characters need quotes, e.g. \"({})\")."
        ) from None
    where = _Where(source, lines, "")
    if data is None:
        return {}
    if not isinstance(data, Mapping) or "spaces" not in data:
        raise where.error("", "the top level must be a mapping with the key `spaces`",
                          "write `spaces:` then one mapping per space name")
    extra = [k for k in data if k != "spaces"]
    if extra:
        raise where.error(str(extra[0]), f"{extra[0]}: unknown top-level key {extra[0]!r}",
                          "only `spaces:` is allowed at the top level")
    spaces_raw = data["spaces"]
    if spaces_raw is None:
        return {}
    if not isinstance(spaces_raw, Mapping):
        raise where.error("spaces", "spaces: expected a mapping of space name -> dimensions",
                          "write e.g. `spaces:\\n  mcq:\\n    enumerator: [upper, number]`")
    out: dict[str, Space] = {}
    for name, mapping in spaces_raw.items():
        out[str(name)] = Space.from_mapping(str(name), mapping, source=source, lines=lines)
    return out


def load_spaces(path: str | Path) -> dict[str, Space]:
    """Every space under ``spaces:`` in a reliable.yaml file; ReliableConfigError when bad."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ReliableConfigError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes; a "
                                      "reliable.yaml declares spaces, not data. Fix: shorten it.")
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReliableConfigError(f"{path}: cannot read ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise ReliableConfigError(f"{path}: not UTF-8 text (offset {error.start}). Fix: save it "
                                  "as UTF-8.") from None
    return parse_spaces(text, source=path.name)


# --------------------------------------------------------------------------------------------
# reliable.lock


LOCK_VERSION = 1


@dataclass(frozen=True)
class LockDifference:
    """One space that differs from reliable.lock."""

    space: str
    dimensions: tuple[str, ...] = ()
    missing: bool = False

    def describe(self) -> str:
        if self.missing:
            return f"space {self.space!r}: missing from the lock"
        return f"space {self.space!r}: changed " + ", ".join(self.dimensions)


def write_lock(path: str | Path, spaces: Mapping[str, Space]) -> None:
    """Write every space's normalized declaration and hash (JSON, sorted keys)."""
    content = {
        "version": LOCK_VERSION,
        "spaces": {name: {"hash": space.hash, "declaration": space.normalized()}
                   for name, space in sorted(spaces.items())},
    }
    write_atomic(path, json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_lock(path: str | Path) -> dict[str, dict[str, Any]]:
    """Space name -> {"hash", "declaration"}; LockError when unreadable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        spaces = data["spaces"]
        if not isinstance(spaces, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("declaration", {}), dict)
                for v in spaces.values()):
            raise TypeError
        return {str(k): dict(v) for k, v in spaces.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise LockError(f"{path}: not a readable reliable.lock. Fix: rewrite it with "
                        "--reliable-lock-update and commit it.") from None


def compare_lock(spaces: Mapping[str, Space], lock: Mapping[str, Mapping[str, Any]]
                 ) -> list[LockDifference]:
    """The declared spaces that are missing from ``lock`` or differ from it."""
    out: list[LockDifference] = []
    for name, space in sorted(spaces.items()):
        entry = lock.get(name)
        if entry is None:
            out.append(LockDifference(name, missing=True))
            continue
        if entry.get("hash") == space.hash:
            continue
        locked = entry.get("declaration") or {}
        mine = space.normalized()
        changed = tuple(k for k in KEYS if mine.get(k) != locked.get(k))
        out.append(LockDifference(name, changed or ("declaration",)))
    return out


def iter_variants(space: Space, n_options: int = 4) -> Iterable[Variant]:
    """Every valid variant (listed spaces only): formats x few-shot x temperature x orders."""
    rows = space.valid_formats(n_options)
    if rows is None:
        raise ValueError(f"space {space.name!r} is too large to list")
    orders: list[tuple[int, ...] | None] = (
        list(itertools.permutations(range(n_options))) if space.option_order == "permute"
        else [None])
    for row in rows:
        fmt = space.format_variant(row)
        for count in space.dimensions["few_shot"]:
            for t in space.dimensions["temperature"]:
                for order in orders:
                    yield Variant(**fmt, few_shot=count, temperature=t, order=order)
