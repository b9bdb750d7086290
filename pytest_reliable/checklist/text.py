"""Text helpers shared by the perturbations: words, negators, casing, and `on_text`, which turns
an edit of an example's text field into a perturbation."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from pytest_reliable.checklist.result import Example

T = TypeVar("T")

WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?")
NEGATORS = frozenset(
    {"not", "no", "never", "nor", "neither", "none", "nobody", "nothing", "nowhere", "cannot"}
)


def text_key(example: Any) -> str | None:
    if not isinstance(example, dict):
        return None
    for key in ("text", "question"):
        if key in example:
            return key if isinstance(example[key], str) else None
    return None


def _with_text(example: Example, key: str, text: str) -> list[Example]:
    if text == example[key]:
        return []
    out = dict(example)
    out[key] = text
    return [out]


TextEdit = Callable[[str, np.random.Generator], "str | None"]


def on_text(edit: TextEdit) -> Callable[[Example, np.random.Generator], list[Example]]:
    """A perturbation from an edit of the example's text field: [] when the example has no text
    field, or the edit declines (None) or changes nothing."""

    @functools.wraps(edit)
    def perturb(example: Example, rng: np.random.Generator) -> list[Example]:
        key = text_key(example)
        if key is None:
            return []
        new = edit(example[key], rng)
        return [] if new is None else _with_text(example, key, new)

    return perturb


def is_negator(word: str) -> bool:
    lower = word.lower().replace("\u2019", "'")
    return lower in NEGATORS or lower.endswith("n't")


def match_case(template: str, word: str) -> str:
    """``word`` cased like ``template`` (UPPER, Title or lower)."""
    if len(template) > 1 and template.isupper():
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]

