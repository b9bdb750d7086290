"""Hypothesis strategies over spaces, variants and datasets (public: write ``@given`` tests).

- ``variants(space, n_options=4)``: valid variants of ``space`` (never one that breaks R1-R3).
- ``mcq_examples(min_options=2, max_options=6)``: MultipleChoice records with distinct choices.
- ``classification_examples(labels)``, ``generation_examples()``.
- ``datasets(task_kind="multiple_choice" | "classification" | "generation", ...)``: `Dataset`s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from pytest_reliable.plan.data import Dataset
from pytest_reliable.space import (
    FORMAT_DIMENSIONS,
    PERMUTE_LISTED_MAX,
    Space,
    Variant,
)

_TEXT = st.text(
    alphabet=st.characters(whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters=" ,'?-"),
    min_size=1, max_size=30,
).map(str.strip).filter(bool)


def variants(space: Space, n_options: int = PERMUTE_LISTED_MAX) -> st.SearchStrategy[Variant]:
    """Valid variants of ``space`` for data with ``n_options`` options."""
    rows = space.valid_formats(n_options)
    dims = space.dimensions
    if rows is not None:
        if rows.shape[0] == 0:
            raise ValueError(f"space {space.name!r} has no valid variant for {n_options} options")
        formats: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
            [space.format_variant(row) for row in rows])
    else:
        formats = st.fixed_dictionaries(
            {d: st.sampled_from(dims[d]) for d in FORMAT_DIMENSIONS}
        ).filter(lambda f: space.is_valid(Variant(**f), n_options))
    orders: st.SearchStrategy[tuple[int, ...] | None] = (
        st.permutations(list(range(n_options))).map(tuple)
        if space.option_order == "permute" else st.none())
    return st.builds(
        lambda fmt, count, temperature, order: Variant(
            **fmt, few_shot=count, temperature=temperature, order=order),
        formats, st.sampled_from(dims["few_shot"]), st.sampled_from(dims["temperature"]), orders)


@st.composite
def mcq_examples(draw: st.DrawFn, min_options: int = 2, max_options: int = 6) -> dict[str, Any]:
    """A MultipleChoice record with distinct choices and an index answer."""
    choices = draw(st.lists(_TEXT, min_size=min_options, max_size=max_options,
                            unique_by=lambda c: c.casefold()))
    answer = draw(st.integers(0, len(choices) - 1))
    return {"question": draw(_TEXT) + "?", "choices": choices, "answer": answer}


def classification_examples(labels: Sequence[str] = ("positive", "negative")
                            ) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"text": _TEXT, "label": st.sampled_from(list(labels))})


def generation_examples() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"question": _TEXT, "reference": _TEXT})


def datasets(task_kind: str = "multiple_choice", *, min_size: int = 1, max_size: int = 20,
             labels: Sequence[str] = ("positive", "negative")) -> st.SearchStrategy[Dataset]:
    """Datasets of records for ``task_kind``."""
    if task_kind in ("multiple_choice", "mcq"):
        records = mcq_examples()
    elif task_kind == "classification":
        records = classification_examples(labels)
    elif task_kind == "generation":
        records = generation_examples()
    else:
        raise ValueError(f"unknown task kind {task_kind!r}")
    return st.lists(records, min_size=min_size, max_size=max_size).map(Dataset.from_records)
