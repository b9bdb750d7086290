"""The store's errors and warning, below every module of the store that raises them."""

from __future__ import annotations

from pytest_reliable.errors import ReliableError


class StoreUsageError(ReliableError):
    """A store that cannot serve this run: the message names the place and the fix."""


class StoreUnavailable(Exception):
    """Raised by a backend primitive when its database cannot be used now (lost, full, locked).

    The `Store` turns it into kept answers, retries and one report; it never reaches a user."""


class StoreWarning(UserWarning):
    """The store could not store (or read) answers; they are kept in memory for this run."""
