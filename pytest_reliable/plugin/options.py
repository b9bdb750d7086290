"""The ``--reliable-*`` options: declared once, read into one `Settings`.

Each option is a flag, an environment variable (``RELIABLE_*``) and an ini key
(``reliable_*``), in that order of precedence. Its value is checked by one converter: argparse
runs it on the command line (a bad value is pytest's usage error, exit code 4), `option_value`
on environment and ini values, with the same message.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.contract.settings import Settings
from pytest_reliable.plugin.xdist import controller_run_id, controller_seed

SEED_CACHE_KEY = "reliable/seed"
"""Where ``--reliable-seed last`` finds the previous run's seed (pytest's cache)."""

# Each option's value is checked by one converter: argparse runs it on the command line (a bad
# value is pytest's usage error, exit code 4), `option_value` on environment and ini values.
def _integer(minimum: int) -> Callable[[str], int]:
    def integer(text: str) -> int:
        try:
            number = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not valid: give an integer >= {minimum}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: give an integer >= {minimum}")
        return number

    return integer


def _n(text: str) -> int | str:
    if str(text).strip().lower() == "auto":
        return "auto"
    try:
        return _integer(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid: give an integer >= 1 or 'auto'") from None


def _seed(text: str) -> int | str:
    if str(text).strip().lower() == "last":
        return "last"
    try:
        return int(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid: give an integer or 'last'") from None


def _seconds(text: str) -> float:
    try:
        seconds = float(str(text).strip())
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: give seconds > 0 (e.g. 60)")
    return seconds


BUDGET_UNITS = {"calls": "calls", "usd": "US dollars", "tokens": "tokens"}


def _budget(text: str) -> tuple[int | None, int | None, float | None]:
    """(calls, tokens, usd) from '200000', '500calls', '5usd' or several as '5usd,500calls'.
    Each unit at most once: '5usd,0.0001usd' would otherwise keep one of two limits silently."""
    given: dict[str, str] = {}
    for part in str(text).replace(" ", "").lower().split(","):
        unit = next((u for u in ("calls", "usd") if part.endswith(u)), "tokens")
        if unit in given:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not valid: it limits {BUDGET_UNITS[unit]} twice ({given[unit]!r} "
                f"and {part!r}); give each of tokens, calls and usd at most once, e.g. "
                "'5usd,500calls'")
        given[unit] = part
    calls = tokens = None
    usd: float | None = None
    try:
        if "calls" in given:
            calls = int(given["calls"][: -len("calls")])
        if "usd" in given:
            usd = float(given["usd"][: -len("usd")].removeprefix("$"))
            if not math.isfinite(usd) or usd <= 0:
                raise ValueError(given["usd"])
        if "tokens" in given:
            tokens = int(given["tokens"].removesuffix("tokens"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: give tokens ('200000'), "
                                         "calls ('500calls') and/or US dollars ('5usd'), "
                                         "several as '5usd,500calls'") from None
    if (calls is not None and calls < 1) or (tokens is not None and tokens < 1):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid: budgets must be >= 1")
    return calls, tokens, usd


def _url(text: str) -> str:
    """An http(s) URL with a host and a port in 1-65535; the message never shows its password."""
    from urllib.parse import urlparse

    from pytest_reliable.redact import redact, register_url_secrets

    value = str(text).strip()
    register_url_secrets(value)
    shown = redact(repr(value))
    try:
        parsed = urlparse(value)
        port = parsed.port  # ValueError when out of range or not a number
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{shown} is not valid: its port is not a number in 1-65535, e.g. "
            "http://localhost:8000/v1") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise argparse.ArgumentTypeError(
            f"{shown} is not valid: give an http(s) URL with a host, e.g. "
            "http://localhost:8000/v1")
    if port == 0:
        raise argparse.ArgumentTypeError(
            f"{shown} is not valid: port 0 is no server's port; give a port in 1-65535")
    return value


def _store_url(text: str) -> str:
    from pytest_reliable.store import parse_store_url

    try:
        return parse_store_url(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _flag(text: str) -> bool:
    """Environment and ini spellings of a boolean."""
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not valid: give true or false")


@dataclass(frozen=True)
class Option:
    name: str  # without the leading "--reliable-"
    help: str
    kind: str = "string"  # string | bool | path
    choices: tuple[str, ...] | None = None
    convert: Callable[[str], Any] | None = None
    """Validates and converts a value (argparse `type=`); raises ArgumentTypeError."""

    @property
    def flag(self) -> str:
        return f"--reliable-{self.name}"

    @property
    def dest(self) -> str:
        return "reliable_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "RELIABLE_" + self.name.replace("-", "_").upper()

    def parse(self, value: Any) -> Any:
        """An environment or ini value (a string, or a number/bool from a TOML table) checked
        and converted as argparse does for the command line."""
        if self.kind == "bool":
            return value if isinstance(value, bool) else _flag(value)
        text = str(value)
        if self.choices is not None and text not in self.choices:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not valid: choose from {', '.join(self.choices)}")
        return self.convert(text) if self.convert is not None else text


OPTIONS = (
    Option("n", "resamplings per test without its own n: an integer >= 1 or 'auto' (n* from a "
           "pilot, stored in .reliable/). Default 10.", convert=_n),
    Option("pilot-n", "pilot resamplings for --reliable-n auto (default 100).",
           convert=_integer(2)),
    Option("reference-model", "model of the --reliable-n auto pilot (default: the model under "
           "test)."),
    Option("n-method", "n* of --reliable-n auto: bootstrap (default: fresh resamplings, may "
           "extend the pilot) or paper (ReliableEval's subsets, n* <= pilot).",
           choices=("bootstrap", "paper")),
    Option("n-max", "most resamplings a bootstrap n* may run (default 1000).",
           convert=_integer(1)),
    Option("stop-early", "run resamplings in batches and stop once every threshold's verdict "
           "is settled by anytime-valid bounds (as the marker's stop_early=True).", kind="bool"),
    Option("search", "how tests without their own search= choose resamplings: uniform "
           "(default), adaptive (rounds spent on the groups, pairs and mean whose verdict is "
           "still open, by anytime-valid bounds) or thompson (FormatSpread's exploration of "
           "the best and worst format, fixed mode; reported, never a verdict).",
           choices=("uniform", "adaptive", "thompson")),
    Option("seed", "seed of the variant draws: an integer or 'last' (default 0: a gate draws the "
           "same pre-registered variants every run).", convert=_seed),
    Option("model", "model name for the OpenAI-compatible adapter, or 'local' for the embedded "
           "SmolLM2-135M-Instruct (the default)."),
    Option("base-url", "base URL of an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, "
           "LM Studio).", convert=_url),
    Option("api-key-env", "environment variable holding the API key (default OPENAI_API_KEY)."),
    Option("concurrency", "concurrent model calls (default 1 for the embedded model, 8 otherwise).",
           convert=_integer(1)),
    Option("timeout", "seconds per model call before it is retried (default 60).",
           convert=_seconds),
    Option("max-retries", "retries per call on 429/5xx/timeouts/dropped connections (default 5).",
           convert=_integer(0)),
    Option("wait-timeout", "longest wait, in seconds, for what another party owes this run: a "
           "batch to finish, an answer or n* pilot another process or host claimed (default "
           "1800); past it the wait ends with an error naming what it waited for.",
           convert=_seconds),
    Option("budget", "stop new model calls after this many tokens ('200000'), calls "
           "('500calls') and/or US dollars ('5usd', needs --reliable-pricing); several as "
           "'5usd,500calls'.", convert=_budget),
    Option("pricing", "price table (YAML): USD per million input/output/cached_input tokens "
           "and a batch multiplier per model name or glob, {models: {NAME: {input: 0.15, "
           "output: 0.6}}}; reports then show what the run spent.", kind="path"),
    Option("batch", "send the uncached calls of each evaluation as one job to the provider's "
           "batch API (/v1/files, /v1/batches: typically half price), wait for it, then gate; "
           "a killed run resumes its batch. Needs --reliable-model NAME.", kind="bool"),
    Option("cache", "response cache file (default .reliable/cache.sqlite under the rootdir).",
           kind="path"),
    Option("no-cache", "no persistent response cache (in-run reuse at temperature 0 stays).",
           kind="bool"),
    Option("record", "record mode of the response cache: new (default), none (replay only: "
           "offline CI), all (call again).", choices=("new", "none", "all")),
    Option("store", "one store for many machines: a postgresql://USER@HOST:PORT/DATABASE URL "
           "keeps the response cache, budget ledger, n* store and claims (needs "
           "pytest-reliable[postgres]). Default: the local sqlite files under .reliable/.",
           convert=_store_url),
    Option("run-id", "names this run in the store's budget ledger (one budget per run id). "
           "Default: the CI's run id (GITHUB_RUN_ID+GITHUB_RUN_ATTEMPT, CI_PIPELINE_ID, "
           "BUILDKITE_BUILD_ID, CIRCLE_WORKFLOW_ID), else one per pytest session."),
    Option("report", "write the JSON report to this path.", kind="path"),
    Option("history", "keep each run's JSON report in this directory for the release history "
           "(python -m pytest_reliable history DIR -o PAGE.html), named by run id, with the "
           "git commit; with --reliable-store also in the store.", kind="path"),
    Option("html", "write the HTML report (one self-contained page) to this path.", kind="path"),
    Option("config", "the space declarations (default reliable.yaml in the rootdir).", kind="path"),
    Option("lock", "stop before any model call if a declared space differs from reliable.lock.",
           kind="bool"),
    Option("lock-update", "write every declared space to reliable.lock, then run.", kind="bool"),
    Option("full-text", "keep model answers and prompts whole in every report (default: long "
           "texts are cut, saying where and how much).", kind="bool"),
    Option("plan", "make no model call: print per test the calls it would make and what its "
           "thresholds can resolve at this size, then exit 0.", kind="bool"),
    Option("decide", "default policy of thresholds without their own decide=: pass-on-evidence "
           "(default), fail-on-evidence or estimate.",
           choices=("pass-on-evidence", "fail-on-evidence", "estimate")),
    Option("baseline-model", "baseline (production) model for tests with baseline=/max_regression=: "
           "a name for the OpenAI-compatible adapter or 'local'."),
    Option("baseline-base-url", "base URL of the baseline model's server (default "
           "--reliable-base-url).", convert=_url),
    Option("baseline-report", "compare against this earlier run's JSON report instead of calling "
           "a baseline model.", kind="path"),
    Option("save-baseline", "write this run's JSON report to PATH as the baseline of later runs "
           "(--reliable-baseline-report PATH); tests with baseline=/max_regression= run the "
           "model under test only and compare with nothing in this run.", kind="path"),
)


def add_options(parser: pytest.Parser) -> None:
    """Every option: a ``--reliable-*`` flag with its ini twin (`pytest_addoption`)."""
    group = parser.getgroup("reliable", "LLM robustness release gates (pytest-reliable)")
    for option in OPTIONS:
        help_text = f"{option.help} [env {option.env}; ini reliable_{option.name.replace('-', '_')}]"
        if option.kind == "bool":
            group.addoption(option.flag, action="store_true", default=None, dest=option.dest,
                            help=help_text)
            parser.addini(option.dest, option.help, type="bool", default=None)
        else:
            group.addoption(option.flag, default=None, dest=option.dest, help=help_text,
                            metavar=option.name.split("-")[-1].upper(), type=option.convert,
                            choices=option.choices)
            parser.addini(option.dest, option.help, type=INI_TYPE, default=None)


# pytest 9's native [tool.pytest] table gives numbers as numbers (`reliable_seed = 7`); pytest
# >= 9.2 accepts them for an ini option typed as a union, and `Option.parse` converts either.
INI_TYPE: Any = (str | int | float) if pytest.version_tuple >= (9, 2) else None


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line, then environment, then ini, converted by the option's converter. Paths
    resolve as pytest resolves them (command line and environment: the current directory; ini:
    the rootdir)."""
    value = config.getoption(option.dest)
    base = Path.cwd()
    source = ""
    if value is None and os.environ.get(option.env):
        value, source = os.environ[option.env], f"environment variable {option.env}"
    elif value is None:
        value, source = config.getini(option.dest), f"ini option {option.dest}"
        if value is None or value == "" or value == []:
            return None
        base = config.rootpath
    if source:
        try:
            value = option.parse(value)
        except argparse.ArgumentTypeError as error:
            raise pytest.UsageError(f"{source} (for {option.flag}): {error}") from None
    if option.kind == "path":
        path = Path(str(value)).expanduser()
        return path if path.is_absolute() else base / path
    return value


RENAMED = {"cache": "cache_path", "report": "report_path", "html": "html_path",
           "config": "config_path", "store": "store_url", "pricing": "pricing_path"}
"""Options whose `Settings` field is not their own name (with underscores)."""


def read_settings(config: pytest.Config) -> Settings:
    """Every option, validated: a bad value is pytest's usage error (exit code 4)."""
    given = {option.name: option_value(config, option) for option in OPTIONS}
    if given["no-cache"] and given["record"] == "none":
        raise pytest.UsageError(
            "--reliable-no-cache with --reliable-record none leaves nothing to replay: "
            "drop one of them."
        )
    budget_calls, budget_tokens, budget_usd = given.pop("budget") or (None, None, None)
    if budget_usd is not None and given["pricing"] is None:
        raise pytest.UsageError(
            f"--reliable-budget {budget_usd:g}usd needs prices: give --reliable-pricing "
            "PATH.yaml with {models: {NAME: {input: USD, output: USD}}} (per million tokens)")
    if given["save-baseline"] is not None and (given["baseline-model"] is not None
                                               or given["baseline-report"] is not None):
        other = ("--reliable-baseline-model" if given["baseline-model"] is not None
                 else "--reliable-baseline-report")
        raise pytest.UsageError(
            f"--reliable-save-baseline records this run as the baseline of later runs, and "
            f"{other} compares this run with another baseline: give one of them.")
    lock, lock_update = given.pop("lock"), given.pop("lock-update")
    if given["store"] is not None and given["cache"] is not None:
        raise pytest.UsageError("--reliable-cache names a local file and --reliable-store a "
                                "shared database for the answers: give one of them.")
    seed = resolve_seed(config, given.pop("seed"))
    run_id = controller_run_id(config) or given.pop("run-id")
    given.pop("run-id", None)
    if run_id is None:
        from pytest_reliable.store import default_run_id

        run_id = default_run_id()
    fields = {RENAMED.get(name, name.replace("-", "_")): value
              for name, value in given.items() if value is not None}
    return Settings(
        rootdir=config.rootpath, seed=seed, budget_calls=budget_calls, budget_tokens=budget_tokens,
        budget_usd=budget_usd,
        lock_mode="update" if lock_update else ("check" if lock else None),
        run_id=run_id, **fields,
    )


def resolve_seed(config: pytest.Config, value: int | str | None) -> int:
    """The option's seed; ``last``: the previous run's; a pytest-xdist worker: the controller's."""
    forwarded = controller_seed(config)
    if forwarded is not None:
        return forwarded
    if value is None:
        return 0
    if value == "last":
        if getattr(config, "cache", None) is None:
            raise pytest.UsageError(
                "--reliable-seed last reads the seed of the previous run from pytest's cache, "
                "but the cache provider is disabled (-p no:cacheprovider): give an integer seed."
            )
        return int(config.cache.get(SEED_CACHE_KEY, 0))
    return int(value)


def remember_seed(config: pytest.Config, seed: int) -> None:
    """For the next run's ``--reliable-seed last`` (without the cache provider: nothing)."""
    if getattr(config, "cache", None) is not None:
        config.cache.set(SEED_CACHE_KEY, seed)
