"""Claims: single-flight of one call (or one n* pilot) across every process using a store.

A claim is a name (a cache key, an n* key) that at most one holder has at a time. It dies with
its holder: a process killed with SIGKILL never blocks the others (the backends use locks the
operating system or the database server drops with the process or its connection). Waiting is
the caller's business (`calls.runner.Runner` polls for the answer; `store.nstar` for the entry): a
claim is only ever tried, never waited for here.

Within one process the claims of a location are kept in one registry, so two handles on the same
store (or two threads) exclude each other as two processes do.

A claim may be taken over once its holder is deemed gone for good (`store.waits`): the waiter
then claims the next *generation* of the name (`claim_name`), so the takeover is single-flight
too. `Claims.holders` says who holds what (a host and pid where the backend can tell), for the
waiters' messages and to expire every claim of a holder found unresponsive at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_reliable.files import sha256_hex
from pytest_reliable.store.errors import StoreUnavailable

log = logging.getLogger("pytest_reliable.store")

LOST_GRACE_S = 10.0
"""How long claims wait for a database that stopped answering before they go local."""

_registry_lock = threading.Lock()
_held: set[tuple[str, str]] = set()
"""(location, name) of every claim this process holds."""


def this_host() -> str:
    return socket.gethostname() or "localhost"


def claim_name(name: str, generation: int = 0) -> str:
    """The claim of ``name`` at ``generation``: 0 is the ordinary claim; a waiter that takes over
    an expired claim claims generation 1 (and so on), so only one of the waiters does."""
    return name if generation == 0 else f"{name}#takeover-{generation}"


@dataclass(frozen=True)
class Holder:
    """Who holds a claim, as far as the backend can tell."""

    ident: str
    """Unique while the holder lives (a backend pid and its start, a pid on a host)."""
    label: str
    """For messages: ``host ci-2 pid 4242``, ``pid 4242 on this host``, ..."""
    idle_s: float | None = None
    """How long the holder has done nothing on its claims' connection (PostgreSQL), if known."""

    def describe(self) -> str:
        if self.idle_s is not None and self.idle_s >= 1:
            return f"{self.label} (idle for {self.idle_s:.0f} s)"
        return self.label


THIS_PROCESS = Holder(f"pid:{os.getpid()}@{this_host()}", "another thread of this process")


class Claims(ABC):
    """``try_claim(name)`` -> True when this process now holds ``name``; ``release(name)``."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.degraded: str | None = None
        """Why claims are process-local now (the database was lost), for the one report."""
        self._lost_since: float | None = None
        """When the database stopped answering for claims (None: it answers)."""
        self.unshared: set[str] = set()
        """Claims held while the database could not be asked: taken there when it is back."""

    @abstractmethod
    def _acquire(self, name: str) -> bool:
        """The other processes' side: True when none of them holds ``name``."""

    @abstractmethod
    def _release(self, name: str) -> None: ...

    def _acquire_checking(self, name: str, key: str) -> tuple[bool, bool | None]:
        """`_acquire`, and whether an answer is stored under ``key`` when the backend can tell
        in the same round trip (None: it cannot; the caller looks). The look must see every
        answer stored before the claim was granted: the holder stores, then lets go."""
        return self._acquire(name), None

    def _holders(self, names: Sequence[str]) -> dict[str, Holder]:
        """Who, in other processes, holds which of ``names`` (those it can tell)."""
        return {}

    def try_claim(self, name: str) -> bool:
        return self.try_claim_checking(name)[0]

    def try_claim_checking(self, name: str, key: str | None = None) -> tuple[bool, bool | None]:
        """(held, answer stored under ``key`` (default ``name``): True, False, or None when
        unknown). Not held, the look still tells whether a waiter may stop waiting."""
        slot = (self.location, name)
        with _registry_lock:
            if slot in _held:
                return False, None
            _held.add(slot)
        stored: bool | None = None
        try:
            acquired, stored = self._acquire_checking(name, name if key is None else key)
            self._lost_since = None
        except StoreUnavailable as error:
            acquired = self._without_database(error)
            if acquired:
                with _registry_lock:
                    self.unshared.add(name)
        if not acquired:
            with _registry_lock:
                _held.discard(slot)
        return acquired, stored

    def _without_database(self, error: StoreUnavailable) -> bool:
        """Whether to hold a claim the database cannot be asked about. For `LOST_GRACE_S` of an
        outage, no: the caller waits, as a restarting server is back in seconds (and its
        holders take their claims back, `_take_back`). Then yes: claims are local to this
        process (said once), so the run goes on; another host may pay for the same call."""
        now = time.monotonic()
        if self._lost_since is None:
            self._lost_since = now
        if now - self._lost_since < LOST_GRACE_S:
            return False
        if self.degraded is None:
            self.degraded = str(error)
            log.warning("pytest-reliable: claims of %s are local to this process (%s): "
                        "another host may pay for the same call", self.location, error)
        return True

    def held_here(self, names: set[str]) -> list[str]:
        """Those of ``names`` this process still holds at this location."""
        with _registry_lock:
            return sorted(name for name in names if (self.location, name) in _held)

    def take_unshared(self) -> set[str]:
        """The claims taken while the database was away (to be taken there), emptied."""
        with _registry_lock:
            taken, self.unshared = self.unshared, set()
        return taken

    def release(self, name: str) -> None:
        with _registry_lock:
            self.unshared.discard(name)
        try:
            self._release(name)
        except StoreUnavailable:
            pass  # the database dropped the claim with the connection
        finally:
            with _registry_lock:
                _held.discard((self.location, name))

    def holders(self, names: Sequence[str]) -> dict[str, Holder]:
        """Who holds which of ``names``: what the backend can tell of other processes, else this
        process when it holds one. Never raises: a holder not found is unknown."""
        found: dict[str, Holder] = {}
        try:
            found.update(self._holders(names))
        except (StoreUnavailable, OSError) as error:
            log.debug("could not tell who holds claims of %s: %s", self.location, error)
        with _registry_lock:
            found.update({name: THIS_PROCESS for name in names
                          if name not in found and (self.location, name) in _held})
        return found

    def close(self) -> None:
        """Release what this handle still holds (its holder's end)."""


class ProcessClaims(Claims):
    """Claims within this process only: for answers no other process can read (in memory)."""

    def _acquire(self, name: str) -> bool:
        return True

    def _release(self, name: str) -> None:
        pass


def lock_offset(name: str, bits: int = 40) -> int:
    """Where ``name`` locks: a byte offset from its hash (collisions only make one wait)."""
    return int(sha256_hex(name)[: bits // 4], 16)


_files_lock = threading.Lock()
_files: dict[str, tuple[int, int]] = {}
"""Path -> (descriptor, handles): one descriptor per file per process, since closing any
descriptor of a file drops every POSIX lock the process holds on it."""


class FileClaims(Claims):
    """Byte-range locks (``fcntl.lockf``) on one file next to the sqlite cache: one byte per
    claim, released by the kernel when the holding process ends, however it ends."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path
        self._fd: int | None = None

    def _descriptor(self) -> int:
        if self._fd is None:
            key = str(self.path)
            with _files_lock:
                fd, handles = _files.get(key, (-1, 0))
                if fd < 0:
                    try:
                        self.path.parent.mkdir(parents=True, exist_ok=True)
                        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
                    except OSError as error:
                        raise StoreUnavailable(f"claims file {self.path}: {error}") from None
                _files[key] = (fd, handles + 1)
            self._fd = fd
        return self._fd

    def _acquire(self, name: str) -> bool:
        import fcntl

        try:
            fcntl.lockf(self._descriptor(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, lock_offset(name))
        except (BlockingIOError, PermissionError):
            return False
        except OSError as error:
            raise StoreUnavailable(f"claims file {self.path}: {error}") from None
        return True

    def _release(self, name: str) -> None:
        import fcntl

        if self._fd is None:
            return
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, lock_offset(name))
        except OSError as error:
            raise StoreUnavailable(f"claims file {self.path}: {error}") from None

    def _holders(self, names: Sequence[str]) -> dict[str, Holder]:
        from pytest_reliable.store.holders import describe_process, range_holders

        offsets = {lock_offset(name): name for name in names}
        found = {}
        for offset, pid in range_holders(self.path, list(offsets)).items():
            found[offsets[offset]] = Holder(f"pid:{pid}@{this_host()}",
                                            f"{describe_process(pid)} on this host")
        return found

    def close(self) -> None:
        if self._fd is None:
            return
        key = str(self.path)
        with _files_lock:
            fd, handles = _files.get(key, (-1, 0))
            if handles <= 1:
                _files.pop(key, None)
                if fd >= 0:
                    os.close(fd)
            else:
                _files[key] = (fd, handles - 1)
        self._fd = None


def file_claims(path: Path) -> Claims:
    """`FileClaims` where the platform has POSIX locks, else claims within this process."""
    try:
        import fcntl  # noqa: F401
    except ImportError:  # Windows
        return ProcessClaims(str(path))
    return FileClaims(path)


__all__ = ["Claims", "FileClaims", "Holder", "ProcessClaims", "file_claims", "lock_offset",
           "this_host"]
