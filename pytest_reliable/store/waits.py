"""Waiting for what other processes claimed: one deadline for the whole run, said while it runs.

A process that needs an answer or an n* pilot another process has claimed waits for it (`runner`
polls for the answer, `store.nstar` for the entry). `ClaimWaits` is the run's account of those
waits, one per store (so one per process and run):

- A claim expires (SPEC section 10) once its waiter has waited longer than the holder's work can
  take (the ``patience`` a waiter gives: for an answer, the longest a call can take with its
  retries). The waiter then takes the work over, under the claim's next generation
  (`claims.claim_name`), so one waiter does it. A holder with one expired claim is unresponsive
  (a frozen host): every other claim it holds expires at once for this process, so a frozen host
  holding 500 claims costs one patience, not 500.
- The deadline (``--reliable-wait-timeout``) bounds the time this process spends waiting in the
  whole run, not per key: waits that overlap count once. Past it every wait ends at once and the
  caller fails the cell or test with `ClaimWait.deadline_message` (no key is paid twice for it).
- While waiting, who holds what (`claims.Claims.holders`: host and pid where the backend can
  tell) is looked up now and then, and said once a wait is long (`report`): on the log, and by
  the runner on the progress line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Literal

from pytest_reliable.errors import ReliableError
from pytest_reliable.store.claims import Claims, Holder

log = logging.getLogger("pytest_reliable.store")

FIRST_REPORT_S = 10.0
"""A wait shorter than this is ordinary (another process's call in flight): nothing is said."""
REPORT_EVERY_S = 60.0
"""Then what is waited for is said again this often."""
HOLDERS_EVERY_S = 5.0
"""Who holds the claims waited for is looked up at most this often (one query for all)."""
HOLDERS_SOON_S = 0.5
"""... and this often once a holder was found unresponsive (its other claims expire at once)."""

State = Literal["waiting", "expired", "deadline"]


class ClaimWaitTimeout(ReliableError):
    """The run's waiting time (``--reliable-wait-timeout``) is spent: the test stops waiting."""


class ClaimWait:
    """One wait for one claim (see `ClaimWaits.begin`)."""

    def __init__(self, waits: ClaimWaits, name: str, what: str, patience: float | None) -> None:
        self.waits = waits
        self.name = name
        """The claim waited for (its current generation)."""
        self.what = what
        self.patience = patience
        self.started = waits.clock()
        self.holder: Holder | None = None
        self.ended = False

    def state(self) -> State:
        """``deadline``: the run's waiting time is spent; ``expired``: the claim's holder is deemed
        gone (take the work over under the next generation, see `take_over`); else waiting."""
        return self.waits._state(self)

    def take_over(self, name: str) -> None:
        """The claim expired: its holder is marked unresponsive, and this wait goes on for the
        claim ``name`` (the next generation) with fresh patience."""
        self.waits._expired(self)
        self.name = name
        self.holder = None
        self.started = self.waits.clock()

    def deadline_message(self) -> str:
        waits = self.waits
        holder = self.holder.describe() if self.holder is not None else "another process"
        return (
            f"not {'called' if self.what == 'answer' else 'run'}: this process waited "
            f"{waits.waited_s():.0f} s in all for work other processes claimed "
            f"(--reliable-wait-timeout {waits.deadline_s:g} s for the whole run), and this "
            f"{self.what} is still claimed by {holder}, which may be frozen. Nothing was paid "
            "twice for it; a rerun replays what the others stored meanwhile. Raise "
            "--reliable-wait-timeout to wait longer."
        )

    def end(self) -> None:
        self.waits._end(self)


class ClaimWaits:
    """The waits of one process's run on one store's claims (see the module docstring)."""

    def __init__(self, claims: Claims, deadline_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.claims = claims
        self.deadline_s = deadline_s
        """``--reliable-wait-timeout``; None: no deadline (a store used outside a run)."""
        self.clock = clock
        self._lock = threading.Lock()
        self._waits: set[ClaimWait] = set()
        self._waited = 0.0
        self._since: float | None = None
        """Start of the current stretch with at least one wait (None: nobody waits)."""
        self._frozen: dict[str, Holder] = {}
        self._taken_over: Counter[str] = Counter()
        """Claims taken over, by the label of the holder that let them expire."""
        self._looked_at = float("-inf")
        self._looking = False
        self._reported_at = float("-inf")
        self._summary_taken = False

    # -- the run's account ------------------------------------------------------------------------
    def begin(self, name: str, what: str = "answer", patience: float | None = None) -> ClaimWait:
        """Start waiting for claim ``name`` (``what``: "answer", "n* pilot"); ``patience``: how
        long its holder's work can take (None: as long as the holder lives)."""
        wait = ClaimWait(self, name, what, patience)
        with self._lock:
            if not self._waits:
                self._since = wait.started
            self._waits.add(wait)
        return wait

    def waited_s(self) -> float:
        """Seconds this process has spent waiting so far in the run (overlapping waits once)."""
        with self._lock:
            return self._waited_locked(self.clock())

    def _waited_locked(self, now: float) -> float:
        return self._waited + (now - self._since if self._since is not None else 0.0)

    def _end(self, wait: ClaimWait) -> None:
        with self._lock:
            if wait.ended:
                return
            wait.ended = True
            self._waits.discard(wait)
            if not self._waits and self._since is not None:
                self._waited += self.clock() - self._since
                self._since = None

    def _state(self, wait: ClaimWait) -> State:
        self._look_up_holders()
        now = self.clock()
        with self._lock:
            past_deadline = (self.deadline_s is not None
                             and self._waited_locked(now) >= self.deadline_s)
            if not past_deadline:
                if wait.holder is not None and wait.holder.ident in self._frozen:
                    return "expired"
                if wait.patience is not None and now - wait.started >= wait.patience:
                    return "expired"
                return "waiting"
        if wait.holder is None:  # the message names who holds it: looked up now
            wait.holder = self.claims.holders([wait.name]).get(wait.name)
        return "deadline"

    def _expired(self, wait: ClaimWait) -> None:
        if wait.holder is None:  # who let it expire: looked up now, so its other claims expire too
            wait.holder = self.claims.holders([wait.name]).get(wait.name)
        holder = wait.holder
        label = holder.describe() if holder is not None else "another process"
        with self._lock:
            if holder is not None:
                self._frozen[holder.ident] = holder
            self._taken_over[label] += 1
        log.warning("pytest-reliable: the claim of %s %s, held by %s, expired after %.0f s "
                    "without an answer: this process takes it over", wait.what, wait.name[:16],
                    label, self.clock() - wait.started)

    def _look_up_holders(self) -> None:
        """Who holds the claims waited for: one backend query for all, at most every
        `HOLDERS_EVERY_S`, by one thread at a time."""
        now = self.clock()
        with self._lock:
            # Once a holder was found unresponsive, new waits are checked against it promptly.
            every = HOLDERS_SOON_S if self._frozen else HOLDERS_EVERY_S
            if self._looking or now - self._looked_at < every or not self._waits:
                return
            if not self._frozen and all(now - w.started < every for w in self._waits):
                return  # short waits are ordinary: no query for them
            self._looking = True
            waits = list(self._waits)
        try:
            found = self.claims.holders(sorted({wait.name for wait in waits}))
        finally:
            with self._lock:
                self._looking = False
                self._looked_at = self.clock()
        with self._lock:
            for wait in waits:
                if wait.name in found:
                    wait.holder = found[wait.name]

    # -- what is said -----------------------------------------------------------------------------
    def describe(self) -> str:
        """What this process waits for now, and for whom: e.g. "waiting for 12 answers other
        processes claimed: host ci-2 pid 4242 holds 12; waited 35 s so far"."""
        now = self.clock()
        with self._lock:
            waits = list(self._waits)
            waited = self._waited_locked(now)
        whats = Counter(wait.what for wait in waits)
        holders = Counter(wait.holder.describe() if wait.holder is not None else "another process"
                          for wait in waits)
        things = ", ".join(f"{count} {what}{'s' if count > 1 else ''}"
                           for what, count in whats.most_common())
        who = ", ".join(f"{label} holds {count}" for label, count in holders.most_common(3))
        if len(holders) > 3:
            who += f" and {len(holders) - 3} more"
        limit = (f" of --reliable-wait-timeout {self.deadline_s:g} s"
                 if self.deadline_s is not None else "")
        return (f"waiting for {things} other processes claimed: {who}; waited {waited:.0f} s "
                f"so far{limit}")

    def report(self) -> str | None:
        """`describe`, when a wait has lasted `FIRST_REPORT_S` and nothing was said for
        `REPORT_EVERY_S` (logged too); else None. Any waiter may ask: one of them gets it."""
        now = self.clock()
        with self._lock:
            longest = max((now - wait.started for wait in self._waits), default=0.0)
            if longest < FIRST_REPORT_S or now - self._reported_at < REPORT_EVERY_S:
                return None
            self._reported_at = now
        text = f"pytest-reliable: {self.describe()}"
        log.warning("%s", text)
        return text

    def take_summary(self) -> str | None:
        """Once per run, if claims were taken over: whose, and what it risks."""
        with self._lock:
            if not self._taken_over or self._summary_taken:
                return None
            self._summary_taken = True
            taken = sum(self._taken_over.values())
            who = ", ".join(f"{count} held by {label}" for label, count in self._taken_over.items())
        claims = "1 claim" if taken == 1 else f"{taken} claims"
        return (f"pytest-reliable: {claims} of other processes expired without an answer and "
                f"this process did the work itself ({who}). A claim expires once its holder has "
                "had it longer than its work can take (a frozen or lost host); if that holder "
                "wakes, it may pay for the same calls again.")


__all__ = ["ClaimWait", "ClaimWaitTimeout", "ClaimWaits"]
