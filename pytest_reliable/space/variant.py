"""`Variant`: one value per dimension plus an option-order permutation, and the validity rules
R1-R3 one variant obeys (`violations`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_reliable.files import content_hash
from pytest_reliable.space.dimensions import FORMAT_DIMENSIONS, VALUE_DIMENSIONS
from pytest_reliable.space.labels import ENUMERATOR_CAPACITY, apply_casing


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
        """A stable short string identifying the format (the format dimensions' values).
        Cached, as the hash is: a summary keys every cell by it."""
        cached = self.__dict__.get("_format_key")
        if cached is None:
            cached = "f" + content_hash(self.format_values, sort_keys=False)[:10]
            object.__setattr__(self, "_format_key", cached)
        return str(cached)

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


def violations(
    variant: Variant, casings: Sequence[str], n_options: int | None = None
) -> list[str]:
    """The validity rules ``variant`` breaks, one sentence each, in a space whose casing values
    are ``casings`` (R3 keeps the first of the casings that render alike; R2 needs
    ``n_options``)."""
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
    if variant.casing in casings:
        mine = (variant.marker, variant.sentinel)
        for casing in casings[: casings.index(variant.casing)]:
            if (apply_casing(casing, variant.field_marker),
                    apply_casing(casing, variant.answer_sentinel)) == mine:
                problems.append(f"R3: casing {variant.casing} renders as casing {casing}")
                break
    return problems


def restrict_order(order: tuple[int, ...] | None, n_options: int) -> tuple[int, ...]:
    """The display order of an instance with ``n_options`` options under permutation ``order``:
    its own positions, in the permutation's relative order (positions the permutation does not
    cover, when an instance has more options than the plan was sized for, follow in order)."""
    if order is None:
        return tuple(range(n_options))
    shown = tuple(p for p in order if p < n_options)
    if len(shown) < n_options:
        shown += tuple(range(len(order), n_options))
    return shown


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
