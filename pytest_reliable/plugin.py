"""The pytest plugin: options, markers, fixtures and hooks. A thin layer over the core.

Where the work happens: `session.ReliableSession` runs evaluations, `markerspec` validates marker
arguments, `report/` formats results. This module translates between them and pytest: option
values in, `pytest.UsageError` / `pytest.fail` out, results carried from xdist workers to the
controller on the test reports (``report.reliable_entries``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.markerspec import (
    ChecklistSpec,
    MarkerArgumentError,
    ReliableSpec,
    parse_checklist,
    parse_reliable,
)

# Decorator aliases: ``from pytest_reliable import reliable`` then ``@reliable(...)``.
reliable = pytest.mark.reliable
invariance = pytest.mark.invariance
directional = pytest.mark.directional
mft = pytest.mark.mft

MARKERS = {
    "reliable": "reliable(space=None, eps=0.01, delta=0.1, n=None, mode='ilr', confidence=0.95, "
    "min_score=, min_lower_ci=, min_median=, min_worst=, max_spread=, max_std=, temperature=, k=1, "
    "min_pass_at_k=, min_pass_hat_k=, min_cells=20, max_tokens=32): evaluate the model under "
    "resampled meaning-preserving prompt variants and gate on robustness thresholds.",
    "invariance": "invariance(perturb=[...], max_flip_rate=0.0, space=None, confidence=0.95, "
    "tolerance=None, gate_on_bound=False): CheckList INV test: predictions must not change under "
    "the listed perturbations.",
    "directional": "directional(perturb=..., expect=..., max_fail_rate=0.0, space=None, "
    "confidence=0.95): CheckList DIR test: predictions must change in the expected direction.",
    "mft": "mft(min_pass=..., space=None, confidence=0.95): CheckList minimum functionality test.",
}
CHECKLIST_KINDS = ("invariance", "directional", "mft")
STATE_NAME = "reliable-state"
MARKER_ERROR = "bad pytest-reliable marker arguments (nothing was run):\n"
SEED_CACHE_KEY = "reliable/seed"
RESULTS_KEY = pytest.StashKey[list]()
SPECS_KEY = pytest.StashKey[dict]()
ERRORS_KEY = pytest.StashKey[list]()


# -- options --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    name: str  # without the leading "--reliable-"
    help: str
    kind: str = "string"  # string | bool | path
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return f"--reliable-{self.name}"

    @property
    def dest(self) -> str:
        return "reliable_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "RELIABLE_" + self.name.replace("-", "_").upper()


OPTIONS = (
    Option("n", "resamplings per test without its own n: an integer >= 1 or 'auto' (n* from a "
           "pilot, stored in .reliable/). Default 10."),
    Option("pilot-n", "pilot resamplings for --reliable-n auto (default 100)."),
    Option("reference-model", "model of the --reliable-n auto pilot (default: the model under "
           "test)."),
    Option("seed", "seed of the variant draws: an integer or 'last' (default 0: a gate draws the "
           "same pre-registered variants every run)."),
    Option("model", "model name for the OpenAI-compatible adapter, or 'local' for the embedded "
           "SmolLM2-135M-Instruct (the default)."),
    Option("base-url", "base URL of an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, "
           "LM Studio)."),
    Option("api-key-env", "environment variable holding the API key (default OPENAI_API_KEY)."),
    Option("concurrency", "concurrent model calls (default 1 for the embedded model, 8 otherwise)."),
    Option("timeout", "seconds per model call before it is retried (default 60)."),
    Option("max-retries", "retries per call on 429/5xx/timeouts/dropped connections (default 5)."),
    Option("budget", "stop new model calls after this many tokens ('200000') and/or calls "
           "('500calls'); several as 'N,Mcalls'."),
    Option("cache", "response cache file (default .reliable/cache.sqlite under the rootdir).",
           kind="path"),
    Option("no-cache", "no persistent response cache (in-run reuse at temperature 0 stays).",
           kind="bool"),
    Option("record", "record mode of the response cache: new (default), none (replay only: "
           "offline CI), all (call again).", choices=("new", "none", "all")),
    Option("report", "write the JSON report to this path.", kind="path"),
    Option("html", "write the HTML report (one self-contained page) to this path.", kind="path"),
    Option("config", "the space declarations (default reliable.yaml in the rootdir).", kind="path"),
    Option("lock", "stop before any model call if a declared space differs from reliable.lock.",
           kind="bool"),
    Option("lock-update", "write every declared space to reliable.lock, then run.", kind="bool"),
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
                            metavar=option.name.split("-")[-1].upper())
            parser.addini(option.dest, option.help, default=None)


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line, then environment, then ini. Paths resolve as pytest resolves them."""
    value = config.getoption(option.dest)
    base = Path.cwd()
    if value is None and os.environ.get(option.env):
        value = os.environ[option.env]
    if value is None:
        value = config.getini(option.dest)
        if value is None or value == "":
            return None
        base = config.rootpath
    if option.kind == "bool":
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)
    if option.kind == "path":
        path = Path(str(value)).expanduser()
        return path if path.is_absolute() else base / path
    return value


def _usage(option: Option, value: Any, allowed: str) -> pytest.UsageError:
    return pytest.UsageError(f"{option.flag}={value!r} is not valid: {allowed}.")


def _int(option: Option, value: Any, minimum: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise _usage(option, value, f"give an integer >= {minimum}") from None
    if number < minimum:
        raise _usage(option, value, f"give an integer >= {minimum}")
    return number


def _budget(option: Option, value: str) -> tuple[int | None, int | None]:
    calls = tokens = None
    for part in str(value).replace(" ", "").split(","):
        text = part.lower()
        try:
            if text.endswith("calls"):
                calls = int(text[: -len("calls")])
            else:
                tokens = int(text.removesuffix("tokens"))
        except ValueError:
            raise _usage(option, value, "give tokens ('200000') and/or calls ('500calls')") from None
        if (calls is not None and calls < 1) or (tokens is not None and tokens < 1):
            raise _usage(option, value, "budgets must be >= 1")
    return calls, tokens


def read_settings(config: pytest.Config) -> Any:
    """Every option, validated: a bad value is pytest's usage error (exit code 4)."""
    from pytest_reliable.session import Settings

    opts = {option.name: option for option in OPTIONS}
    raw = {name: option_value(config, option) for name, option in opts.items()}
    settings = Settings(rootdir=config.rootpath)
    if raw["n"] is not None:
        settings.n = "auto" if str(raw["n"]).lower() == "auto" else _int(opts["n"], raw["n"], 1)
        if settings.n != "auto" and str(raw["n"]).strip() != str(settings.n):
            raise _usage(opts["n"], raw["n"], "give an integer >= 1 or 'auto'")
    if raw["pilot-n"] is not None:
        settings.pilot_n = _int(opts["pilot-n"], raw["pilot-n"], 2)
    for name in ("concurrency", "max-retries"):
        if raw[name] is not None:
            value = _int(opts[name], raw[name], 1 if name == "concurrency" else 0)
            setattr(settings, name.replace("-", "_"), value)
    if raw["timeout"] is not None:
        try:
            settings.timeout = float(raw["timeout"])
        except ValueError:
            raise _usage(opts["timeout"], raw["timeout"], "give seconds > 0") from None
        if settings.timeout <= 0:
            raise _usage(opts["timeout"], raw["timeout"], "give seconds > 0")
    if raw["budget"] is not None:
        settings.budget_calls, settings.budget_tokens = _budget(opts["budget"], raw["budget"])
    if raw["record"] is not None:
        if raw["record"] not in ("new", "none", "all"):
            raise _usage(opts["record"], raw["record"], "choose new, none or all")
        settings.record = raw["record"]
    settings.no_cache = bool(raw["no-cache"])
    if settings.no_cache and settings.record == "none":
        raise pytest.UsageError(
            "--reliable-no-cache with --reliable-record none leaves nothing to replay: "
            "drop one of them."
        )
    if raw["cache"] is not None:
        settings.cache_path = raw["cache"]
    for name in ("model", "base-url", "reference-model", "api-key-env"):
        if raw[name] is not None:
            setattr(settings, name.replace("-", "_"), str(raw[name]))
    settings.seed = _seed(config, opts["seed"], raw["seed"])
    return settings, raw


def _seed(config: pytest.Config, option: Option, value: Any) -> int:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "reliable_seed" in workerinput:
        return int(workerinput["reliable_seed"])
    if value is None:
        return 0
    if str(value).lower() == "last":
        if getattr(config, "cache", None) is None:
            raise pytest.UsageError(
                "--reliable-seed last reads the seed of the previous run from pytest's cache, "
                "but the cache provider is disabled (-p no:cacheprovider): give an integer seed."
            )
        return int(config.cache.get(SEED_CACHE_KEY, 0))  # type: ignore[union-attr]
    try:
        return int(str(value))
    except ValueError:
        raise _usage(option, value, "give an integer or 'last'") from None


# -- the run's state --------------------------------------------------------------------------
class ReliableState:
    """What the plugin holds for one pytest run; registered with the plugin manager."""

    def __init__(self, config: pytest.Config) -> None:
        from pytest_reliable.session import ReliableSession

        self.config = config
        self.settings, raw = read_settings(config)
        self.is_worker = hasattr(config, "workerinput")
        self.config_path: Path = raw["config"] or config.rootpath / "reliable.yaml"
        self.report_path: Path | None = raw["report"]
        self.html_path: Path | None = raw["html"]
        if self.html_path is not None and not self.is_worker:
            check_writable_or_usage_error("--reliable-html", self.html_path)
        self.spaces = load_spaces_or_usage_error(self.config_path)
        self.session = ReliableSession(self.settings, self.spaces, on_progress=self._progress)
        self.entries: dict[str, list[dict[str, Any]]] = {}
        self.marker_errors = False
        self._last_progress = 0.0
        self._progress_shown = False
        self.lock_path = config.rootpath / "reliable.lock"
        self.lock_mode = "update" if raw["lock-update"] else ("check" if raw["lock"] else None)
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
        canonical = json.dumps(
            {name: space.normalized() for name, space in sorted(self.spaces.items())},
            sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def model_label(self) -> str:
        if self.settings.model and self.settings.model != "local":
            host = self.settings.base_url or "api.openai.com"
            return f"{self.settings.model} at {host}"
        return "local SmolLM2-135M-Instruct (embedded, started on first use)"

    # Hooks of the registered state object: they run on the controller under pytest-xdist,
    # where entries arrive on the workers' test reports.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entries = getattr(report, "reliable_entries", None)
        if entries:
            self.entries[report.nodeid] = entries

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker or not self.entries:
            return
        from pytest_reliable.report import summary_table

        terminalreporter.write_sep("=", "reliable summary")
        for line in summary_table(all_entries(self), width=terminalreporter._tw.fullwidth):
            terminalreporter.write_line(line)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and str(report.longrepr).startswith(MARKER_ERROR):
            self.marker_errors = True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.marker_errors and not self.is_worker:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
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
            append_github_step_summary(report, html_path=self.html_path)

    def _progress(self, nodeid: str, event: Any) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.is_worker or self.config.get_verbosity() < 0:
            return
        if not reporter.isatty:
            return
        now = time.monotonic()
        finished = event.done >= event.total
        if not finished and now - self._last_progress < 0.25:
            return
        self._last_progress = now
        if not self._progress_shown:
            reporter.ensure_newline()
            self._progress_shown = True
        from pytest_reliable.report import progress_line

        reporter.rewrite(progress_line(nodeid, event.done, event.total, event.cached, event.made),
                         erase=True)
        if finished:
            reporter.rewrite("", erase=True)
            reporter.currentfspath = None  # pytest writes the file name again on a fresh line
            self._progress_shown = False


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
    from pytest_reliable.space import compare_lock, read_lock

    if not lock_path.exists():
        raise pytest.UsageError(
            f"--reliable-lock: {lock_path} does not exist; write it once with "
            "--reliable-lock-update and commit it."
        )
    return [d.describe() for d in compare_lock(spaces, read_lock(lock_path))]


def check_lock_or_usage_error(lock_path: Path, spaces: dict[str, Any]) -> None:
    differences = lock_differences(lock_path, spaces)
    if differences:
        lines = "\n".join("  " + d for d in differences)
        raise pytest.UsageError(
            f"--reliable-lock: the declared spaces differ from {lock_path.name} (pre-registration "
            f"broken), nothing was run:\n{lines}\nIf the change is intended, run once with "
            "--reliable-lock-update and commit reliable.lock."
        )


def _state(config: pytest.Config) -> ReliableState:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    assert state is not None, "pytest-reliable's state is missing"
    return state


# -- hooks ------------------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    for help_text in MARKERS.values():
        config.addinivalue_line("markers", help_text)
    if config.option.help or getattr(config.option, "markers", False):
        return
    config.pluginmanager.register(ReliableState(config), STATE_NAME)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "reliable-xdist")
    if config.pluginmanager.hasplugin("html"):
        from pytest_reliable.pytest_html_hooks import PytestHtmlHooks

        config.pluginmanager.register(PytestHtmlHooks(_state(config)), "reliable-pytest-html")


class XdistHooks:
    """Sends the controller's seed to pytest-xdist workers (so `last` means one seed)."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["reliable_seed"] = _state(node.config).settings.seed


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is not None:
        state.session.close()
        config.pluginmanager.unregister(state, STATE_NAME)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is None:
        return []
    spaces = state.spaces_hash
    where = f"{state.config_path.name} {spaces[:12]}" if spaces else "built-in default space"
    return [f"reliable: seed={state.settings.seed}, model={state.model_label()}, spaces={where}"]


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
    if code_spaces and state.lock_mode == "check":
        # Spaces declared in code are pre-registered too: checked when collected.
        errors += [f"--reliable-lock: {line}" for line in
                   lock_differences(state.lock_path, code_spaces)]
    elif code_spaces and state.lock_mode == "update" and not state.is_worker:
        from pytest_reliable.space import write_lock

        write_lock(state.lock_path, {**state.spaces, **code_spaces})
    if errors:
        message = MARKER_ERROR + "\n".join(errors)
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
        specs["reliable"] = parse_reliable(marker.kwargs, space_exists=state.session.space_exists)
    for kind in CHECKLIST_KINDS:
        marker = item.get_closest_marker(kind)
        if marker is not None:
            specs[kind] = parse_checklist(
                kind, marker.args, marker.kwargs, space_exists=state.session.space_exists,
                perturbation_exists=perturbation_exists,
            )
    return specs


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Thresholds are checked when the test body ends, so the test can assert on a report first."""
    result = yield
    failing = [report for report in item.stash.get(RESULTS_KEY, []) if not report.passed]
    if failing:
        pytest.fail("\n\n".join(report.failure_message() for report in failing), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    """Results travel on the test report (to the xdist controller) and as JUnit properties."""
    report = yield
    if report.when == "call" or (report.when == "setup" and report.failed):
        from pytest_reliable.report import junit_properties

        entries = [*item.stash.get(ERRORS_KEY, [])]
        for result in item.stash.get(RESULTS_KEY, []):
            verdict = "error" if result.problems else ("passed" if report.passed else "failed")
            entries.append(result.entry(verdict))
        for entry in entries:
            # junitxml reads the teardown report's properties, copied from the item.
            item.user_properties.extend(junit_properties(entry))
        if entries:
            report.reliable_entries = entries
    return report


def all_entries(state: ReliableState) -> list[dict[str, Any]]:
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


@pytest.fixture(name="reliable")
def reliable_fixture(request: pytest.FixtureRequest, reliable_model: Any) -> ReliableFixture:
    """Runs evaluations bound to the test's marker; thresholds are checked when the test ends."""
    return ReliableFixture(request.node, _state(request.config), reliable_model)


class ReliableFixture:
    """``reliable.evaluate(dataset, task)`` and the CheckList methods, bound to one test."""

    def __init__(self, item: pytest.Item, state: ReliableState, model: Any) -> None:
        self._item = item
        self._state = state
        self._model = model
        item.stash.setdefault(RESULTS_KEY, [])

    def _spec(self, kind: str, overrides: dict[str, Any]) -> Any:
        """The marker's arguments (validated at collection), with ``overrides`` on top."""
        specs = self._item.stash.get(SPECS_KEY, {})
        if not overrides and kind in specs:
            return specs[kind]
        marker = self._item.get_closest_marker(kind)
        kwargs = {**(marker.kwargs if marker else {}), **overrides}
        exists = self._state.session.space_exists
        try:
            if kind == "reliable":
                return parse_reliable(kwargs, space_exists=exists)
            return parse_checklist(kind, (), kwargs, space_exists=exists,
                                   perturbation_exists=perturbation_exists)
        except MarkerArgumentError as error:
            pytest.fail(f"{self._item.nodeid}: {error}", pytrace=False)

    def _run(self, kind: str, work: Callable[[], Any]) -> Any:
        from pytest_reliable.errors import ReliableError

        try:
            result = work()
        except ReliableError as error:
            self._item.stash.setdefault(ERRORS_KEY, []).append(
                {"nodeid": self._item.nodeid, "kind": kind, "verdict": "error",
                 "message": str(error)}
            )
            pytest.fail(f"{self._item.nodeid}: {error}", pytrace=False)
        self._item.stash[RESULTS_KEY].append(result)
        return result

    def evaluate(self, dataset: Any, task: Any, **overrides: Any) -> Any:
        """Run the marker's resamplings plus the canonical pass; returns the report object."""
        spec: ReliableSpec = self._spec("reliable", overrides)
        return self._run("reliable", lambda: self._state.session.run_reliable(
            self._item.nodeid, dataset, task, spec, self._model))

    def _checklist(self, kind: str, dataset: Any, task: Any, overrides: dict[str, Any]) -> Any:
        spec: ChecklistSpec = self._spec(kind, overrides)
        return self._run(kind, lambda: self._state.session.run_checklist(
            self._item.nodeid, dataset, task, spec, self._model))

    def invariance(self, dataset: Any, task: Any, **overrides: Any) -> Any:
        return self._checklist("invariance", dataset, task, overrides)

    def directional(self, dataset: Any, task: Any, **overrides: Any) -> Any:
        return self._checklist("directional", dataset, task, overrides)

    def mft(self, dataset: Any, task: Any, **overrides: Any) -> Any:
        return self._checklist("mft", dataset, task, overrides)
