"""Fixtures shared by the store's tests: a real PostgreSQL server (never a mock).

``postgres_server`` starts one throwaway cluster per test session (per xdist worker) from Debian's
``postgresql`` package (`pytest_reliable.testing.postgres`); ``postgres_url`` gives each test a
fresh database on it. Where PostgreSQL or psycopg is missing the tests that need them skip, except
under CI, where .ci/run installs both and a skip would hide a broken store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy  # noqa: F401  (see below)
import pytest

from pytest_reliable.testing.postgres import PostgresNotFound, TemporaryPostgres

# numpy is imported here, before any in-process pytester run: pytester restores sys.modules after
# each run, and numpy's C extension cannot be loaded twice in one process. The plugin imports numpy
# only once a reliable test needs it, so without this the first in-process run that needs it
# would leave numpy half-unloaded for every later one (an order-dependent ImportError).


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, but CI is set: the PostgreSQL store's tests must run in CI "
                    "(.ci/run installs Debian's postgresql package and the postgres extra)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _missing('psycopg is not installed (pip install "pytest-reliable[postgres]")')
    try:
        server = TemporaryPostgres()
    except PostgresNotFound as error:
        _missing(str(error))
    with server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: TemporaryPostgres) -> str:
    """A fresh, empty database on the session's server (its URL carries the password)."""
    return postgres_server.create_database()
