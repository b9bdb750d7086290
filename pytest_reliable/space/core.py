"""`Space`: the immutable declaration, its hash, the validity rules R1-R3 and the format tables.

A `Space` is built from a validated `Declaration` (declaration.py); this module never reads a
mapping itself."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_reliable.files import content_hash
from pytest_reliable.space.declaration import Declaration, FewShot, declare
from pytest_reliable.space.dimensions import (
    FORMAT_DIMENSIONS,
    KEYS,
    LIST_LIMIT,
    VALUE_DIMENSIONS,
    display_value,
)
from pytest_reliable.space.labels import ENUMERATOR_CAPACITY, apply_casing
from pytest_reliable.space.variant import Variant, violations


class Space:
    """An immutable, pre-registered perturbation space (SPEC section 3).

    Build one with `Space.from_mapping`, `load_spaces` (reliable.yaml), `Space.default()` or
    `Space.plain()`. A key left out has one value, its default.
    """

    __slots__ = (
        "_declared",
        "_hash",
        "_normalized",
        "_plain",
        "_tables",
        "_values",
    )

    def __init__(self, declared: Declaration, *, plain: bool = False) -> None:
        self._declared = declared
        self._values = {d: tuple(declared.values[d]) for d in VALUE_DIMENSIONS if d != "few_shot"}
        self._values["few_shot"] = tuple(declared.few_shot.count)
        self._plain = plain
        self._normalized: dict[str, Any] | None = None
        self._hash: str | None = None
        self._tables: dict[int, tuple[np.ndarray | None, int]] = {}

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_tables") and key != "_normalized" and key != "_hash":
            raise AttributeError("Space is immutable")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"Space({self.name!r}, hash={self.hash[:12]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and other.hash == self.hash and other.name == self.name

    def __hash__(self) -> int:
        return hash((self.name, self.hash))

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
        return cls(declare(name, mapping, source=source, lines=lines or {},
                           prefix=path_prefix if path_prefix is not None else f"spaces.{name}"))

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
        return cls(declare("plain", {}, source="built-in plain space", lines={},
                           prefix="spaces.plain"), plain=True)

    # -- properties -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._declared.name

    @property
    def source(self) -> str | None:
        return self._declared.source

    @property
    def is_plain(self) -> bool:
        return self._plain

    @property
    def option_order(self) -> str:
        return self._declared.option_order

    @property
    def few_shot(self) -> FewShot:
        return self._declared.few_shot

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
        return self._declared.canonical_values()

    def normalized(self) -> dict[str, Any]:
        """The declaration with defaults filled in, as plain JSON-able data (what the hash covers)."""
        if self._normalized is None:
            out: dict[str, Any] = {}
            for key in KEYS:
                if key == "option_order":
                    out[key] = self.option_order
                elif key == "few_shot":
                    few_shot = self.few_shot
                    out[key] = {"count": list(few_shot.count), "pool": few_shot.pool,
                                "order": few_shot.order}
                elif key == "canonical":
                    out[key] = {d: v for d, v in self.canonical.items()}
                else:
                    out[key] = list(self._values[key])
            self._normalized = out
        copy: dict[str, Any] = json.loads(json.dumps(self._normalized))  # callers may edit it
        return copy

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
        return self._declared.canonical_variant()

    # -- validity -------------------------------------------------------------------------
    def is_valid(self, variant: Variant, n_options: int | None = None) -> bool:
        """Whether ``variant`` obeys R1-R3 (R2 needs ``n_options``)."""
        return not self.violations(variant, n_options)

    def violations(self, variant: Variant, n_options: int | None = None) -> list[str]:
        """The validity rules ``variant`` breaks, one sentence each."""
        return violations(variant, self._values["casing"], n_options)

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
        orders = math.factorial(n_options) if self.option_order == "permute" else 1
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
        mask: np.ndarray = newline_ok & enum_ok & rep
        return mask

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
