"""reliable.yaml: parsing the spaces a project declares, with line numbers in every error; what
a space name that is not declared resembles (`lookalike`)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.space.core import Space
from pytest_reliable.space.declaration import _Where

MAX_CONFIG_BYTES = 1_000_000
"""A reliable.yaml is a few hundred lines; anything near this size is a mistake or an attack."""
MAX_CONFIG_NODES = 100_000
"""YAML nodes after alias expansion: stops an alias bomb ("billion laughs") in milliseconds."""
MAX_CONFIG_DEPTH = 50
"""Mappings and lists nest this deep at most (a space nests about 5 deep); deeper nesting would
exhaust Python's recursion in the YAML library (an INTERNALERROR)."""


def _too_deep(source: str) -> ReliableConfigError:
    return ReliableConfigError(
        f"{source}: mappings and lists nest more than {MAX_CONFIG_DEPTH} deep (a space nests "
        "about 5 deep), so it is not a space declaration. Fix: write each space as a mapping of "
        "dimension -> list of values.")


def _node_lines(node: Any, path: str, lines: dict[str, int], source: str,
                budget: list[int] | None = None, depth: int = 0) -> None:
    """Line of every key path; rejects duplicate keys, runaway alias expansion and nesting."""
    import yaml

    if depth > MAX_CONFIG_DEPTH:
        raise _too_deep(source)
    budget = budget if budget is not None else [MAX_CONFIG_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise ReliableConfigError(
            f"{source}: more than {MAX_CONFIG_NODES:,} YAML nodes once aliases are expanded "
            "(an alias bomb?). Fix: write the spaces out without nested aliases."
        )
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                where = f"{path}." if path else ""
                raise ReliableConfigError(
                    f"{source}, line {line}: duplicate key {where}{key} (first on line "
                    f"{seen[key]}); YAML would silently keep only the last. Fix: remove one."
                )
            seen[key] = line
            child = f"{path}.{key}" if path else key
            lines[child] = line
            _node_lines(value_node, child, lines, source, budget, depth + 1)
            lines[child] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, f"{path}[{i}]", lines, source, budget, depth + 1)


def parse_spaces(text: str, *, source: str = "reliable.yaml") -> dict[str, Space]:
    """The spaces declared in ``text`` (the content of a reliable.yaml)."""
    import yaml

    lines: dict[str, int] = {}
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                # Before constructing: duplicate keys and alias bombs are caught on the node graph.
                _node_lines(node, "", lines, source)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except RecursionError:  # the YAML library composes nodes recursively
        raise _too_deep(source) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        start = getattr(error, "context_mark", None)
        if start is not None and mark is not None and start.line != mark.line:
            line += f" (the construct began on line {start.line + 1})"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        context = getattr(error, "context", None)
        detail = f"{context}: {problem}" if context else problem
        raise ReliableConfigError(
            f"{source}{line}: broken YAML ({detail}). Fix: check the brackets, quotes and "
            "indentation there (strings with special characters need quotes, e.g. \"({})\")."
        ) from None
    where = _Where(source, lines, "")
    if data is None:
        return {}
    if not isinstance(data, Mapping) or "spaces" not in data:
        raise where.error("", "the top level must be a mapping with the key `spaces`",
                          "write `spaces:` then one mapping per space name")
    extra = [k for k in data if k != "spaces"]
    if extra:
        raise where.error(str(extra[0]), f"{extra[0]}: unknown top-level key {extra[0]!r}",
                          "only `spaces:` is allowed at the top level")
    spaces_raw = data["spaces"]
    if spaces_raw is None:
        return {}
    if not isinstance(spaces_raw, Mapping):
        raise where.error("spaces", "spaces: expected a mapping of space name -> dimensions",
                          "write e.g. `spaces:\\n  mcq:\\n    enumerator: [upper, number]`")
    out: dict[str, Space] = {}
    for name, mapping in spaces_raw.items():
        out[str(name)] = Space.from_mapping(str(name), mapping, source=source, lines=lines)
    return out


def load_spaces(path: str | Path) -> dict[str, Space]:
    """Every space under ``spaces:`` in a reliable.yaml file; ReliableConfigError when bad."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ReliableConfigError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes; a "
                                      "reliable.yaml declares spaces, not data. Fix: shorten it.")
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReliableConfigError(f"{path}: cannot read ({error.strerror}).") from None
    except UnicodeDecodeError as error:
        raise ReliableConfigError(f"{path}: not UTF-8 text (offset {error.start}). Fix: save it "
                                  "as UTF-8.") from None
    return parse_spaces(text, source=path.name)



def _forms(text: str) -> str:
    """Which Unicode normal forms ``text`` is in, in words (e.g. "NFC", "NFD", "neither")."""
    forms = [form for form in ("NFC", "NFD") if unicodedata.is_normalized(form, text)]
    return " and ".join(forms) if forms else "neither NFC nor NFD"


def _visible(text: str) -> str:
    """``text`` without format characters (zero-width spaces and joiners, BOM)."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def lookalike(name: str, declared: Iterable[str]) -> str | None:
    """How ``name`` differs from a declared space name that reads the same (its code points
    written out), and the fix; None when it resembles none.

    A name typed in one editor and declared in another can differ only in how an accent is
    encoded ("é" as one code point (NFC) or "e" + a combining accent (NFD)), in compatibility
    characters (full-width letters, ligatures), invisible characters or case; each looks like
    a name that is declared, and the error must say so."""
    checks: tuple[tuple[Callable[[str], str], Callable[[str, str], str]], ...] = (
        (lambda t: unicodedata.normalize("NFC", t),
         lambda a, b: (f"only in Unicode normalisation (how an accent is encoded): the name asked "
                       f"for is {_forms(a)}, the declared one {_forms(b)}")),
        (lambda t: unicodedata.normalize("NFKC", t),
         lambda a, b: "only in compatibility characters (e.g. full-width letters or ligatures)"),
        (lambda t: unicodedata.normalize("NFKC", _visible(t)),
         lambda a, b: "in invisible characters (zero-width spaces or joiners)"),
        (lambda t: unicodedata.normalize("NFKC", _visible(t)).casefold(),
         lambda a, b: "only in case"),
    )
    others = [str(other) for other in declared if str(other) != name]
    for key, says in checks:
        for other in others:
            if key(other) == key(name):
                return (f"{name!r} looks like the declared space {other!r} but differs "
                        f"{says(name, other)}; code points {name!a} vs {other!a}. "
                        "Fix: spell it with the declaration's code points (copy the name from "
                        "where the space is declared), or rename the space there; most editors "
                        "save NFC")
    return None
