"""``python -m pytest_reliable cache merge|export|import``: answers between stores, without a run.

For teams whose machines share no server, only CI artifacts (SPEC section 10):

- ``cache merge A.sqlite B.sqlite ... -o MERGED.sqlite``: every answer of the inputs in one file
  (an existing output is merged into, its answers first).
- ``cache export --store URL -o FILE.sqlite``: a PostgreSQL store's answers as a local cache file.
- ``cache import FILE.sqlite --store URL``: a local cache file's answers into a PostgreSQL store.

Every copy is insert-or-ignore: an answer already there stays, and a different answer for the same
key (two machines that sampled one key apart) keeps the first and is counted. Bad input is named
with the fix and exits 2; nothing is half-written (each batch is one transaction). A stored row
that is not an answer (its text NULL or not UTF-8, its JSON fields broken) is left out and
counted with why; numbers that are not numbers are copied as unknown. Answers stream through in
chunks of a few megabytes (`base.CHUNK_BYTES`), whatever the size of the store.
"""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_reliable.contract.settings import RecordMode
from pytest_reliable.redact import redact
from pytest_reliable.store.base import AnswerRow, Store
from pytest_reliable.store.errors import StoreUnavailable, StoreUsageError
from pytest_reliable.store.local import (
    CacheFileError,
    LocalStore,
    check_cache_path,
    connect_read_only,
)

PROG = "python -m pytest_reliable cache"


class CacheCommandError(Exception):
    """Bad input to a cache command: the message names the file or store and the fix."""


@dataclass
class Copied:
    """What copying one source into a target did."""

    source: str
    answers: int = 0
    added: int = 0
    present: int = 0
    """Already there with the same answer."""
    conflicting: int = 0
    """Already there with another answer: the first (the target's) is kept."""
    skipped: list[tuple[str, str]] | None = None
    """(key, why) of the source's rows that are not answers, left out."""

    def describe(self) -> str:
        parts = [f"{self.added} added"]
        if self.present:
            parts.append(f"{self.present} already there")
        if self.conflicting:
            parts.append(f"{self.conflicting} conflicting (the first kept)")
        text = f"{self.source}: {self.answers} answers ({', '.join(parts)})"
        if self.skipped:
            shown = "; ".join(f"key {key[:24]}: {why}" for key, why in self.skipped[:3])
            more = f"; and {len(self.skipped) - 3} more" if len(self.skipped) > 3 else ""
            text += (f"; {len(self.skipped)} rows left out, not answers ({shown}{more})")
        return text


def copy_answers(batches: Iterable[list[AnswerRow]], target: Store, source: str,
                 skipped: list[tuple[str, str]] | None = None) -> Copied:
    """Insert-or-ignore every row of ``batches`` into ``target``, counting what happened;
    ``skipped``: the source's list of rows it left out (filled as ``batches`` is read)."""
    done = Copied(source, skipped=skipped)
    for batch in batches:
        existing = {row.key: row for row in target.read_rows([row.key for row in batch])}
        new: list[AnswerRow] = []
        for row in batch:
            done.answers += 1
            first = existing.get(row.key)
            if first is None:
                existing[row.key] = row
                new.append(row)
                done.added += 1
            elif first.same_answer(row):
                done.present += 1
            else:
                done.conflicting += 1
        target.write_rows(new)
    return done


def open_input(path: Path) -> LocalStore:
    """A local cache file to read, checked: it exists and is a pytest-reliable cache."""
    if not path.exists():
        raise CacheCommandError(f"{path} does not exist: give a cache file (.reliable/cache.sqlite "
                                "of a run, or a file that cache export or merge wrote)")
    if path.is_dir():
        raise CacheCommandError(f"{path} is a directory: give the cache file in it, e.g. "
                                f"{path / 'cache.sqlite'}")
    try:
        conn = connect_read_only(path)
        try:
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.Error as error:
        raise CacheCommandError(f"{path} is not a pytest-reliable cache (sqlite: {error}): give "
                                "a cache file that a run, cache export or merge wrote") from None
    if "responses" not in tables:
        raise CacheCommandError(f"{path} is not a pytest-reliable cache (it has no responses "
                                "table): give a cache file that a run, cache export or merge "
                                "wrote")
    try:
        return LocalStore(path, "none")
    except CacheFileError as error:
        raise CacheCommandError(str(error)) from None


def open_output(path: Path, inputs: Iterable[Path] = ()) -> LocalStore:
    if any(path.resolve() == given.resolve() for given in inputs):
        raise CacheCommandError(f"-o {path} is also an input: write to a new file")
    try:
        check_cache_path(path, "new")
        return LocalStore(path, "new")
    except CacheFileError as error:
        raise CacheCommandError(f"-o {path}: {error}") from None


def open_remote(url: str, record_mode: RecordMode) -> Store:
    from pytest_reliable.store import parse_store_url
    from pytest_reliable.store.postgres import PostgresStore

    try:
        return PostgresStore(parse_store_url(url), record_mode)
    except ValueError as error:
        raise CacheCommandError(f"--store: {error}") from None


def merge(inputs: list[Path], output: Path) -> list[Copied]:
    sources = [open_input(path) for path in inputs]
    target = open_output(output, inputs)
    try:
        return [copy_answers(source.rows(), target, str(path), source.bad_rows)
                for source, path in zip(sources, inputs)]
    finally:
        for store in (*sources, target):
            store.close()


def export(url: str, output: Path) -> Copied:
    source = open_remote(url, "none")
    try:
        target = open_output(output)
        try:
            return copy_answers(source.rows(), target, source.location, source.bad_rows)
        finally:
            target.close()
    finally:
        source.close()


def import_(path: Path, url: str) -> Copied:
    source = open_input(path)
    try:
        target = open_remote(url, "new")
        try:
            return copy_answers(source.rows(), target, str(path), source.bad_rows)
        finally:
            target.close()
    finally:
        source.close()


def run_cache(args: argparse.Namespace) -> tuple[int, str]:
    """Run a parsed ``cache`` command: (exit code, what to print)."""
    action = args.cache_command
    try:
        if action == "merge":
            copied = merge(list(args.inputs), args.output)
            added = sum(c.added for c in copied)
            conflicting = sum(c.conflicting for c in copied)
            lines = [(f"merged {len(copied)} files into {args.output}: {added} answers added, "
                     f"{conflicting} conflicting (the first kept)")]
            lines += [f"  {c.describe()}" for c in copied]
        elif action == "export":
            done = export(args.store, args.output)
            lines = [f"exported to {args.output}: {done.describe()}"]
        else:
            done = import_(args.input, args.store)
            lines = [f"imported into {redact(args.store)}: {done.describe()}"]
    except (CacheCommandError, StoreUsageError) as error:
        return 2, f"{PROG} {action}: error: {redact(str(error))}\n"
    except StoreUnavailable as error:
        return 2, (f"{PROG} {action}: error: the store failed midway ({redact(str(error))}); "
                   "what was copied before stays (each batch is whole): run it again\n")
    return 0, "\n".join(lines) + "\n"


__all__ = ["Copied", "copy_answers", "run_cache"]
