"""How the runner's calls reach a model: the `Transport` protocol, and what one `answer` works with
(`Sending`).

The runner (`calls.runner`) has one path: it looks the requests up in the store, takes their
claims (`calls.claiming`), and hands the requests it holds to its transport's `answer`. A
transport sends them and reports back: each answer goes to `Sending.keep` as soon as it is in
(the runner stores it, then pays for it, before anything else happens with it), and `answer`
returns every request's `CallResult`. Each attempt the transport sends takes its share of the
budget first, through `Sending.meter` (`calls.money.Meter.reserve`).

Two transports: `calls.direct.DirectTransport` (each request a call of its own: retries,
Retry-After, timeouts, abandoning) and `calls.batch.BatchTransport` (``--reliable-batch``: the
requests as one job of a provider's batch API, for a model that is `models.base.BatchCapable`).
``together`` is all the runner knows of the difference: whether the requests are claimed and
answered as one set (within one deadline, ``wait_timeout``) or each on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_reliable.calls.requests import CallResult, ProgressEvent, Request
from pytest_reliable.models.base import ModelResponse

if TYPE_CHECKING:
    from pytest_reliable.calls.money import Meter

Keep = Callable[[dict[str, ModelResponse]], Awaitable[None]]
"""Stores answers (by cache key), then pays for them: awaited as soon as they are in, so an answer
paid for is in the store before its claim is released, a batch forgotten or a follow-up sent."""


@dataclass
class Sending:
    """What one `Transport.answer` works with, from the runner."""

    meter: Meter
    """Each attempt's share of the budget (`Meter.reserve`) before it is sent."""
    keep: Keep
    on_progress: Callable[[ProgressEvent], None] | None = None
    deadline: float | None = None
    """The event loop's time at which waiting ends (a together transport's ``wait_timeout``)."""
    stopping: bool = False
    """A call of the evaluation was interrupted: attempts not started yet are not started."""


class Transport(Protocol):
    """Sends the requests the runner holds the claims of, and reports their results."""

    @property
    def together(self) -> bool:
        """True: the requests are claimed together and go in one `answer` (a batch), waiting at
        most ``wait_timeout`` seconds for them and for other processes' answers; False: each
        request is claimed and answered on its own, the runner's concurrency at a time."""
        ...

    @property
    def wait_timeout(self) -> float: ...

    def longest_call_s(self) -> float | None:
        """The longest answering one held request may take (None: no limit): how long another
        process waiting for it gives the claim before it expires (`Runner.claim_patience`)."""
        ...

    async def answer(self, requests: Mapping[str, Request],
                     sending: Sending) -> dict[str, CallResult]:
        """Every request's result (by cache key); each answer went to ``sending.keep`` first."""
        ...


__all__ = ["Keep", "Sending", "Transport"]
