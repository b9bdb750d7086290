"""The run's budget of calls, tokens and USD (``--reliable-budget``), shared through the store's
ledger by every process and host of a run."""

from __future__ import annotations

import threading

from pytest_reliable.store.base import Ledger
from pytest_reliable.store.errors import StoreUnavailable


class Budget:
    """Call/token budget of the whole run (thread-safe).

    A call is one attempt sent: a retry counts, and so does an attempt abandoned at the timeout and
    sent again (the server still completes it, and bills it). Without a ledger it counts in this
    process; with the store's `Ledger` (the session gives one) the count is shared by every process
    and host of the run id, so ``--reliable-budget 50calls`` means 50 calls whatever the number of
    workers or machines. When the ledger's database cannot be used, the count goes on in this
    process (reported once): the run goes on, and its verdicts do not depend on the store.

    ``max_usd``: a call is granted only if its most possible cost (reserved at `try_start`) fits
    under the limit with what was spent and reserved so far; `settle` replaces the reservation
    by the call's real cost once its usage is known.
    """

    def __init__(
        self,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        *,
        max_usd: float | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.ledger = ledger
        self.calls = 0
        self.tokens = 0
        self.usd = 0.0
        self.outstanding_usd = 0.0
        """Reserved by this process's calls in flight, not settled yet."""
        self._lock = threading.Lock()
        self._ledger_failure: str | None = None
        self._failure_taken = False

    def describe(self) -> str:
        """The limit as the user gave it, e.g. ``--reliable-budget 50calls``."""
        parts = []
        if self.max_usd is not None:
            parts.append(f"{self.max_usd:g}usd")
        if self.max_calls is not None:
            parts.append(f"{self.max_calls}calls")
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens}")
        return "--reliable-budget " + ",".join(parts)

    def _exhausted(self) -> bool:
        return (self.max_calls is not None and self.calls >= self.max_calls) or (
            self.max_tokens is not None and self.tokens >= self.max_tokens
        )

    def _over_usd(self, usd: float) -> bool:
        return self.max_usd is not None and self.usd + usd > self.max_usd + 1e-12

    def _shared(self) -> Ledger | None:
        return self.ledger if self._ledger_failure is None else None

    def _lost(self, error: StoreUnavailable) -> None:
        with self._lock:
            if self._ledger_failure is None:
                self._ledger_failure = (
                    f"pytest-reliable: the budget ledger of the store could not be used ({error}): "
                    f"{self.describe()} is counted in this process from now on, so other "
                    "processes or hosts of this run may spend their own share too."
                )

    def try_start(self, usd: float = 0.0) -> bool:
        """Reserve one call (one attempt sent) and ``usd``, its most possible cost; False when
        the budget is spent (or the call could pass the USD limit)."""
        ledger = self._shared()
        if ledger is not None:
            try:
                granted = ledger.reserve(self.max_calls, self.max_tokens, self.max_usd, usd)
            except StoreUnavailable as error:
                self._lost(error)
            else:
                with self._lock:
                    self.calls += int(granted)
                    self.usd += usd if granted else 0.0
                    self.outstanding_usd += usd if granted else 0.0
                return granted
        with self._lock:
            if self._exhausted() or self._over_usd(usd):
                return False
            self.calls += 1
            self.usd += usd
            self.outstanding_usd += usd
            return True

    def add_tokens(self, n: int, usd: float = 0.0, released: float = 0.0) -> None:
        """Charge a call's tokens, and ``usd`` (its real cost less its reservations ``released``:
        may be negative)."""
        with self._lock:
            self.tokens += n
            self.usd += usd
            self.outstanding_usd = max(0.0, self.outstanding_usd - released)
        ledger = self._shared()
        if ledger is not None:
            try:
                ledger.add_tokens(n, usd)
            except StoreUnavailable as error:
                self._lost(error)

    def take_failure(self) -> str | None:
        """The ledger's failure message, once (None before one, and after)."""
        with self._lock:
            if self._ledger_failure is None or self._failure_taken:
                return None
            self._failure_taken = True
            return self._ledger_failure

