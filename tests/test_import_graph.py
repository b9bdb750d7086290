"""The package's modules import one another one way: no loops, hidden in functions or not.

A loop between modules means neither can be read, tested or moved without the other; putting one
side's import inside a function only hides it. The graph is read from the source (every module of
the package, whatever it holds), so nothing is imported to check it. Imports under
``if TYPE_CHECKING:`` are left out: they name types and never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest_reliable

PACKAGE = Path(pytest_reliable.__file__).resolve().parent

KNOWN_IN_FUNCTIONS: set[tuple[str, str]] = set()
"""Function-level imports allowed to close a loop (none today: add one only with the reason)."""


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(module: str, path: Path, known: set[str]) -> list[Import]:
    """The package modules ``module`` imports, each with its line and whether in a function."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names if a.name in known]
        base = node.module or ""
        if node.level:
            base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        # ``from pkg import name`` imports the submodule pkg.name when there is one.
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                for a in node.names if f"{base}.{a.name}" in known or base in known]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.orelse:
                    visit_one(stmt, in_function)
                continue
            visit_one(child, in_function)

    def visit_one(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.extend(Import(module, t, node.lineno, in_function) for t in targets(node)
                         if t != module)
            return
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        visit(node, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def import_graph() -> list[Import]:
    names = module_names()
    known = set(names)
    return [edge for name, path in names.items() for edge in imports_of(name, path, known)]


def first_cycle(edges: list[Import]) -> str | None:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        cycle = list(error.args[1])  # [a, b, ..., a], each importing the one before it
        lines = []
        for importer, imported in zip(cycle[1:], cycle):
            edge = next(e for e in edges if e.source == importer and e.target == imported)
            where = " (in a function)" if edge.in_function else ""
            lines.append(f"{importer} line {edge.line} imports {imported}{where}")
        return "\n".join(lines)
    return None


def test_the_graph_is_read_from_the_package() -> None:
    # A sanity check of the reader, not a rule: an import at module level and one in a function.
    edges = {(e.source, e.target, e.in_function) for e in import_graph()}
    assert ("pytest_reliable.plan.render", "pytest_reliable.plan.prompt", False) in edges
    assert ("pytest_reliable.run.session", "pytest_reliable.models.local", True) in edges
    assert ("pytest_reliable.evaluate.evaluation", "pytest_reliable.plan.sampling", False) in edges


def test_no_import_cycles_at_module_level() -> None:
    cycle = first_cycle([e for e in import_graph() if not e.in_function])
    assert cycle is None, "modules import each other:\n" + str(cycle)


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    edges = [e for e in import_graph() if (e.source, e.target) not in KNOWN_IN_FUNCTIONS]
    cycle = first_cycle(edges)
    assert cycle is None, ("modules import each other (move the shared concept to its owner "
                           "rather than importing inside a function):\n" + str(cycle))
