"""Report writers over one report model (`report.model`): terminal, JSON, JUnit, Markdown."""

from pytest_reliable.report.json_report import SCHEMA_VERSION, build_report, write_report
from pytest_reliable.report.junit import junit_properties
from pytest_reliable.report.markdown import append_github_step_summary, markdown_summary
from pytest_reliable.report.terminal import progress_line, summary_table

__all__ = [
    "SCHEMA_VERSION",
    "append_github_step_summary",
    "build_report",
    "junit_properties",
    "markdown_summary",
    "progress_line",
    "summary_table",
    "write_report",
]
