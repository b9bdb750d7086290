"""The run's state: what the plugin holds for one pytest run, and what it does with the results.

`ReliableState` is made when the run is configured (after the start-up checks) and registered
with the plugin manager; its hooks run on the controller under pytest-xdist, where each test's
results arrive on the workers' test reports (``report.reliable_entries``): it collects them,
prints the ``reliable summary`` table and writes the JSON and HTML reports at the end.

The session that runs evaluations (`session.ReliableSession`, which imports numpy, scipy and
statsmodels) is made when the first reliable test needs it: a run without reliable tests never
imports them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_reliable.files import content_hash
from pytest_reliable.plugin import checks
from pytest_reliable.plugin.checks import LOCK_ERROR
from pytest_reliable.plugin.markers import MARKER_ERROR
from pytest_reliable.plugin.options import read_settings, remember_seed
from pytest_reliable.plugin.outcome import session_outcome
from pytest_reliable.plugin.prices import UNPRICED_ERROR
from pytest_reliable.plugin.xdist import is_worker

if TYPE_CHECKING:
    # The stash keys below name these in strings, which mypy reads and ruff does not.
    from pytest_reliable.checklist.report import ChecklistReport  # noqa: F401
    from pytest_reliable.contract.markers import ChecklistSpec, ReliableSpec  # noqa: F401
    from pytest_reliable.report.format import Column
    from pytest_reliable.run.session import ProgressCallback, ReliableSession
    from pytest_reliable.schema.entries import Entry, ErrorEntry  # noqa: F401
    from pytest_reliable.space import Space
    from pytest_reliable.store import Store
    from pytest_reliable.verdict.results import ReliableReport  # noqa: F401

STATE_NAME = "reliable-state"
USAGE_ERRORS = (MARKER_ERROR, LOCK_ERROR, UNPRICED_ERROR)
"""Headings of the collect errors a worker sends for what is a usage error on the controller."""

# What each test carries (on its item) between the hooks and the fixture.
RESULTS_KEY = pytest.StashKey["list[ReliableReport | ChecklistReport]"]()
SPECS_KEY = pytest.StashKey["dict[str, ReliableSpec | ChecklistSpec]"]()
ERRORS_KEY = pytest.StashKey["list[ErrorEntry]"]()


class ReliableState:
    """What the plugin holds for one pytest run; registered with the plugin manager."""

    def __init__(self, config: pytest.Config, on_progress: ProgressCallback) -> None:
        from pytest_reliable.redact import install_log_redaction

        install_log_redaction()
        self.config = config
        self.is_worker = is_worker(config)
        self.settings = settings = read_settings(config)
        self._on_progress = on_progress
        self._session: ReliableSession | None = None
        self._opened_store: Store | None = None
        self.entries: dict[str, list[Entry]] = {}
        self.outcomes: dict[str, str] = {}
        """Every test the session ran, reliable or not: pytest's outcome (the report's
        ``outcomes``, which ``merge`` decides on with the entries)."""
        self.marker_errors = False
        self.baseline_usage_errors = False
        self.saved_line: str | None = None
        """What ``--reliable-save-baseline`` wrote (`saved_baseline_line`), shown at the end."""
        self.lock_before: dict[str, Any] | None = None
        """Under ``--reliable-lock-update``: reliable.lock before this run rewrote it."""

        checks.check_api_key(settings)
        checks.check_config_path(settings)
        checks.check_pricing_or_usage_error(settings)
        checks.check_batch_or_usage_error(settings)
        if settings.history is not None and not self.is_worker:
            from pytest_reliable.store.reports import history_dir_problem

            if problem := history_dir_problem(settings.history):
                raise pytest.UsageError(f"--reliable-history={settings.history}: {problem}.")
        checks.check_output_paths(settings, config)
        self.spaces: dict[str, Space] = checks.load_spaces_or_usage_error(settings.config_file)
        self._opened_store = checks.check_store_or_usage_error(settings)
        try:
            checks.check_baseline_options_or_usage_error(
                settings, lambda: self.session.stored_baseline)
            if not self.is_worker:
                self.lock_before = checks.apply_lock_mode(settings, self.spaces)
                remember_seed(config, settings.seed)
        except BaseException:
            self.close()  # a connected shared store is let go, not left to the interpreter
            raise

    @property
    def session(self) -> ReliableSession:
        """Runs the evaluations; made on first use (it imports the statistics stack)."""
        if self._session is None:
            from pytest_reliable.run.session import ReliableSession

            self._session = ReliableSession(self.settings, self.spaces,
                                            on_progress=self._on_progress)
            if self._opened_store is not None:
                self._session.use_store(self._opened_store)
        return self._session

    def close(self) -> None:
        """Stop what the session started (the embedded server, the cache): at the run's end."""
        if self._session is not None:
            self._session.close()
        elif self._opened_store is not None:
            self._opened_store.close()

    def explain_space(self, space: Any) -> str:
        """What a marker's ``space=`` that is not declared is told (`checks.undeclared_space`)."""
        invocation = self.config.invocation_params
        return checks.undeclared_space(space, self.spaces, self.settings, invocation.dir,
                                       invocation.args)

    @property
    def spaces_hash(self) -> str | None:
        if not self.settings.config_file.exists():
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

    def all_entries(self) -> list[Entry]:
        """Every test's entries, in node id order."""
        return [entry for nodeid in sorted(self.entries) for entry in self.entries[nodeid]]

    def finish_entry(self, entry: Entry) -> Entry:
        """Where a test's entry is made (a worker under xdist): secrets redacted from every text
        (a model may answer with the API key), model text cut unless --reliable-full-text, then
        the pytest_reliable_report_entry hook. Every writer reads the entry from here on."""
        from pytest_reliable.redact import redact_strings
        from pytest_reliable.schema.text import cut_strings

        entry = cast("Entry", redact_strings(entry))
        if not self.settings.full_text:
            entry = cut_strings(entry)
        self.config.hook.pytest_reliable_report_entry(entry=entry)
        return entry

    def table_columns(self) -> list[Column]:
        """The `reliable` table's columns, after the pytest_reliable_table_columns hook."""
        from pytest_reliable.report.format import RELIABLE_COLUMNS, Column

        columns: list[Any] = list(RELIABLE_COLUMNS)
        self.config.hook.pytest_reliable_table_columns(columns=columns)
        return [column if isinstance(column, Column) else Column(*column) for column in columns]

    # Hooks of the registered state object: they run on the controller under pytest-xdist,
    # where entries arrive on the workers' test reports.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if (outcome := session_outcome(report, self.outcomes.get(report.nodeid))) is not None:
            self.outcomes[report.nodeid] = outcome
        entries = getattr(report, "reliable_entries", None)
        if entries:
            self.entries[report.nodeid] = entries
            if any(entry.get("usage_error") for entry in entries):
                self.baseline_usage_errors = True

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and str(report.longrepr).startswith(USAGE_ERRORS):
            self.marker_errors = True

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        if self.entries:
            from pytest_reliable.report import summary_table

            terminalreporter.write_sep("=", "reliable summary")
            width = self.config.get_terminal_writer().fullwidth
            for line in summary_table(self.all_entries(), width=width,
                                      columns=self.table_columns()):
                terminalreporter.write_line(line)
        if self.saved_line is not None:
            terminalreporter.write_line(self.saved_line)
        if self.lock_before is not None:
            terminalreporter.write_line(
                checks.lock_update_line(self.settings.lock_path, self.lock_before))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if (self.marker_errors or self.baseline_usage_errors) and not self.is_worker:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if not self.is_worker:
            mark_cache_dir(self.config.rootpath / ".reliable")
        report_path, html_path = self.settings.report_path, self.settings.html_path
        saved = self.settings.save_baseline
        if self.is_worker or (not self.entries and report_path is None and html_path is None
                              and saved is None):
            return
        from pytest_reliable.report import append_github_step_summary, build_report, write_report

        report = build_report(
            self.all_entries(), seed=self.settings.seed, model=None, space_hash=self.spaces_hash,
            outcomes=self.outcomes,
        )
        if report_path is not None:
            write_report(report, report_path)
        if saved is not None:
            if any(entry.get("kind") == "reliable" for entry in report["tests"]):
                write_report(report, saved)
            self.saved_line = saved_baseline_line(report, saved)  # printed under the table
        if self.settings.history is not None and self.entries:
            self.keep_in_history(report)
        if html_path is not None:
            from pytest_reliable.report.html import write_html

            write_html(report, html_path)
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if step_summary and self.entries:
            try:
                append_github_step_summary(report, columns=self.table_columns(),
                                           html_path=html_path)
            except OSError as error:
                # A summary GitHub cannot show is no reason to change the run's result.
                self._warn(f"could not append to $GITHUB_STEP_SUMMARY ({step_summary}): "
                           f"{error.strerror or error}; the run's result is unchanged, the "
                           "summary is in the terminal output above.")

    def _warn(self, message: str) -> None:
        """One line on the terminal (or stderr without the terminal reporter), at the end."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"pytest-reliable: warning: {message}", yellow=True)
        else:
            import sys

            print(f"pytest-reliable: warning: {message}", file=sys.stderr)

    def keep_in_history(self, report: dict[str, Any]) -> None:
        """``--reliable-history``: the run's report kept in the directory (and the store). A copy
        that cannot be kept is said, not fatal: the run's own reports are written already."""
        from pytest_reliable.store import reports

        commit = self.config.hook.pytest_reliable_generate_commit_info(config=self.config)
        kept = reports.kept_report(report, run_id=self.settings.run_id,
                                   commit=None if commit is None else str(commit))
        assert self.settings.history is not None
        said = []
        try:
            said.append(f"kept in {reports.keep_in_dir(self.settings.history, kept)}")
        except OSError as error:
            said.append(f"NOT kept in {self.settings.history} ({error.strerror})")
        if self._opened_store is not None:  # the local files are checked at start-up, not opened
            from pytest_reliable.store import StoreUnavailable

            try:
                if self._opened_store.keep_run_report(kept):
                    said.append("and in the store")
            except StoreUnavailable as error:
                said.append(f"NOT kept in the store ({error}): copy the file in later")
        writer = self.config.pluginmanager.get_plugin("terminalreporter")
        if writer is not None:
            writer.write_line(f"reliable history: run {kept['run_id']} " + " ".join(said))


def saved_baseline_line(report: dict[str, Any], path: Path) -> str:
    """What ``--reliable-save-baseline`` wrote, and how a later run uses it; tests whose calls
    did not all complete hold no per-instance results, so a later run cannot pair with them."""
    reliable = [t for t in report.get("tests", []) if t.get("kind") == "reliable"]
    if not reliable:  # --collect-only, --reliable-plan, -k matching none: keep the old baseline
        return (f"reliable baseline: nothing saved: no reliable test ran; {path} is left as it "
                "was")
    unusable = [t["nodeid"] for t in reliable if not t.get("per_instance")]
    usable = len(reliable) - len(unusable)
    line = (f"reliable baseline: saved {usable} reliable test{'' if usable == 1 else 's'} to "
            f"{path}; compare a later run with --reliable-baseline-report {path}")
    if unusable:
        shown = ", ".join(unusable[:3]) + (" ..." if len(unusable) > 3 else "")
        line += (f" ({len(unusable)} tests did not complete and cannot be compared with: "
                 f"{shown}; run them again)")
    return line


def state_of(config: pytest.Config) -> ReliableState:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    assert isinstance(state, ReliableState), "pytest-reliable's state is missing"
    return state


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
