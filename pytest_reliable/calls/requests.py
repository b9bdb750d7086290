"""What a call is and what comes back: `Request` (messages, sampling parameters, sample index,
scope), `CallResult`, the progress `ProgressEvent`, a runner's counts `RunStats`, and what the
run's first round answered ahead of the tests (`AnsweredAhead`).

Shared by the runner (`calls.runner`), its claims, its money and its transports, so none of them
imports another for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_reliable.calls.pricing import CallCost, Spend
from pytest_reliable.models.base import Message, ModelResponse, SamplingParams

Status = Literal["ok", "not_run", "error"]


@dataclass(frozen=True)
class Request:
    """One call: messages as a tuple of (role, content) pairs (hashable, canonical)."""

    messages: tuple[tuple[str, str], ...]
    params: SamplingParams
    sample_index: int = 0
    scope: str | None = None

    @classmethod
    def of(
        cls,
        messages: Sequence[Message] | Sequence[tuple[str, str]],
        params: SamplingParams,
        sample_index: int = 0,
        scope: str | None = None,
    ) -> Request:
        canon = tuple(
            (str(m["role"]), str(m["content"])) if isinstance(m, dict) else (str(m[0]), str(m[1]))
            for m in messages
        )
        return cls(canon, params, sample_index, scope)

    def message_dicts(self) -> list[Message]:
        return [{"role": r, "content": c} for r, c in self.messages]


def number_samples(
    items: Sequence[tuple[Sequence[Message], SamplingParams]], nodeid: str
) -> list[Request]:
    """Sample indexes in plan order: occurrence number at temperature > 0 (scoped to the nodeid),
    index 0 and no scope at temperature 0."""
    seen: dict[tuple[Any, ...], int] = {}
    out: list[Request] = []
    for messages, params in items:
        req = Request.of(messages, params)
        if params.temperature > 0:
            k = (req.messages, params)
            idx = seen.get(k, 0)
            seen[k] = idx + 1
            out.append(Request(req.messages, params, idx, nodeid))
        else:
            out.append(req)
    return out


@dataclass
class CallResult:
    response: ModelResponse | None
    cached: bool = False
    status: Status = "ok"
    error: str | None = None
    attempts: int = 0
    retries: int = 0
    cost: CallCost | None = None
    """A call made (and priced): what it cost (`calls.money.Meter.pay`)."""


@dataclass(frozen=True)
class ProgressEvent:
    done: int
    total: int
    cached: int
    made: int
    failed: int
    note: str | None = None
    """What the calls wait for, when they wait for another party (a batch, another process)."""
    waiting: str = ""
    """What the evaluation waits for, once a wait for other processes' claims is long (see
    `store.waits`): shown on the progress line."""


@dataclass
class RunStats:
    made: int = 0
    cached: int = 0
    retries: int = 0
    not_run: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    """Prompt tokens sent with the calls made (as the server counted them)."""
    prompt_tokens_evaluated: int = 0
    """Of those, the tokens the server had to evaluate: see `Runner._evaluated_tokens`."""
    completion_tokens: int = 0
    abandoned: int = 0
    """Calls that did not end within `CANCEL_GRACE_S` of their cancellation at the timeout."""
    spend: Spend = field(default_factory=Spend)
    """Money of these calls (SPEC section 13): paid now, and saved by the cache."""
    usage_ignored: str | None = None
    """The first bad usage a paid answer reported (kept, its tokens estimated): said once."""



@dataclass
class AnsweredAhead:
    """What the run's first round (``--reliable-batch``, `pytest_reliable.run.first_round`) did
    in this process, by cache key, for the tests to come; shared by every runner of the run."""

    paid: dict[str, CallResult] = field(default_factory=dict)
    """Calls it made (each with its cost) that no test has counted yet: the runner that serves
    one from the store counts it as its own call made (its price is that test's spend)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Requests the first round could not answer (their line failed twice, or the batch that
    owes them did not finish in time): an error for the cell, not sent again in this run."""
