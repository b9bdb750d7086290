"""Reading a JSON report (``--reliable-report PATH.json``) back, checked, for the commands that
rebuild from one (``python -m pytest_reliable html``, ``merge``, ``history``).

`load_report` (a file) and `parse_report` (text from elsewhere, e.g. a report kept in the store)
stop with a `ReportFileError` naming the report, the problem and the fix: a missing file, bytes
that are not UTF-8 JSON, a report of a newer (or unknown) ``schema_version``, nesting no report
has, a ``tests`` list that is not a list of objects, a top-level field of the wrong type. A
report that passes is brought up to this version's shape (`schema.migrate`): every entry has
every field of its kind, so a viewer indexes the fields the schema guarantees. Their values are
not checked one by one here: a viewer reads an odd value defensively (the page: "not
reported"); ``merge``, which decides on them, checks the ones it decides on (`report.merge`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from pytest_reliable import __version__
from pytest_reliable.schema.entries import SCHEMA_VERSION, ReportDocument
from pytest_reliable.schema.migrate import UPGRADES, upgrade_report

READABLE_SCHEMA_VERSIONS = frozenset(UPGRADES)
"""The ``schema_version`` values this version reads (every one it or an earlier version wrote:
each has its upgrade to this version's shape)."""
MAX_NESTING = 100
"""Objects and arrays nest this deep at most; a report nests about 6 deep."""
OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "pytest_reliable_version": (str,),
    "created": (str,),
    "seed": (int,),
    "model": (str, type(None)),
    "space_hash": (str, type(None)),
    "cost": (dict,),
    "outcomes": (dict,),
    "shards": (list,),
}
"""Top-level fields besides ``schema_version`` and ``tests``: checked when present."""
FIX = "give the file that --reliable-report PATH.json wrote"


class ReportFileError(Exception):
    """A JSON report that cannot be read; the message names the file, the problem and the fix."""


def load_report(path: str | Path, *, fix: str = FIX) -> ReportDocument:
    """The report at ``path``, checked (see the module docstring); ``fix``: what the errors tell
    the reader to do about a bad one."""
    path = Path(path)
    if not path.exists():
        raise ReportFileError(f"{path} does not exist: {fix}.")
    if path.is_dir():
        raise ReportFileError(f"{path} is a directory: {fix}.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ReportFileError(f"{path} is not UTF-8 text ({error.reason} at byte "
                              f"{error.start}): {fix}.") from None
    except OSError as error:
        raise ReportFileError(f"{path} cannot be read ({error.strerror}): {fix}.") from None
    return parse_report(text, str(path), fix)


def parse_report(text: str, name: str, fix: str = FIX) -> ReportDocument:
    """The report in ``text``, checked; ``name`` says where it came from in the errors (a file's
    path, or e.g. "--store HOST: kept report 3"), ``fix`` what to do about a bad one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportFileError(f"{name} is not valid JSON (line {error.lineno}, column "
                              f"{error.colno}: {error.msg}): {_fix(fix, 'complete')}.") \
            from None
    except RecursionError:
        raise ReportFileError(_too_deep(name, fix)) from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise ReportFileError(f"{name} is not JSON this reader takes ({error}): {fix}.") \
            from None
    return check_report(data, name, fix)


def check_report(data: Any, name: str, fix: str = FIX) -> ReportDocument:
    """``data`` (parsed JSON) as a report, checked and in this version's shape; the errors
    name it ``name``."""
    if _nesting(data) > MAX_NESTING:
        raise ReportFileError(_too_deep(name, fix))
    if not isinstance(data, dict) or "tests" not in data:
        raise ReportFileError(f"{name} is JSON but not a pytest-reliable report (it has no "
                              f"'tests' list): {fix}.")
    _check_schema_version(name, data, fix)
    tests = data["tests"]
    if not isinstance(tests, list):
        raise ReportFileError(f"{name}: 'tests' is {_a(tests)}, not a list of test entries: "
                              f"{_fix(fix, 'unedited')}.")
    for index, entry in enumerate(tests):
        if not isinstance(entry, dict):
            raise ReportFileError(f"{name}: tests[{index}] is {_a(entry)}, not an object (one "
                                  f"test's entry): {_fix(fix, 'unedited')}.")
    for field, types in OPTIONAL_FIELDS.items():
        value = data.get(field)
        if field in data and (not isinstance(value, types) or isinstance(value, bool)):
            wanted = " or ".join("null" if t is type(None) else _TYPE_NAMES[t] for t in types)
            raise ReportFileError(f"{name}: '{field}' is {_a(value)}, not {wanted}: "
                                  f"{_fix(fix, 'unedited')}.")
    for nodeid, outcome in data.get("outcomes", {}).items():
        if not isinstance(outcome, str):
            raise ReportFileError(f"{name}: outcomes[{_shown(nodeid)}] is {_a(outcome)}, not a "
                                  "string (pytest's outcome of the test): "
                                  f"{_fix(fix, 'unedited')}.")
    return cast(ReportDocument, upgrade_report(data))


def _check_schema_version(name: str, data: dict[str, Any], fix: str) -> None:
    if "schema_version" not in data:
        raise ReportFileError(f"{name} has no schema_version, so it is not a report "
                              f"pytest-reliable wrote: {fix}.")
    version = data["schema_version"]
    if version in READABLE_SCHEMA_VERSIONS and isinstance(version, int) \
            and not isinstance(version, bool):
        return
    readable = ", ".join(str(v) for v in sorted(READABLE_SCHEMA_VERSIONS))
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        writer = data.get("pytest_reliable_version")
        by = f"pytest-reliable {writer}" if isinstance(writer, str) else "a newer pytest-reliable"
        raise ReportFileError(
            f"{name} has schema_version {version}, written by {by}; this pytest-reliable "
            f"({__version__}) reads schema_version {readable}: upgrade pytest-reliable "
            "(python -m pip install -U pytest-reliable) and rebuild the page with it.")
    raise ReportFileError(
        f"{name} has schema_version {_shown(version)}, which no pytest-reliable writes (this "
        f"one reads {readable}): {_fix(fix, 'unedited')}.")


def _fix(fix: str, how: str) -> str:
    """The default fix says how the file must be ("..., unedited"); another fix stands alone."""
    return f"{fix}, {how}" if fix == FIX else fix


def _shown(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _too_deep(name: str, fix: str) -> str:
    return (f"{name} nests arrays or objects more than {MAX_NESTING} deep (a report nests about "
            f"6 deep), so it is not a pytest-reliable report: {fix}.")


def _nesting(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            depth += 1
            if depth > MAX_NESTING:
                return depth
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
    return deepest


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               list: "a list", dict: "an object"}


def _a(value: Any) -> str:
    """What a JSON value is, in words: 'a string', 'null', ..."""
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)
