"""The `Task` protocol: what the plugin needs from a task (the built-in ones of `tasks.builtin`,
or your own class), and the `Grade` it gives an answer.

It sits with the plan because rendering needs it (a record's text, its options, a demo's answer)
as much as grading does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_reliable.plan.prompt import Prompt

if TYPE_CHECKING:
    from pytest_reliable.plan.data import Dataset

Example = Mapping[str, Any]


@dataclass(frozen=True)
class Grade:
    """The grade of one answer: ``score`` in [0, 1] (or the grader's number), whether the answer
    could be parsed, and the parsed prediction (original option index, label text, or text)."""

    score: float
    parsed: bool
    prediction: Any
    votes: tuple[float | None, ...] = ()
    """A judge's votes behind ``score`` (None: a vote the reply did not yield); empty when no
    judge graded the answer."""
    unread: tuple[str, ...] = ()
    """The judge's replies that came back without a vote (what an unreadable judge's error
    quotes)."""


class Task(Protocol):
    """What the plugin needs from a task: the built-in `MultipleChoice`, `Classification` and
    `Generation` satisfy it, and so can your own class (no base class needed).

    A task with options (``options`` returns a list) is graded on the option the answer picks;
    one without (``options`` returns None) shows demos with ``demo_answer``.
    """

    default_instruction: str
    """The instruction a variant without its own ``instruction`` shows."""

    def validate(self, dataset: Dataset) -> None:
        """Raise `pytest_reliable.errors.DatasetError` naming the first bad record and the fix."""
        ...

    def prompt_text(self, example: Example) -> str:
        """The record's question or text, as the prompt shows it."""
        ...

    def options(self, example: Example) -> list[str] | None:
        """The record's options in their original order; None for free-form answers."""
        ...

    def gold_index(self, example: Example) -> int | None:
        """The correct option's original index; None for free-form answers."""
        ...

    def demo_answer(self, example: Example) -> str:
        """A few-shot demo's answer text (used when ``options`` is None)."""
        ...

    def render_plain(self, example: Example) -> str | None:
        """The whole user message for `Space.plain()` prompts, or None for the default layout."""
        ...

    def grade(self, text: str, example: Example, prompt: Prompt | None = None) -> Grade:
        """Score one answer; never raise on a bad answer (unparsed: ``Grade(0.0, False, None)``)."""
        ...
