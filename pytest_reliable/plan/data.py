"""Datasets: immutable record lists with a content hash and a location for every record.

Loaders:
- `Dataset.from_records(list_of_dicts)`.
- `Dataset.from_file(path)`: ``.jsonl`` (one JSON object a line; blank lines skipped), ``.json``
  (a list of objects, or ``{"examples": [...]}``), ``.csv`` (header row; a ``choices`` cell is a
  JSON list when it starts with ``[``, otherwise ``|``-separated; an ``answer`` cell of digits is
  an index; a ``references`` cell likewise a JSON list or ``|``-separated), ``.yaml``/``.yml`` (a
  list of mappings, or a mapping with ``records:``/``examples:``).
- `Dataset.from_bbh(path, limit=None)`: BIG-Bench Hard JSON. An ``Options:`` block of ``(A) ...``
  lines (or ``- ...`` lines) becomes ``choices``, the text before it ``question``, and the target
  (``(B)`` or an option's text) ``answer`` (an index). A file without options (e.g.
  boolean_expressions) becomes a `Generation`-shaped dataset: ``{"question", "reference"}``.

Errors are `DatasetError` naming the file, the line (JSONL line, CSV row as the line number in the
file) and the field.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from pytest_reliable.errors import DatasetError
from pytest_reliable.files import content_hash

Record = dict[str, Any]
Records = Iterable[Mapping[str, Any]]
"""What ``reliable.evaluate`` and friends accept as a dataset: a `Dataset` or any records."""


class Dataset(Sequence[Record]):
    """An immutable sequence of records (dicts) with ``name``, ``source`` and ``hash``.

    ``hash`` is the sha256 of the canonical JSON (sorted keys) of the records. Records are
    returned as stored: treat them as read-only.
    """

    __slots__ = ("_hash", "_locations", "_name", "_records", "_source")

    def __init__(self, records: Sequence[Mapping[str, Any]], *, name: str | None = None,
                 source: str | None = None, locations: Sequence[str] | None = None) -> None:
        self._records: tuple[Record, ...] = tuple(dict(r) for r in records)
        self._name = name
        self._source = source
        if locations is not None and len(locations) != len(self._records):
            raise ValueError("one location per record")
        self._locations = tuple(locations) if locations is not None else None
        self._hash = content_hash(list(self._records))

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]] | Any,
                     name: str | None = None) -> Dataset:
        if isinstance(records, Dataset):
            return records
        records = list(records)
        for i, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise DatasetError(f"{name or 'records'}, record {i + 1}: a record must be a "
                                   f"mapping (dict), got {type(record).__name__}")
        return cls(records, name=name, source=None)

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> Dataset:
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".jsonl", ".json", ".csv", ".yaml", ".yml"):
            raise DatasetError(f"{path}: unknown data format {suffix!r}. Fix: use .jsonl, .json, "
                               ".csv or .yaml.")
        text = read_text(path)
        name = name or path.stem
        if suffix == ".jsonl":
            records, where = _read_jsonl(path, text)
        elif suffix == ".json":
            records, where = _read_json(path, text)
        elif suffix == ".csv":
            records, where = _read_csv(path, text)
        else:
            records, where = _read_yaml(path, text)
        if not records:
            raise DatasetError(f"{path}: the dataset is empty. Fix: give at least one record.")
        return cls(records, name=name, source=str(path), locations=where)

    @classmethod
    def from_bbh(cls, path: str | Path, limit: int | None = None) -> Dataset:
        path = Path(path)
        text = read_text(path)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {error.lineno}: not JSON ({error.msg}).") from None
        examples = data.get("examples") if isinstance(data, dict) else None
        if not isinstance(examples, list):
            raise DatasetError(f"{path}: field 'examples' is missing. Fix: BBH files are "
                               '{"examples": [{"input": ..., "target": ...}]}.')
        if limit is not None:
            examples = examples[:limit]
        records: list[Record] = []
        where: list[str] = []
        for i, example in enumerate(examples):
            loc = f"{path.name}, example {i + 1}"
            if not isinstance(example, dict) or "input" not in example or "target" not in example:
                raise DatasetError(f"{loc}: fields 'input' and 'target' are required")
            records.append(bbh_record(str(example["input"]), str(example["target"]), loc))
            where.append(loc)
        if not records:
            raise DatasetError(f"{path}: the dataset is empty.")
        return cls(records, name=path.stem, source=str(path), locations=where)

    # -- sequence protocol ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> Dataset: ...

    def __getitem__(self, index: int | slice) -> Record | Dataset:
        if isinstance(index, slice):
            locs = self._locations[index] if self._locations is not None else None
            return Dataset(self._records[index], name=self._name, source=self._source,
                           locations=locs)
        return self._records[index]

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dataset) and other._hash == self._hash

    def __hash__(self) -> int:
        return hash(self._hash)

    def __repr__(self) -> str:
        return f"Dataset(name={self._name!r}, records={len(self)}, hash={self._hash[:12]})"

    # -- properties -------------------------------------------------------------------------
    @property
    def records(self) -> tuple[Record, ...]:
        return self._records

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def hash(self) -> str:
        return self._hash

    def where(self, i: int) -> str:
        """Where record ``i`` came from, e.g. ``data.jsonl, line 3`` (for error messages)."""
        if self._locations is not None:
            return self._locations[i]
        return f"{self._name or 'records'}, record {i + 1}"


def record_location(records: Any, i: int) -> str:
    """Where record ``i`` (0-based) of ``records`` came from, as a person counts: a `Dataset`'s
    own location (``data.jsonl, line 3``), else ``records, record {i + 1}`` (1-based). Messages,
    tables and pages name an instance this way; JSON indexes stay 0-based."""
    if isinstance(records, Dataset):
        return records.where(i)
    return f"records, record {i + 1}"


# ------------------------------------------------------------------------------------------
# readers


def read_text(path: Path) -> str:
    """A data file's text, or a DatasetError naming the file (unreadable, or not UTF-8)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise DatasetError(f"{path}: cannot read ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise DatasetError(
            f"{path}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}). Fix: save the file as UTF-8."
        ) from None


def _read_jsonl(path: Path, text: str) -> tuple[list[Record], list[str]]:
    records, where = [], []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {n}: not JSON ({error.msg}, column {error.colno})."
                               " Fix: one JSON object per line.") from None
        if not isinstance(value, dict):
            raise DatasetError(f"{path}, line {n}: expected a JSON object, got "
                               f"{type(value).__name__}")
        records.append(value)
        where.append(f"{path.name}, line {n}")
    return records, where


def _read_json(path: Path, text: str) -> tuple[list[Record], list[str]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}, line {error.lineno}: not JSON ({error.msg}).") from None
    if isinstance(value, dict):
        value = value.get("records", value.get("examples"))
    if not isinstance(value, list):
        raise DatasetError(f"{path}: expected a list of records (or {{\"records\": [...]}})")
    for i, record in enumerate(value):
        if not isinstance(record, dict):
            raise DatasetError(f"{path}, record {i + 1}: expected an object")
    return value, [f"{path.name}, record {i + 1}" for i in range(len(value))]


def _split_list(cell: str, path: Path, line: int, field: str) -> list[str]:
    cell = cell.strip()
    if cell.startswith("["):
        try:
            value = json.loads(cell)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}, line {line}: field {field!r} is not a JSON list "
                               f"({error.msg}). Fix: write a JSON list or separate with |.") from None
        if not isinstance(value, list):
            raise DatasetError(f"{path}, line {line}: field {field!r} must be a list")
        return [str(v) for v in value]
    return [part.strip() for part in cell.split("|")]


def _read_csv(path: Path, text: str) -> tuple[list[Record], list[str]]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    records, where = [], []
    if reader.fieldnames is None:
        return [], []
    for row in reader:
        line = reader.line_num
        if None in row:
            raise DatasetError(f"{path}, line {line}: more cells than header columns")
        record: Record = {k: v for k, v in row.items() if k is not None}
        for field in ("choices", "references"):
            if field in record and isinstance(record[field], str):
                record[field] = _split_list(record[field], path, line, field)
        answer = record.get("answer")
        if isinstance(answer, str) and answer.strip().isdigit():
            record["answer"] = int(answer.strip())
        records.append(record)
        where.append(f"{path.name}, line {line}")
    return records, where


def _read_yaml(path: Path, text: str) -> tuple[list[Record], list[str]]:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f", line {mark.line + 1}" if mark is not None else ""
        raise DatasetError(f"{path}{at}: broken YAML ({getattr(error, 'problem', error)}).") \
            from None
    if isinstance(value, dict):
        key = "records" if "records" in value else "examples"
        value = value.get(key)
        node = next((v for k, v in node.value if k.value == key), None) if node else None
    if not isinstance(value, list):
        raise DatasetError(f"{path}: expected a list of records (or `records:` with one)")
    lines = [item.start_mark.line + 1 for item in node.value] if node is not None else []
    where = []
    for i, record in enumerate(value):
        line = lines[i] if i < len(lines) else None
        loc = f"{path.name}, line {line}" if line else f"{path.name}, record {i + 1}"
        if not isinstance(record, dict):
            raise DatasetError(f"{loc}: expected a mapping")
        where.append(loc)
    return value, where


_OPTION_LINE = re.compile(r"^\(([A-Z])\)\s?(.*)$")
# A field label some BBH inputs carry (web_of_lies: "Question: Sherrie tells the truth. ..."). The
# prompt's own field marker labels the question, so the label is dropped here: kept, a marker
# "Question:" rendered "Question: Question: ...", and "Q:" rendered "Q: Question: ...".
_QUESTION_LABEL = re.compile(r"^\s*Question:\s*")


def bbh_record(text: str, target: str, where: str = "BBH example") -> Record:
    """One BBH example as a MultipleChoice record (or Generation-shaped without options)."""
    text = _QUESTION_LABEL.sub("", text, count=1)
    head, sep, tail = text.rpartition("\nOptions:\n")
    if not sep:
        return {"question": text, "reference": target}
    lines = [line for line in tail.splitlines() if line.strip()]
    choices: list[str] = []
    letters: list[str] = []
    for line in lines:
        m = _OPTION_LINE.match(line.strip())
        if m:
            letters.append(m.group(1))
            choices.append(m.group(2).strip())
        elif line.strip().startswith("- "):
            choices.append(line.strip()[2:].strip())
        else:
            raise DatasetError(f"{where}: field 'input': cannot read option line {line!r}")
    target = target.strip()
    m = re.fullmatch(r"\(([A-Z])\)", target)
    if m and m.group(1) in letters:
        answer = letters.index(m.group(1))
    else:
        folded = [c.casefold() for c in choices]
        if target.casefold() not in folded:
            raise DatasetError(f"{where}: field 'target' {target!r} is not among the options")
        answer = folded.index(target.casefold())
    return {"question": head.strip(), "choices": choices, "answer": answer}
