"""``--reliable-batch``: the same planned calls through a provider's batch API (SPEC section 13).

A transport beneath the runner: the runner asks `BatchTransport.answer` for the requests its
cache does not hold; they go as one JSONL file to ``/v1/files`` and one job to ``/v1/batches``,
the transport polls until the job ends (reporting its progress), reads the output file, and sends
the lines that failed (or that an expired batch left undone) once more in a follow-up batch. What
still failed after that is an error for that cell, like a failed call. Nothing above the runner
notices: answers are stored and counted as calls made, priced at the batch multiplier.

The pending batch's id is kept in the store under the name of its set of requests (their cache
keys), so a run killed while it waits finds the same batch on the next run and collects it instead
of paying again. Which requests a process may put in its batch is the runner's business
(`runner.claim_batch_keys`): those whose claims it holds in the store, so two processes or hosts
batching the same requests pay for them once.

With ``--reliable-batch`` the run's first round (`pytest_reliable.first_round`) goes through this
transport before the tests run; what it did for them (`AnsweredAhead`) is shared by every
transport of the run, so the tests count the answers it paid for as their own calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_reliable.files import sha256_hex
from pytest_reliable.models.base import ModelCallError, ModelResponse
from pytest_reliable.models.openai_compat import response_from_body

if TYPE_CHECKING:
    from pytest_reliable.models.openai_compat import OpenAICompatibleModel
    from pytest_reliable.runner import Request
    from pytest_reliable.store import Store

log = logging.getLogger("pytest_reliable.batch")

POLL_FIRST_S = 0.2
POLL_MAX_S = 30.0
"""How often a waiting run asks for the batch's status (growing from first to max)."""
FINAL = ("completed", "expired", "failed", "cancelled")
COMPLETION_WINDOW = "24h"

Progress = Callable[[int, int, int], None]
"""``(answered, total, failed)`` lines of the batch being waited for."""


@dataclass(frozen=True)
class BatchResult:
    """What a batch brought: answers by cache key, and why each other key has none."""

    answers: dict[str, ModelResponse]
    failures: dict[str, str]


@dataclass
class AnsweredAhead:
    """What the run's first round did in this process, by cache key, for the tests to come."""

    paid: dict[str, ModelResponse] = field(default_factory=dict)
    """Answers it paid for and no test has counted yet: the runner that serves one from the
    store counts it as its own call made (its price is that test's spend)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Requests whose batch line failed twice (sent, then retried): an error for the cell, not
    sent a third time."""


def batch_name(keys: Sequence[str], model: str, round_: int) -> str:
    """The store's name of a batch: its model, its requests' cache keys, the round (0: first
    sending, 1: the retry of its failed lines)."""
    return f"{model}:{round_}:{sha256_hex(chr(10).join(sorted(keys)))}"


class BatchTransport:
    def __init__(self, model: OpenAICompatibleModel, store: Store | None, *,
                 poll_first_s: float = POLL_FIRST_S, poll_max_s: float = POLL_MAX_S,
                 ahead: AnsweredAhead | None = None) -> None:
        self.model = model
        self.store = store
        self.ahead = ahead if ahead is not None else AnsweredAhead()
        """What the run's first round (`pytest_reliable.first_round`) did for the tests."""
        self.poll_first_s = poll_first_s
        self.poll_max_s = poll_max_s
        self.batches_sent = 0
        self.batches_resumed = 0

    async def answer(self, requests: dict[str, Request],
                     on_progress: Progress | None = None) -> BatchResult:
        """Answers to ``requests`` (by cache key): one batch, then one for the lines it failed."""
        first = await self._round(requests, 0, on_progress)
        retry = {key: requests[key] for key in first.failures}
        if not retry:
            return first
        log.info("pytest-reliable: %d lines of the batch failed; sending them once more",
                 len(retry))
        second = await self._round(retry, 1, on_progress)
        return BatchResult({**first.answers, **second.answers}, second.failures)

    async def _round(self, requests: dict[str, Request], round_: int,
                     on_progress: Progress | None) -> BatchResult:
        name = batch_name(list(requests), self.model.identity, round_)
        store = self.store  # its database may be another machine: off the event loop
        batch_id = await asyncio.to_thread(store.pending_batch, name) if store else None
        client = self.model.batch_client
        try:
            if batch_id is None:
                batch_id = await self._send(client, requests)
                if store is not None:
                    await asyncio.to_thread(store.keep_batch, name, batch_id)
            else:
                self.batches_resumed += 1
                log.info("pytest-reliable: resuming batch %s (sent by an earlier run)", batch_id)
            batch = await self._wait(client, batch_id, len(requests), on_progress)
            result = await self._collect(client, batch, requests)
        except ModelCallError as error:
            return BatchResult({}, {key: f"batch: {error}" for key in requests})
        except Exception as error:  # noqa: BLE001 - the transport's failure is the cells' error
            import openai

            if not isinstance(error, openai.OpenAIError):
                raise
            text = f"{type(error).__name__}: {error}"
            return BatchResult({}, {key: f"batch: {text}" for key in requests})
        if store is not None:
            await asyncio.to_thread(store.forget_batch, name)
        return result

    async def _send(self, client: Any, requests: dict[str, Request]) -> str:
        lines = [self.model.batch_line(key, request.message_dicts(), request.params)
                 for key, request in requests.items()]
        endpoint = lines[0]["url"]
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        uploaded = await client.files.create(file=("reliable-batch.jsonl", data), purpose="batch")
        batch = await client.batches.create(input_file_id=uploaded.id, endpoint=endpoint,
                                            completion_window=COMPLETION_WINDOW)
        self.batches_sent += 1
        log.info("pytest-reliable: sent batch %s (%d requests)", batch.id, len(lines))
        return str(batch.id)

    async def _wait(self, client: Any, batch_id: str, total: int,
                    on_progress: Progress | None) -> Any:
        delay = self.poll_first_s
        while True:
            batch = await client.batches.retrieve(batch_id)
            counts = getattr(batch, "request_counts", None)
            if on_progress is not None and counts is not None:
                on_progress(int(counts.completed or 0), int(counts.total or total),
                            int(counts.failed or 0))
            if batch.status in FINAL:
                return batch
            await asyncio.sleep(delay)
            delay = min(self.poll_max_s, delay * 1.5)

    async def _collect(self, client: Any, batch: Any,
                       requests: dict[str, Request]) -> BatchResult:
        answers: dict[str, ModelResponse] = {}
        failures: dict[str, str] = {}
        for line in await self._lines(client, batch.output_file_id):
            key, response = line.get("custom_id"), line.get("response") or {}
            if key not in requests:
                continue
            if int(response.get("status_code") or 0) == 200 and isinstance(
                    response.get("body"), dict):
                answers[key] = response_from_body(response["body"])
            else:
                failures[key] = f"batch line failed (HTTP {response.get('status_code')})"
        for line in await self._lines(client, batch.error_file_id):
            key = line.get("custom_id")
            if key in requests and key not in answers:
                error = line.get("error") or {}
                status = (line.get("response") or {}).get("status_code")
                failures[key] = (f"batch line failed: {error.get('code') or 'HTTP ' + str(status)}"
                                 f" {error.get('message') or ''}".rstrip())
        for key in requests:
            if key not in answers and key not in failures:
                failures[key] = f"batch {batch.id} ended {batch.status} without this request"
        return BatchResult(answers, failures)

    @staticmethod
    async def _lines(client: Any, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        content = await client.files.content(file_id)
        return [json.loads(line) for line in content.text.splitlines() if line.strip()]


__all__ = ["AnsweredAhead", "BatchResult", "BatchTransport", "batch_name"]
