"""What outlives a run: answers, budget ledgers, n* entries and claims, behind one interface.

`open_store` chooses the backend once, at start-up, from `StoreConfig`: without a store URL the
local sqlite files under ``.reliable/`` (`local.LocalStore`, the embedded default); with a
``postgresql://`` URL one PostgreSQL database shared by every machine (`postgres.PostgresStore`,
from the extra ``pytest-reliable[postgres]``). Everything above this package sees a `Store`.

Modules, lowest first: `errors` (the store's errors and warning), `claims` (single-flight across
processes), `holders` (who holds a locked sqlite file), `waits` (one waiting deadline per run),
`nstar` (the n* entries of ``--reliable-n auto``), `reports` (the release history's kept reports:
their directory and text), `base` (the `Store` interface and the ledger), `local` (sqlite), the
PostgreSQL store's parts (`postgres_driver`, `postgres_schema`, `postgres_claims`,
`postgres_records`) and `postgres` (the store itself).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pytest_reliable.contract.settings import RecordMode, Settings
from pytest_reliable.redact import redact, register_url_secrets
from pytest_reliable.store.base import RECORD_MODES, AnswerRow, Claim, Ledger, Store
from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError, StoreWarning
from pytest_reliable.store.local import (
    CacheFileError,
    LocalStore,
    SqliteLedger,
    check_budget_path,
    check_cache_path,
)

URL_SCHEMES = ("postgresql", "postgres")


def parse_store_url(text: str) -> str:
    """``text`` as a store URL (its password registered for redaction); ValueError naming the
    accepted form otherwise (with the password masked)."""
    url = str(text).strip()
    register_url_secrets(url)
    scheme = urlsplit(url).scheme.lower()
    if scheme not in URL_SCHEMES:
        raise ValueError(
            f"{redact(url)!r} is not a store URL: give a postgresql://HOST:PORT/DATABASE URL "
            "(user and password in it, or in PGUSER, PGPASSWORD or ~/.pgpass), or leave "
            "--reliable-store out for the local sqlite files under .reliable/"
        )
    return url


CI_RUN_IDS = (
    ("github", ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT")),
    ("gitlab", ("CI_PIPELINE_ID",)),
    ("buildkite", ("BUILDKITE_BUILD_ID",)),
    ("circleci", ("CIRCLE_WORKFLOW_ID",)),
)


def default_run_id(environ: Mapping[str, str] | None = None) -> str:
    """The CI's id of this run (every job and shard of one CI run shares it, so they share one
    budget), else a fresh id: then a budget covers one pytest session."""
    env = os.environ if environ is None else environ
    for ci, names in CI_RUN_IDS:
        if env.get(names[0]):
            parts = [env.get(name) or "1" for name in names]
            return "-".join([ci, *parts])
    return uuid.uuid4().hex


@dataclass(frozen=True)
class StoreConfig:
    """Where a run keeps what outlives it (the session fills this in from the settings)."""

    record_mode: RecordMode
    cache_path: Path
    """The local answers file (``--reliable-cache``)."""
    nstar_dir: Path
    url: str | None = None
    """A ``postgresql://`` URL: the shared store; None: the local files."""
    in_memory: bool = False
    """``--reliable-no-cache``: local answers in memory for this run only."""
    budget: bool = False
    """A budget is set: its ledger is checked at start-up too."""
    wait_timeout: float | None = None
    """``--reliable-wait-timeout``: the run's deadline for waiting on other processes' claims."""

    @property
    def budget_path(self) -> Path:
        return self.cache_path.parent / "budget.sqlite"

    @classmethod
    def of(cls, settings: Settings) -> StoreConfig:
        """The store a run's settings name."""
        assert settings.cache_path is not None and settings.store_dir is not None
        return cls(
            record_mode=settings.record, cache_path=settings.cache_path,
            nstar_dir=settings.store_dir, url=settings.store_url, in_memory=settings.no_cache,
            budget=bool(settings.budget_calls or settings.budget_tokens or settings.budget_usd),
            wait_timeout=settings.wait_timeout,
        )


def check_store(config: StoreConfig) -> Store | None:
    """Raise `StoreUsageError` now if the store cannot serve this run. The local files are only
    checked (nothing is created); a PostgreSQL store is connected to, its schema created, and the
    open store returned (connecting is the check)."""
    if config.url is not None:
        return open_store(config)
    if not config.in_memory:
        check_cache_path(config.cache_path, config.record_mode)
    if config.budget:
        check_budget_path(config.budget_path)
    return None


def open_store(config: StoreConfig) -> Store:
    if config.url is not None:
        if config.in_memory:
            raise StoreUsageError(
                "--reliable-no-cache with --reliable-store: the store exists to share answers "
                "between machines; drop one of them (--reliable-record all calls again and "
                "overwrites)"
            )
        from pytest_reliable.store.postgres import PostgresStore

        return PostgresStore(config.url, config.record_mode, wait_timeout=config.wait_timeout)
    return LocalStore(
        None if config.in_memory else config.cache_path,
        "new" if config.in_memory else config.record_mode,
        budget_path=config.budget_path,
        nstar_dir=config.nstar_dir,
        wait_timeout=config.wait_timeout,
    )


__all__ = [
    "RECORD_MODES",
    "AnswerRow",
    "CacheFileError",
    "Claim",
    "Ledger",
    "LocalStore",
    "SqliteLedger",
    "Store",
    "StoreConfig",
    "StoreUnavailable",
    "StoreUsageError",
    "StoreWarning",
    "check_store",
    "default_run_id",
    "open_store",
    "parse_store_url",
]
