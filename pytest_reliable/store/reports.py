"""Kept reports: the release history's runs (``--reliable-history DIR``, SPEC section 10).

A kept report is the run's JSON report (`report.json_report`) with three more top-level fields:
``run_id`` (``--reliable-run-id``: the CI's run id, else one per session), ``git_commit``
(``git rev-parse HEAD`` in the rootdir, null when there is no git or no repository) and ``part``
(one id per pytest session: the shards of one CI run share the run id, each keeps its own part).
The model and the date are the report's own ``model`` and ``created``.

Two places keep them, as the rest of the store: files in a directory, named by run id
(``<run id>.json``; another part of the same run id gets ``<run id>.2.json``, ...), and, with
``--reliable-store``, the PostgreSQL table ``reliable_reports``. Reading gives the kept reports
back, each checked by `report.load.load_report`; `report.history` draws them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from pytest_reliable.files import write_atomic
from pytest_reliable.schema.entries import json_safe
from pytest_reliable.schema.load import ReportFileError, load_report

GIT_TIMEOUT_S = 10.0
UNSAFE_IN_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


class HistoryError(Exception):
    """A history that cannot be read; the message names the place and the fix."""


def history_dir_problem(directory: Path) -> str | None:
    """Why ``--reliable-history`` cannot keep reports in ``directory`` (checked at start-up, so a
    run never finds out at its end), or None."""
    if directory.exists() and not directory.is_dir():
        return f"{directory} is a file: give a directory (it is made when missing)"
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not a writable directory: give a directory you can write"
    return None


def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None (no git, not a repository, no commit yet)."""
    try:
        done = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root,
                              capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def kept_report(report: dict[str, Any], *, run_id: str, commit: str | None,
                part: str | None = None) -> dict[str, Any]:
    """The report as the history keeps it (the three fields of the module docstring added)."""
    return {**report, "run_id": run_id, "git_commit": commit,
            "part": part or uuid.uuid4().hex}


def _text(kept: dict[str, Any]) -> str:
    # ASCII escapes: a lone surrogate a model answered stays valid JSON (and PostgreSQL text).
    return json.dumps(json_safe(kept), indent=2, allow_nan=False, ensure_ascii=True) + "\n"


def keep_in_dir(directory: Path, kept: dict[str, Any]) -> Path:
    """Write ``kept`` into ``directory`` (made when missing), named by its run id; never over
    another kept report."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = UNSAFE_IN_NAMES.sub("_", str(kept["run_id"])).strip("._") or "run"
    path = directory / f"{stem}.json"
    number = 1
    while path.exists():
        number += 1
        path = directory / f"{stem}.{number}.json"
    return write_atomic(path, _text(kept))


def keep_in_store(store: Any, kept: dict[str, Any]) -> None:
    """Keep ``kept`` in a PostgreSQL store (`PostgresStore.keep_report`); its
    `StoreUnavailable` is the caller's to report."""
    store.keep_report(str(kept["run_id"]), str(kept["part"]), kept.get("created"),
                      kept.get("model"), kept.get("git_commit"), _text(kept))


def read_dir(directory: Path) -> list[dict[str, Any]]:
    """Every kept report in ``directory`` (``*.json``), checked; `HistoryError` naming a file
    that is not one."""
    if not directory.is_dir():
        raise HistoryError(f"{directory} is not a directory: give the directory that "
                           "--reliable-history DIR kept the runs in.")
    reports = []
    for path in sorted(directory.glob("*.json")):
        try:
            reports.append(dict(load_report(path)))
        except ReportFileError as error:
            raise HistoryError(f"{error} (In a history directory every *.json must be a kept "
                               "report: move this file out of it.)") from None
    return reports


def read_store(url: str) -> list[dict[str, Any]]:
    """Every report kept in the PostgreSQL store at ``url``; `HistoryError` when it cannot be
    read. Opened read-only (record mode ``none``): reading creates nothing."""
    from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError
    from pytest_reliable.store.postgres import PostgresStore

    try:
        store = PostgresStore(url, "none")
    except StoreUsageError as error:
        raise HistoryError(str(error)) from None
    try:
        texts = store.kept_reports()
    except StoreUnavailable as error:
        raise HistoryError(f"--store {store.location}: the kept reports cannot be read "
                           f"({error}): check the server and try again.") from None
    finally:
        store.close()
    reports = []
    for index, text in enumerate(texts):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise HistoryError(f"--store {store.location}: kept report {index + 1} is not JSON "
                               f"({error.msg}).") from None
        if isinstance(data, dict):
            reports.append(data)
    return reports
