"""The built-in perturbations by name, and `resolve_perturbation` (a name or a user callable)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_reliable.checklist.directional import intensify, negation
from pytest_reliable.checklist.invariance import (
    casing,
    contractions,
    locations,
    names,
    neutral_phrase,
    numbers_,
    punctuation,
    synonyms,
    typos,
    whitespace,
)
from pytest_reliable.checklist.judge_task import (
    answer_position,
    answer_whitespace,
    rubric_paraphrase,
)
from pytest_reliable.checklist.result import Example, Perturbation, PerturbFn

INV_PERTURBATIONS: dict[str, PerturbFn] = {
    "typos": typos,
    "synonyms": synonyms,
    "names": names,
    "locations": locations,
    "numbers": numbers_,
    "punctuation": punctuation,
    "whitespace": whitespace,
    "casing": casing,
    "contractions": contractions,
    "neutral_phrase": neutral_phrase,
    "rubric_paraphrase": rubric_paraphrase,  # a judge's examples (JudgeTask)
    "answer_whitespace": answer_whitespace,
    "answer_position": answer_position,
}
DIR_PERTURBATIONS: dict[str, PerturbFn] = {"negation": negation, "intensify": intensify}
_ALLOWED: dict[str, dict[str, PerturbFn]] = {
    "invariance": INV_PERTURBATIONS,
    "directional": {**DIR_PERTURBATIONS, **INV_PERTURBATIONS},
    "mft": {},
}


def _wrap_callable(fn: Callable[[Example], Any]) -> Perturbation:
    name = str(getattr(fn, "__name__", None) or type(fn).__name__)

    def call(example: Example, rng: np.random.Generator) -> list[Example]:
        out = fn(copy.deepcopy(example))
        if out is None:
            return []
        if isinstance(out, dict):
            out = [out]
        items = list(out)
        for item in items:
            if not isinstance(item, dict):
                raise TypeError(f"perturbation {name!r} must return a list of dicts (examples), "
                                f"got an item of type {type(item).__name__}")
        return items

    return Perturbation(name, call)


def resolve_perturbation(name_or_callable: Any, *, kind: str) -> Perturbation:
    """A built-in perturbation by name, or a user callable ``example -> list[example]`` wrapped.

    ``kind``: "invariance" (INV names only), "directional" (DIR and INV names) or "mft" (none).
    An unknown name raises ``ValueError`` listing the allowed names.
    """
    if kind not in _ALLOWED:
        raise ValueError(f"unknown CheckList kind {kind!r}; allowed: {', '.join(_ALLOWED)}")
    if isinstance(name_or_callable, Perturbation):
        return name_or_callable
    if isinstance(name_or_callable, str):
        table = _ALLOWED[kind]
        if name_or_callable not in table:
            allowed = ", ".join(table) if table else "none (mft takes no perturbations)"
            raise ValueError(
                f"unknown perturbation {name_or_callable!r} for {kind}; allowed: {allowed}"
            )
        return Perturbation(name_or_callable, table[name_or_callable])
    if callable(name_or_callable):
        return _wrap_callable(name_or_callable)
    raise ValueError(
        f"a perturbation must be a name or a callable example -> list[example], got "
        f"{name_or_callable!r}; allowed names: {', '.join(_ALLOWED[kind]) or 'none'}"
    )

