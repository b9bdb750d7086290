"""Error types shared by the core modules (no pytest here).

Every error a user can cause carries a message that names where (file, line, key path or field)
and how to fix it; the plugin turns them into clean usage errors or test failures.
"""

from __future__ import annotations


class ReliableError(Exception):
    """Base class of every error pytest-reliable raises on purpose."""


class ReliableConfigError(ReliableError):
    """A bad space declaration: broken YAML, unknown key, empty list, wrong type, bad canonical."""


class DatasetError(ReliableError):
    """A dataset that does not fit its task or cannot be read: names the file, line and field."""


class LockError(ReliableConfigError):
    """An unreadable ``reliable.lock``."""
