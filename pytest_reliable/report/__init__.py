"""The viewers of a run's JSON entries (`pytest_reliable.schema`): terminal, JSON, JUnit,
Markdown, HTML; and the reports combined after a run (`merge`, `history`).

A pure viewer: every number shown is a field of an entry (built by
`pytest_reliable.verdict.results`); nothing here computes a statistic or imports numpy, so a
saved report renders anywhere.
"""

from pytest_reliable.report.json_report import build_report, write_report
from pytest_reliable.report.junit import junit_properties
from pytest_reliable.report.markdown import append_github_step_summary, markdown_summary
from pytest_reliable.report.terminal import progress_line, summary_table

__all__ = [
    "append_github_step_summary",
    "build_report",
    "junit_properties",
    "markdown_summary",
    "progress_line",
    "summary_table",
    "write_report",
]
