"""Variant x example -> chat messages (never grading).

Layout of the user message (``sp`` = the variant's ``field_spacing``)::

    <instruction> sp
    [<demonstration> sp sp]*            few-shot demonstrations, inline, same format
    <marker> <question> sp
    <options joined by option_separator> sp
    <sentinel>

- ``<marker>`` is the field marker after casing, followed by one space (nothing when empty).
- An option is ``wrapper.format(label) + " " + text``, labels from the enumerator, in the
  variant's order restricted to the instance's own option positions.
- A demonstration is the same block for another instance, followed by its answer: the wrapped
  label of its correct option (a `Generation` writes its reference) after a space (after ``sp``
  when there is no sentinel). Demonstrations are inline in the one user message, as FormatSpread
  does, not separate chat turns.
- The options part is left out for tasks without options (`Generation`), the sentinel when empty.
- A system message, when the variant has one, is the first message.

`Space.plain()` renders the task's own prompt instead: a `Classification` with a ``template``
renders the template (``{text}`` and any other record field) as the whole user message, without
one the text followed by one line listing the labels; other tasks render the plain default format.

Fragments that depend only on the variant (instruction, marker, wrapped labels, sentinel) are
cached per (variant, instruction, option count), so rendering 100,000 prompts takes well under a
second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.plan.prompt import Prompt
from pytest_reliable.plan.task import Task
from pytest_reliable.space import Space, Variant, enumerator_labels
from pytest_reliable.space.variant import restrict_order

__all__ = ["Prompt", "render"]


@dataclass(frozen=True)
class _Fragments:
    head: str
    marker: str
    wrapped: tuple[str, ...]
    labels: tuple[str, ...]
    separator: str
    spacing: str
    tail: str
    demo_gap: str
    system: tuple[dict[str, str], ...]


_FRAGMENTS: dict[tuple[Any, ...], _Fragments] = {}
_ORDERS: dict[tuple[tuple[int, ...] | None, int], tuple[int, ...]] = {}
_CACHE_LIMIT = 50_000


def _fragments(variant: Variant, instruction: str, n_options: int) -> _Fragments:
    key = (variant, instruction, n_options)
    got = _FRAGMENTS.get(key)
    if got is not None:
        return got
    sp = variant.field_spacing
    marker = variant.marker
    sentinel = variant.sentinel
    try:
        labels = enumerator_labels(variant.enumerator, n_options)
    except ValueError:
        raise ReliableConfigError(
            f"enumerator {variant.enumerator} cannot label {n_options} options (rule R2). Fix: "
            "size the plan with make_plan(..., task=task) or drop that enumerator from the space."
        ) from None
    got = _Fragments(
        head=instruction + sp,
        marker=marker + " " if marker else "",
        wrapped=tuple(variant.wrapper.format(label) for label in labels),
        labels=labels,
        separator=variant.option_separator,
        spacing=sp,
        tail=sp + sentinel if sentinel else "",
        demo_gap=" " if sentinel else sp,
        system=({"role": "system", "content": variant.system_message},)
        if variant.system_message is not None else (),
    )
    if len(_FRAGMENTS) > _CACHE_LIMIT:
        _FRAGMENTS.clear()
    _FRAGMENTS[key] = got
    return got


def _order(order: tuple[int, ...] | None, n: int) -> tuple[int, ...]:
    key = (order, n)
    got = _ORDERS.get(key)
    if got is None:
        if len(_ORDERS) > _CACHE_LIMIT:
            _ORDERS.clear()
        got = _ORDERS[key] = restrict_order(order, n)
    return got


def _block(frag: _Fragments, question: str, options: Sequence[str] | None,
           displayed: tuple[int, ...]) -> str:
    if options is None:
        return frag.marker + question + frag.tail
    wrapped = frag.wrapped
    body = frag.separator.join([wrapped[k] + " " + options[j] for k, j in enumerate(displayed)])
    return frag.marker + question + frag.spacing + body + frag.tail


def render(
    space: Space,
    variant: Variant,
    example: Mapping[str, Any],
    task: Task,
    demos: Sequence[Mapping[str, Any]] = (),
) -> Prompt:
    """Render ``example`` (and its few-shot ``demos``) in ``variant``'s format for ``task``."""
    if space.is_plain:
        own = task.render_plain(example)
        if own is not None:
            options = task.options(example)
            gold = task.gold_index(example)
            shown = tuple(range(len(options))) if options is not None else ()
            return Prompt(({"role": "user", "content": own},),
                          labels=tuple(options or ()), displayed=shown,
                          gold_position=gold if options is not None else None,
                          wrapper="{}", enumerator=None)
    instruction = variant.instruction if variant.instruction is not None else (
        task.default_instruction)
    options = task.options(example)
    n = len(options) if options is not None else 0
    frag = _fragments(variant, instruction, n)
    displayed = _order(variant.order, n) if options is not None else ()
    parts = [frag.head]
    for demo in demos:
        d_options = task.options(demo)
        if d_options is None:
            answer = task.demo_answer(demo)
            parts.append(_block(frag, task.prompt_text(demo), None, ()) + frag.demo_gap + answer)
        else:
            d_frag = _fragments(variant, instruction, len(d_options))
            d_shown = _order(variant.order, len(d_options))
            gold = task.gold_index(demo)
            answer = d_frag.wrapped[d_shown.index(gold)]
            parts.append(_block(d_frag, task.prompt_text(demo), d_options, d_shown)
                         + frag.demo_gap + answer)
        parts.append(frag.spacing + frag.spacing)
    parts.append(_block(frag, task.prompt_text(example), options, displayed))
    gold = task.gold_index(example)
    gold_position = displayed.index(gold) if options is not None and gold is not None else None
    return Prompt(
        frag.system + ({"role": "user", "content": "".join(parts)},),
        labels=frag.labels,
        displayed=displayed,
        gold_position=gold_position,
        wrapper=variant.wrapper,
        enumerator=variant.enumerator,
    )
