"""The PostgreSQL store's claims: session-level advisory locks, so a claim dies with its holder's
connection (SPEC section 10)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from pytest_reliable.files import sha256_hex
from pytest_reliable.store.claims import Claims, Holder, this_host
from pytest_reliable.store.errors import StoreUnavailable
from pytest_reliable.store.postgres_driver import CONNECT_TIMEOUT_S, Server, one_line

log = logging.getLogger("pytest_reliable.store")

CLAIMS_RECONNECT_S = 1.0
"""A lost claims connection is tried again at most this often."""
SETTLE_S = 3.0
"""After the claims connection came back, new claims wait this long: other processes take back
what they held when the server went away (each reconnects within `CLAIMS_RECONNECT_S` of its
next claim) before this one may take it as free."""


def advisory_key(name: str) -> int:
    """A signed 64-bit advisory lock key from ``name``."""
    value = int(sha256_hex(name)[:16], 16)
    return value - (1 << 64) if value >= (1 << 63) else value


class AdvisoryClaims(Claims):
    """Session-level advisory locks on one connection of this process's own: the server drops
    them when the connection ends, so a claim dies with its holder.

    The connection's ``application_name`` names this host and pid (for waiters' messages). When
    it is lost (a network glitch, a server restart), the server dropped its locks with it: the
    new connection takes back the claims still held here (one another process took meanwhile is
    said once: that key may be paid for twice)."""

    def __init__(self, store: Server) -> None:
        super().__init__(f"postgresql://{store.host}:{store.port}/{store.dbname}")
        self.store = store
        self._lock = threading.Lock()
        self._conn: Any = None
        self._retry_at = 0.0
        self._mine: set[str] = set()
        """Names locked on the current connection (the lock held to read or change it)."""
        self._orphans: set[str] = set()
        """Names locked on a connection that was lost (taken back on the next one)."""
        self._ever_connected = False
        self._settle_until = 0.0

    def _connection(self) -> Any:
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._drop()  # closed under us (the server ended it): its locks went with it
        if self._conn is None:
            if time.monotonic() < self._retry_at:
                raise StoreUnavailable(f"{self.store._where()} is not reachable")
            try:
                conn = self.store._psycopg.connect(
                    self.store.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                    application_name=application_name())
                # the look after a lock must take a snapshot of its own (see _acquire_checking)
                conn.execute("SET default_transaction_isolation = 'read committed'")
            except self.store._psycopg.Error as error:
                self._retry_at = time.monotonic() + CLAIMS_RECONNECT_S
                raise StoreUnavailable(one_line(error)) from None
            reconnected = self._ever_connected
            self._conn = conn
            self._ever_connected = True
            self._take_back(conn)
            if reconnected:
                # The server is back: other processes' claims that died with it are taken back
                # by their holders as they reconnect; new claims here wait a moment for that.
                self._settle_until = time.monotonic() + SETTLE_S
                self.store.database_back()
        return self._conn

    def _take_back(self, conn: Any) -> None:
        """The claims this process still holds that were locked on a connection since lost, or
        taken while the database was away, locked on the new connection."""
        lost = []
        orphans, self._orphans = self._orphans | self.take_unshared(), set()
        for name in self.held_here(orphans):
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (advisory_key(name),)).fetchone()
            if row[0]:
                self._mine.add(name)
            else:
                lost.append(name)
        if lost:
            self._mine.difference_update(lost)
            log.warning("pytest-reliable: the claims connection to %s was lost, and %d claims "
                        "this process held were taken by another process meanwhile: those calls "
                        "may be paid for twice", self.store._where(), len(lost))

    def _run(self, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
        """The first row of each statement, sent together (one round trip); the lock held."""
        conn = self._connection()
        try:
            if len(statements) == 1:
                sql, params = statements[0]
                return [tuple(conn.execute(sql, params).fetchone())]
            with conn.pipeline():
                cursors = [conn.execute(sql, params) for sql, params in statements]
            return [tuple(cursor.fetchone()) for cursor in cursors]
        except self.store._psycopg.Error as error:
            if conn.closed or conn.broken:
                self._drop()  # its locks died with it: a new connection takes them back
            raise StoreUnavailable(one_line(error)) from None

    def _acquire(self, name: str) -> bool:
        return self._lock_and_look(name, None)[0]

    def _acquire_checking(self, name: str, key: str) -> tuple[bool, bool | None]:
        """The lock, then whether ``key`` is a stored answer's key, in one round trip: two
        statements, so the look's snapshot is taken after the lock was granted (one statement
        would take it before: an answer stored and its claim let go in between would be
        missed, and paid for again)."""
        return self._lock_and_look(name, key if self.store.has_schema else None)

    def _lock_and_look(self, name: str, key: str | None) -> tuple[bool, bool | None]:
        with self._lock:
            statements: list[tuple[str, tuple[Any, ...]]] = []
            self._connection()
            # Locked on this connection already (a new connection took back what this process
            # holds, this name included): a lock taken twice by a session needs two unlocks.
            retaken = name in self._mine
            settling = not retaken and time.monotonic() < self._settle_until
            if not (retaken or settling):
                statements.append(("SELECT pg_try_advisory_lock(%s)", (advisory_key(name),)))
            if key is not None:
                statements.append((
                    "SELECT EXISTS (SELECT 1 FROM reliable_answers WHERE key = %s)", (key,)))
            rows = self._run(statements) if statements else []
            held = retaken or (not settling and bool(rows[0][0]))
            stored = bool(rows[-1][0]) if key is not None else None
            if held:
                self._mine.add(name)
            return held, stored

    def _release(self, name: str) -> None:
        with self._lock:
            if name not in self._mine:
                return  # not locked on this connection: it died with an earlier one
            self._mine.discard(name)
            if self._conn is None or self._conn.closed:
                return  # the server dropped this connection's claims with it
            self._run([("SELECT pg_advisory_unlock(%s)", (advisory_key(name),))])

    def _holders(self, names: Sequence[str]) -> dict[str, Holder]:
        """From ``pg_locks`` (every session sees it) and ``pg_stat_activity`` (its host, pid
        and idle time: visible for sessions of the same user, or with pg_read_all_stats)."""
        wanted = {}
        for name in names:
            unsigned = advisory_key(name) & 0xFFFFFFFFFFFFFFFF
            wanted[(unsigned >> 32, unsigned & 0xFFFFFFFF)] = name
        found = self.store._query(
            "SELECT l.classid::bigint, l.objid::bigint, l.pid, a.application_name,"
            " host(a.client_addr), EXTRACT(EPOCH FROM a.backend_start),"
            " CASE WHEN a.state = 'idle' THEN EXTRACT(EPOCH FROM clock_timestamp()"
            " - a.state_change) END"
            " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")
        holders = {}
        for classid, objid, pid, app, client, started, idle in found:
            held = wanted.get((int(classid), int(objid)))
            if held is None:
                continue
            ident = f"pg:{pid}:{started}"
            named = APPLICATION.fullmatch(str(app or ""))
            label = (f"host {named.group(1)} pid {named.group(2)}" if named else
                     f"PostgreSQL backend {pid}" + (f" (from {client})" if client else ""))
            holders[held] = Holder(ident, label, float(idle) if idle is not None else None)
        return holders

    def _drop(self) -> None:
        self._orphans |= self._mine  # the server dropped them with the connection
        self._mine.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a dead connection may fail to close
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._drop()
            self._orphans.clear()


APPLICATION = re.compile(r"pytest-reliable (\S+) pid (\d+)")


def application_name() -> str:
    """``pytest-reliable HOST pid PID`` (PostgreSQL keeps 63 bytes of it)."""
    return f"pytest-reliable {this_host()[:32]} pid {os.getpid()}"
