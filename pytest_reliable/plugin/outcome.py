"""pytest's outcome of a test, as the JSON report records it: each entry's ``outcome`` (from the
test's call report) and the report's ``outcomes`` (every test the session ran, reliable or not:
pytest's last word on it, a teardown that failed included). ``merge`` decides on them.
"""

from __future__ import annotations

import pytest


def outcome_of(report: pytest.TestReport) -> tuple[str, str | None]:
    """How pytest counts the test (an entry's ``outcome``) and the xfail reason: the page, the
    step summary and the table agree with pytest's exit code (a strict xfail is expected)."""
    reason = getattr(report, "wasxfail", None)
    if reason is not None:
        return ("xfailed" if report.skipped else "xpassed"), str(reason) or None
    if report.when != "call":
        return ("error" if report.failed else "skipped"), None
    return report.outcome, None


def session_outcome(report: pytest.TestReport, before: str | None) -> str | None:
    """The test's outcome in the report's ``outcomes`` after ``report`` (one phase of it), given
    the one before (None: none yet); None while there is none (a setup that passed). A teardown
    that fails makes the test ``error``, as pytest counts it an error too."""
    if report.when == "call" or (report.when == "setup" and not report.passed):
        return outcome_of(report)[0]
    if report.when == "teardown" and report.failed:
        return "error"
    return before
