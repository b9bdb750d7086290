"""SPEC section 4: the public types are precise, so ``mypy --strict`` on a user's test sees them.

The mypy runs take about 20 s each (the package's dependencies are analysed too); they are
marked slow, so ``-m "not slow"`` deselects them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import get_type_hints

import pytest

import pytest_reliable
from pytest_reliable import Classification, Dataset, MultipleChoice, Task, text_model
from pytest_reliable.contract.markers import ChecklistSpec, ReliableSpec
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.schema.entries import (
    CallsEntry,
    ChecklistEntry,
    ReliableEntry,
    SummaryFields,
)
from pytest_reliable.space import Space

ROOT = Path(pytest_reliable.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for this module's mypy runs: numpy, scipy and pytest are analysed once."""
    return tmp_path_factory.mktemp("mypy_cache")


def mypy(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on this checkout's package (MYPYPATH wins over any installed copy)."""
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--show-error-codes", "--cache-dir",
         str(cache), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False,
    )


@pytest.mark.slow
def test_mypy_strict_passes_on_the_package(mypy_cache: Path) -> None:
    result = mypy("-p", "pytest_reliable", cwd=ROOT, cache=mypy_cache)
    assert result.returncode == 0, result.stdout + result.stderr


USER_TEST = '''
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_reliable import (
    ChecklistReport, Classification, Dataset, Grade, MultipleChoice, ReliableFixture,
    ReliableReport,
)
from pytest_reliable.plan.data import Dataset as _Dataset


class Exact:
    """A user's own task: no base class, only the `Task` protocol's members."""

    default_instruction = "Answer with the word."

    def validate(self, dataset: _Dataset) -> None:
        pass

    def prompt_text(self, example: Mapping[str, Any]) -> str:
        return str(example["question"])

    def options(self, example: Mapping[str, Any]) -> list[str] | None:
        return None

    def gold_index(self, example: Mapping[str, Any]) -> int | None:
        return None

    def demo_answer(self, example: Mapping[str, Any]) -> str:
        return str(example["reference"])

    def render_plain(self, example: Mapping[str, Any]) -> str | None:
        return None

    def grade(self, text: str, example: Mapping[str, Any], prompt: Any = None) -> Grade:
        return Grade(float(text == example["reference"]), True, text)


DATA = Dataset.from_records([{"question": "2+2?", "choices": ["3", "4"], "answer": 1}])


@pytest.mark.reliable(n=3, min_score=0.5)
def test_gate(reliable: ReliableFixture) -> None:
    report: ReliableReport = reliable.evaluate(DATA, MultipleChoice())
    mean: float = report.mean
    low: float = report.canonical["wilson_low"]
    worst: float | None = report.formats["min"]
    n_star: int | None = report.n_star
    made: int = report.calls["made"]
    assert mean >= 0.5 and low <= mean and worst is not None and made + report.calls_cached > 0
    assert n_star is None or n_star >= 1
    reliable.evaluate(DATA, Exact())


@pytest.mark.mft(min_pass=0.5)
def test_mft(reliable: ReliableFixture) -> None:
    report: ChecklistReport = reliable.mft(DATA, Classification(["yes", "no"]))
    rate: float = report.rate
    assert rate >= 0.5 and report.pairs > 0 and report.failures == []
'''


@pytest.mark.slow
def test_mypy_sees_the_public_types_in_a_users_test(tmp_path: Path, mypy_cache: Path) -> None:
    (tmp_path / "test_user.py").write_text(USER_TEST, encoding="utf-8")
    typo = USER_TEST.replace("mean: float = report.mean", "mean: float = report.meen")
    typo = typo.replace("rate: float = report.rate", "rate: float = report.rat")
    (tmp_path / "test_typo.py").write_text(typo, encoding="utf-8")

    result = mypy("test_user.py", "test_typo.py", cwd=tmp_path, cache=mypy_cache)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    # The typed test is clean; its copy with two misspelt attributes has exactly those errors.
    assert not [line for line in errors if line.startswith("test_user.py")], result.stdout
    errors = [line for line in errors if line.startswith("test_typo.py")]
    assert len(errors) == 2, result.stdout
    assert '"ReliableReport" has no attribute "meen"' in errors[0]
    assert '"ChecklistReport" has no attribute "rat"' in errors[1]
    assert all("[attr-defined]" in line for line in errors)


def test_public_names_agree_for_type_checkers_and_at_runtime() -> None:
    # What mypy sees (the TYPE_CHECKING imports) = what __getattr__ serves = __all__.
    tree = ast.parse(Path(pytest_reliable.__file__).read_text(encoding="utf-8"))
    checked = {
        alias.asname or alias.name
        for node in ast.walk(tree) if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for statement in node.body if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    }
    lazy = set(pytest_reliable._LAZY)
    assert checked == lazy
    assert set(pytest_reliable.__all__) == lazy | {"__version__"}
    for name in sorted(lazy):
        assert getattr(pytest_reliable, name) is not None


def test_import_does_not_import_pytest_or_numpy() -> None:
    code = ("import sys, pytest_reliable; "
            "print(sorted({'pytest', 'numpy'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "[]"


# -- the entry shape: one definition (report/entries.py), the reports build exactly it ---------
def right_label(prompt: str) -> str:
    for line in prompt.splitlines():
        if "right" in line:
            return line.strip()[1]
    return "?"


DATA = Dataset.from_records([
    {"question": f"Question {i}?", "choices": ["wrong", "right"][::1 - 2 * (i % 2)],
     "answer": "right"} for i in range(6)
])


def session(tmp_path: Path) -> ReliableSession:
    space = Space.from_mapping("wrappers", {"wrapper": ["({})", "[{}]"]})
    return ReliableSession(Settings(rootdir=tmp_path, no_cache=True), {"wrappers": space})


def test_reliable_entry_has_exactly_the_declared_keys_and_the_properties_read_it(
    tmp_path: Path,
) -> None:
    model = text_model(right_label, id="right")
    report = session(tmp_path).run_reliable(
        "t.py::t", DATA, MultipleChoice(), ReliableSpec(space="wrappers", n=4), model)
    entry = report.entry("passed")
    assert list(entry) == list(get_type_hints(ReliableEntry))
    assert set(SummaryFields.__required_keys__) <= set(ReliableEntry.__required_keys__)
    assert {"made", "cached"} <= set(entry["calls"]) <= set(get_type_hints(CallsEntry))
    assert report.mean == entry["mean"] == 1.0
    assert report.canonical == entry["canonical"]
    assert report.formats == entry["formats"] and report.orders == entry["orders"]
    assert report.dimensions == entry["dimensions"]
    for name in SummaryFields.__required_keys__:
        assert getattr(report, name) == report.fields[name]  # type: ignore[literal-required]
    assert report.calls == entry["calls"]
    with pytest.raises(AttributeError):
        report.meen  # type: ignore[attr-defined]  # noqa: B018 - the attribute access is the test
    errored = report.entry("error")
    assert list(errored) == list(entry) and errored["mean"] is None


def test_checklist_entry_has_exactly_the_declared_keys(tmp_path: Path) -> None:
    data = Dataset.from_records([{"text": f"text {i}", "label": "yes"} for i in range(3)])
    model = text_model(lambda prompt: "yes", id="yes")
    report = session(tmp_path).run_checklist(
        "t.py::m", data, Classification(["yes", "no"]),
        ChecklistSpec(kind="mft", thresholds={"min_pass": 0.5}), model)
    entry = report.entry("passed")
    assert set(entry) == set(get_type_hints(ChecklistEntry))
    assert (report.kind, report.rate, report.pairs, report.failures) == ("mft", 1.0, 3, [])
    assert list(report.interval) == entry["interval"] and report.unparsed == entry["unparsed"]


def test_builtin_tasks_satisfy_the_task_protocol() -> None:
    tasks: list[Task] = [MultipleChoice(), Classification(["a", "b"])]
    example = {"question": "q?", "choices": ["x", "y"], "answer": 1}
    assert tasks[0].demo_answer(example) == "y"
    assert tasks[0].render_plain(example) is None
    assert tasks[1].render_plain({"text": "t", "label": "a"}) is not None


# -- the user's two doors: marker decorators and evaluate(**overrides), typed (issue 21 item 3) --
DOORS_TEST = '''
from __future__ import annotations

from pytest_reliable import (
    Classification, Dataset, MultipleChoice, ReliableFixture, directional, invariance, mft,
    reliable,
)

DATA = Dataset.from_records([{"question": "2+2?", "choices": ["3", "4"], "answer": 1}])


@reliable(n=3, min_score=0.4, decide="pass-on-evidence", mode="fixed", group_by=["wrapper"])
def test_gate(reliable: ReliableFixture) -> None:
    reliable.evaluate(DATA, MultipleChoice(), min_worst=0.2, decide="estimate", n=None)


@reliable
def test_bare(reliable: ReliableFixture) -> None:
    pass


@invariance(perturb=["typos"], max_flip_rate=0.1)
@directional(perturb="negation", expect="flip", max_fail_rate=0.2)
@mft(min_pass=0.5, decide="fail-on-evidence")
def test_checklist(reliable: ReliableFixture) -> None:
    reliable.mft(DATA, Classification(["yes", "no"]), min_pass=0.9)
'''
DOORS_MISTAKES = '''
from __future__ import annotations

from pytest_reliable import Dataset, MultipleChoice, ReliableFixture, mft, reliable

DATA = Dataset.from_records([{"question": "2+2?", "choices": ["3", "4"], "answer": 1}])


@reliable(min_scor=0.4)
def test_misspelt(reliable: ReliableFixture) -> None:
    pass


@reliable(decide="pass_on_evidence")
def test_policy(reliable: ReliableFixture) -> None:
    pass


@mft(n="ten")
def test_mft_n(reliable: ReliableFixture) -> None:
    pass


@reliable(n=2)
def test_override(reliable: ReliableFixture) -> None:
    reliable.evaluate(DATA, MultipleChoice(), n="ten")
'''


@pytest.mark.slow
def test_mypy_catches_bad_marker_and_override_arguments(tmp_path: Path, mypy_cache: Path) -> None:
    (tmp_path / "test_doors.py").write_text(DOORS_TEST, encoding="utf-8")
    (tmp_path / "test_mistakes.py").write_text(DOORS_MISTAKES, encoding="utf-8")
    result = mypy("test_doors.py", "test_mistakes.py", cwd=tmp_path, cache=mypy_cache)
    # Only the user's files: run outside the project, mypy also reports the package's untyped
    # third-party imports (scipy, yaml), which the project's own config ignores.
    errors = [line for line in result.stdout.splitlines() if ": error:" in line
              and line.startswith(("test_doors.py", "test_mistakes.py"))]
    assert not [line for line in errors if line.startswith("test_doors.py")], result.stdout
    lines = {int(line.split(":")[1]) for line in errors}
    source = DOORS_MISTAKES.splitlines()
    wanted = {i for i, text in enumerate(source, start=1)
              if "min_scor" in text or "pass_on_evidence" in text or '"ten"' in text}
    assert len(wanted) == 4 and lines == wanted, result.stdout
    assert result.returncode == 1


def test_typed_markers_are_pytests_own_at_run_time() -> None:
    from pytest_reliable import directional, invariance, mft, reliable

    for name, decorator in (("reliable", reliable), ("invariance", invariance),
                            ("directional", directional), ("mft", mft)):
        assert isinstance(decorator, pytest.MarkDecorator) and decorator.name == name
        assert decorator(n=3).kwargs == {"n": 3}
