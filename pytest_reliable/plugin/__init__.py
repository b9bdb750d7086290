"""The pytest plugin's hook wiring (the ``pytest11`` entry point). A thin layer over the core.

Where the work happens: `run.session.ReliableSession` runs evaluations, `contract.markers`
validates marker arguments, `report/` formats results. The plugin's features each have a module
of this package, as pytest's own ``_pytest/`` does; this one connects them to pytest's hooks:

- `options`: the ``--reliable-*`` options, read into one `contract.settings.Settings`;
- `checks`: the start-up checks (paths, API key, cache, baseline, reliable.lock);
- `xdist`: pytest-xdist; `markers`: the four markers, validated at collection;
- `prices`: every model priced before the first call under a USD budget;
- `progress`: the progress line of a running evaluation; `outcome`: a test's outcome;
- `state`: the run's state (`ReliableState`), its results and the reports at the end;
- `fixture`: the ``reliable`` fixture (`ReliableFixture`) and the fixtures users override;
- `sizing`: ``--reliable-plan``; `batch`: ``--reliable-batch``'s first round; `html`: pytest-html.

Loading the plugin imports none of numpy, scipy and statsmodels: they load with the session,
when the first reliable test needs it. Values leave this layer as `pytest.UsageError` (bad
options, markers, files: exit code 4) or `pytest.fail`, and travel from xdist workers to the
controller on the test reports (``report.reliable_entries``).
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

import pytest

from pytest_reliable.plugin import checks
from pytest_reliable.plugin.batch import GATHERING_KEY, FirstRoundHooks
from pytest_reliable.plugin.fixture import (
    ReliableFixture,
    baseline_configured,
    reliable_baseline,
    reliable_fixture,
    reliable_model,
    warn_unused_baseline_report,
)
from pytest_reliable.plugin.markers import (
    MARKER_ERROR,
    directional,
    has_marker,
    invariance,
    kind_of,
    mft,
    parse_item_markers,
    register_markers,
    reliable,
)
from pytest_reliable.plugin.options import add_options
from pytest_reliable.plugin.outcome import outcome_of
from pytest_reliable.plugin.prices import PricePass, in_price_pass
from pytest_reliable.plugin.progress import ProgressLine
from pytest_reliable.plugin.sizing import PlanHooks
from pytest_reliable.plugin.state import (
    ERRORS_KEY,
    RESULTS_KEY,
    SPECS_KEY,
    STATE_NAME,
    ReliableState,
)
from pytest_reliable.plugin.xdist import XdistHooks, fail_collection, is_lock_writer, is_worker

if TYPE_CHECKING:
    from pytest_reliable.schema.entries import Entry
    from pytest_reliable.space import Space

__all__ = [  # the fixtures are found here by pytest; the rest is public API
    "ReliableFixture",
    "directional",
    "invariance",
    "mft",
    "reliable",
    "reliable_baseline",
    "reliable_fixture",
    "reliable_model",
]

PROGRESS_INTERVAL = 0.25
"""Seconds between progress updates on a terminal."""
PROGRESS_INTERVAL_LOG = 10.0
"""Seconds between progress lines when output goes to a file or CI log (no rewriting there).
Both are read when the run is configured (after conftest.py is imported, which may lower them)."""
JUNIT_PREFIX = "reliable_"
SIGTERM_KEY = pytest.StashKey[Any]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_reliable.contract import hookspec

    pluginmanager.add_hookspecs(hookspec)


@pytest.hookimpl(trylast=True)
def pytest_reliable_generate_commit_info(config: pytest.Config) -> str | None:
    """The default commit of a kept report: the checkout's, read with git in the rootdir."""
    from pytest_reliable.store.reports import git_commit

    return git_commit(config.rootpath)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    if config.option.help or getattr(config.option, "markers", False):
        return
    progress = ProgressLine(config, interval=PROGRESS_INTERVAL, log_interval=PROGRESS_INTERVAL_LOG)
    config.pluginmanager.register(state := ReliableState(config, progress), STATE_NAME)
    if state.settings.plan:
        config.pluginmanager.register(PlanHooks(), "reliable-plan")
    elif state.settings.batch:
        config.pluginmanager.register(FirstRoundHooks(state), "reliable-first-round")
    if state.settings.budget_usd is not None and not state.settings.plan:
        config.pluginmanager.register(PricePass(state), "reliable-price-pass")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(state.settings.seed, state.settings.run_id),
                                      "reliable-xdist")
    _stop_on_sigterm(config)
    if config.pluginmanager.hasplugin("html"):
        from pytest_reliable.plugin.html import PytestHtmlHooks

        config.pluginmanager.register(PytestHtmlHooks(state), "reliable-pytest-html")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is not None:
        state.close()
        config.pluginmanager.unregister(state, STATE_NAME)
    if SIGTERM_KEY in config.stash and signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, config.stash[SIGTERM_KEY])


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


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is None:
        return []
    spaces = state.spaces_hash
    where = f"{state.settings.config_file.name} {spaces[:12]}" if spaces else (
        "built-in default space")
    header = f"reliable: seed={state.settings.seed}, model={state.model_label()}, spaces={where}"
    if state.settings.store_url:
        from pytest_reliable.redact import redact

        header += f", store={redact(state.settings.store_url)} (run id {state.settings.run_id})"
    return [header]


# -- collection: markers validated, spaces declared in code locked ---------------------------------
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    if state is None:
        return
    errors = []
    code_spaces: dict[str, Space] = {}
    for item in items:
        item.stash[SPECS_KEY] = {}
    marked = [item for item in items if has_marker(item)]
    if marked:  # contract.markers imports the space package, and numpy with it
        from pytest_reliable.contract.markers import MarkerArgumentError
    for item in marked:
        try:
            item.stash[SPECS_KEY] = specs = parse_item_markers(
                item, state.settings, space_exists=state.session.space_exists,
                has_baseline=baseline_configured(item, state.settings),
                explain_space=state.explain_space)
        except MarkerArgumentError as error:
            errors.append(f"{item.nodeid}: {error}")
            continue
        for spec in specs.values():
            if spec.space is not None and not isinstance(spec.space, str):
                code_spaces.setdefault(spec.space.name, spec.space)
    messages = [MARKER_ERROR + "\n".join(errors)] if errors else []
    if not errors and is_lock_writer(config):  # one warning per run, also under pytest-xdist
        warn_unused_baseline_report(marked, state.settings)
    lock_path = state.settings.lock_path
    if code_spaces and state.settings.lock_mode == "check":
        # Spaces declared in code are pre-registered too: checked when collected.
        differences = checks.lock_differences(lock_path, code_spaces)
        if differences:
            messages.append(checks.lock_message(lock_path, differences))
    elif code_spaces and state.settings.lock_mode == "update" and is_lock_writer(config):
        from pytest_reliable.space import write_lock

        write_lock(lock_path, {**state.spaces, **code_spaces})
    if messages:
        if is_worker(config):
            fail_collection(config, "\n\n".join(messages), items)
            return
        raise pytest.UsageError("\n\n".join(messages))


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


# -- running a test: results on the item, thresholds checked at the end, entries on the report ----
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each attempt starts clean (pytest-rerunfailures runs the same item again): the last
    attempt's results are the test's results, in the table, the JSON and JUnit."""
    item.stash[RESULTS_KEY] = []
    item.stash[ERRORS_KEY] = []
    item.user_properties[:] = [prop for prop in item.user_properties
                               if not str(prop[0]).startswith(JUNIT_PREFIX)]


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
        from pytest_reliable.redact import redact
        from pytest_reliable.schema.text import cut_message

        # The message quotes model answers, which may hold a secret (the key echoed back).
        pytest.fail(redact(cut_message("\n\n".join(r.failure_message() for r in failing))),
                    pytrace=False)
    return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    """Results travel on the test report (to the xdist controller) and as JUnit properties."""
    report = yield
    if GATHERING_KEY in item.stash or in_price_pass(item):  # a pass's report: nobody logs it
        return report
    if report.when == "call" or (report.when == "setup" and report.failed):
        entries: list[Entry] = [*item.stash.get(ERRORS_KEY, [])]
        for result in item.stash.get(RESULTS_KEY, []):
            verdict = "error" if result.problems else ("passed" if report.passed else "failed")
            entries.append(result.entry(verdict))
        kind = kind_of(item)
        if not entries and report.failed and kind is not None and call.excinfo is not None:
            # Stopped before any result (pytest-timeout, an exception in the test body): the
            # test still gets its row and JSON entry, as an error.
            from pytest_reliable.models.base import ModelUsageError
            from pytest_reliable.schema.entries import error_entry

            error = call.excinfo.value
            if isinstance(error, ModelUsageError):  # chat_model(fn) on fn(prompt: str) & co.
                report.longrepr = f"{item.nodeid}: {error}"
                item.session.shouldstop = f"pytest-reliable: {error}"
                entries.append(error_entry(item.nodeid, kind, str(error), usage_error=True))
            else:
                entries.append(error_entry(item.nodeid, kind, call.excinfo.exconly()))
        if entries:
            from pytest_reliable.report import junit_properties

            outcome, reason = outcome_of(report)
            for entry in entries:
                entry["outcome"], entry["xfail_reason"] = outcome, reason

            state = item.config.pluginmanager.get_plugin(STATE_NAME)
            if state is not None:
                entries = [state.finish_entry(entry) for entry in entries]
            for entry in entries:
                # junitxml reads the teardown report's properties, copied from the item.
                item.user_properties.extend(junit_properties(entry))
            report.reliable_entries = entries
    return report
