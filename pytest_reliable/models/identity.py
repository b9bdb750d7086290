"""The identity of a user's callable: what makes its answers, so a cached answer never outlives it.

An unnamed callable (``text_model(app.classify)``, a ``reliable_model`` returning a function) is
known by its module and qualified name plus a short hash of the files of its module and of every
user-project module that module imports, directly or transitively (SPEC section 2). A prompt, a
setting or a helper changed in any of them changes the identity, so the answers cached under the
old one are not served. "User-project" means a file under the rootdir that is not an installed
package (no ``site-packages``/``dist-packages`` in its path, not the standard library) and not
this plugin.

The imports are read from each module's source (every ``import`` statement, those in function
bodies too), resolved against ``sys.modules`` or, for a module not imported yet, located on
``sys.path`` without importing it; the modules a module's globals hold are added (an
``importlib.import_module`` kept in a global). Each file is hashed by content, and its imports are
parsed once per content; a `ProjectModules` keeps what it walked for the run, so many models and
tests cost one walk.

Where the source cannot be established (a function made by ``exec``, typed into a REPL, a
built-in) the identity says ``@run-...`` and `Identity.run_scoped` says why: its answers are then
reused within the run only, never written to or read from the store.

What is not covered: data files the app reads (a prompt in a ``.txt``), environment variables,
modules outside the rootdir that are not installed (a sibling checkout on ``PYTHONPATH``). An
explicit ``id=``/``version=`` is the user's promise for those.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import importlib.machinery
import inspect
import os
import re
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_reliable.files import content_hash

DIGEST_CHARS = 12
INSTALLED_PARTS = frozenset({"site-packages", "dist-packages"})
_PLUGIN_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Identity:
    """``name``: the identity string; ``run_scoped``: why its answers cannot outlive the run
    (None: they are kept in the store like any model's)."""

    name: str
    run_scoped: str | None = None
    files: tuple[str, ...] = ()
    """The files hashed (relative to the root; a module outside it by its name)."""


@dataclass(frozen=True)
class _Module:
    """One module as walked: its label in the hash, its content hash, the modules it imports."""

    label: str | None
    """Path relative to the root (None: not a project file, not hashed)."""
    sha: str | None
    imports: tuple[str, ...]


_IMPORTS: dict[tuple[str, str], tuple[str, ...]] = {}
"""Parsed imports by (content sha, package): a file's imports are read once per content."""

_IMPORT_START = re.compile(rb"(?:^|[;:])[ \t]*((?:from[ \t]+[.\w]+[ \t]+)?import[ \t(\\].*)$",
                           re.MULTILINE)
"""Where an import statement may start: at a line's start (any indentation, in a function body
too), or after ``;`` or a compound statement's ``:`` (``try: import x``). Only these statements
are parsed: parsing whole files cost twice the project's own import (benchmarks/bench_identity)."""


def _import_statements(source: bytes) -> Iterator[ast.Import | ast.ImportFrom]:
    lines = source.split(b"\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for match in _IMPORT_START.finditer(source):
        # The statement with its continuation lines (open parentheses, a trailing backslash).
        row = bisect.bisect_right(offsets, match.start(1)) - 1
        text = match.group(1)
        while (text.count(b"(") > text.count(b")") or text.rstrip().endswith(b"\\")) \
                and row + 1 < len(lines):
            row += 1
            text += b"\n" + lines[row]
        try:
            tree = ast.parse(text.decode("utf-8", "replace"))
        except (SyntaxError, ValueError):
            continue  # the word in a string or a comment
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node


def _parsed_imports(sha: str, source: bytes, package: str) -> tuple[str, ...]:
    """The absolute module names a source imports (each one's parent packages too)."""
    known = _IMPORTS.get((sha, package))
    if known is not None:
        return known
    names: set[str] = set()
    base_parts = package.split(".") if package else []
    for node in _import_statements(source):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            keep = len(base_parts) - node.level + 1
            if keep < 0 or (keep == 0 and not base):
                continue
            base = ".".join(base_parts[:keep] + ([base] if base else []))
        names.add(base)
        # ``from pkg import name`` imports the submodule pkg.name when there is one.
        names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    out: set[str] = set()
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    _IMPORTS[(sha, package)] = found = tuple(sorted(out))
    return found


def _installed_roots() -> tuple[Path, ...]:
    roots = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = paths.get(key)
        if path:
            roots.add(Path(path).resolve())
    return tuple(roots)


class ProjectModules:
    """The project's modules as one run sees them: identities of callables under ``root``.

    Thread-safe; the walk of each module is kept for the life of the object (the session keeps
    one per run, so a module edited between two runs in one process is read again)."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root if root is not None else os.getcwd()).resolve()
        self._modules: dict[str, _Module] = {}
        self._files: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._installed = _installed_roots()

    # -- the callable ----------------------------------------------------------------------------
    def identity_of(self, fn: Any) -> Identity:
        """``module.qualname@<hash>`` of ``fn`` (a function, method, partial, class or callable
        object), or a run-scoped ``module.qualname@run-...`` when its source is not there."""
        named = named_target(fn)
        module = (getattr(named, "__module__", None)
                  or getattr(getattr(named, "__objclass__", None), "__module__", None)
                  or "__main__")
        qualname = (getattr(named, "__qualname__", None) or getattr(named, "__name__", None)
                    or type(named).__qualname__)
        label = f"{module}.{qualname}"
        with self._lock:
            starts, missing = self._starts(fn)
            if missing is not None:
                return Identity(f"{label}@run-{_volatile_hash(named)}",
                                f"the source of {label} cannot be established ({missing})")
            hashed = self._walk(starts)
        code = getattr(getattr(named, "__func__", named), "__code__", None)
        where = f"{qualname}:{code.co_firstlineno}" if code is not None else qualname
        digest = content_hash({"files": hashed, "target": where})[:DIGEST_CHARS]
        return Identity(f"{label}@{digest}", None, tuple(label for label, _ in hashed))

    def _starts(self, fn: Any) -> tuple[list[tuple[str | None, str]], str | None]:
        """(module name, source file) of every layer of ``fn`` (decorators, partials, bound
        methods and their objects' classes), or why its source is not there: a Python function
        without a source file, or no Python code at all (a built-in)."""
        starts: list[tuple[str | None, str]] = []
        for layer in _layers(fn):
            module = getattr(layer, "__module__", None)
            module = module if isinstance(module, str) else None
            if inspect.isfunction(layer):
                path = layer.__code__.co_filename
                if not os.path.isfile(path):
                    return [], f"{layer.__qualname__} was compiled from {path!r}"
                starts.append((module, path))
            elif inspect.isclass(layer) and module is not None:
                file = self._file_of(module)  # a class written in C has none: not user code
                if file is not None and os.path.isfile(file):
                    starts.append((module, file))
        if not starts:
            return [], "no Python code to hash (a built-in)"
        return starts, None

    # -- the walk --------------------------------------------------------------------------------
    def _walk(self, starts: Iterable[tuple[str | None, str]]) -> list[tuple[str, str]]:
        """(label, sha) of every hashed file: each start's file (a project file or not: it is
        the callable's own), then the project modules reachable from it."""
        hashed: dict[str, str] = {}
        queue: list[str] = []
        seen: set[str] = set()
        for module, path in starts:
            own = self._read(path)
            if own is not None:
                label = self._label(path) or (module or Path(path).name)
                hashed[label] = own[0]
                queue.extend(self._imports(own, module, path))
            if module is not None:
                queue.append(module)
        while queue:
            name = queue.pop()
            if name in seen:
                continue
            seen.add(name)
            walked = self._module(name)
            if walked.label is not None and walked.sha is not None:
                hashed[walked.label] = walked.sha
                queue.extend(walked.imports)
        return sorted(hashed.items())

    def _module(self, name: str) -> _Module:
        cached = self._modules.get(name)
        if cached is not None:
            return cached
        path = self._file_of(name)
        label = self._label(path) if path is not None else None
        walked = _Module(None, None, ())
        if path is not None and label is not None:
            read = self._read(path)
            if read is not None:
                imports = set(self._imports(read, name, path))
                imports.update(_global_modules(sys.modules.get(name)))
                walked = _Module(label, read[0], tuple(sorted(imports)))
        self._modules[name] = walked
        return walked

    @staticmethod
    def _read(path: str) -> tuple[str, bytes] | None:
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        return hashlib.sha256(data).hexdigest(), data

    @staticmethod
    def _imports(read: tuple[str, bytes], module: str | None, path: str) -> tuple[str, ...]:
        if not path.endswith(".py"):
            return ()  # a compiled module: hashed, not read
        is_package = Path(path).name == "__init__.py"
        package = (module or "") if is_package else (module or "").rpartition(".")[0]
        live = sys.modules.get(module or "")
        declared = getattr(live, "__package__", None)
        if isinstance(declared, str) and declared:
            package = declared
        return _parsed_imports(read[0], read[1], package)

    def _label(self, path: str) -> str | None:
        """``path`` relative to the root when it is a project file, else None."""
        try:
            resolved = Path(path).resolve()
            relative = resolved.relative_to(self.root)
        except (OSError, ValueError):
            return None
        if INSTALLED_PARTS.intersection(relative.parts) or resolved.is_relative_to(_PLUGIN_DIR):
            return None
        if any(resolved.is_relative_to(root) for root in self._installed
               if not self.root.is_relative_to(root)):
            return None
        return relative.as_posix()

    def _file_of(self, name: str) -> str | None:
        """The file of module ``name``: the imported module's, else found on ``sys.path``
        without importing it (an import in a function body that has not run yet)."""
        if name in self._files:
            return self._files[name]
        found: str | None = None
        live = sys.modules.get(name)
        if isinstance(live, types.ModuleType):
            file = getattr(live, "__file__", None)
            found = file if isinstance(file, str) else None
        elif live is None:
            found = self._find(name)
        self._files[name] = found
        return found

    def _find(self, name: str) -> str | None:
        parent, _, _ = name.rpartition(".")
        search: list[str] | None = None
        if parent:
            live = sys.modules.get(parent)
            locations = getattr(live, "__path__", None)
            if locations is None:
                parent_file = self._file_of(parent)
                if parent_file is None or Path(parent_file).name != "__init__.py":
                    return None
                locations = [str(Path(parent_file).parent)]
            search = list(locations)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, search)
        except (ImportError, ValueError, OSError):
            return None
        origin = getattr(spec, "origin", None) if spec is not None else None
        return origin if isinstance(origin, str) and os.path.isfile(origin) else None


def named_target(fn: Any) -> Any:
    """What names the callable: a partial's function, a decorated function's original, a
    method's function, a callable object's class."""
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = inspect.unwrap(target) if callable(target) else target
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target)
            or inspect.isbuiltin(target) or inspect.ismethoddescriptor(target)):
        target = type(target)
    return target


def _layers(fn: Any) -> list[Any]:
    """Every function or class whose code makes ``fn``'s answers: the functions under
    partials, decorators (``__wrapped__``) and bound methods, the classes of methods' objects
    and of callable objects (with their ``__call__``)."""
    out: list[Any] = []
    pending = [fn]
    seen: set[int] = set()
    while pending:
        layer = pending.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        wrapped = getattr(layer, "__wrapped__", None)
        if wrapped is not None and not inspect.isclass(layer):
            pending.append(wrapped)  # a decorator's (lru_cache's, a retry's) original function
        if isinstance(layer, functools.partial):
            pending.append(layer.func)
        elif inspect.ismethod(layer):
            pending.append(layer.__func__)
            owner = layer.__self__
            pending.append(owner if inspect.isclass(owner) else type(owner))
        elif inspect.isfunction(layer) or inspect.isbuiltin(layer):
            out.append(layer)
        elif inspect.isclass(layer):
            out.append(layer)
            call = next((vars(base)["__call__"] for base in layer.__mro__
                         if "__call__" in vars(base)), None)
            if inspect.isfunction(call):
                pending.append(call)
        elif not inspect.ismethoddescriptor(layer):  # a callable object: its class
            pending.append(type(layer))
    return out


def _volatile_hash(target: Any) -> str:
    """A name for a run-scoped callable within this process: its code (two ``exec``-made
    functions of one name differ), else its object id."""
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    if code is None:
        return f"{id(target):x}"
    h = hashlib.sha256()

    def feed(c: types.CodeType) -> None:
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if inspect.iscode(const):
                feed(const)
            else:
                h.update(repr(const).encode())

    feed(code)
    return h.hexdigest()[:DIGEST_CHARS]


def _global_modules(module: types.ModuleType | None) -> set[str]:
    """Modules a module's globals hold or come from (``prompts = importlib.import_module(...)``,
    ``from app.prompts import build``)."""
    if module is None:
        return set()
    found: set[str] = set()
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            found.add(value.__name__)
        elif inspect.isfunction(value) or inspect.isclass(value):
            name = getattr(value, "__module__", None)
            if isinstance(name, str):
                found.add(name)
    return found


def identity_of(fn: Callable[..., Any], root: Path | str | None = None) -> Identity:
    """`ProjectModules.identity_of` with a walk of its own (root: default the current
    directory)."""
    return ProjectModules(root).identity_of(fn)
