"""The package's layers (DESIGN.md, "The tree shows the flow"): every import runs down the
pipeline, never back up.

`LAYERS` is the order, lowest first, written once: each layer is a folder of ``pytest_reliable``
or a module at its top. A module may import the modules of lower layers; inside one layer its
modules may import each other as long as none imports itself back, directly or around a loop.
Every import counts: at module level, inside a function (an import moved into a function to
dodge a loop is still the loop) and under ``if TYPE_CHECKING:`` (a type names a dependency as
much as a call does). The graph is read from the source: nothing is imported to check it.

The report's schema (`schema/`) sits low, so the engine and the viewers both read it without
either importing the other. One import is not a dependency: ``from pytest_reliable import
__version__`` reads a constant of the package root, which Python runs before any module of it.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Container, Iterator
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import pytest_reliable

PACKAGE = Path(pytest_reliable.__file__).resolve().parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "files", "redact"),  # the foundation: errors, atomic files, secrets kept out
    ("schema",),  # the JSON report's shape, read by the engine and the viewers alike
    ("space",),  # the pre-registered perturbation space
    ("contract",),  # what a user names: vocabulary, settings, marker arguments, hook specs
    ("stats",),  # pure statistics over score arrays
    ("plan",),  # Space -> Plan; Plan x Dataset -> Prompt (and the Task and Grader protocols)
    ("models",),  # the model protocol and its adapters
    ("store",),  # what outlives a run: answers, ledger, claims, n*, kept reports
    ("calls",),  # cache keys, money, requests, budget, the runner and its transports
    ("tasks",),  # the built-in tasks and the judge: answers -> grades
    ("evaluate",),  # the score matrix and the run strategies that fill it
    ("verdict",),  # summary, gate, baseline, what a reliable test reports
    ("checklist",),  # CheckList tests, decided by the same gate
    ("run",),  # one run's state without pytest, the batch's first round, --reliable-plan
    ("report",),  # the viewers of the JSON entries
    ("cli",),  # python -m pytest_reliable
    ("plugin",),  # the pytest plugin
    ("testing", "strategies", "__main__", "__init__"),  # the doors: test helpers, public names
)
ROOT_CONSTANTS = frozenset({"__version__"})
"""Names of the package root a module of any layer may import (constants, not lazy names)."""
PYTEST_LAYER = ("plugin", "testing")
"""The layers that may import pytest at module level."""


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    how: str
    """"" at module level, else "in a function" or "under TYPE_CHECKING"."""
    names: tuple[str, ...] = ()
    """``from imported import names`` (empty for a submodule or ``import imported``)."""

    def __str__(self) -> str:
        return f"{self.importer} line {self.line} imports {self.imported}" + (
            f" ({self.how})" if self.how else "")


def module_names(package: Path) -> dict[str, Path]:
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def layer_key(path: Path, package: Path) -> str:
    """What `LAYERS` calls the module's place: its folder, or its own name at the top."""
    return path.relative_to(package).with_suffix("").parts[0]


def is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str, path: Path, known: Container[str]) -> Iterator[Import]:
    """The package modules ``module`` imports: where, and how (module level, in a function,
    under ``TYPE_CHECKING``)."""
    is_package = path.name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]

    def found(node: ast.Import | ast.ImportFrom, how: str) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield Import(module, alias.name, node.lineno, how)
            return
        base = node.module or ""
        if node.level:
            parent = package[: len(package) - node.level + 1]
            base = ".".join([*parent, base] if base else parent)
        names = []
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in known:  # ``from pkg import submodule`` imports the submodule
                yield Import(module, submodule, node.lineno, how)
            else:
                names.append(alias.name)
        if names and base in known:
            yield Import(module, base, node.lineno, how, tuple(names))

    def visit(node: ast.AST, how: str) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield from (i for i in found(child, how) if i.imported != module)
            elif isinstance(child, ast.If) and is_type_checking(child):
                for statement in child.body:
                    yield from visit(ast.Module([statement], []), "under TYPE_CHECKING")
                for statement in child.orelse:
                    yield from visit(ast.Module([statement], []), how)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from visit(child, how or "in a function")
            else:
                yield from visit(child, how)

    yield from visit(ast.parse(path.read_text(encoding="utf-8")), "")


@dataclass(frozen=True)
class Graph:
    modules: dict[str, Path]
    imports: list[Import]
    layer_of: dict[str, int | None]

    @classmethod
    def read(cls, package: Path, layers: tuple[tuple[str, ...], ...] = LAYERS) -> Graph:
        modules = module_names(package)
        known = set(modules)
        imports = [i for name, path in modules.items() for i in imports_of(name, path, known)]
        index = {key: n for n, layer in enumerate(layers) for key in layer}
        layer_of = {name: index.get(layer_key(path, package)) for name, path in modules.items()}
        return cls(modules, imports, layer_of)

    def unplaced(self) -> list[str]:
        return sorted(name for name, layer in self.layer_of.items() if layer is None)

    def upward(self, root: str) -> list[Import]:
        """Imports of a module in a higher layer than the importer's (or in no layer)."""
        def up(i: Import) -> bool:
            if i.imported == root and i.names and set(i.names) <= ROOT_CONSTANTS:
                return False
            low, high = self.layer_of[i.importer], self.layer_of[i.imported]
            return low is None or high is None or high > low
        return [i for i in self.imports if up(i)]

    def loop_inside_a_layer(self) -> str | None:
        """The first import loop between modules of one layer, each import with its line."""
        inside = [i for i in self.imports
                  if self.layer_of[i.importer] == self.layer_of[i.imported]]
        graph: dict[str, set[str]] = {}
        for i in inside:
            graph.setdefault(i.importer, set()).add(i.imported)
        try:
            TopologicalSorter(graph).prepare()
        except CycleError as error:
            loop = list(error.args[1])  # [a, b, ..., a], each importing the one before it
            return "\n".join(str(next(i for i in inside if (i.importer, i.imported) == pair))
                             for pair in zip(loop[1:], loop))
        return None


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph.read(PACKAGE)


def test_every_module_is_in_a_layer(graph: Graph) -> None:
    assert graph.unplaced() == [], "modules in no layer of LAYERS (give each its place)"


def test_no_import_runs_back_up_the_layers(graph: Graph) -> None:
    upward = graph.upward(pytest_reliable.__name__)
    assert not upward, ("imports that run back up LAYERS (move the shared concept down to the "
                        "lower layer, or the importer up):\n" + "\n".join(map(str, upward)))


def test_no_import_loop_inside_a_layer(graph: Graph) -> None:
    loop = graph.loop_inside_a_layer()
    assert loop is None, "modules of one layer import each other:\n" + str(loop)


def test_the_graph_is_read_from_the_package(graph: Graph) -> None:
    # A check of the reader, not a rule: one import of each kind it tells apart.
    edges = {(i.importer, i.imported, i.how) for i in graph.imports}
    assert ("pytest_reliable.plan.render", "pytest_reliable.plan.prompt", "") in edges
    assert ("pytest_reliable.run.session", "pytest_reliable.models.local", "in a function") in edges
    assert ("pytest_reliable.calls.transport", "pytest_reliable.calls.money",
            "under TYPE_CHECKING") in edges
    assert ("pytest_reliable.evaluate.circular", "pytest_reliable.stats", "") in edges


def test_the_checks_name_an_upward_import_a_loop_and_a_module_in_no_layer(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    files = {
        "__init__.py": "__version__ = '1'\n",
        "low/__init__.py": "",
        "low/a.py": "from pkg import __version__\nfrom pkg.low import b\n",
        "low/b.py": "def f():\n    from pkg.low import a\n",
        "high/__init__.py": "",
        "high/c.py": "from pkg.low.a import X\n",
        "low/d.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from pkg.high import c\n"),
        "stray.py": "",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(textwrap.dedent(text), encoding="utf-8")
    found = Graph.read(package, (("low",), ("high",), ("__init__",)))
    assert found.unplaced() == ["pkg.stray"]
    assert [str(i) for i in found.upward("pkg")] == [
        "pkg.low.d line 3 imports pkg.high.c (under TYPE_CHECKING)"]
    loop = found.loop_inside_a_layer()
    assert loop is not None
    assert set(loop.splitlines()) == {"pkg.low.a line 2 imports pkg.low.b",
                                      "pkg.low.b line 2 imports pkg.low.a (in a function)"}


def test_the_viewers_import_nothing_of_the_engine(graph: Graph) -> None:
    # DESIGN: report/ is a pure viewer of the schema; its layer sits above the engine, so the
    # layer order alone would let it import the engine.
    allowed = ("pytest_reliable.report", "pytest_reliable.schema", "pytest_reliable.files",
               "pytest_reliable.redact", "pytest_reliable.errors")
    engine = [str(i) for i in graph.imports if i.importer.startswith("pytest_reliable.report")
              and not i.imported.startswith(allowed)
              and not (i.imported == "pytest_reliable" and set(i.names) <= ROOT_CONSTANTS)]
    assert engine == []


def test_nothing_imports_the_plugin_wiring(graph: Graph) -> None:
    # plugin/__init__.py is what pytest loads (the pytest11 entry point): a module importing its
    # names back would be a loop, as _plugin_html once was.
    importers = [str(i) for i in graph.imports if i.imported == "pytest_reliable.plugin"]
    assert importers == []


class PytestModules:
    """Every module of pytest, for `imports_of`."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.split(".")[0] in ("pytest", "_pytest")


def test_only_the_plugin_layer_imports_pytest_at_module_level() -> None:
    offenders = [str(i) for name, path in module_names(PACKAGE).items()
                 if layer_key(path, PACKAGE) not in PYTEST_LAYER
                 for i in imports_of(name, path, PytestModules()) if not i.how]
    assert offenders == []
