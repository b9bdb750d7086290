"""The package's shape (DESIGN.md): imports flow one way, pytest stays in the plugin layer, and
the plugin's wiring is imported by nobody (pytest loads it as the ``pytest11`` entry point)."""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_reliable

PACKAGE = Path(pytest_reliable.__file__).resolve().parent
PYTEST_LAYER = ("plugin", "_plugin", "fixtures", "testing")
"""Module (or folder) names that may import pytest at module level."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and (
        node.test.id == "TYPE_CHECKING")


def module_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported: not in functions, classes or
    ``if TYPE_CHECKING:``."""
    pending: list[ast.AST] = [node for node in tree.body if not is_type_checking(node)]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def imported_names(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    """Absolute names ``node`` imports (``from a import b`` may import module ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        is_package = MODULES[importer].name == "__init__.py"
        package = importer if is_package else importer.rpartition(".")[0]
        parent = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parent, base] if base else parent)
    # ``from pkg import submodule`` imports the submodule, not a name of pkg's __init__.
    names = [f"{base}.{alias.name}" for alias in node.names]
    return names if all(name in MODULES for name in names) else [base, *names]


def package_imports(name: str, *, module_level: bool) -> set[str]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    nodes = module_level_imports(tree) if module_level else (
        node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))
    return {target for node in nodes for target in imported_names(node, name)
            if target in MODULES and target != name}


def test_no_module_level_import_cycles() -> None:
    graph = {name: package_imports(name, module_level=True) for name in MODULES}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"module-level import cycle: {' -> '.join(error.args[1])}")


def test_nothing_imports_the_plugin_wiring() -> None:
    # plugin.py sits on top: a feature module importing it back would be a loop (even inside a
    # function), as _plugin_html once did.
    importers = [name for name in MODULES
                 if "pytest_reliable.plugin" in package_imports(name, module_level=False)]
    assert importers == []


def test_only_the_plugin_layer_imports_pytest_at_module_level() -> None:
    offenders = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(target.split(".")[0] in ("pytest", "_pytest")
               for node in module_level_imports(tree) for target in imported_names(node, name)):
            relative = name.split(".")[1:]
            if not any(part.startswith(PYTEST_LAYER) for part in relative):
                offenders.append(name)
    assert offenders == []
