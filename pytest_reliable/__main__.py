"""``python -m pytest_reliable html REPORT.json -o PAGE.html``: rebuild the HTML page of a run
from its JSON report (``--reliable-report``), with no model call. It loads only the viewer
(`pytest_reliable.report`): no numpy, no model code. ``python -m pytest_reliable merge SHARD.json
... -o REPORT.json``: one report, table, page and exit code from a gate's shards
(`pytest_reliable.report.merge`). ``python -m pytest_reliable cache merge|export|import``: cached
answers between stores (`pytest_reliable.store.cli`). ``python -m pytest_reliable history
[DIR|--store URL] -o PAGE.html``: the release history page of the kept runs
(`pytest_reliable.report.history`)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    add_merge_command(commands)
    add_history_command(commands)
    add_cache_command(commands)
    args = parser.parse_args(argv)
    if args.command == "merge":
        return run_merge(parser, args)
    if args.command == "history":
        return run_history(parser, args)
    if args.command == "cache":
        # Only now: the viewer's command above must not load the store's modules.
        from pytest_reliable.store.cli import run_cache

        code, text = run_cache(args)
        (sys.stdout if code == 0 else sys.stderr).write(text)
        return code

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


def add_merge_command(commands: Any) -> None:
    merging = commands.add_parser(
        "merge", help="one report from the JSON reports of a gate's shards",
        description="Combine the JSON reports (--reliable-report) of the shards of one gate run "
                    "into one report; print its summary table, write the step summary when "
                    "$GITHUB_STEP_SUMMARY is set, and exit 1 when any test failed or errored, "
                    "else 0 (2: shards that cannot be merged).")
    merging.add_argument("shards", nargs="+", type=Path, metavar="SHARD.json")
    merging.add_argument("-o", "--output", type=Path, required=True, metavar="REPORT.json",
                         help="where to write the merged JSON report")
    merging.add_argument("--html", type=Path, metavar="PAGE.html",
                         help="also write the HTML page of the merged report")


def run_merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_reliable.report import (
        ReportFileError,
        append_github_step_summary,
        summary_table,
        write_report,
    )
    from pytest_reliable.report.merge import (
        BLOCKING_VERDICTS,
        ShardMismatch,
        exit_code,
        merge_reports,
    )

    prog = f"{parser.prog} merge"
    try:
        report = merge_reports(args.shards)
    except (ReportFileError, ShardMismatch) as error:
        parser.exit(2, f"{prog}: error: {error}\n")
    written: list[Path] = []
    for path, write in ((args.output, write_report), (args.html, write_html)):
        if path is None:
            continue
        try:
            write(report, path)
        except OSError as error:
            parser.exit(2, f"{prog}: error: cannot write {path} ({error.strerror}): give a path "
                           "in a writable directory.\n")
        written.append(path)
    width = shutil.get_terminal_size().columns
    tests = report["tests"]
    print(f" reliable summary: {len(tests)} tests from {len(args.shards)} shards "
          .center(width, "="))
    for line in summary_table(tests, width=width):
        print(line)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        append_github_step_summary(report, html_path=args.html)
    for path in written:
        print(f"wrote {path}")
    code = exit_code(report)
    blocking = sum(entry.get("verdict") in BLOCKING_VERDICTS for entry in tests)
    print(f"{blocking} of {len(tests)} tests failed or errored: the gate "
          + ("blocks the release (exit 1)" if code else "passes (exit 0)"))
    return code


def add_history_command(commands: Any) -> None:
    history = commands.add_parser(
        "history", help="the release history page of the kept runs",
        description="Draw, per test across the runs kept by --reliable-history (a directory, or "
                    "the store), the canonical score with its interval and the format "
                    "min/median/max, marking the runs whose gate failed.")
    history.add_argument("directory", type=Path, nargs="?", metavar="DIR",
                         help="the directory given to --reliable-history")
    history.add_argument("--store", metavar="URL",
                         help="read the runs kept in this store (postgresql://USER@HOST:PORT/"
                              "DATABASE) instead of a directory")
    history.add_argument("-o", "--output", type=Path, required=True, metavar="PAGE.html")


def run_history(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_reliable.report.history import runs_of, write_history
    from pytest_reliable.store.reports import HistoryError, read_dir, read_store

    prog = f"{parser.prog} history"
    if (args.directory is None) == (args.store is None):
        parser.exit(2, f"{prog}: error: give the history's directory (DIR) or --store URL, "
                       "one of them.\n")
    where = str(args.directory) if args.store is None else "the store"
    try:
        if args.store is not None:
            from pytest_reliable.store import parse_store_url

            reports = read_store(parse_store_url(args.store))
        else:
            reports = read_dir(args.directory)
    except (HistoryError, ValueError) as error:
        parser.exit(2, f"{prog}: error: {error}\n")
    if not reports:
        parser.exit(2, f"{prog}: error: no kept runs in {where}: run pytest with "
                       "--reliable-history DIR (and --reliable-store) to keep them.\n")
    try:
        write_history(reports, args.output)
    except OSError as error:
        parser.exit(2, f"{prog}: error: cannot write {args.output} ({error.strerror}): give a "
                       "path in a writable directory.\n")
    runs = runs_of(reports)
    print(f"wrote {args.output}: {len(runs)} runs from {where}, "
          f"{sum(run.failed for run in runs)} with a failed gate")
    return 0


def add_cache_command(commands: Any) -> None:
    """Add ``cache`` with its three subcommands to ``python -m pytest_reliable``'s parser."""
    cache = commands.add_parser(
        "cache", help="merge, export or import cached answers (no model call)",
        description="Copy cached answers between stores without a run: insert-or-ignore, a "
                    "conflicting answer for one key keeps the first and is counted.")
    actions = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    merging = actions.add_parser("merge", help="merge local cache files into one",
                                 description="Merge local cache files (e.g. one per CI shard) "
                                             "into one file that --reliable-cache can use.")
    merging.add_argument("inputs", nargs="+", type=Path, metavar="CACHE.sqlite")
    merging.add_argument("-o", "--output", type=Path, required=True, metavar="MERGED.sqlite")
    exporting = actions.add_parser("export", help="a PostgreSQL store's answers as a local file",
                                   description="Write a --reliable-store's answers to a local "
                                               "cache file.")
    exporting.add_argument("--store", required=True, metavar="URL",
                           help="postgresql://USER@HOST:PORT/DATABASE")
    exporting.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.sqlite")
    importing = actions.add_parser("import", help="a local file's answers into a PostgreSQL store",
                                   description="Add a local cache file's answers to a "
                                               "--reliable-store.")
    importing.add_argument("input", type=Path, metavar="FILE.sqlite")
    importing.add_argument("--store", required=True, metavar="URL",
                           help="postgresql://USER@HOST:PORT/DATABASE")


if __name__ == "__main__":
    sys.exit(main())
