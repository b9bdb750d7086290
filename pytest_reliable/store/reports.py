"""Kept reports: the release history's runs (``--reliable-history DIR``, SPEC section 10).

A kept report is the run's JSON report (`report.json_report`) with three more top-level fields:
``run_id`` (``--reliable-run-id``: the CI's run id, else one per session), ``git_commit``
(``git rev-parse HEAD`` in the rootdir, null when there is no git or no repository) and ``part``
(one id per pytest session: the shards of one CI run share the run id, each keeps its own part).
The model and the date are the report's own ``model`` and ``created``.

Two places keep them: files in the history directory, named by run id (``<run id>.json``;
another part of the same run id gets ``<run id>.2.json``, ...: `keep_in_dir`), and the run's
`Store` (`Store.keep_run_report`: the PostgreSQL store's table ``reliable_reports``, which every
host reads; the local files keep none). `report.history` reads them back, each checked by
`schema.load`, and draws them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_reliable.files import write_atomic
from pytest_reliable.schema.entries import json_safe

GIT_TIMEOUT_S = 10.0
UNSAFE_IN_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


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


def report_text(kept: Mapping[str, Any]) -> str:
    """A kept report as the JSON text both places keep."""
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
    return write_atomic(path, report_text(kept))
