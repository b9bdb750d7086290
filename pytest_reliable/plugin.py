"""The pytest plugin: options, markers, fixtures and hooks. A thin layer over the core.

Where the work happens: `session.ReliableSession` runs evaluations, `markerspec` validates marker
arguments, `report/` formats results. This module translates between them and pytest: option
values in, `pytest.UsageError` / `pytest.fail` out, results carried from xdist workers to the
controller on the test reports (``report.reliable_entries``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

from pytest_reliable.files import content_hash
from pytest_reliable.markerspec import (
    ChecklistSpec,
    MarkerArgumentError,
    ReliableSpec,
    parse_checklist,
    parse_reliable,
)

if TYPE_CHECKING:
    from pytest_reliable.data import Records
    from pytest_reliable.report.entries import Entry, ErrorEntry
    from pytest_reliable.results import ChecklistReport, ReliableReport
    from pytest_reliable.session import Settings
    from pytest_reliable.tasks import Task

    _Report = TypeVar("_Report", ReliableReport, ChecklistReport)

# Decorator aliases: ``from pytest_reliable import reliable`` then ``@reliable(...)``.
reliable = pytest.mark.reliable
invariance = pytest.mark.invariance
directional = pytest.mark.directional
mft = pytest.mark.mft

MARKER_PURPOSE = {
    "reliable": "evaluate the model under resampled meaning-preserving prompt variants and gate "
                "on robustness thresholds.",
    "invariance": "CheckList INV test: predictions must not change under the listed "
                  "perturbations.",
    "directional": "CheckList DIR test: predictions must change in the expected direction.",
    "mft": "CheckList minimum functionality test.",
}


def marker_help(kind: str) -> str:
    """``pytest --markers`` text, derived from markerspec's argument sets so it cannot drift."""
    import dataclasses

    from pytest_reliable.markerspec import (
        CHECKLIST_ARGUMENTS,
        CHECKLIST_DEFAULTS,
        CHECKLIST_THRESHOLDS,
        ChecklistSpec,
        ReliableSpec,
    )

    def default(spec: type, name: str) -> str:
        fields = {f.name: f for f in dataclasses.fields(spec)}
        if name in ("perturb",):
            return "[...]"
        if name == "expect":
            return "..."
        if name not in fields or fields[name].default is dataclasses.MISSING:
            return "..."
        return repr(fields[name].default)

    if kind == "reliable":
        arguments = [f"{f.name}={default(ReliableSpec, f.name)}"
                     for f in dataclasses.fields(ReliableSpec)]
    else:
        thresholds = [f"{name}={CHECKLIST_DEFAULTS[kind].get(name, '...')!r}".replace("'...'", "...")
                      for name in CHECKLIST_THRESHOLDS[kind]]
        first = [name for name in ("perturb", "expect") if name in CHECKLIST_ARGUMENTS[kind]]
        rest = sorted(CHECKLIST_ARGUMENTS[kind] - set(first))
        arguments = ([f"{name}={default(ChecklistSpec, name)}" for name in first] + thresholds
                     + [f"{name}={default(ChecklistSpec, name)}" for name in rest])
    return f"{kind}({', '.join(arguments)}): {MARKER_PURPOSE[kind]}"


CHECKLIST_KINDS = ("invariance", "directional", "mft")
STATE_NAME = "reliable-state"
MARKER_ERROR = "bad pytest-reliable marker arguments (nothing was run):\n"
LOCK_ERROR = "--reliable-lock: "
USAGE_ERRORS = (MARKER_ERROR, LOCK_ERROR)
"""Headings of the collect errors a worker sends for what is a usage error on the controller."""
SEED_CACHE_KEY = "reliable/seed"
RESULTS_KEY = pytest.StashKey["list[ReliableReport | ChecklistReport]"]()
SPECS_KEY = pytest.StashKey["dict[str, ReliableSpec | ChecklistSpec]"]()
ERRORS_KEY = pytest.StashKey["list[ErrorEntry]"]()


# -- options --------------------------------------------------------------------------------
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


def _budget(text: str) -> tuple[int | None, int | None]:
    """(calls, tokens) from '200000', '500calls' or both as '200000,500calls'."""
    calls = tokens = None
    for part in str(text).replace(" ", "").lower().split(","):
        try:
            if part.endswith("calls"):
                calls = int(part[: -len("calls")])
            else:
                tokens = int(part.removesuffix("tokens"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: give tokens ('200000') "
                                             "and/or calls ('500calls')") from None
        if (calls is not None and calls < 1) or (tokens is not None and tokens < 1):
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: budgets must be >= 1")
    return calls, tokens


def _url(text: str) -> str:
    from urllib.parse import urlparse

    parsed = urlparse(str(text).strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid: give an http(s) URL, e.g. http://localhost:8000/v1")
    return str(text).strip()


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
    Option("budget", "stop new model calls after this many tokens ('200000') and/or calls "
           "('500calls'); several as 'N,Mcalls'.", convert=_budget),
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
           "--reliable-base-url)."),
    Option("baseline-report", "compare against this earlier run's JSON report instead of calling "
           "a baseline model.", kind="path"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
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


def read_settings(config: pytest.Config) -> tuple[Settings, dict[str, Any]]:
    """Every option, validated: a bad value is pytest's usage error (exit code 4)."""
    from pytest_reliable.session import Settings

    raw = {option.name: option_value(config, option) for option in OPTIONS}
    settings = Settings(rootdir=config.rootpath)
    for name in ("n", "pilot-n", "concurrency", "max-retries", "timeout", "record", "model",
                 "base-url", "reference-model", "api-key-env", "decide", "n-method", "n-max",
                 "baseline-model", "baseline-base-url"):
        if raw[name] is not None:
            setattr(settings, name.replace("-", "_"), raw[name])
    if raw["budget"] is not None:
        settings.budget_calls, settings.budget_tokens = raw["budget"]
    settings.stop_early = bool(raw["stop-early"])
    settings.no_cache = bool(raw["no-cache"])
    if settings.no_cache and settings.record == "none":
        raise pytest.UsageError(
            "--reliable-no-cache with --reliable-record none leaves nothing to replay: "
            "drop one of them."
        )
    if raw["cache"] is not None:
        settings.cache_path = raw["cache"]
    if raw["store"] is not None:
        if raw["cache"] is not None:
            raise pytest.UsageError("--reliable-cache names a local file and --reliable-store a "
                                    "shared database for the answers: give one of them.")
        settings.store_url = raw["store"]
    settings.seed = _resolve_seed(config, raw["seed"])
    _check_api_key(settings)
    if raw["report"] is not None:
        _check_writable(raw["report"])
    settings.baseline_report = raw["baseline-report"]
    return settings, raw


def _resolve_seed(config: pytest.Config, value: int | str | None) -> int:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "reliable_seed" in workerinput:
        return int(workerinput["reliable_seed"])
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


def _check_api_key(settings: Settings) -> None:
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


def _check_writable(path: Path) -> None:
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


# -- the run's state --------------------------------------------------------------------------
class ReliableState:
    """What the plugin holds for one pytest run; registered with the plugin manager."""

    def __init__(self, config: pytest.Config) -> None:
        from pytest_reliable.errors import ReliableError
        from pytest_reliable.redact import install_log_redaction
        from pytest_reliable.session import ReliableSession

        install_log_redaction()
        self.config = config
        self.settings, raw = read_settings(config)
        self.is_worker = hasattr(config, "workerinput")
        workerinput = getattr(config, "workerinput", {})
        from pytest_reliable.store import default_run_id

        self.settings.run_id = (workerinput.get("reliable_run_id") or raw["run-id"]
                                or default_run_id())
        self.config_path: Path = raw["config"] or config.rootpath / "reliable.yaml"
        if raw["config"] is not None and not self.config_path.is_file():
            raise pytest.UsageError(f"--reliable-config={self.config_path}: no such file; give "
                                    "the path of your reliable.yaml (or drop the option).")
        self.report_path: Path | None = raw["report"]
        self.full_text = bool(raw["full-text"])
        self.html_path: Path | None = raw["html"]
        if self.html_path is not None and not self.is_worker:
            check_writable_or_usage_error("--reliable-html", self.html_path)
        self.spaces = load_spaces_or_usage_error(self.config_path)
        self.session = ReliableSession(self.settings, self.spaces, on_progress=self._progress)
        try:
            self.session.check_cache()
        except ReliableError as error:
            where = "" if self.settings.store_url else "--reliable-cache: "
            raise pytest.UsageError(f"{where}{error}") from None
        self.entries: dict[str, list[Entry]] = {}
        self.marker_errors = False
        self.baseline_usage_errors = False
        check_baseline_options_or_usage_error(self.session)
        self._last_progress = 0.0
        self._progress_start: float | None = None
        self._progress_shown = False
        self.lock_path = config.rootpath / "reliable.lock"
        self.lock_mode = "update" if raw["lock-update"] else ("check" if raw["lock"] else None)
        self.planning = bool(raw["plan"])
        if not self.is_worker:
            if self.lock_mode == "update":
                from pytest_reliable.space import write_lock

                write_lock(self.lock_path, self.spaces)
            elif self.lock_mode == "check":
                check_lock_or_usage_error(self.lock_path, self.spaces)
            if getattr(config, "cache", None) is not None:
                config.cache.set(SEED_CACHE_KEY, self.settings.seed)

    @property
    def spaces_hash(self) -> str | None:
        if not self.config_path.exists():
            return None
        return content_hash(
            {name: space.normalized() for name, space in sorted(self.spaces.items())})

    def model_label(self) -> str:
        fixture = self.model_fixture_source()
        if fixture is not None:
            return f"the reliable_model fixture of {fixture}"
        if self.settings.model and self.settings.model != "local":
            from pytest_reliable.redact import redact

            host = self.settings.base_url or "api.openai.com"
            return redact(f"{self.settings.model} at {host}")
        return "local SmolLM2-135M-Instruct (embedded, started on first use)"

    def model_fixture_source(self) -> str | None:
        """The conftest.py that overrides the ``reliable_model`` fixture, if one does."""
        for plugin in self.config.pluginmanager.get_plugins():
            path = getattr(plugin, "__file__", None) or ""
            if path.endswith("conftest.py") and hasattr(plugin, "reliable_model"):
                return os.path.relpath(path, self.config.rootpath)
        return None

    # Hooks of the registered state object: they run on the controller under pytest-xdist,
    # where entries arrive on the workers' test reports.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entries = getattr(report, "reliable_entries", None)
        if entries:
            self.entries[report.nodeid] = entries
            if any(entry.get("usage_error") for entry in entries):
                self.baseline_usage_errors = True

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.entries:
            return
        from pytest_reliable.report import summary_table

        terminalreporter.write_sep("=", "reliable summary")
        width = self.config.get_terminal_writer().fullwidth
        for line in summary_table(all_entries(self), width=width, columns=self.table_columns()):
            terminalreporter.write_line(line)

    def table_columns(self) -> list[Any]:
        """The `reliable` table's columns, after the pytest_reliable_table_columns hook."""
        from pytest_reliable.report.format import RELIABLE_COLUMNS, Column

        columns: list[Any] = list(RELIABLE_COLUMNS)
        self.config.hook.pytest_reliable_table_columns(columns=columns)
        return [column if isinstance(column, Column) else Column(*column) for column in columns]

    def finish_entry(self, entry: Entry) -> Entry:
        """Where a test's entry is made (a worker under xdist): model text cut unless
        --reliable-full-text, then the pytest_reliable_report_entry hook."""
        from pytest_reliable.report.format import cut_strings

        if not self.full_text:
            entry = cut_strings(entry)
        self.config.hook.pytest_reliable_report_entry(entry=entry)
        return entry

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and str(report.longrepr).startswith(USAGE_ERRORS):
            self.marker_errors = True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if (self.marker_errors or self.baseline_usage_errors) and not self.is_worker:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if not self.is_worker:
            mark_cache_dir(self.config.rootpath / ".reliable")
        if self.is_worker or (not self.entries and self.report_path is None
                              and self.html_path is None):
            return
        from pytest_reliable.report import append_github_step_summary, build_report, write_report

        report = build_report(
            all_entries(self), seed=self.settings.seed, model=None, space_hash=self.spaces_hash
        )
        if self.report_path is not None:
            write_report(report, self.report_path)
        if self.html_path is not None:
            from pytest_reliable.report.html import write_html

            write_html(report, self.html_path)
        if os.environ.get("GITHUB_STEP_SUMMARY") and self.entries:
            append_github_step_summary(report, columns=self.table_columns(),
                                       html_path=self.html_path)

    def _progress(self, nodeid: str, event: Any) -> None:
        """The running evaluation's calls, on one rewritten terminal line. Written with pytest's
        capture suspended (as live logging does): visible under the default capture, never in a
        test's "Captured stdout". A pytest-xdist worker writes its own prefixed lines."""
        if self.config.option.verbose < 0:
            return
        if self.is_worker:
            self._worker_progress(nodeid, event)
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        now = time.monotonic()
        finished = event.done >= event.total
        if event.done <= 1 or self._progress_start is None:
            self._progress_start = now
        interval = PROGRESS_INTERVAL if reporter.isatty else PROGRESS_INTERVAL_LOG
        if not reporter.isatty and not self._progress_shown and now - self._progress_start < (
                interval) and (finished or interval > 0):
            return  # a log gets progress only for evaluations long enough to need it
        if not finished and now - self._last_progress < interval:
            return
        self._last_progress = now
        from pytest_reliable.report import progress_line

        width = self.config.get_terminal_writer().fullwidth
        line = progress_line(nodeid, event.done, event.total, event.cached, event.made, width)
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if not reporter.isatty:
                reporter.ensure_newline()
                reporter.write_line(line)
                self._progress_shown = not finished
                return
            if not self._progress_shown:
                reporter.ensure_newline()
                self._progress_shown = True
            reporter.rewrite(line, erase=True)
            if finished:
                reporter.rewrite("", erase=True)
                reporter.currentfspath = None  # pytest writes the file name again on a fresh line
                self._progress_shown = False

    def _worker_progress(self, nodeid: str, event: Any) -> None:
        """Under pytest-xdist: a worker's own line, prefixed with its id, on the stderr it shares
        with the controller, at most every PROGRESS_INTERVAL_LOG seconds of a long evaluation
        (a rewritten line would fight the controller's)."""
        now = time.monotonic()
        if event.done <= 1 or self._progress_start is None:
            self._progress_start = now
        finished = event.done >= event.total
        if now - self._progress_start < PROGRESS_INTERVAL_LOG and PROGRESS_INTERVAL_LOG > 0:
            return
        if not finished and now - self._last_progress < PROGRESS_INTERVAL_LOG:
            return
        self._last_progress = now
        from pytest_reliable.report import progress_line

        worker = getattr(self.config, "workerinput", {}).get("workerid", "worker")
        line = progress_line(nodeid, event.done, event.total, event.cached, event.made)
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            sys.stderr.write(f"[{worker}] {line}\n")
            sys.stderr.flush()


PROGRESS_INTERVAL = 0.25
"""Seconds between progress updates on a terminal."""
PROGRESS_INTERVAL_LOG = 10.0
"""Seconds between progress lines when output goes to a file or CI log (no rewriting there)."""


def mark_cache_dir(path: Path) -> None:
    """``.reliable/`` holds prompts and answers: keep it out of git (``git add .``) and out of
    backups (CACHEDIR.TAG, bford.net/cachedir). Only for a directory the plugin made: an
    existing .gitignore is left alone."""
    if not path.is_dir() or (path / ".gitignore").exists():
        return
    try:
        (path / ".gitignore").write_text("# created by pytest-reliable: prompts and answers\n*\n",
                                         encoding="utf-8")
        (path / "CACHEDIR.TAG").write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This directory is a cache of pytest-reliable (model answers).\n", encoding="utf-8")
    except OSError:
        pass  # a read-only checkout: nothing to protect against


def check_baseline_options_or_usage_error(session: Any) -> None:
    """A baseline model that cannot be built, or a stored baseline report that cannot be read,
    stops the run before anything runs."""
    from pytest_reliable.baseline import BaselineUsageError, check_model_name

    settings = session.settings
    try:
        if settings.baseline_model is not None:
            check_model_name(settings.baseline_model,
                             settings.baseline_base_url or settings.base_url,
                             settings.api_key_env)
        session.stored_baseline  # noqa: B018 - loads and validates the file
    except BaselineUsageError as error:
        raise pytest.UsageError(str(error)) from None


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


def load_spaces_or_usage_error(path: Path) -> dict[str, Any]:
    from pytest_reliable.errors import ReliableConfigError
    from pytest_reliable.space import load_spaces

    if not path.exists():
        return {}
    try:
        return load_spaces(path)
    except ReliableConfigError as error:
        raise pytest.UsageError(str(error)) from None


def lock_differences(lock_path: Path, spaces: dict[str, Any]) -> list[str]:
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


def check_lock_or_usage_error(lock_path: Path, spaces: dict[str, Any]) -> None:
    differences = lock_differences(lock_path, spaces)
    if differences:
        raise pytest.UsageError(lock_message(lock_path, differences))


def _state(config: pytest.Config) -> ReliableState:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    assert isinstance(state, ReliableState), "pytest-reliable's state is missing"
    return state


# -- hooks ------------------------------------------------------------------------------------
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_reliable import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_configure(config: pytest.Config) -> None:
    for kind in MARKER_PURPOSE:
        config.addinivalue_line("markers", marker_help(kind))
    if config.option.help or getattr(config.option, "markers", False):
        return
    config.pluginmanager.register(state := ReliableState(config), STATE_NAME)
    if state.planning:
        config.pluginmanager.register(PlanHooks(), "reliable-plan")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "reliable-xdist")
    _stop_on_sigterm(config)
    if config.pluginmanager.hasplugin("html"):
        from pytest_reliable._plugin_html import PytestHtmlHooks

        config.pluginmanager.register(PytestHtmlHooks(_state(config)), "reliable-pytest-html")


class XdistHooks:
    """Sends the controller's seed (so `last` means one seed) and run id (one budget) to
    pytest-xdist workers."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        settings = _state(node.config).settings
        node.workerinput["reliable_seed"] = settings.seed
        node.workerinput["reliable_run_id"] = settings.run_id


SIGTERM_KEY = pytest.StashKey[Any]()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _stop_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (CI cancellation, `timeout`, `docker stop`) ends the run like Ctrl-C: pytest
    unwinds, the session closes and the embedded server stops. Only when nobody else handles it."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    try:
        config.stash[SIGTERM_KEY] = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread (pytest run from a thread): leave it alone
        pass


PLAN_PROPERTY = "reliable_plan"


class PlanHooks:
    """``--reliable-plan``: each test body runs up to its evaluate call, which plans instead of
    calling the model and skips the rest of the test; the plans arrive on the test reports."""

    def __init__(self) -> None:
        self.plans: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        # user_properties hold objects; ours under PLAN_PROPERTY are TestPlan.as_dict() dicts.
        self.plans += [cast("dict[str, Any]", value)
                       for name, value in report.user_properties if name == PLAN_PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(terminalreporter.config, "workerinput"):
            return
        from pytest_reliable.plan_report import TestPlan, format_plans

        terminalreporter.write_sep("=", "reliable plan (no model call made)")
        for line in format_plans([TestPlan.from_dict(plan) for plan in self.plans]):
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is not None:
        state.session.close()
        config.pluginmanager.unregister(state, STATE_NAME)
    if SIGTERM_KEY in config.stash and signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, config.stash[SIGTERM_KEY])


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is None:
        return []
    spaces = state.spaces_hash
    where = f"{state.config_path.name} {spaces[:12]}" if spaces else "built-in default space"
    header = f"reliable: seed={state.settings.seed}, model={state.model_label()}, spaces={where}"
    if state.settings.store_url:
        from pytest_reliable.redact import redact

        header += f", store={redact(state.settings.store_url)} (run id {state.settings.run_id})"
    return [header]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is None:
        return
    errors = []
    code_spaces: dict[str, Any] = {}
    for item in items:
        try:
            item.stash[SPECS_KEY] = specs = parse_item_markers(item, state)
        except MarkerArgumentError as error:
            errors.append(f"{item.nodeid}: {error}")
            continue
        for spec in specs.values():
            if spec.space is not None and not isinstance(spec.space, str):
                code_spaces.setdefault(spec.space.name, spec.space)
    messages = [MARKER_ERROR + "\n".join(errors)] if errors else []
    if code_spaces and state.lock_mode == "check":
        # Spaces declared in code are pre-registered too: checked when collected.
        differences = lock_differences(state.lock_path, code_spaces)
        if differences:
            messages.append(lock_message(state.lock_path, differences))
    elif code_spaces and state.lock_mode == "update" and is_lock_writer(config):
        from pytest_reliable.space import write_lock

        write_lock(state.lock_path, {**state.spaces, **code_spaces})
    if state.planning:
        for item in items:
            if not item.stash.get(SPECS_KEY, None) and "reliable" not in getattr(
                    item, "fixturenames", ()):
                item.add_marker(pytest.mark.skip(reason="--reliable-plan runs only reliable tests"))
    if messages:
        message = "\n\n".join(messages)
        if state.is_worker:
            # A UsageError in a worker reaches the controller as an INTERNALERROR traceback.
            # A failed collect report reaches it as a short error; the controller then ends
            # the run with the usage-error exit code (ReliableState.pytest_sessionfinish).
            config.hook.pytest_collectreport(
                report=pytest.CollectReport("", "failed", message, [])
            )
            items[:] = []
            return
        raise pytest.UsageError(message)


def is_lock_writer(config: pytest.Config) -> bool:
    """The controller, or under pytest-xdist the first worker (the controller collects nothing,
    and every worker collects the same spaces)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput is None or workerinput.get("workerid") == "gw0"


def perturbation_exists(kind: str, name: str) -> bool:
    from pytest_reliable.checklist import resolve_perturbation

    try:
        resolve_perturbation(name, kind=kind)
    except (ValueError, KeyError):
        return False
    return True


def parse_item_markers(item: pytest.Item, state: ReliableState) -> dict[str, Any]:
    """Every pytest-reliable marker of ``item``, validated (`MarkerArgumentError` otherwise)."""
    specs: dict[str, Any] = {}
    marker = item.get_closest_marker("reliable")
    if marker is not None:
        if marker.args:
            raise MarkerArgumentError("reliable", "positional arguments", marker.args,
                                      "pass arguments by name")
        specs["reliable"] = spec = parse_reliable(
            marker.kwargs, space_exists=state.session.space_exists,
            has_baseline=baseline_configured(item, state),
            n_default=default_resamplings(state.settings.n), decide_default=state.settings.decide,
        )
        if spec.baseline is not None:
            check_marker_baseline(spec.baseline, state)
    for kind in CHECKLIST_KINDS:
        marker = item.get_closest_marker(kind)
        if marker is not None:
            specs[kind] = parse_checklist(
                kind, marker.args, marker.kwargs, space_exists=state.session.space_exists,
                perturbation_exists=perturbation_exists,
            )
    return specs


def default_resamplings(n: int | str | None) -> int | None:
    """The resamplings of a test without its own ``n``: ``--reliable-n N``, else the default;
    None under ``--reliable-n auto`` (n* is known only after the pilot)."""
    from pytest_reliable.session import DEFAULT_N

    if isinstance(n, int):
        return n
    return DEFAULT_N if n is None else None


JUNIT_PREFIX = "reliable_"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """A test module that loads a bad data file at import (``DATA = Dataset.from_file(...)``)
    gets the error's own message, naming the file, not a traceback through the plugin."""
    from pytest_reliable.errors import ReliableError

    report = yield
    excinfo = getattr(getattr(report, "call", None), "excinfo", None)
    if report.failed and excinfo is not None and excinfo.errisinstance(ReliableError):
        report.longrepr = f"{collector.nodeid}: {excinfo.value}"
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each attempt starts clean (pytest-rerunfailures runs the same item again): the last
    attempt's results are the test's results, in the table, the JSON and JUnit."""
    item.stash[RESULTS_KEY] = []
    item.stash[ERRORS_KEY] = []
    item.user_properties[:] = [prop for prop in item.user_properties
                               if not str(prop[0]).startswith(JUNIT_PREFIX)]


def baseline_configured(item: pytest.Item, state: ReliableState) -> bool:
    """A baseline outside the marker: the options, or a ``reliable_baseline`` fixture of the
    user's (one that is not this plugin's default)."""
    settings = state.settings
    if settings.baseline_model is not None or settings.baseline_report is not None:
        return True
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.get("reliable_baseline", ()) if info else ()
    return any(getattr(d.func, "__module__", __name__) != __name__ for d in definitions)


def check_marker_baseline(name: str, state: ReliableState) -> None:
    from pytest_reliable.baseline import BaselineUsageError, check_model_name

    settings = state.settings
    try:
        check_model_name(name, settings.baseline_base_url or settings.base_url,
                         settings.api_key_env)
    except BaselineUsageError as error:
        raise MarkerArgumentError("reliable", "baseline", name, str(error)) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Thresholds are checked when the test body ends, so the test can assert on a report first."""
    from pytest_reliable.errors import ReliableError

    try:
        result = yield
    except ReliableError as error:
        # E.g. Dataset.from_file on a bad file in the test body: the message names the culprit;
        # a traceback through the plugin's modules would only hide it.
        pytest.fail(f"{item.nodeid}: {error}", pytrace=False)
    failing = [report for report in item.stash.get(RESULTS_KEY, []) if not report.passed]
    if failing:
        from pytest_reliable.report.format import cut_message

        pytest.fail(cut_message("\n\n".join(report.failure_message() for report in failing)),
                    pytrace=False)
    return result


def _kind(item: pytest.Item) -> str | None:
    """The pytest-reliable kind of ``item`` (its marker, or "reliable" for the bare fixture)."""
    for kind in ("reliable", *CHECKLIST_KINDS):
        if item.get_closest_marker(kind) is not None:
            return kind
    return "reliable" if "reliable" in getattr(item, "fixturenames", ()) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    """Results travel on the test report (to the xdist controller) and as JUnit properties."""
    report = yield
    if report.when == "call" or (report.when == "setup" and report.failed):
        from pytest_reliable.report import junit_properties

        entries: list[Entry] = [*item.stash.get(ERRORS_KEY, [])]
        for result in item.stash.get(RESULTS_KEY, []):
            verdict = "error" if result.problems else ("passed" if report.passed else "failed")
            entries.append(result.entry(verdict))
        kind = _kind(item)
        if not entries and report.failed and kind is not None and call.excinfo is not None:
            # Stopped before any result (pytest-timeout, an exception in the test body): the
            # test still gets its row and JSON entry, as an error.
            entries.append({"nodeid": item.nodeid, "kind": kind, "verdict": "error",
                            "message": call.excinfo.exconly()})
        state = item.config.pluginmanager.get_plugin(STATE_NAME)
        if state is not None:
            entries = [state.finish_entry(entry) for entry in entries]
        for entry in entries:
            # junitxml reads the teardown report's properties, copied from the item.
            item.user_properties.extend(junit_properties(entry))
        if entries:
            report.reliable_entries = entries
    return report


def all_entries(state: ReliableState) -> list[Entry]:
    return [entry for nodeid in sorted(state.entries) for entry in state.entries[nodeid]]


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture
def reliable_model() -> Any:
    """The model under test. Override in conftest.py to test your own model or callable.

    Return a ``Callable[[str], str]``, a callable on chat messages, an async variant, or an object
    of the model protocol. None (this default) means ``--reliable-model``/``--reliable-base-url``,
    else the embedded SmolLM2-135M-Instruct.
    """
    return None


@pytest.fixture
def reliable_baseline() -> Any:
    """The baseline (production) model for tests with ``baseline=``/``max_regression=``.

    Override in conftest.py exactly as ``reliable_model``. None (this default) means
    ``--reliable-baseline-model``, else ``--reliable-baseline-report``.
    """
    return None


@pytest.fixture(name="reliable")
def reliable_fixture(
    request: pytest.FixtureRequest, reliable_model: Any, reliable_baseline: Any
) -> ReliableFixture:
    """Runs evaluations bound to the test's marker; thresholds are checked when the test ends."""
    return ReliableFixture(request.node, _state(request.config), reliable_model, reliable_baseline)


class ReliableFixture:
    """``reliable.evaluate(dataset, task)`` and the CheckList methods, bound to one test."""

    def __init__(
        self, item: pytest.Item, state: ReliableState, model: Any, baseline: Any = None
    ) -> None:
        self._item = item
        self._state = state
        self._model = model
        self._baseline = baseline
        item.stash.setdefault(RESULTS_KEY, [])

    def _spec(self, kind: str, overrides: dict[str, Any]) -> ReliableSpec | ChecklistSpec:
        """The marker's arguments (validated at collection), with ``overrides`` on top."""
        specs = self._item.stash.get(SPECS_KEY, {})
        if not overrides and kind in specs:
            return specs[kind]
        marker = self._item.get_closest_marker(kind)
        kwargs = {**(marker.kwargs if marker else {}), **overrides}
        exists = self._state.session.space_exists
        try:
            if kind == "reliable":
                settings = self._state.settings
                return parse_reliable(kwargs, space_exists=exists,
                                      has_baseline=baseline_configured(self._item, self._state),
                                      n_default=default_resamplings(settings.n),
                                      decide_default=settings.decide)
            return parse_checklist(kind, (), kwargs, space_exists=exists,
                                   perturbation_exists=perturbation_exists)
        except MarkerArgumentError as error:
            pytest.fail(f"{self._item.nodeid}: {error}", pytrace=False)

    def _run(self, kind: str, work: Callable[[], _Report]) -> _Report:
        from pytest_reliable.baseline import BaselineUsageError
        from pytest_reliable.errors import ReliableError

        try:
            result = work()
        except ReliableError as error:
            usage = isinstance(error, BaselineUsageError)
            entry: ErrorEntry = {"nodeid": self._item.nodeid, "kind": kind, "verdict": "error",
                                 "message": str(error)}
            if usage:
                entry["usage_error"] = True
            self._item.stash.setdefault(ERRORS_KEY, []).append(entry)
            if usage:  # a misconfigured comparison: stop before other tests spend calls
                self._item.session.shouldstop = f"pytest-reliable: {error}"
            pytest.fail(f"{self._item.nodeid}: {error}", pytrace=False)
        self._item.stash[RESULTS_KEY].append(result)
        return result

    def _plan(self, make: Callable[[], Any]) -> None:
        """Under ``--reliable-plan``: record the plan, make no call, end the test here."""
        from pytest_reliable.errors import ReliableError

        try:
            plan = make()
        except ReliableError as error:
            pytest.fail(f"{self._item.nodeid}: {error}", pytrace=False)
        self._item.user_properties.append((PLAN_PROPERTY, plan.as_dict()))
        pytest.skip(f"planned (--reliable-plan): {plan.calls} model calls, none made")

    def evaluate(self, dataset: Records, task: Task, **overrides: Any) -> ReliableReport:
        """Run the marker's resamplings plus the canonical pass; returns the report object."""
        spec = self._spec("reliable", overrides)
        assert isinstance(spec, ReliableSpec)
        if self._state.planning:
            from pytest_reliable.plan_report import plan_reliable

            self._plan(lambda: plan_reliable(self._state.session, self._item.nodeid, dataset,
                                             task, spec, self._model))
        return self._run("reliable", lambda: self._state.session.run_reliable(
            self._item.nodeid, dataset, task, spec, self._model, self._baseline))

    async def aevaluate(self, dataset: Records, task: Task, **overrides: Any) -> ReliableReport:
        """`evaluate` for an async test: the model calls run on the test's own event loop (so a
        model built on it works), the rest in a worker thread, and the loop stays free."""
        return await self._on_test_loop(functools.partial(self.evaluate, **overrides),
                                        dataset, task)

    async def _on_test_loop(
        self, method: Callable[[Records, Task], _Report], dataset: Records, task: Task
    ) -> _Report:
        from pytest_reliable.models.base import to_daemon_thread
        from pytest_reliable.runner import use_loop

        with use_loop(asyncio.get_running_loop()):
            return await to_daemon_thread(method, dataset, task)

    def _checklist(
        self, kind: str, dataset: Records, task: Task, overrides: dict[str, Any]
    ) -> ChecklistReport:
        spec = self._spec(kind, overrides)
        assert isinstance(spec, ChecklistSpec)
        if self._state.planning:
            from pytest_reliable.plan_report import plan_checklist

            self._plan(lambda: plan_checklist(self._state.session, self._item.nodeid, dataset,
                                              task, spec))
        return self._run(kind, lambda: self._state.session.run_checklist(
            self._item.nodeid, dataset, task, spec, self._model))

    def invariance(self, dataset: Records, task: Task, **overrides: Any) -> ChecklistReport:
        return self._checklist("invariance", dataset, task, overrides)

    def directional(self, dataset: Records, task: Task, **overrides: Any) -> ChecklistReport:
        return self._checklist("directional", dataset, task, overrides)

    def mft(self, dataset: Records, task: Task, **overrides: Any) -> ChecklistReport:
        return self._checklist("mft", dataset, task, overrides)

    async def ainvariance(self, dataset: Records, task: Task, **overrides: Any) -> ChecklistReport:
        """`invariance` for an async test, on the test's own event loop (as `aevaluate`)."""
        return await self._on_test_loop(functools.partial(self.invariance, **overrides),
                                        dataset, task)

    async def adirectional(self, dataset: Records, task: Task, **overrides: Any) -> ChecklistReport:
        """`directional` for an async test, on the test's own event loop (as `aevaluate`)."""
        return await self._on_test_loop(functools.partial(self.directional, **overrides),
                                        dataset, task)

    async def amft(self, dataset: Records, task: Task, **overrides: Any) -> ChecklistReport:
        """`mft` for an async test, on the test's own event loop (as `aevaluate`)."""
        return await self._on_test_loop(functools.partial(self.mft, **overrides), dataset, task)
