"""An unnamed callable's identity covers its module and the project modules it imports (issue 28).

Each test writes a small project into ``tmp_path`` (the rootdir) under a package name of its own,
imports it, and checks which edits change the identity: a prompt constant in another module, a
helper imported inside a function body, a relative import; never a file outside the rootdir or
under ``site-packages``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import keyword
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable.models import identity as identity_module
from pytest_reliable.models.identity import ProjectModules


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(the rootdir, a package name no other test uses) on sys.path; unimported at the end."""
    name = f"app_{uuid.uuid4().hex[:8]}"
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path, name
    finally:
        sys.path.remove(str(tmp_path))
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]


def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def app_files(name: str, prompt: str = "Answer positive or negative.") -> dict[str, str]:
    return {
        f"{name}/__init__.py": "",
        f"{name}/prompts.py": f"SYSTEM = {prompt!r}\n",
        f"{name}/classify.py": (
            "import json\n\n"
            f"from {name}.prompts import SYSTEM\n\n\n"
            "def classify(review: str) -> str:\n"
            "    return json.dumps([SYSTEM, review])\n"
        ),
    }


def identity(root: Path, fn: Any) -> str:
    found = ProjectModules(root).identity_of(fn)
    assert found.run_scoped is None, found
    return found.name


def test_a_prompt_constant_in_another_module_changes_the_identity(
    project: tuple[Path, str],
) -> None:
    root, name = project
    write(root, app_files(name))
    classify = importlib.import_module(f"{name}.classify").classify
    before = ProjectModules(root).identity_of(classify)
    assert before.name.startswith(f"{name}.classify.classify@")
    assert set(before.files) == {f"{name}/__init__.py", f"{name}/prompts.py",
                                 f"{name}/classify.py"}
    assert identity(root, classify) == before.name  # the same files: the same identity
    write(root, {f"{name}/prompts.py": "SYSTEM = 'Reply briefly.'\n"})
    assert identity(root, classify) != before.name


def test_files_outside_the_rootdir_and_installed_packages_are_not_hashed(
    project: tuple[Path, str],
) -> None:
    root, name = project
    venv = root / ".venv" / "lib" / "python3" / "site-packages"
    write(root, {**app_files(name), f"{name}_vendor.py": "X = 1\n"})
    write(venv, {f"{name}_lib.py": "Y = 1\n"})
    sys.path.insert(0, str(venv))
    try:
        write(root, {f"{name}/classify.py": (
            f"import {name}_lib\nimport {name}_vendor\nimport json\n\n"
            "def classify(review: str) -> str:\n    return review\n")})
        classify = importlib.import_module(f"{name}.classify").classify
        found = ProjectModules(root).identity_of(classify)
        # json is the standard library; <name>_lib sits under site-packages inside the rootdir.
        assert f"{name}_vendor.py" in found.files
        assert not any("site-packages" in f or "json" in f for f in found.files), found.files
        write(venv, {f"{name}_lib.py": "Y = 2\n"})
        assert identity(root, classify) == found.name
        write(root, {f"{name}_vendor.py": "X = 2\n"})
        assert identity(root, classify) != found.name
    finally:
        sys.path.remove(str(venv))
        sys.modules.pop(f"{name}_lib", None)
        sys.modules.pop(f"{name}_vendor", None)
    # Under another rootdir the project's other modules are not the project's: only the
    # callable's own module is hashed.
    elsewhere = ProjectModules(root / "elsewhere").identity_of(classify)
    assert elsewhere.files == (f"{name}.classify",)


def test_imports_in_function_bodies_and_relative_imports_are_followed(
    project: tuple[Path, str],
) -> None:
    root, name = project
    write(root, {
        f"{name}/__init__.py": "",
        f"{name}/helpers/__init__.py": "",
        f"{name}/helpers/clean.py": "def clean(text):\n    return text.strip()\n",
        f"{name}/settings.py": "TEMPERATURE = 0.0\n",
        f"{name}/classify.py": (
            "from . import settings\n\n"
            "def classify(review: str) -> str:\n"
            f"    from {name}.helpers.clean import clean  # not imported until called\n"
            "    return clean(review) + str(settings.TEMPERATURE)\n"
        ),
    })
    classify = importlib.import_module(f"{name}.classify").classify
    assert f"{name}.helpers.clean" not in sys.modules
    first = ProjectModules(root).identity_of(classify)
    assert {f"{name}/settings.py", f"{name}/helpers/clean.py",
            f"{name}/helpers/__init__.py"} <= set(first.files)
    assert f"{name}.helpers.clean" not in sys.modules  # found, not imported
    write(root, {f"{name}/helpers/clean.py": "def clean(text):\n    return text\n"})
    second = identity(root, classify)
    write(root, {f"{name}/settings.py": "TEMPERATURE = 0.7\n"})
    assert len({first.name, second, identity(root, classify)}) == 3


def test_methods_partials_decorated_and_callable_objects(project: tuple[Path, str]) -> None:
    root, name = project
    write(root, {
        **app_files(name),
        f"{name}/bot.py": (
            f"from {name}.classify import classify\n\n"
            "class Bot:\n"
            "    def __call__(self, prompt: str) -> str:\n        return classify(prompt)\n\n"
            "    def answer(self, prompt: str) -> str:\n        return classify(prompt)\n"
        ),
    })
    bot = importlib.import_module(f"{name}.bot")
    classify = importlib.import_module(f"{name}.classify").classify
    pm = ProjectModules(root)
    called = pm.identity_of(bot.Bot())
    method = pm.identity_of(bot.Bot().answer)
    assert called.name.startswith(f"{name}.bot.Bot@")
    assert method.name.startswith(f"{name}.bot.Bot.answer@")
    assert f"{name}/prompts.py" in called.files and f"{name}/prompts.py" in method.files
    assert pm.identity_of(functools.partial(classify)).name == pm.identity_of(classify).name
    assert pm.identity_of(functools.lru_cache(classify)).name == pm.identity_of(classify).name
    write(root, {f"{name}/prompts.py": "SYSTEM = 'changed'\n"})
    assert ProjectModules(root).identity_of(bot.Bot()).name != called.name
    assert ProjectModules(root).identity_of(bot.Bot().answer).name != method.name


def test_a_callable_without_source_is_run_scoped(tmp_path: Path) -> None:
    one: dict[str, Any] = {}
    two: dict[str, Any] = {}
    exec("def f(prompt):\n    return 'one'\n", one)  # noqa: S102
    exec("def f(prompt):\n    return 'two'\n", two)  # noqa: S102
    pm = ProjectModules(tmp_path)
    first, second = pm.identity_of(one["f"]), pm.identity_of(two["f"])
    assert first.run_scoped is not None and "'<string>'" in first.run_scoped
    assert "@run-" in first.name and first.name != second.name
    assert pm.identity_of(str.upper).run_scoped is not None  # a built-in: no code to hash
    # Decorating a sourceless function does not give it a source.
    assert pm.identity_of(functools.wraps(one["f"])(lambda p: p)).run_scoped is not None


def test_the_walk_is_kept_for_the_run(project: tuple[Path, str]) -> None:
    """One `ProjectModules` (one run) reads each imported module once: an edit during the run
    is seen by the next run, not half-way through this one."""
    root, name = project
    write(root, app_files(name))
    classify = importlib.import_module(f"{name}.classify").classify
    pm = ProjectModules(root)
    before = pm.identity_of(classify).name
    write(root, {f"{name}/prompts.py": "SYSTEM = 'changed'\n"})
    assert pm.identity_of(classify).name == before
    assert ProjectModules(root).identity_of(classify).name != before


# -- the import scan: only import statements are parsed (a whole-file parse cost 2x the import) --
NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n))
DOTTED = st.lists(NAME, min_size=1, max_size=3).map(".".join)


@st.composite
def import_statement(draw: st.DrawFn) -> str:
    names = draw(st.lists(NAME, min_size=1, max_size=3, unique=True))
    module = draw(DOTTED)
    level = "." * draw(st.integers(0, 2))
    form = draw(st.sampled_from(["import", "import_as", "from", "from_paren", "from_backslash"]))
    if form == "import":
        return f"import {module}, {names[0]}"
    if form == "import_as":
        return f"import {module} as {names[0]}"
    if form == "from":
        return f"from {level}{module} import {', '.join(names)}"
    if form == "from_paren":
        return f"from {level}{module} import (\n    " + ",\n    ".join(names) + ",\n)"
    return f"from {level}{module} import \\\n    {names[0]}"


@st.composite
def source_with_imports(draw: st.DrawFn) -> str:
    """Imports at the top, in function bodies, after ``try:`` and ``;``, between other code and
    strings that mention the word."""
    lines = ['"""A module. Note: import nothing from here."""']
    for statement in draw(st.lists(import_statement(), max_size=6)):
        where = draw(st.sampled_from(["top", "function", "try", "semicolon"]))
        if where == "top":
            lines.append(statement)
        elif where == "function":
            body = "\n".join("    " + line for line in statement.splitlines())
            lines += ["def f():", body, "    return 'see: import this'"]
        elif where == "try" and "\n" not in statement:
            lines += [f"try: {statement}", "except ImportError: pass"]
        else:
            lines.append(f"x = 1; {statement}")
    return "\n".join(lines) + "\n"


@settings(max_examples=100, deadline=None)
@given(source_with_imports())
def test_the_import_scan_finds_what_a_full_parse_finds(source: str) -> None:
    package = "app.sub"
    expected: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            expected.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            base = ".".join(parts + ([node.module] if node.module else []))
            expected.add(base)
            expected.update(f"{base}.{alias.name}" for alias in node.names)
    closed = {".".join(n.split(".")[: i + 1]) for n in expected for i in range(n.count(".") + 1)}
    sha = hashlib.sha256(source.encode()).hexdigest()
    assert set(identity_module._parsed_imports(sha, source.encode(), package)) == closed
