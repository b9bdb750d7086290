"""One typed `Settings` holds every option (nothing is read from a raw dict later)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_reliable.contract import settings
from pytest_reliable.contract.settings import Settings
from pytest_reliable.plugin.options import OPTIONS, RENAMED

# Options that fill more (or other) than the field of their own name.
COMBINED = {"budget": {"budget_calls", "budget_tokens", "budget_usd"}, "lock": {"lock_mode"},
            "lock-update": {"lock_mode"}}


def test_every_option_has_its_field() -> None:
    fields = {field.name for field in dataclasses.fields(Settings)}
    for option in OPTIONS:
        expected = COMBINED.get(option.name) or {
            RENAMED.get(option.name, option.name.replace("-", "_"))}
        assert expected <= fields, option.flag


def test_defaults_agree_with_their_owners() -> None:
    # settings.py repeats them as literals: gate.py and nstar.py import numpy, settings.py loads
    # with the plugin on every pytest run.
    from pytest_reliable.evaluate import nstar
    from pytest_reliable.verdict import gate

    assert settings.DEFAULT_POLICY == gate.DEFAULT_POLICY
    assert settings.DEFAULT_N_METHOD == nstar.DEFAULT_METHOD
    assert settings.DEFAULT_N_MAX == nstar.DEFAULT_N_MAX


def test_settings_are_frozen_and_fill_in_their_rootdir_defaults(tmp_path: Path) -> None:
    values = Settings(rootdir=tmp_path)
    assert values.cache_path == tmp_path / ".reliable" / "cache.sqlite"
    assert values.store_dir == tmp_path / ".reliable" / "n_star"
    assert values.config_file == tmp_path / "reliable.yaml"
    assert values.lock_path == tmp_path / "reliable.lock"
    assert Settings(rootdir=tmp_path, config_path=tmp_path / "x.yaml").config_file == (
        tmp_path / "x.yaml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        values.seed = 1  # type: ignore[misc]


def test_the_options_land_in_typed_fields(pytester: pytest.Pytester) -> None:
    from pytest_reliable.plugin.state import state_of

    config = pytester.parseconfigure(
        "--reliable-report=out/r.json", "--reliable-html=page.html", "--reliable-lock-update",
        "--reliable-plan", "--reliable-full-text", "--reliable-budget=100,5calls",
        "--reliable-n=auto", "--reliable-seed=3", "--reliable-record=none", "-p", "no:xdist")
    values = state_of(config).settings
    assert values.report_path == pytester.path / "out" / "r.json"
    assert values.html_path == pytester.path / "page.html"
    assert values.config_path is None and values.config_file == pytester.path / "reliable.yaml"
    assert (values.lock_mode, values.plan, values.full_text) == ("update", True, True)
    assert (values.budget_tokens, values.budget_calls) == (100, 5)
    assert (values.n, values.seed, values.record) == ("auto", 3, "none")
    assert values.run_id != "local"  # one id per run, for the shared budget ledger
