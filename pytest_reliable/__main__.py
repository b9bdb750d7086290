"""``python -m pytest_reliable html REPORT.json -o PAGE.html``: rebuild the HTML page of a run
from its JSON report (``--reliable-report``), with no model call. ``python -m pytest_reliable cache
merge|export|import``: cached answers between stores (`pytest_reliable.store.cli`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class ReportFileError(Exception):
    """A JSON report that cannot be read; the message names the problem and the fix."""


def load_report(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ReportFileError(f"{path} does not exist: give the file that "
                              "--reliable-report PATH.json wrote.")
    if path.is_dir():
        raise ReportFileError(f"{path} is a directory: give the JSON file that "
                              "--reliable-report PATH.json wrote.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ReportFileError(f"{path} is not UTF-8 text ({error.reason} at byte "
                              f"{error.start}): give the JSON file that --reliable-report "
                              "wrote.") from None
    except json.JSONDecodeError as error:
        raise ReportFileError(f"{path} is not valid JSON (line {error.lineno}, column "
                              f"{error.colno}: {error.msg}): give the file that --reliable-report "
                              "wrote, complete.") from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        raise ReportFileError(f"{path} is JSON but not a pytest-reliable report (it has no "
                              "'tests' list): give the file that --reliable-report wrote.")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_reliable",
                                     description="pytest-reliable tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    page = commands.add_parser("html", help="build the HTML report from a JSON report",
                               description="Build the self-contained HTML page of a run from its "
                               "JSON report (--reliable-report): the same page "
                               "--reliable-html writes.")
    page.add_argument("report", type=Path, metavar="REPORT.json")
    page.add_argument("-o", "--output", type=Path, metavar="PAGE.html",
                      help="where to write the page (default: REPORT.html next to REPORT.json)")
    from pytest_reliable.store.cli import add_cache_command, run_cache

    add_cache_command(commands)
    args = parser.parse_args(argv)
    if args.command == "cache":
        code, text = run_cache(args)
        (sys.stdout if code == 0 else sys.stderr).write(text)
        return code

    try:
        report = load_report(args.report)
    except ReportFileError as error:
        parser.exit(2, f"{parser.prog} html: error: {error}\n")
    output: Path = args.output or args.report.with_suffix(".html")
    from pytest_reliable.report.html import write_html

    try:
        write_html(report, output)
    except OSError as error:
        parser.exit(2, f"{parser.prog} html: error: cannot write {output} ({error.strerror}): "
                       "give a path in a writable directory.\n")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
