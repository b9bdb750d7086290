"""``python -m pytest_reliable html REPORT.json -o PAGE.html``: rebuild the HTML page of a run
from its JSON report (``--reliable-report``), with no model call. It loads only the viewer
(`pytest_reliable.report`): no numpy, no model code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_reliable.report.html import write_html
from pytest_reliable.report.load import ReportFileError, load_report


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
    args = parser.parse_args(argv)

    try:
        report = load_report(args.report)
    except ReportFileError as error:
        parser.exit(2, f"{parser.prog} html: error: {error}\n")
    output: Path = args.output or args.report.with_suffix(".html")
    try:
        write_html(report, output)
    except OSError as error:
        parser.exit(2, f"{parser.prog} html: error: cannot write {output} ({error.strerror}): "
                       "give a path in a writable directory.\n")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
