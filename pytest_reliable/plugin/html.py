"""pytest-html integration: the reliable summary in pytest-html's report, and each test's
thresholds as an extra. Registered by `plugin.pytest_configure` only when pytest-html is loaded,
so nothing here runs (or is imported) without it."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_reliable.plugin.state import ReliableState


class PytestHtmlHooks:
    def __init__(self, state: ReliableState) -> None:
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str],
                                    postfix: list[str], session: pytest.Session) -> None:
        if not self.state.entries:
            return
        from pytest_reliable.report import build_report
        from pytest_reliable.report.html import summary_fragment

        report = build_report(self.state.all_entries(), seed=self.state.settings.seed, model=None,
                              space_hash=self.state.spaces_hash)
        link = None
        html_path = self.state.settings.html_path
        if html_path is not None:
            # Relative to pytest-html's page, so the link survives moving both as an artifact.
            their_page = Path(str(session.config.getoption("htmlpath", None) or ".")).resolve()
            link = Path(os.path.relpath(html_path, their_page.parent)).as_posix()
        postfix.append(summary_fragment(report, link))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
        report = yield
        # Registered after the plugin module and tryfirst as its wrapper (which sets the entries
        # once pytest's xfail handling has run), so that wrapper ran inside this one.
        entries = getattr(report, "reliable_entries", None)
        if entries:
            from pytest_html import extras

            from pytest_reliable.report.html import entry_fragment

            report.extras = [*getattr(report, "extras", []),
                             *(extras.html(entry_fragment(entry)) for entry in entries)]
        return report
