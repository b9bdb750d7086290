"""A finished batch's files, read into answers and failures (`read_batch`), and how the batch
transport (`calls.batch`) tells the provider's failures apart.

The output file and the error file are read by one loop, line by line: a line that cannot be read
(not JSON, not an object, a non-numeric status, a body without an answer) is that request's
failure, every good line is kept. A body is read by the model's one reading of a response
(`models.base.BatchCapable.batch_response`), as a direct call's is. A line whose request cannot
be told fails nothing else; a request no line answers fails naming the batch's status.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_reliable.models.base import BatchCapable, ModelCallError, ModelResponse
from pytest_reliable.redact import redact

if TYPE_CHECKING:
    from pytest_reliable.calls.requests import Request

log = logging.getLogger("pytest_reliable.batch")

API_ATTEMPTS = 4
"""Attempts of a file upload, a batch creation or an output download (transient failures)."""
API_BACKOFF_S = 0.5


@dataclass(frozen=True)
class BatchResult:
    """What a batch brought: answers by cache key, and why each other key has none."""

    answers: dict[str, ModelResponse]
    failures: dict[str, str]
    retryable: frozenset[str] = frozenset()
    """The failed keys worth sending once more (their line failed, or no batch was sent); not
    those a batch still owes (sending them again would pay twice)."""


class Owed(Exception):
    """A batch was sent (or may have been) and its answers cannot be collected now: its id (or
    sending mark) stays in the store, and its requests are not sent again in this run."""


class Gone(Exception):
    """The provider does not know the batch (or its output) any more: forget it."""


LineReader = Callable[[dict[str, Any], str, "Request"], "ModelResponse | str"]
"""One readable line's answer, or its request's failure (the line's place given)."""


async def read_batch(model: BatchCapable, client: Any, batch: Any,
                     requests: Mapping[str, Request]) -> BatchResult:
    """Every readable line's answer or failure; a line that cannot be read fails its request
    (if it can be told) and no other."""
    batch_id, status = str(batch.id), str(getattr(batch, "status", None) or "unknown")
    answers: dict[str, ModelResponse] = {}
    failures: dict[str, str] = {}
    unreadable = 0

    def output_line(row: dict[str, Any], where: str, request: Request) -> ModelResponse | str:
        response = row.get("response")
        code = _status_code(response)
        if code == 200:
            try:
                return model.batch_response(
                    response.get("body") if isinstance(response, dict) else None, request.params)
            except ModelCallError as error:
                return f"{where}: {error}"
        if code is None:
            shown = response.get("status_code") if isinstance(response, dict) else response
            return f"{where} has no numeric status_code (got {short(shown)})"
        return f"batch line failed (HTTP {code})"

    def error_line(row: dict[str, Any], where: str, request: Request) -> str:
        said = _object(row.get("error"))
        why = said.get("code") or f"HTTP {_status_code(row.get('response'))}"
        return f"batch line failed: {why} {said.get('message') or ''}".rstrip()

    files: list[tuple[str, str, LineReader]] = [("output_file_id", "output", output_line),
                                                ("error_file_id", "error file", error_line)]
    for which, label, read in files:
        for number, text in await _lines(client, batch, which):
            row, problem = _row(text)
            key = row.get("custom_id") if row is not None else _custom_id_in(text)
            if not isinstance(key, str):  # whose line it is cannot be told
                unreadable += 1
                continue
            if key not in requests or key in answers:  # a line repeated: its first answer stands
                continue
            where = f"batch {batch_id}, line {number} of its {label}"
            if row is None:
                failures[key] = f"{where} {problem}"
                continue
            outcome = read(row, where, requests[key])
            if isinstance(outcome, str):
                failures[key] = outcome
            else:
                answers[key] = outcome
                failures.pop(key, None)
    whole = _batch_errors(batch)
    for key in requests:
        if key not in answers and key not in failures:
            why = f"batch {batch_id} ended {status} without this request"
            if whole:
                why += f": {whole}"
            if unreadable:
                why += f" ({unreadable} lines of its files could not be read)"
            failures[key] = why
    if unreadable:
        log.warning("pytest-reliable: %d lines of batch %s's files could not be read: their "
                    "requests are sent once more", unreadable, batch_id)
    return BatchResult(answers, failures, frozenset(failures))


async def _lines(client: Any, batch: Any, which: str) -> list[tuple[int, str]]:
    """The non-blank lines of the batch's output or error file, numbered from 1."""
    import openai

    file_id = getattr(batch, which, None)
    if not file_id:
        return []
    for attempt in range(1, API_ATTEMPTS + 1):
        try:
            content = await client.files.content(file_id)
            break
        except openai.OpenAIError as error:
            if gone(error):
                raise Gone(f"the provider has no file {file_id} (the {which[:-8]} file of "
                           f"batch {batch.id}) any more") from None
            if not transient(error) or attempt == API_ATTEMPTS:
                raise Owed(f"batch {batch.id} ended, and its {which[:-8]} file "
                           f"{file_id} could not be read: {text_of(error)}.") from None
        await asyncio.sleep(API_BACKOFF_S * 2 ** (attempt - 1))
    # Split on newlines only: str.splitlines() also splits inside a JSON string at U+2028.
    return [(number, line) for number, line in enumerate(content.text.split("\n"), 1)
            if line.strip()]


def _row(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """A JSONL line as an object, or why it is none."""
    try:
        row = json.loads(text)
    except ValueError:  # JSONDecodeError, and numbers Python cannot make
        return None, "is not valid JSON"
    if not isinstance(row, dict):
        return None, f"is not a JSON object (got {short(row)})"
    return row, None


_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"([^"\\]*)"')


def _custom_id_in(text: str) -> str | None:
    """The request id written in a line that is not a JSON object, if it can be read."""
    found = _CUSTOM_ID.search(text)
    return found.group(1) if found else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _status_code(response: Any) -> int | None:
    """A batch line's HTTP status, None when it has none that is a number."""
    code = response.get("status_code") if isinstance(response, dict) else None
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, str) and code.strip().isdigit():
        return int(code.strip())
    return None


def _batch_errors(batch: Any) -> str:
    """What the provider said about a batch that failed as a whole (e.g. its input refused)."""
    errors = getattr(getattr(batch, "errors", None), "data", None)
    said = [str(getattr(error, "message", None) or getattr(error, "code", None) or "")
            for error in errors or []] if isinstance(errors, list) else []
    return redact("; ".join(text for text in said[:3] if text))


# -- the provider's failures ---------------------------------------------------------------------
def transient(error: BaseException) -> bool:
    """A failure worth trying again: a dropped connection, a timeout, a rate limit, a 5xx."""
    import openai

    if isinstance(error, openai.APIStatusError):
        return error.status_code in (408, 409, 429) or error.status_code >= 500
    return isinstance(error, (openai.APIConnectionError, openai.APIResponseValidationError))


def gone(error: BaseException) -> bool:
    import openai

    return isinstance(error, openai.APIStatusError) and error.status_code == 404


def text_of(error: BaseException) -> str:
    return redact(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["API_ATTEMPTS", "API_BACKOFF_S", "BatchResult", "Gone", "Owed", "gone", "read_batch",
           "short", "text_of", "transient"]
