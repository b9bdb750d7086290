"""Cache keys and what a miss says: which answer a call is, whatever store keeps it.

Keys are the sha256 of a canonical JSON of (model identity, messages, sampling params, sample
index, scope); an API key is never part of a key nor of a stored row. Where answers are kept (the
local sqlite file, or a PostgreSQL store shared by many machines), with record modes, the budget
ledger and claims, is `pytest_reliable.store`; the names below that point there are the historical
ones (`ResponseCache` is the local store, `BudgetLedger` its ledger).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_reliable.errors import ReliableError
from pytest_reliable.files import content_hash
from pytest_reliable.models.base import Message, SamplingParams
from pytest_reliable.store.base import RECORD_MODES
from pytest_reliable.store.errors import StoreWarning
from pytest_reliable.store.local import (
    SCHEMA_VERSION,
    CacheFileError,
    check_cache_path,
)
from pytest_reliable.store.local import (
    LocalStore as ResponseCache,
)
from pytest_reliable.store.local import (
    SqliteLedger as BudgetLedger,
)

KEY_VERSION = 1
"""Part of every key: a change of what a key covers changes this, never the stored files."""


class CacheMissError(ReliableError):
    """Record mode ``none`` met a call that is not in the cache."""


def canonical_messages(messages: Iterable[Message] | Iterable[tuple[str, str]]) -> list[list[str]]:
    """Messages as ``[[role, content], ...]``: the same for dicts and tuples."""
    out: list[list[str]] = []
    for m in messages:
        if isinstance(m, dict):
            out.append([str(m.get("role", "user")), str(m.get("content", ""))])
        else:
            role, content = m
            out.append([str(role), str(content)])
    return out


def cache_key(
    model_identity: str,
    messages: Iterable[Message] | Iterable[tuple[str, str]],
    params: SamplingParams,
    sample_index: int,
    scope: str | None,
) -> str:
    """sha256 of the canonical JSON of everything that determines one sample."""
    payload = {
        "v": KEY_VERSION,
        "model": model_identity,
        "messages": canonical_messages(messages),
        "params": params.as_dict(),
        "sample_index": int(sample_index),
        "scope": scope,
    }
    return content_hash(payload)


def prompt_excerpt(
    messages: Sequence[Message] | Sequence[tuple[str, str]], limit: int = 120
) -> str:
    """The last user message, on one line, truncated: for error messages."""
    canon = canonical_messages(messages)
    users = [c for r, c in canon if r == "user"] or [c for _, c in canon] or [""]
    text = " ".join(users[-1].split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def miss_message(
    context: str | None, messages: Sequence[Message] | Sequence[tuple[str, str]]
) -> str:
    where = f" for {context}" if context else ""
    return (
        f"no cached response{where} (prompt: {prompt_excerpt(messages)!r}): "
        "--reliable-record none replays only; run once with --reliable-record new to record it"
    )


__all__ = [
    "KEY_VERSION",
    "RECORD_MODES",
    "SCHEMA_VERSION",
    "BudgetLedger",
    "CacheFileError",
    "CacheMissError",
    "ResponseCache",
    "StoreWarning",
    "cache_key",
    "canonical_messages",
    "check_cache_path",
    "miss_message",
    "prompt_excerpt",
]
