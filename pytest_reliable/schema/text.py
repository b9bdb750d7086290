"""How much model and dataset text a report holds (`cut_text`, `cut_message`, `cut_strings`): the
engine cuts what it puts into an entry or a failure message, the viewers what they show."""

from __future__ import annotations

from typing import Any

# A model may answer a megabyte; every report shows a bounded piece and says what was cut
# (GitHub rejects step summaries over 1 MiB). --reliable-full-text keeps the JSON whole.
TEXT_LIMIT = 2000
"""Characters of one piece of model or dataset text kept in a report."""
LINE_LIMIT = 500
"""Characters of one line of a failure message (terminal, JUnit, step summary)."""
MESSAGE_LIMIT = 8000
"""Characters of one failure message."""


def cut_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` up to ``limit`` characters, then where it was cut and how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[... {len(text) - limit:,} more characters cut]"


def cut_message(message: str) -> str:
    """A failure message with every line and the whole bounded."""
    lines = [cut_text(line, LINE_LIMIT) for line in message.splitlines()]
    return cut_text("\n".join(lines), MESSAGE_LIMIT)


def cut_strings(value: Any, limit: int = TEXT_LIMIT) -> Any:
    """Every string inside a JSON-like value, cut to ``limit`` (a report entry)."""
    if isinstance(value, str):
        return cut_text(value, limit)
    if isinstance(value, dict):
        return {key: cut_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [cut_strings(item, limit) for item in value]
    return value
