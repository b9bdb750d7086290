"""Start-up checks: what would fail later fails now, before any model call, as a usage error.

A report path that cannot be written, a missing API key, a broken reliable.yaml, an unusable
cache file, a baseline that cannot be built and a lock that no longer matches would otherwise be
found once per test, or at the end of a run that has paid for its calls. Each check raises
`pytest.UsageError` (exit code 4) naming the option and the fix. `ReliableState` runs them in
this order when the run is configured.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_reliable.settings import Settings

if TYPE_CHECKING:
    from pytest_reliable.space import Space
    from pytest_reliable.store import Store

LOCK_ERROR = "--reliable-lock: "
"""Heading of a lock mismatch (also a worker's collect error for spaces declared in code)."""


def check_api_key(settings: Settings) -> None:
    """A remote model without a key stops the run at start-up, not once per test."""
    from pytest_reliable.models.openai_compat import is_loopback, url_host

    if not settings.model or settings.model == "local" or is_loopback(settings.base_url):
        return
    if not os.environ.get(settings.api_key_env):
        raise pytest.UsageError(
            f"--reliable-model {settings.model} at {url_host(settings.base_url)} needs an API key: "
            f"set the environment variable {settings.api_key_env} (or name another one with "
            "--reliable-api-key-env), nothing was run."
        )


def check_report_path(path: Path) -> None:
    """Before any model call: a report path that cannot be written would be found at the end."""
    if path.is_dir():
        raise pytest.UsageError(f"--reliable-report={path}: is a directory; give a file path.")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise pytest.UsageError(f"--reliable-report={path}: {parent} is a file, not a directory; "
                                "give a path in a directory.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"--reliable-report={path}: {parent} is not writable; give a "
                                "path you can write.")


def check_config_path(settings: Settings) -> None:
    """A ``--reliable-config`` that names no file (reliable.yaml itself is optional)."""
    if settings.config_path is not None and not settings.config_path.is_file():
        raise pytest.UsageError(f"--reliable-config={settings.config_path}: no such file; give "
                                "the path of your reliable.yaml (or drop the option).")


def check_writable_or_usage_error(flag: str, path: Path) -> None:
    """At start-up, so a run never pays for calls whose report cannot be written."""
    if path.is_dir():
        raise pytest.UsageError(f"{flag}={path} is a directory: give a file path such as "
                                f"{path / 'reliable.html'}.")
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK) or (
            path.exists() and not os.access(path, os.W_OK)):
        raise pytest.UsageError(f"{flag}={path} cannot be written ({existing} is not a writable "
                                "directory): give a path in a writable directory.")


def load_spaces_or_usage_error(path: Path) -> dict[str, Space]:
    """The declared spaces (none without the file; the space package is not even imported)."""
    if not path.exists():
        return {}
    from pytest_reliable.errors import ReliableConfigError
    from pytest_reliable.space import load_spaces

    try:
        return load_spaces(path)
    except ReliableConfigError as error:
        raise pytest.UsageError(str(error)) from None


def check_store_or_usage_error(settings: Settings) -> Store | None:
    """The store can serve: the local files are checked without creating anything; a shared
    PostgreSQL store is connected to, and returned open for the session (connecting is the
    check)."""
    from pytest_reliable.errors import ReliableError
    from pytest_reliable.store import StoreConfig, check_store

    try:
        return check_store(StoreConfig.of(settings))
    except ReliableError as error:
        where = "" if settings.store_url else "--reliable-cache: "
        raise pytest.UsageError(f"{where}{error}") from None


def check_baseline_options_or_usage_error(
    settings: Settings, load_stored_baseline: Callable[[], Any]
) -> None:
    """A baseline model that cannot be built, or a stored baseline report that cannot be read,
    stops the run before anything runs. ``load_stored_baseline`` loads and keeps the report
    (the session's ``stored_baseline``)."""
    if settings.baseline_model is None and settings.baseline_report is None:
        return
    from pytest_reliable.baseline import BaselineUsageError, check_model_name

    try:
        if settings.baseline_model is not None:
            check_model_name(settings.baseline_model,
                             settings.baseline_base_url or settings.base_url,
                             settings.api_key_env)
        if settings.baseline_report is not None:
            load_stored_baseline()
    except BaselineUsageError as error:
        raise pytest.UsageError(str(error)) from None


# -- reliable.lock: the declared spaces are pre-registered ---------------------------------------
def apply_lock_mode(settings: Settings, spaces: dict[str, Space]) -> None:
    """``--reliable-lock-update`` writes the lock; ``--reliable-lock`` stops on a difference."""
    if settings.lock_mode == "update":
        from pytest_reliable.space import write_lock

        write_lock(settings.lock_path, spaces)
    elif settings.lock_mode == "check":
        differences = lock_differences(settings.lock_path, spaces)
        if differences:
            raise pytest.UsageError(lock_message(settings.lock_path, differences))


def lock_differences(lock_path: Path, spaces: dict[str, Space]) -> list[str]:
    """What differs between ``spaces`` and the lock file, one line each (empty: all locked)."""
    from pytest_reliable.errors import LockError
    from pytest_reliable.space import compare_lock, read_lock

    if not lock_path.exists():
        raise pytest.UsageError(
            f"--reliable-lock: {lock_path} does not exist; write it once with "
            "--reliable-lock-update and commit it."
        )
    try:
        lock = read_lock(lock_path)
    except LockError as error:
        raise pytest.UsageError(f"--reliable-lock: {error}") from None
    return [d.describe() for d in compare_lock(spaces, lock)]


def lock_message(lock_path: Path, differences: list[str]) -> str:
    lines = "\n".join("  " + d for d in differences)
    return (f"{LOCK_ERROR}the declared spaces differ from {lock_path.name} (pre-registration "
            f"broken), nothing was run:\n{lines}\nIf the change is intended, run once with "
            "--reliable-lock-update and commit reliable.lock.")
