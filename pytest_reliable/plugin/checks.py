"""Start-up checks: what would fail later fails now, before any model call, as a usage error.

A report path that cannot be written, a missing API key, a broken reliable.yaml, an unusable
cache file, a baseline that cannot be built and a lock that no longer matches would otherwise be
found once per test, or at the end of a run that has paid for its calls. Each check raises
`pytest.UsageError` (exit code 4) naming the option and the fix. `ReliableState` runs them in
this order when the run is configured.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_reliable.contract.settings import Settings

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


def check_config_path(settings: Settings) -> None:
    """A ``--reliable-config`` that names no file (reliable.yaml itself is optional)."""
    if settings.config_path is not None and not settings.config_path.is_file():
        raise pytest.UsageError(f"--reliable-config={settings.config_path}: no such file; give "
                                "the path of your reliable.yaml (or drop the option).")


# -- Output paths: written through regular files only, never over each other or an input -------
STEP_SUMMARY = "$GITHUB_STEP_SUMMARY"


@dataclass(frozen=True)
class NamedPath:
    """A path the run reads or writes, with the option (or file role) that names it."""

    name: str
    path: Path


def output_paths(settings: Settings, config: pytest.Config) -> list[NamedPath]:
    """Every file the run writes whole at its end (the step summary is appended to)."""
    named = [("--reliable-report", settings.report_path), ("--reliable-html", settings.html_path),
             ("--reliable-save-baseline", settings.save_baseline),
             ("--junitxml", getattr(config.option, "xmlpath", None)),
             ("--html (pytest-html)", getattr(config.option, "htmlpath", None)),
             (STEP_SUMMARY, os.environ.get("GITHUB_STEP_SUMMARY") or None)]
    # pytest resolves --junitxml and --html against the current directory, as the options here.
    return [NamedPath(name, Path(os.path.abspath(os.path.expanduser(str(path)))))
            for name, path in named if path is not None]


def protected_paths(settings: Settings) -> list[NamedPath]:
    """What a report written over would destroy: the paid answers and the run's own inputs."""
    from pytest_reliable.store import StoreConfig

    store = StoreConfig.of(settings)
    cache = store.cache_path
    protected = [NamedPath("--reliable-cache (the paid answers)", cache)]
    protected += [NamedPath("--reliable-cache (the paid answers)", Path(f"{cache}{suffix}"))
                  for suffix in ("-wal", "-shm", "-journal")]
    protected += [NamedPath("the budget ledger", store.budget_path),
                  NamedPath("the n* store (.reliable/n_star)", store.nstar_dir),
                  NamedPath("--reliable-config (the space declarations)", settings.config_file),
                  NamedPath("reliable.lock", settings.lock_path)]
    if settings.baseline_report is not None:
        protected.append(NamedPath("--reliable-baseline-report", settings.baseline_report))
    return protected


def check_output_paths(settings: Settings, config: pytest.Config) -> None:
    """Before any model call: each output is a writable regular file (or a new one), and none is
    another output, an input or a file of the plugin's (a report over the cache would destroy
    every paid answer). A symlink to a regular file is written through: its target gets the new
    content, the link stays."""
    outputs = output_paths(settings, config)
    for output in outputs:
        if output.name != STEP_SUMMARY:  # appended to at the end; failing there only warns
            check_writable_regular_file(output)
    for index, output in enumerate(outputs):
        for other in outputs[index + 1:]:
            if _same_or_inside(output.path, other.path):
                raise pytest.UsageError(
                    f"{output.name}={output.path} and {other.name}={other.path} name the same "
                    "file: one would overwrite the other; give each its own path.")
        for kept in protected_paths(settings):
            if _same_or_inside(output.path, kept.path):
                raise pytest.UsageError(
                    f"{output.name}={output.path} is {kept.name} ({kept.path}): writing there "
                    f"would destroy it; give {output.name} another path.")


def check_writable_regular_file(output: NamedPath) -> None:
    """A device (/dev/null), a directory, a FIFO or a link to one is refused: the atomic write
    replaces its target, which would replace the device node or the link."""
    flag, path = output.name, output.path
    try:
        resolved = path.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop
        raise pytest.UsageError(f"{flag}={path} is a symlink that resolves to no file (a loop?): "
                                "give the path of a regular file.") from None
    via = f" (a link to {resolved})" if resolved != path and path.is_symlink() else ""
    if resolved.is_dir():
        raise pytest.UsageError(f"{flag}={path} is a directory{via}: give a file path such as "
                                f"{path / ('reliable.html' if 'html' in flag else 'reliable.json')}.")
    if resolved.exists() and not resolved.is_file():
        raise pytest.UsageError(f"{flag}={path} is a device or special file{via}, not a regular "
                                "file; the run writes its output through regular files only: "
                                "give the path of a file.")
    existing = resolved.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise pytest.UsageError(f"{flag}={path}: {existing} is a file, not a directory; give a "
                                "path in a directory.")
    if not os.access(existing, os.W_OK | os.X_OK) or (
            resolved.exists() and not os.access(resolved, os.W_OK)):
        raise pytest.UsageError(f"{flag}={path} cannot be written ({existing} is not a writable "
                                "directory): give a path in a writable directory.")


def _same_or_inside(path: Path, kept: Path) -> bool:
    """``path`` is ``kept`` (through links, hard links, case-insensitive file systems) or lies
    under it (a report inside the n* store)."""
    try:
        if path.exists() and kept.exists() and os.path.samefile(path, kept):
            return True
    except OSError:
        pass
    resolved, kept_resolved = (os.path.normcase(str(p.resolve(strict=False))) for p in (path, kept))
    return resolved == kept_resolved or resolved.startswith(kept_resolved.rstrip(os.sep) + os.sep)


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


def undeclared_space(space: Any, spaces: dict[str, Space], settings: Settings,
                     invocation_dir: Path, args: Sequence[str] = ()) -> str:
    """What a marker's ``space=`` that names no declared space is told: a declared name it
    looks like (Unicode normalisation, case...), or the file that was read (or looked for) and
    the spaces it declares, and how pytest's rootdir decided where reliable.yaml is (``args``:
    the command line, whose path-like values pytest took the rootdir from)."""
    if isinstance(space, str) and spaces:
        from pytest_reliable.space import lookalike

        similar = lookalike(space, spaces)
        if similar is not None:
            return similar
    config = settings.config_file
    if config.exists():
        declared = ", ".join(repr(name) for name in sorted(spaces)) or "none"
        return (f"declare it under `spaces:` in {config}, which declares: {declared}")
    found = "" if settings.config_path is not None else _reliable_yaml_elsewhere(
        invocation_dir, config)
    if found:
        option, value = _separate_option_value(args) or ("--reliable-cache", "/abs/cache.sqlite")
        return (f"no space is declared: there is no {config} (the rootdir's reliable.yaml), but "
                f"there is {found}. pytest chose the rootdir {settings.rootdir} from the paths on "
                "the command line, and an option's value given as a separate argument counts as "
                f"one (`{option} {value}`); write such options with `=` (`{option}={value}`), or "
                f"give `--rootdir={Path(found).parent}` or `--reliable-config={found}`")
    where = ("--reliable-config" if settings.config_path is not None
             else f"reliable.yaml in the rootdir {settings.rootdir}")
    return (f"no space is declared: there is no {config} ({where}); declare the space under "
            "`spaces:` there, or give --reliable-config PATH")


def _separate_option_value(args: Sequence[str]) -> tuple[str, str] | None:
    """The first ``--reliable-* VALUE`` on the command line whose value is an existing path:
    pytest reads such a value as a path argument when it places the rootdir (it parses the
    command line before plugins add their options)."""
    for option, value in itertools.pairwise(args):
        if option.startswith("--reliable-") and "=" not in option \
                and not value.startswith("-") and os.path.exists(value):
            return option, value
    return None


def _reliable_yaml_elsewhere(start: Path, config: Path) -> str:
    """A reliable.yaml in ``start`` (the directory pytest ran in) or above it that is not the
    one the run read: the one the user meant when the rootdir moved."""
    for directory in (start, *start.parents):
        candidate = directory / "reliable.yaml"
        if candidate.is_file() and candidate != config:
            return str(candidate)
    return ""


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
    from pytest_reliable.verdict.baseline import BaselineUsageError, check_model_name

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
def apply_lock_mode(settings: Settings, spaces: dict[str, Space]) -> dict[str, Any] | None:
    """``--reliable-lock-update`` writes the lock and returns what it held before (empty
    without one: `lock_update_line` compares them at the end); ``--reliable-lock`` stops on a
    difference."""
    if settings.lock_mode == "update":
        from pytest_reliable.errors import LockError
        from pytest_reliable.space import read_lock, write_lock

        try:
            before: dict[str, Any] = dict(read_lock(settings.lock_path))
        except LockError:  # none yet, or unreadable: everything written is new
            before = {}
        write_lock(settings.lock_path, spaces)
        return before
    elif settings.lock_mode == "check":
        differences = lock_differences(settings.lock_path, spaces)
        if differences:
            raise pytest.UsageError(lock_message(settings.lock_path, differences))
    return None


def lock_update_line(lock_path: Path, before: dict[str, Any]) -> str:
    """``--reliable-lock-update``'s one line: what reliable.lock holds now against before (read
    at the end: under pytest-xdist the first worker adds the spaces declared in code)."""
    from pytest_reliable.errors import LockError
    from pytest_reliable.space import lock_update_summary, read_lock

    try:
        after = read_lock(lock_path)
    except LockError as error:
        return f"reliable lock: {error}"
    spaces = f"{len(after)} space" + ("" if len(after) == 1 else "s")
    return (f"reliable lock: wrote {lock_path} with {spaces}: "
            f"{lock_update_summary(before, after)}; commit it")


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


def check_batch_or_usage_error(settings: Settings) -> None:
    """``--reliable-batch`` talks to an OpenAI-compatible server's batch API."""
    if settings.batch and (not settings.model or settings.model == "local"):
        raise pytest.UsageError(
            "--reliable-batch sends the calls to an OpenAI-compatible server's batch API "
            "(/v1/files, /v1/batches): give --reliable-model NAME (and --reliable-base-url); the "
            "embedded model has no batch API.")


def check_pricing_or_usage_error(settings: Settings) -> None:
    """``--reliable-pricing``: the file is read and checked now; under a USD budget every model
    named on the command line (or ini) that the run will call needs a price, before any call.
    (The models known only in a test's body, a ``reliable_model`` fixture's or a judge's, are
    checked by the price pass before the first test runs: `plugin.prices`.)"""
    if settings.pricing_path is None:
        return
    from pytest_reliable.calls.pricing import PriceTable, PricingError
    from pytest_reliable.models.openai_compat import url_host

    try:
        table = PriceTable.load(settings.pricing_path)
    except PricingError as error:
        raise pytest.UsageError(f"--reliable-pricing: {error}") from None
    if settings.budget_usd is None:
        return
    from pytest_reliable.run.session import unpriced_message

    named = [(settings.model, settings.base_url), (settings.reference_model, settings.base_url),
             (settings.baseline_model, settings.baseline_base_url or settings.base_url)]
    for name, url in named:
        if name is None or name == "local":
            continue  # the embedded model costs nothing
        identity = f"openai:{name}@{url_host(url)}"
        if table.price_for([name, identity]) is None:
            raise pytest.UsageError(unpriced_message(settings, identity) + "; nothing was run.")
