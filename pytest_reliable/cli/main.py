"""``python -m pytest_reliable html REPORT.json -o PAGE.html``: rebuild the HTML page of a run
from its JSON report (``--reliable-report``), with no model call. It loads only the viewer
(`pytest_reliable.report`): no numpy, no model code.

``python -m pytest_reliable merge SHARD.json ... -o REPORT.json [--html PAGE.html]
[--expect-tests FILE]``: one report, table, page and release decision (the exit code) from a
gate's shards, each checked (`pytest_reliable.report.merge`); the decision is printed only once
every output is written.

``python -m pytest_reliable cache merge|export|import``: cached answers between stores
(`pytest_reliable.cli.cache`).

``python -m pytest_reliable history [DIR|--store URL] -o PAGE.html``: the release history page of
the kept runs, each checked as it is read (`pytest_reliable.report.history`).

An output that names an input is refused (exit 2)."""

from __future__ import annotations

import argparse
import html
import io
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_reliable.report.html import write_html
from pytest_reliable.schema.load import ReportFileError, load_report


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
        from pytest_reliable.cli.cache import run_cache

        code, text = run_cache(args)
        (sys.stdout if code == 0 else sys.stderr).write(text)
        return code

    try:
        report = load_report(args.report)
    except ReportFileError as error:
        parser.exit(2, f"{parser.prog} html: error: {error}\n")
    output: Path = args.output or args.report.with_suffix(".html")
    _refuse_outputs_over_inputs(parser, f"{parser.prog} html", outputs=[("-o", output)],
                                inputs=[args.report])
    try:
        write_html(report, output)
    except OSError as error:
        parser.exit(2, f"{parser.prog} html: error: cannot write {output} ({error.strerror}): "
                       "give a path in a writable directory.\n")
    print(f"wrote {output}")
    return 0


def add_merge_command(commands: Any) -> None:
    merging = commands.add_parser(
        "merge", help="one report and one release decision from a gate's shards",
        description="Combine the JSON reports (--reliable-report) of the shards of one gate run "
                    "into one report; print its summary table, write the step summary when "
                    "$GITHUB_STEP_SUMMARY is set, and exit 1 when any test failed or errored "
                    "(pytest's outcome: an expected failure does not block), else 0. Exit 2: "
                    "shards that are inconsistent, empty or of different runs, an expected test "
                    "no shard reported, or an output that cannot be written.")
    merging.add_argument("shards", nargs="+", type=Path, metavar="SHARD.json")
    merging.add_argument("-o", "--output", type=Path, required=True, metavar="REPORT.json",
                         help="where to write the merged JSON report (not one of the shards)")
    merging.add_argument("--html", type=Path, metavar="PAGE.html",
                         help="also write the HTML page of the merged report")
    merging.add_argument("--expect-tests", metavar="FILE",
                         help="the tests the gate must have: the output of `pytest "
                              "--collect-only -q` (one node id per line), or a JSON report; "
                              "'-' reads standard input. A listed test that no shard reported "
                              "is an error (exit 2), so a lost shard cannot pass")


def run_merge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_reliable.report import markdown_summary, summary_table, write_report
    from pytest_reliable.report.format import spend_note
    from pytest_reliable.report.json_report import total_cost
    from pytest_reliable.report.merge import (
        ExpectedTestsError,
        ShardMismatch,
        check_expected,
        decision_text,
        exit_code,
        merge_reports,
        read_expected_tests,
        unexpected_tests,
    )
    from pytest_reliable.schema.load import ReportFileError

    prog = f"{parser.prog} merge"
    if isinstance(sys.stdout, io.TextIOWrapper):  # a test name no terminal can encode
        sys.stdout.reconfigure(errors="backslashreplace")
    summary = os.environ.get("GITHUB_STEP_SUMMARY") or None
    _refuse_outputs_over_inputs(
        parser, prog,
        outputs=[("-o", args.output), ("--html", args.html),
                 ("$GITHUB_STEP_SUMMARY", None if summary is None else Path(summary))],
        inputs=[*args.shards, *([Path(args.expect_tests)]
                                if args.expect_tests not in (None, "-") else [])])
    expected: list[str] | None = None
    try:
        report = merge_reports(args.shards)
        if args.expect_tests is not None:
            expected = read_expected_tests(args.expect_tests)
            check_expected(report, expected, args.expect_tests)
    except (ReportFileError, ShardMismatch, ExpectedTestsError) as error:
        parser.exit(2, f"{prog}: error: {error}\n")

    width = shutil.get_terminal_size().columns
    tests = report["tests"]
    print(f" reliable summary: {len(tests)} tests from {len(args.shards)} shards "
          .center(width, "="))
    for line in summary_table(tests, width=width):
        print(line)
    if report["cost"] != total_cost(tests):  # a test two shards both ran was paid twice
        print(f"all {len(args.shards)} shards: {spend_note(report['cost']) or 'spend: $0'}")

    decided = decision_text(report)
    # The decision is printed only once every output is written: an output that fails stops the
    # merge (exit 2) and takes back the files it wrote, so nothing says the gate passed. The
    # step summary, which cannot be taken back, goes last.
    writes: list[tuple[str, Path | None, Callable[[Path], None]]] = [
        ("--html", args.html, lambda path: write_html(report, path)),
        ("-o", args.output, lambda path: write_report(report, path)),
        ("$GITHUB_STEP_SUMMARY", None if summary is None else Path(summary),
         lambda path: _append(path, markdown_summary(report, html_path=args.html)
                              + f"\n**merge** of {len(args.shards)} shards: "
                              + _markdown_text(decided) + "\n")),
    ]
    written: list[Path] = []
    for option, path, write in writes:
        if path is None:
            continue
        try:
            write(path)
        except (OSError, UnicodeError) as error:
            for done in written:
                Path(os.path.realpath(done)).unlink(missing_ok=True)
            taken_back = f" ({', '.join(map(str, written))} removed)" if written else ""
            reason = getattr(error, "strerror", None) or error
            parser.exit(2, f"{prog}: error: cannot write {option} {path} ({reason}): give a "
                           f"path in a writable directory. The gate is not decided{taken_back}."
                           "\n")
        if option != "$GITHUB_STEP_SUMMARY":
            written.append(path)
    for path in written:
        print(f"wrote {path}")

    if expected is not None and (extra := unexpected_tests(report, expected)):
        print(f"note: {len(extra)} tests the shards ran are not in {args.expect_tests}: "
              + ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else ""))
    print(decided)
    code = exit_code(report)
    return code


def _append(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` in one write (the step summary GitHub shows); a lone surrogate
    (UTF-8 cannot hold it) as an escape."""
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(text)


def _markdown_text(text: str) -> str:
    """``text`` (test names in it) as Markdown that shows it and runs nothing."""
    return re.sub(r"([\\`*_{}\[\]()#+!|~>-])", r"\\\1", html.escape(text, quote=False))


def _refuse_outputs_over_inputs(parser: argparse.ArgumentParser, prog: str, *,
                                outputs: list[tuple[str, Path | None]],
                                inputs: list[Path]) -> None:
    """Exit 2 when an output names an input (the command would overwrite what it reads) or
    another output."""
    named: list[tuple[str, Path]] = [(f"input {path}", path) for path in inputs]
    for option, path in outputs:
        if path is None:
            continue
        for what, other in named:
            if _same_file(path, other):
                parser.exit(2, f"{prog}: error: {option} {path} is also the {what}: the command "
                               "would write over what it reads; give the output another "
                               "path.\n")
        named.append((f"output {option}", path))


def _same_file(one: Path, other: Path) -> bool:
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    try:
        return os.path.samefile(one, other)  # a hard link
    except OSError:
        return False  # one of them does not exist (yet)


def add_history_command(commands: Any) -> None:
    history = commands.add_parser(
        "history", help="the release history page of the kept runs",
        description="Draw, per test across the runs kept by --reliable-history (a directory, or "
                    "the store), the canonical score with its interval and the format "
                    "min/median/max, marking the runs whose gate failed. A kept report that "
                    "cannot be read is skipped with a note naming it.")
    history.add_argument("directory", type=Path, nargs="?", metavar="DIR",
                         help="the directory given to --reliable-history")
    history.add_argument("--store", metavar="URL",
                         help="read the runs kept in this store (postgresql://USER@HOST:PORT/"
                              "DATABASE) instead of a directory")
    history.add_argument("-o", "--output", type=Path, required=True, metavar="PAGE.html")


def run_history(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_reliable.report.history import kept_in_dir, kept_in_texts, runs_of, write_history

    prog = f"{parser.prog} history"
    if (args.directory is None) == (args.store is None):
        parser.exit(2, f"{prog}: error: give the history's directory (DIR) or --store URL, "
                       "one of them.\n")
    if args.store is not None:
        where = "the store"
        location, texts = _kept_texts_in_store(parser, prog, args.store)
        reports, skipped = kept_in_texts(texts, f"the store at {location}")
    else:
        where = str(args.directory)
        if not args.directory.is_dir():
            parser.exit(2, f"{prog}: error: {args.directory} is not a directory: give the "
                           "directory that --reliable-history DIR kept the runs in.\n")
        _refuse_outputs_over_inputs(parser, prog, outputs=[("-o", args.output)],
                                    inputs=sorted(args.directory.glob("*.json")))
        reports, skipped = kept_in_dir(args.directory)
    for note in skipped:
        print(f"{prog}: note: {note}", file=sys.stderr)
    if not reports:
        parser.exit(2, f"{prog}: error: no kept runs in {where}"
                       + (f" ({len(skipped)} skipped: see above)" if skipped else "")
                       + ": run pytest with --reliable-history DIR (and --reliable-store) to "
                         "keep them.\n")
    try:
        write_history(reports, args.output)
    except OSError as error:
        parser.exit(2, f"{prog}: error: cannot write {args.output} ({error.strerror}): give a "
                       "path in a writable directory.\n")
    runs = runs_of(reports)
    print(f"wrote {args.output}: {len(runs)} runs from {where}, "
          f"{sum(run.failed for run in runs)} with a failed gate"
          + (f" ({len(skipped)} kept reports skipped: not reports)" if skipped else ""))
    return 0


def _kept_texts_in_store(parser: argparse.ArgumentParser, prog: str, url: str) \
        -> tuple[str, list[str]]:
    """Where the store is (host, port, database: no password) and its kept reports as the JSON
    texts it holds (checked by the caller); opened read-only (record mode ``none``: reading
    creates nothing)."""
    from pytest_reliable.store import parse_store_url
    from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError
    from pytest_reliable.store.postgres import PostgresStore

    try:
        store = PostgresStore(parse_store_url(url), "none")
    except (StoreUsageError, ValueError) as error:
        parser.exit(2, f"{prog}: error: {error}\n")
    try:
        return store.location, store.kept_reports()
    except StoreUnavailable as error:
        parser.exit(2, f"{prog}: error: --store {store.location}: the kept reports cannot be "
                       f"read ({error}): check the server and try again.\n")
    finally:
        store.close()


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
