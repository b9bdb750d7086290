"""`Prompt`: a rendered prompt, what render.py produces and a task grades an answer against."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt.

    ``labels`` are the displayed option labels (as enumerated, without the wrapper) in display
    order, ``displayed`` maps display position -> original option index, ``gold_position`` is the
    display position of the correct option (None without options or gold).
    """

    messages: tuple[dict[str, str], ...]
    labels: tuple[str, ...] = ()
    displayed: tuple[int, ...] = ()
    gold_position: int | None = None
    wrapper: str = "({})"
    enumerator: str | None = None

    @property
    def user(self) -> str:
        """The last user message."""
        for message in reversed(self.messages):
            if message["role"] == "user":
                return message["content"]
        return ""

    @property
    def text(self) -> str:
        """All messages as one string (system message, blank line, user message)."""
        return "\n\n".join(m["content"] for m in self.messages)


def render_messages(messages: Iterable[Mapping[str, str]]) -> str:
    """A chat prompt as a person reads it: one block per message, with its role."""
    return "\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
