"""The progress line: a running evaluation's calls, while it runs.

On a terminal, one line rewritten in place every ``interval`` seconds; in a log (output to a
file or a CI log, where nothing can be rewritten), a line every ``log_interval`` seconds, and only
for evaluations long enough to need one. A pytest-xdist worker writes its own lines, prefixed with
its id, on the stderr it shares with the controller. Written with pytest's capture suspended (as
live logging does): visible under the default capture, never in a test's "Captured stdout".

While the calls wait for another party (a batch, another process's answers: the event's
``note``), the line says what they wait for: on a terminal as often as the calls' line, in a log
at once and then every ``WAIT_LOG_INTERVAL`` seconds (a batch may take hours).
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from pytest_reliable.plugin.xdist import is_worker, worker_id

if TYPE_CHECKING:
    from pytest_reliable.calls.requests import ProgressEvent


WAIT_LOG_INTERVAL = 60.0
"""Seconds between the lines of a wait in a log."""


class ProgressLine:
    """The session's ``on_progress`` callback: ``line(nodeid, event)`` for each call event."""

    def __init__(self, config: pytest.Config, *, interval: float, log_interval: float) -> None:
        self.config = config
        self.interval = interval
        """Seconds between updates on a terminal."""
        self.log_interval = log_interval
        """Seconds between lines in a log, and the least length of an evaluation shown there."""
        self._last = 0.0
        self._start: float | None = None
        self._shown = False
        self._said_wait = -WAIT_LOG_INTERVAL

    def __call__(self, nodeid: str, event: ProgressEvent) -> None:
        if self.config.option.verbose < 0:
            return
        if event.waiting:  # a long wait for other processes' claims: said on a line of its own
            self._say(event.waiting)
            return
        if is_worker(self.config):
            self._worker_line(nodeid, event)
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        now = time.monotonic()
        finished = event.done >= event.total
        width = self.config.get_terminal_writer().fullwidth
        if event.note is not None:
            if not reporter.isatty:
                if not finished and now - self._said_wait < WAIT_LOG_INTERVAL:
                    return
                self._said_wait = now
            elif not finished and now - self._last < self.interval:
                return
            self._last = now
            # A log keeps the whole line (what is waited for is at its end); a terminal's line
            # is rewritten in place, so it must fit.
            line = waiting_line(nodeid, event.note, width if reporter.isatty else None)
        else:
            if event.done <= 1 or self._start is None:
                self._start = now
            interval = self.interval if reporter.isatty else self.log_interval
            if not reporter.isatty and not self._shown and now - self._start < (
                    interval) and (finished or interval > 0):
                return  # a log gets progress only for evaluations long enough to need it
            if not finished and now - self._last < interval:
                return
            self._last = now
            from pytest_reliable.report import progress_line

            line = progress_line(nodeid, event.done, event.total, event.cached, event.made, width)
        with self._capture_suspended():
            if not reporter.isatty:
                reporter.ensure_newline()
                reporter.write_line(line)
                self._shown = not finished
                return
            if not self._shown:
                reporter.ensure_newline()
                self._shown = True
            reporter.rewrite(line, erase=True)
            if finished:
                reporter.rewrite("", erase=True)
                reporter.currentfspath = None  # pytest writes the file name again on a fresh line
                self._shown = False

    def _worker_line(self, nodeid: str, event: ProgressEvent) -> None:
        """A worker's own line, at most every ``log_interval`` seconds of a long evaluation (a
        rewritten line would fight the controller's)."""
        now = time.monotonic()
        finished = event.done >= event.total
        if event.note is not None:
            if not finished and now - self._said_wait < WAIT_LOG_INTERVAL:
                return
            self._said_wait = now
            line = waiting_line(nodeid, event.note)
        else:
            if event.done <= 1 or self._start is None:
                self._start = now
            if now - self._start < self.log_interval and self.log_interval > 0:
                return
            if not finished and now - self._last < self.log_interval:
                return
            self._last = now
            from pytest_reliable.report import progress_line

            line = progress_line(nodeid, event.done, event.total, event.cached, event.made)
        with self._capture_suspended():
            sys.stderr.write(f"[{worker_id(self.config)}] {line}\n")
            sys.stderr.flush()

    def _say(self, text: str) -> None:
        with self._capture_suspended():
            if is_worker(self.config):
                sys.stderr.write(f"[{worker_id(self.config)}] {text}\n")
                sys.stderr.flush()
                return
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is None:
                return
            if self._shown and reporter.isatty:
                reporter.rewrite("", erase=True)
            reporter.ensure_newline()
            reporter.write_line(text)
            self._shown = False

    def _capture_suspended(self) -> contextlib.AbstractContextManager[Any]:
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        return capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()


def waiting_line(nodeid: str, note: str, width: int | None = None) -> str:
    """The progress line of a wait: what waits, and for what (cut to ``width``, if given)."""
    from pytest_reliable.report.format import middle_truncate

    line = f"reliable {middle_truncate(nodeid, 40)}: {note}"
    return line if width is None else line[: max(width - 1, 20)]
