"""The PostgreSQL store's driver: psycopg 3 and its pool (imported only when a
``postgresql://`` store is asked for), their logs routed away from the terminal, the password
kept out of every output, and `Server`: what the store's parts use of the store.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

from pytest_reliable.redact import redact, register_environment_secrets, register_url_secrets
from pytest_reliable.store.errors import StoreUsageError

if TYPE_CHECKING:
    from pytest_reliable.store.claims import Claims
    from pytest_reliable.store.waits import ClaimWaits

driver_log = logging.getLogger("pytest_reliable.store.driver")

EXTRA = 'pip install "pytest-reliable[postgres]"'
CONNECT_TIMEOUT_S = 10
POOL_NAME = "pytest-reliable"


def driver_modules() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as error:
        raise StoreUsageError(
            f"--reliable-store with a postgresql:// URL needs psycopg 3 and psycopg-pool, which "
            f"are not installed here ({error.name or error}): {EXTRA}"
        ) from None
    return psycopg, psycopg_pool


in_store = threading.local()
"""``active`` while this thread runs a store query: what the driver logs then is the store's."""
_routing_lock = threading.Lock()


class _DriverLogs(logging.Filter):
    """Takes the driver's records about the store's connections (the pool's threads, a store
    query's thread) off their logger and says them at DEBUG on `driver_log`: a store lost mid-run
    is reported once by the store (`Store.take_store_failure`), never as raw lines of the pool's
    reconnection attempts, which would otherwise print after pytest's summary."""

    def filter(self, record: logging.LogRecord) -> bool:
        ours = (record.threadName or "").startswith(POOL_NAME) or \
            getattr(in_store, "active", False)
        if not ours:
            try:
                ours = f"'{POOL_NAME}'" in record.getMessage()
            except Exception:  # noqa: BLE001 - a record that cannot be formatted is not ours
                return True
        if ours:
            driver_log.debug("%s: %s", record.name, redact(record.getMessage()))
        return not ours


def route_driver_logs() -> None:
    """Install `_DriverLogs` on psycopg's loggers (once per process)."""
    with _routing_lock:
        for name in ("psycopg", "psycopg.pool"):
            logger = logging.getLogger(name)
            if not any(isinstance(f, _DriverLogs) for f in logger.filters):
                logger.addFilter(_DriverLogs())


def register_store_secrets(url: str) -> None:
    """The URL's password and ``PGPASSWORD`` never appear in anything the plugin prints."""
    register_url_secrets(url)
    register_environment_secrets("PGPASSWORD")


def one_line(error: BaseException) -> str:
    return redact(" ".join(str(error).split()))


class Server(Protocol):
    """What the store's claims, budget ledger and n* entries use of their `PostgresStore`
    (declared here, so they need not import the store that makes them)."""

    url: str
    host: str
    port: str
    dbname: str
    location: str
    has_schema: bool
    _psycopg: Any
    claims: Claims
    waits: ClaimWaits

    def _where(self) -> str: ...

    def _query(self, sql: str, params: Any = None, *, many: bool = False,
               binary: bool = False, lazy: bool = False) -> list[tuple[Any, ...]]: ...

    def database_back(self) -> None: ...
