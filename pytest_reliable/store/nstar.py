"""The n* store of ``--reliable-n auto`` (SPEC section 7): what a pilot found, per key.

`NStarEntries` is what `nstar.run_auto` uses, whatever the store: ``get``, ``put`` and ``pilot``
(hold the key's claim while running its pilot, so the pilot runs once per key and every other
process waits for its entry). The wait counts in the run's one deadline (`store.waits`,
``--reliable-wait-timeout``): past it the test stops with `ClaimWaitTimeout`, naming who holds
the pilot; a holder found unresponsive (one of its answer claims expired) has its pilot taken
over. `NStarStore` keeps the entries as one small JSON file per key in
``.reliable/n_star/`` (the local default), written atomically (temp file + ``os.replace``), so
concurrent pytest-xdist workers never lose or corrupt each other's entries. It is not the response
cache: ``--reliable-no-cache`` leaves it alone. The PostgreSQL store keeps the same records in a
table (`pytest_reliable.store.postgres`).

An entry that cannot be read or has the wrong shape (an older version's, a hand edit, bytes that
are not UTF-8) is treated as absent with a warning: the pilot runs again. A store that cannot be
written (``n_star`` is a file, a read-only directory, a lost server) warns too and never costs the
verdict: the run gates on the n* its pilot found; only the next run pays for the pilot again.

n* lives in four rooms: the statistic `pytest_reliable.stats.reliable_n`, running it
`pytest_reliable.evaluate.nstar`, keeping it `pytest_reliable.store.nstar`, scheduling it
`pytest_reliable.evaluate.schedules`.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from pytest_reliable.contract.vocabulary import Mode
from pytest_reliable.files import content_hash, write_atomic

if TYPE_CHECKING:
    from pytest_reliable.store.claims import Claims
    from pytest_reliable.store.waits import ClaimWait, ClaimWaits

PILOT_POLL_FIRST_S = 0.1
PILOT_POLL_MAX_S = 2.0


class NStarStoreWarning(UserWarning):
    """A stored n* entry was unusable and is ignored (the pilot runs again), or could not be
    written (the next run runs the pilot again)."""


@dataclass(frozen=True)
class NStarKey:
    """Everything that changes n*: a different value is a different entry."""

    nodeid: str
    space_hash: str
    dataset_hash: str
    reference_model: str
    mode: Mode
    eps: float
    delta: float
    seed: int
    pilot_n: int
    n_star_method: str = "bootstrap"
    n_max: int = 1000

    def digest(self) -> str:
        return content_hash(asdict(self))[:32]


@dataclass(frozen=True)
class NStarEntry:
    """What a pilot found: n* (uncapped), whether it is reliable, the eps it vouches for."""

    n_star: int
    reliable: bool
    achievable_eps: float
    n_star_paper: int | None = None
    """The paper's n* from the same pilot (``bootstrap`` entries only)."""
    pilot_n: int | None = None
    """The pilot's size, kept with n*: a later run reading the entry reports it, and a bootstrap
    n* from a pilot under `stats.MIN_BOOTSTRAP_PILOT` stays not reliable there too (SPEC 7).
    None: n* of a run's own resamplings (no pilot), or an entry stored before it was kept."""

    @classmethod
    def from_record(cls, record: Any) -> NStarEntry | None:
        """The entry of a stored record, or None when a field is missing or of the wrong type."""
        if not isinstance(record, dict):
            return None
        n_star, reliable = record.get("n_star"), record.get("reliable")
        eps, paper = record.get("achievable_eps"), record.get("n_star_paper")
        pilot = record.get("pilot_n")
        if not (_is_int(n_star) and n_star >= 1 and isinstance(reliable, bool)):
            return None
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or math.isnan(eps):
            return None
        if paper is not None and not (_is_int(paper) and paper >= 1):
            return None
        if pilot is not None and not (_is_int(pilot) and pilot >= 1):
            return None
        return cls(n_star, reliable, float(eps), paper, pilot)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _warn_for(key: NStarKey, message: str) -> None:
    """Warn at the test the entry belongs to (its file), not at a line of the plugin."""
    warnings.warn_explicit(message, NStarStoreWarning, key.nodeid.split("::")[0] or "n*", 0,
                           module="pytest_reliable.store.nstar")


class NStarEntries(ABC):
    """n* entries of one store. Backends implement `_load` and `_save` (raising ``OSError`` or the
    store's own error when they cannot); reading, validating, warning and the pilot's claim live
    here. ``claims``: the store's (`pytest_reliable.store.claims`), or this process's only."""

    def __init__(self, claims: Claims | None = None, waits: ClaimWaits | None = None) -> None:
        if claims is None:
            from pytest_reliable.store.claims import ProcessClaims

            claims = ProcessClaims(f"n* store {id(self)}")
        if waits is None:
            from pytest_reliable.store.waits import ClaimWaits

            waits = ClaimWaits(claims)
        self.claims = claims
        self.waits = waits
        """The run's waits on other processes' claims (shared with the store's answers)."""

    @abstractmethod
    def where(self, key: NStarKey) -> str:
        """Where ``key``'s entry lives, for messages."""

    @abstractmethod
    def _load(self, key: NStarKey) -> str | bytes | None:
        """The stored record's JSON, or None when there is none."""

    @abstractmethod
    def _save(self, key: NStarKey, record: str) -> None: ...

    def _cannot_write_fix(self) -> str:
        return "fix the store"

    def get(self, key: NStarKey) -> NStarEntry | None:
        return self._lookup(key, warn=True)

    def _lookup(self, key: NStarKey, *, warn: bool) -> NStarEntry | None:
        from pytest_reliable.store.errors import StoreUnavailable

        try:
            raw = self._load(key)
        except (OSError, StoreUnavailable):
            return None  # unreadable counts as absent: the pilot runs (and says so if it can't store)
        if raw is None:
            return None
        try:
            record = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
            record = None
        if isinstance(record, dict) and record.get("key") != asdict(key):
            return None  # a digest collision or another version's key: not ours
        entry = NStarEntry.from_record(record)
        if entry is None and warn:
            _warn_for(key, f"n* store entry {self.where(key)} for {key.nodeid} is not a valid "
                           "entry and is ignored: the pilot runs again and rewrites it.")
        return entry

    def put(self, key: NStarKey, entry: NStarEntry) -> bool:
        """Store ``entry``; False (with a warning) when the store cannot take it. Never raises:
        the verdict of this run does not depend on it."""
        from pytest_reliable.store.errors import StoreUnavailable

        record = {"key": asdict(key), **asdict(entry)}
        try:
            self._save(key, json.dumps(record, indent=2))
        except (OSError, StoreUnavailable) as error:
            _warn_for(key, f"n* store entry {self.where(key)} for {key.nodeid} could not be "
                           f"written ({type(error).__name__}: {error}): this run gates on the "
                           f"n* = {entry.n_star} its pilot found, but the next run runs the pilot "
                           f"again: {self._cannot_write_fix()}.")
            return False
        return True

    @contextlib.contextmanager
    def pilot(self, key: NStarKey) -> Iterator[NStarEntry | None]:
        """Hold ``key``'s pilot claim for the block; gives the entry another process stored while
        this one waited (then no claim is held and no pilot is needed), else None.

        A pilot takes as long as it takes: its claim expires only when its holder was found
        unresponsive (`store.waits`); `ClaimWaitTimeout` once the run's waiting time is spent."""
        from pytest_reliable.store.claims import claim_name

        base = f"n*:{key.digest()}"
        generation = 0
        delay = PILOT_POLL_FIRST_S
        waiting: ClaimWait | None = None
        try:
            while not self.claims.try_claim(claim_name(base, generation)):
                found = self._lookup(key, warn=False)
                if found is not None:
                    break
                if waiting is None:
                    waiting = self.waits.begin(claim_name(base, generation), "n* pilot")
                state = waiting.state()
                if state == "deadline":
                    from pytest_reliable.store.waits import ClaimWaitTimeout

                    raise ClaimWaitTimeout(f"n* pilot of {key.nodeid}: "
                                           f"{waiting.deadline_message()}")
                if state == "expired":
                    generation += 1
                    waiting.take_over(claim_name(base, generation))
                    continue
                self.waits.report()
                time.sleep(delay)
                delay = min(PILOT_POLL_MAX_S, delay * 1.5)
            else:
                found = None
        finally:
            if waiting is not None:
                waiting.end()
        if found is not None:
            yield found
            return
        try:
            yield self._lookup(key, warn=False)
        finally:
            self.claims.release(claim_name(base, generation))


class NStarStore(NStarEntries):
    """The local n* store: one JSON file per key in ``directory``."""

    def __init__(self, directory: Path, claims: Claims | None = None,
                 waits: ClaimWaits | None = None) -> None:
        super().__init__(claims, waits)
        self.directory = Path(directory)

    def _path(self, key: NStarKey) -> Path:
        return self.directory / f"{key.digest()}.json"

    def where(self, key: NStarKey) -> str:
        return str(self._path(key))

    def _load(self, key: NStarKey) -> bytes | None:
        path = self._path(key)
        if not path.exists():
            return None
        return path.read_bytes()

    def _save(self, key: NStarKey, record: str) -> None:
        write_atomic(self._path(key), record)

    def _cannot_write_fix(self) -> str:
        return (f"make {self.directory} a writable directory (it holds only n* entries, no "
                "answers)")
