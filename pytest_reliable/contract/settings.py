"""One run's settings: every ``--reliable-*`` option, validated and typed (no pytest here).

The plugin fills one `Settings` at start-up from the command line, the environment and the ini
file (`plugin.options.read_settings`); the core reads it (`run.session.ReliableSession`).
Scripts and benchmarks build one directly: ``Settings(rootdir=Path("."), no_cache=True)``.

This module is imported on every pytest run where the plugin is installed, so it imports nothing
heavy: the defaults below that another module owns are repeated as literals (gate.py and nstar.py
import numpy), and tests/test_settings.py checks that they agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_reliable.contract.vocabulary import DEFAULT_POLICY, Policy

RecordMode = Literal["new", "none", "all"]
"""Of the response cache: record new answers, replay only (offline CI), or call again."""
NStarMethod = Literal["bootstrap", "paper"]
LockMode = Literal["check", "update"]
"""``--reliable-lock`` (stop if a declared space differs from reliable.lock) or
``--reliable-lock-update`` (write reliable.lock, then run)."""

DEFAULT_N_METHOD: NStarMethod = "bootstrap"
"""= nstar.DEFAULT_METHOD."""
DEFAULT_N_MAX = 1000
"""= nstar.DEFAULT_N_MAX."""


@dataclass(frozen=True)
class Settings:
    """Run-wide settings (command line, environment, ini), already validated."""

    rootdir: Path
    n: int | Literal["auto"] | None = None
    """An int, "auto", or None (the marker's n, else 10)."""
    pilot_n: int = 100
    reference_model: str | None = None
    seed: int = 0
    """Resolved: ``--reliable-seed last`` is the previous run's seed by now."""
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int | None = None
    timeout: float = 60.0
    max_retries: int = 5
    wait_timeout: float = 1800.0
    """``--reliable-wait-timeout``: the longest this run waits for what another party owes it (a
    batch to finish, an answer or an n* pilot another process or host has claimed), in seconds.
    Past it the wait ends with an error naming what it waited for; nothing paid is lost."""
    budget_calls: int | None = None
    budget_tokens: int | None = None
    budget_usd: float | None = None
    """``--reliable-budget 5usd``: needs ``pricing_path``."""
    batch: bool = False
    """``--reliable-batch``: the adapter's uncached calls go through the batch API."""
    pricing_path: Path | None = None
    """``--reliable-pricing``: the price table (SPEC section 13); None: spend is not counted."""
    cache_path: Path | None = None
    """Default: ``.reliable/cache.sqlite`` under the rootdir (filled in on construction)."""
    no_cache: bool = False
    record: RecordMode = "new"
    store_dir: Path | None = None
    """Where n* entries are kept. Default: ``.reliable/n_star`` under the rootdir."""
    store_url: str | None = None
    """``--reliable-store``: a postgresql:// URL (one store for many machines); None: the local
    sqlite files (``cache_path``, ``budget.sqlite`` next to it, ``store_dir``)."""
    run_id: str = "local"
    """``--reliable-run-id``: names this run in the store's budget ledger (the controller's id
    under pytest-xdist)."""
    decide: Policy = DEFAULT_POLICY
    """The project's default policy for thresholds (a marker's ``decide=`` wins)."""
    n_method: NStarMethod = DEFAULT_N_METHOD
    n_max: int = DEFAULT_N_MAX
    stop_early: bool = False
    baseline_model: str | None = None
    baseline_base_url: str | None = None
    """Default: ``base_url`` (the same server, another model)."""
    baseline_report: Path | None = None
    save_baseline: Path | None = None
    """``--reliable-save-baseline``: write the run's JSON report here too, as the baseline of
    later runs; tests that would compare with a baseline run their candidate only."""
    report_path: Path | None = None
    """``--reliable-report``: the JSON report to write (None: none)."""
    history: Path | None = None
    """``--reliable-history``: the directory that keeps each run's JSON report (None: none)."""
    html_path: Path | None = None
    """``--reliable-html``: the HTML page to write (None: none)."""
    config_path: Path | None = None
    """``--reliable-config`` as given (None: reliable.yaml in the rootdir, if there is one);
    `config_file` is the file read either way."""
    lock_mode: LockMode | None = None
    plan: bool = False
    """``--reliable-plan``: plan every reliable test, make no model call."""
    full_text: bool = False
    """Keep model answers and prompts whole in every report."""

    def __post_init__(self) -> None:
        # The two defaults depend on the rootdir; the instance is frozen once built.
        if self.cache_path is None:
            object.__setattr__(self, "cache_path", self.rootdir / ".reliable" / "cache.sqlite")
        if self.store_dir is None:
            object.__setattr__(self, "store_dir", self.rootdir / ".reliable" / "n_star")

    @property
    def config_file(self) -> Path:
        """The space declarations read: ``--reliable-config``, else reliable.yaml in the rootdir."""
        return self.config_path or self.rootdir / "reliable.yaml"

    @property
    def lock_path(self) -> Path:
        return self.rootdir / "reliable.lock"
