"""The manual cannot drift: every code block of README.md and docs/*.md is checked (issue 28).

Each block carries a mark saying how (tests/docs_harness.py lists the kinds): example projects
are assembled from the blocks and their commands run against a scripted OpenAI-compatible server
(and a throwaway PostgreSQL where a page says so); fragments are type-checked with
``mypy --strict``; YAML is parsed and a ``reliable.yaml`` validated by the plugin's own loader;
CI's commands are ``.ci/run``'s, verbatim; benchmark commands name scripts whose own argument
parsers accept them. The reference (docs/reference.md) is compared with the plugin's own lists:
the option table, the marker spec, the public names and the JSON entry TypedDicts.

README's quick start runs in a fresh directory and a fresh virtual environment, as written
(`test_readme_quick_start_runs_as_written_in_a_fresh_venv`).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

from tests.docs_harness import (
    KINDS,
    PAGES,
    ROOT,
    Block,
    all_blocks,
    commands,
    docs_rule,
    projects,
    without_comment,
    write_project,
)

BLOCKS = all_blocks()
PROJECTS = projects(BLOCKS)
VENV_BIN = str(Path(sys.executable).parent)


def marked(kind: str) -> list[Block]:
    return [block for block in BLOCKS if block.kind == kind]


def ids(blocks: list[Block]) -> list[str]:
    return [block.id for block in blocks]


# -- every block is marked, and every mark is understood ------------------------------------------
def test_every_block_has_a_mark_that_fits_its_language() -> None:
    problems = []
    for block in BLOCKS:
        if block.kind is None:
            problems.append(f"{block.id}: a ```{block.lang} block without a <!-- doc-test: ... --> "
                            "mark (tests/docs_harness.py lists the kinds)")
        elif block.kind not in KINDS:
            problems.append(f"{block.id}: unknown mark {block.kind!r}")
        elif block.lang not in KINDS[block.kind]:
            problems.append(f"{block.id}: a {block.kind} mark on a ```{block.lang} block "
                            f"(allowed: {', '.join(sorted(KINDS[block.kind]))})")
        elif block.kind == "file" and (len(block.args) != 1 or not block.projects):
            problems.append(f"{block.id}: write `file PATH in=PROJECT`")
        elif block.kind in ("run", "console") and not block.projects:
            problems.append(f"{block.id}: a {block.kind} block needs in=PROJECT")
    assert not problems, "\n".join(problems)
    assert len(BLOCKS) > 50  # the pages were read


def test_every_project_a_block_runs_in_exists() -> None:
    for block in BLOCKS:
        for project in block.projects:
            if block.kind in ("run", "typecheck"):
                assert project in PROJECTS, f"{block.id}: no file is marked in={project}"


def test_every_link_between_pages_resolves() -> None:
    link = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target, anchor in link.findall(text):
            if re.match(r"[a-z]+://", target):
                continue
            path = (page.parent / target).resolve()
            assert path.exists(), f"{page.name}: the link {target!r} leads nowhere"
            if anchor and path.suffix == ".md":
                headings = {_anchor(h) for h in re.findall(r"^#+ (.*)$", path.read_text(
                    encoding="utf-8"), re.MULTILINE)}
                assert anchor[1:] in headings, f"{page.name}: no heading {anchor} in {target}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_readme_stays_the_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 320, "README grew past a front door: move it to docs/"
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"README does not link docs/{page.name}"


def test_readmes_error_rates_are_rows_of_the_published_table() -> None:
    """SPEC section 11: README shows the gate's error rates; they are rows of docs/verdicts.md's
    table, so a re-measured table cannot leave README behind."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## What a verdict promises"):]
    section = section[:section.index("\n## ", 3)]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 3
    published = (ROOT / "docs" / "verdicts.md").read_text(encoding="utf-8").splitlines()
    for row in rows:
        assert row in published, f"README's row is not in docs/verdicts.md: {row}"


# -- data and configuration blocks ----------------------------------------------------------------
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "yaml"], ids=lambda b: b.id)
def test_yaml_blocks_parse_and_spaces_and_prices_load(block: Block, tmp_path: Path) -> None:
    data = yaml.safe_load(block.text)
    assert data is not None
    if block.kind == "file" and block.args[0].endswith("reliable.yaml"):
        from pytest_reliable.space import parse_spaces

        assert parse_spaces(block.text, source=block.id)
    if block.kind == "file" and block.args[0] == "prices.yaml":
        from pytest_reliable.calls.pricing import PriceTable

        path = tmp_path / "prices.yaml"
        path.write_text(block.text, encoding="utf-8")
        assert PriceTable.load(path).prices


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in ("json", "ini", "toml")],
                         ids=lambda b: b.id)
def test_json_ini_and_toml_blocks_parse(block: Block) -> None:
    if block.lang == "json":
        name = block.args[0] if block.kind == "file" else ""
        if name.endswith(".jsonl"):
            rows = [json.loads(line) for line in block.text.splitlines() if line.strip()]
            assert rows and all(isinstance(row, dict) for row in rows)
        else:
            json.loads(block.text)
    elif block.lang == "ini":
        parser = configparser.ConfigParser()
        parser.read_string(block.text)
        assert parser.sections()
    elif tomllib is not None:
        tomllib.loads(block.text)


# -- commands: CI's, installs, benchmarks ----------------------------------------------------------
def ci_commands() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("block", marked("ci"), ids=ids(marked("ci")))
def test_ci_blocks_are_what_ci_runs_verbatim(block: Block) -> None:
    for command in commands(block):
        assert command in ci_commands(), f"{block.id}: .ci/run does not run {command!r}"


def test_readmes_two_commands_are_the_ones_ci_runs() -> None:
    """`.ci/run` says "keep the two identical": README's two commands (the example gate, the
    test suite) are its last two commands, verbatim."""
    readme = [command for block in marked("ci") if block.page == "README.md"
              for command in commands(block)]
    assert len(readme) == 2 and sorted(readme) == sorted(ci_commands()[-2:]), (
        readme, ci_commands()[-2:])


def install_lines() -> list[tuple[Block, str]]:
    return [(block, command) for block in BLOCKS if block.kind in ("install", "quickstart")
            for command in commands(block) if " pip install " in f" {command} "]


@pytest.mark.parametrize("block,command", install_lines(),
                         ids=[b.id for b, _ in install_lines()])
def test_install_lines_name_real_extras_and_installed_packages(block: Block, command: str) -> None:
    from importlib.metadata import PackageNotFoundError, distribution

    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    words = without_comment(command).split("pip install", 1)[1].split()
    assert words, command
    for word in words:
        word = word.strip("\"'")
        if word.startswith("-"):
            continue
        name, _, given = word.partition("[")
        if name == "pytest-reliable":
            wanted = set(given.rstrip("]").split(",")) if given else set()
            assert wanted <= extras, f"{block.id}: unknown extras {wanted - extras}"
            continue
        try:
            distribution(name)
        except PackageNotFoundError:
            pytest.fail(f"{block.id}: {name!r} is not installed where the tests run")


def _page_text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def test_every_page_that_shows_n_also_installs_pytest_xdist() -> None:
    for page in PAGES:
        shown = [c for b in BLOCKS if b.page == page.relative_to(ROOT).as_posix()
                 and b.lang == "bash" for c in commands(b)]
        if any(re.search(r"pytest\b.*\s-n\s", c) for c in shown):
            assert any("pytest-xdist" in c or ".[local,test]" in c for c in shown), (
                f"{page.name} runs pytest -n without installing pytest-xdist")


def benchmark_commands() -> list[tuple[Block, list[str]]]:
    out = []
    for block in marked("benchmark"):
        for command in commands(block):
            for part in without_comment(command).split("&&"):
                words = shlex.split(part)  # a quoted argument ('max_std fixed') is one word
                if words and words[0] == "PYTHONPATH=.":
                    words = words[1:]
                out.append((block, words))
    return out


_PARSE_ONLY = r'''
import argparse, runpy, sys

class Parsed(Exception):
    pass

def parse_and_stop(self, args=None, namespace=None):
    argparse.ArgumentParser.parse_known_args(self, args, namespace)
    raise Parsed

def parse_known_and_stop(self, args=None, namespace=None):
    namespace, extra = ORIGINAL(self, args, namespace)
    if extra:
        self.error("unrecognized arguments: " + " ".join(extra))
    raise Parsed

ORIGINAL = argparse.ArgumentParser.parse_known_args
argparse.ArgumentParser.parse_args = lambda self, args=None, namespace=None: (
    parse_known_and_stop(self, args, namespace))
for script, *args in [tuple(line.split("\t")) for line in sys.stdin.read().splitlines()]:
    sys.argv = [script, *[a for a in args if a]]
    try:
        runpy.run_path(script, run_name="__main__")
    except Parsed:
        print("parsed", script)
    except SystemExit as stop:
        print("exit", stop.code, script)
        sys.exit(1)
    else:
        print("ran without parsing", script)
        sys.exit(1)
'''


@pytest.mark.slow
def test_benchmark_commands_name_scripts_that_accept_their_arguments() -> None:
    """Each ``python benchmarks/X.py ARGS`` of the manual: the script exists, and the arguments
    pass its own argparse parser (the script stops right after parsing; a script without a
    parser must be given no arguments). The measurements themselves take minutes to hours."""
    with_parser = []
    for block, words in benchmark_commands():
        assert words[:1] == ["python"] and len(words) >= 2, f"{block.id}: {words}"
        script = ROOT / words[1]
        assert script.is_file(), f"{block.id}: {words[1]} does not exist"
        args = words[2:]
        if "argparse" in script.read_text(encoding="utf-8"):
            with_parser.append("\t".join([str(script), *args]))
        else:
            assert not args, f"{block.id}: {words[1]} takes no arguments, given {args}"
    result = subprocess.run([sys.executable, "-c", _PARSE_ONLY], input="\n".join(with_parser),
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("parsed ") == len(with_parser), result.stdout


def test_recorded_output_follows_the_command_that_recorded_it() -> None:
    for block in marked("recorded"):
        before = [b for b in BLOCKS if b.page == block.page and b.line < block.line]
        assert before and before[-1].kind == "benchmark", (
            f"{block.id}: recorded output without its benchmark command right before it")


# -- the reference is complete -------------------------------------------------------------------
def reference_tables() -> dict[str, list[list[str]]]:
    """{name: rows} of every table after a ``<!-- reference: NAME -->`` line in the reference."""
    lines = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8").splitlines()
    tables: dict[str, list[list[str]]] = {}
    for i, line in enumerate(lines):
        found = re.match(r"<!-- reference: (\S+) -->", line)
        if not found:
            continue
        rows = []
        for row in lines[i + 3:]:
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
            rows.append(cells)
        tables[found.group(1)] = rows
    return tables


def names_in(cell: str) -> set[str]:
    """The backticked names of a cell (`a`, `b` -> {a, b}); a flag's value words dropped."""
    return {name.split(" ")[0].split("[")[0] for name in re.findall(r"`([^`]+)`", cell)}


def documented(table: str, column: int = 0) -> set[str]:
    return {name for row in reference_tables()[table] for name in names_in(row[column])}


def test_the_reference_lists_every_option_with_its_env_and_ini_twins() -> None:
    from pytest_reliable.plugin.options import OPTIONS

    rows = reference_tables()["options"]
    by_flag = {next(iter(names_in(row[0]))): row for row in rows}
    assert set(by_flag) == {option.flag for option in OPTIONS}, (
        "missing: " + str({o.flag for o in OPTIONS} - set(by_flag))
        + "; stale: " + str(set(by_flag) - {o.flag for o in OPTIONS}))
    for option in OPTIONS:
        row = by_flag[option.flag]
        assert names_in(row[1]) == {option.env}, row
        assert names_in(row[2]) == {option.dest}, row


def test_the_reference_lists_every_marker_argument() -> None:
    from pytest_reliable.contract.markers import (
        CHECKLIST_ARGUMENTS,
        CHECKLIST_THRESHOLDS,
        RELIABLE_ARGUMENTS,
    )

    assert documented("reliable-marker") == RELIABLE_ARGUMENTS
    for kind in ("invariance", "directional", "mft"):
        allowed = CHECKLIST_ARGUMENTS[kind] | set(CHECKLIST_THRESHOLDS[kind])
        assert documented(f"{kind}-marker") == allowed, kind


def test_the_reference_lists_every_public_name() -> None:
    import pytest_reliable

    assert documented("public-names") == set(pytest_reliable.__all__)


def test_the_reference_and_the_spaces_page_list_every_reliable_yaml_key() -> None:
    from pytest_reliable.space.dimensions import KEYS

    assert documented("space-keys") == set(KEYS)
    spaces = (ROOT / "docs" / "spaces.md").read_text(encoding="utf-8")
    table = spaces[spaces.index("| key | values | left out |"):]
    listed = {names_in(row.split("|")[1]).pop() for row in table.splitlines()[2:]
              if row.startswith("|")}
    assert listed == set(KEYS)


def test_the_reference_lists_every_command() -> None:
    listed = set()
    for row in reference_tables()["commands"]:
        words = re.findall(r"`([^`]+)`", row[0])[0].split()
        assert words[:3] == ["python", "-m", "pytest_reliable"], row
        listed.add(" ".join(words[3:5]) if words[3] == "cache" else words[3])

    def subcommands(*args: str) -> set[str]:
        result = subprocess.run([sys.executable, "-m", "pytest_reliable", *args, "--help"],
                                capture_output=True, text=True, check=True, cwd=ROOT)
        return set(re.findall(r"^    (\w+)\s", result.stdout, re.MULTILINE))

    expected = (subcommands() - {"cache"}) | {f"cache {a}" for a in subcommands("cache")}
    assert listed == expected


ENTRY_TABLES = {
    "ReportDocument": "ReportDocument", "ReliableEntry": "ReliableEntry",
    "ChecklistEntry": "ChecklistEntry", "ErrorEntry": "ErrorEntry",
    "CanonicalEntry": "CanonicalEntry", "RangeEntry": "RangeEntry", "GroupEntry": "GroupEntry",
    "ThresholdEntry": "ThresholdEntry", "CallsEntry": "CallsEntry", "CostEntry": "CostEntry",
    "WorstVariantEntry": "WorstVariantEntry", "InstanceEntry": "InstanceEntry",
    "NStarCurveEntry": "NStarCurveEntry", "CircularEntry": "CircularEntry",
    "JudgeEntry": "JudgeEntry", "JudgeCallsEntry": "JudgeCallsEntry",
    "PairwiseEntry": "PairwiseEntry", "WinRateEntry": "WinRateEntry",
    "FailureEntry": "FailureEntry", "ExplorationEntry": "ExplorationEntry",
    "ExplorationFormat": "ExplorationFormat",
}


@pytest.mark.parametrize("table", sorted(ENTRY_TABLES))
def test_the_reference_lists_every_json_field(table: str) -> None:
    from typing import get_type_hints

    from pytest_reliable.schema import entries

    shape = getattr(entries, ENTRY_TABLES[table])
    fields = set(get_type_hints(shape))
    assert documented(table) == fields, (
        f"missing: {fields - documented(table)}; stale: {documented(table) - fields}")


def test_every_typed_entry_shape_has_its_table() -> None:
    """A new TypedDict in the entries module needs a table in the reference."""
    from typing import is_typeddict

    from pytest_reliable.schema import entries

    shapes = {name for name, value in vars(entries).items()
              if is_typeddict(value) and not name.startswith("_")
              and value.__module__ == entries.__name__}
    not_published = {"SummaryFields", "UnknownCanonicalEntry", "UnknownRangeEntry"}
    assert shapes - not_published == set(ENTRY_TABLES.values())


def test_the_reference_lists_every_baseline_field() -> None:
    """The ``baseline`` object is a plain mapping (`BaselineComparison.as_dict`); its keys and
    the nested objects' keys are what the reference's table names."""
    import ast

    from pytest_reliable.verdict.baseline import BaselineComparison, GroupDifference

    difference = SimpleNamespace(estimate=-0.1, low=-0.2, high=0.0, confidence=0.95,
                                 method="m", n_cells=4)
    comparison = BaselineComparison(
        model="m", source="s", mean=0.5, candidate_mean=0.4, difference=difference,
        mcnemar=SimpleNamespace(p_value=1.0, a_only=0, b_only=1, n=4), grouping="dimensions",
        groups=[GroupDifference("k", "d", difference)], orp=SimpleNamespace(
            sigma_d=0.1, rho=0.5, area=0.2, d_max=0.3, curve=[0.5]), example=None)
    data = comparison.as_dict()
    rows = {next(iter(names_in(r[0]))): r for r in reference_tables()["baseline"]}
    assert documented("baseline") == set(data)

    def listed(field: str) -> set[str]:
        row = next(r for r in reference_tables()["baseline"] if field in names_in(r[0]))
        braces = re.findall(r"\{([^}]*)\}", row[1])
        return {name.strip() for name in ",".join(braces).split(",")}

    assert listed("difference") == set(data["difference"])
    assert listed("mcnemar") == set(data["mcnemar"])
    assert listed("orp") == set(data["orp"])
    assert listed("groups") == set(data["groups"]["k"])
    source = ast.parse(Path(sys.modules["pytest_reliable.verdict.baseline"].__file__).read_text())
    example_keys = next(
        {k.value for k in node.keys if isinstance(k, ast.Constant)}
        for node in ast.walk(source)
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "candidate_answer" for k in node.keys))
    assert listed("example") == example_keys
    assert rows  # the table was read


def test_the_checklist_page_lists_every_built_in_perturbation() -> None:
    from pytest_reliable.checklist import DIR_PERTURBATIONS, INV_PERTURBATIONS

    page = (ROOT / "docs" / "checklist.md").read_text(encoding="utf-8")
    section = page[page.index("## Every built-in perturbation"):page.index("## How pairs")]
    inv, dir_ = section.split("Directional perturbations")
    rows = re.compile(r"^\| `(\w+)` \|", re.MULTILINE)
    assert set(rows.findall(inv)) == set(INV_PERTURBATIONS)
    assert set(rows.findall(dir_)) == set(DIR_PERTURBATIONS)


# -- type-checked fragments ------------------------------------------------------------------------
@pytest.mark.slow
def test_fragments_type_check_under_mypy_strict(tmp_path: Path) -> None:
    """Each ``typecheck`` block, after its prelude, as a module of its own (its project's files
    importable), under ``mypy --strict``; only the fragments' own errors count."""
    modules = []
    for n, block in enumerate(marked("typecheck")):
        where = tmp_path / f"fragment_{n}"
        where.mkdir()
        for project in block.projects:
            write_project({name: text for name, text in PROJECTS[project].items()
                           if name.endswith(".py") and not name.startswith(("test_", "conftest"))},
                          where)
        module = where / f"fragment_{n}.py"
        module.write_text(f"# {block.id}\n{block.prelude}\n{block.text}", encoding="utf-8")
        modules.append((block, where, module))
    problems = []
    for block, where, module in modules:
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
             "--cache-dir", str(tmp_path / ".mypy_cache"), module.name],
            cwd=where, env={**os.environ, "MYPYPATH": str(ROOT)}, capture_output=True,
            text=True, timeout=600, check=False)
        if result.returncode != 0:
            problems.append(f"{block.id}:\n{result.stdout}{result.stderr}")
    assert not problems, "\n".join(problems)


# -- runs ----------------------------------------------------------------------------------------
@pytest.fixture
def scripted_server() -> Iterator[Any]:
    from pytest_reliable.testing import ScriptedServer

    with ScriptedServer(docs_rule, model_name="gpt-4o-mini") as server:
        yield server


def run_env(block: Block, request: pytest.FixtureRequest) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RELIABLE_", "PYTEST_", "OPENAI_", "GITHUB_"))
           and k not in ("CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "CIRCLE_WORKFLOW_ID")}
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "200"  # a wide terminal: every column of the table is shown
    if "scripted" in block.env:
        server = request.getfixturevalue("scripted_server")
        env.update(OPENAI_API_KEY="sk-docs-not-a-real-key", OPENAI_BASE_URL=server.base_url,
                   RELIABLE_BASE_URL=server.base_url)
    if "postgres" in block.env:
        env["RELIABLE_STORE"] = request.getfixturevalue("postgres_url")
    return env


def runnable() -> list[Block]:
    return [b for b in marked("run")]


@pytest.mark.slow
@pytest.mark.parametrize("block", runnable(), ids=ids(runnable()))
def test_run_blocks_run_as_written(block: Block, tmp_path: Path,
                                   request: pytest.FixtureRequest) -> None:
    """The block, in a fresh copy of its project: a bash block as one ``bash -eu`` script, a
    python block as a script; it ends with the mark's exit status (0 unless it says), prints
    what the mark expects, and no traceback."""
    (project,) = block.projects
    write_project(PROJECTS[project], tmp_path)
    env = run_env(block, request)
    if block.lang == "bash":
        argv = ["bash", "-euo", "pipefail", "-c", block.text]
    else:
        (tmp_path / "_snippet.py").write_text(block.text, encoding="utf-8")
        argv = [sys.executable, "_snippet.py"]
    started = time.monotonic()
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=900, check=False)
    output = result.stdout + result.stderr
    shown = f"{block.id} ({time.monotonic() - started:.0f} s):\n{output[-6000:]}"
    assert result.returncode == int(block.options.get("exit", "0")), shown
    assert "Traceback" not in output and "INTERNALERROR" not in output, shown
    for expected in block.options.get("expect", "").split(";"):
        assert expected in output, shown


@pytest.mark.slow
@pytest.mark.parametrize("block", marked("console"), ids=ids(marked("console")))
def test_console_blocks_print_what_the_page_shows(block: Block, tmp_path: Path) -> None:
    """``$ `` lines run in a directory holding a copy of examples/ (no model call: the page's
    console blocks are plans); every shown line of output appears, in order."""
    assert block.projects == ("examples",)
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns(".reliable", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELIABLE_", "PYTEST_"))}
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    lines = block.text.splitlines()
    runs: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            runs.append((line[2:], []))
        else:
            runs[-1][1].append(line)
    for command, expected in runs:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=900,
                                check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        actual = [line.rstrip() for line in result.stdout.splitlines()]
        position = 0
        for want in expected:
            while position < len(actual) and actual[position] != want.rstrip():
                position += 1
            assert position < len(actual), (
                f"{block.id}: {want!r} is not in the output (in order):\n{result.stdout}")


# -- README's quick start, as a newcomer runs it ------------------------------------------------------
def normal(line: str) -> str:
    """A line of output without pytest's ``=`` rulers and the closing line's timing."""
    line = line.strip().strip("=").strip()
    timing = re.match(r"(.*\b(?:passed|failed|xfailed|skipped|errors?)) in \S+", line)
    return timing.group(1) if timing else line


def skeleton(line: str) -> re.Pattern[str]:
    """A line of shown output as a pattern: its numbers may differ (another machine's kernels
    may answer a few prompts differently), nothing else may."""
    parts = re.split(r"\d+", normal(line))
    return re.compile(r"\d+".join(re.escape(part) for part in parts))


@pytest.mark.slow
def test_readme_quick_start_runs_as_written_in_a_fresh_venv(tmp_path: Path) -> None:
    """README's "A gate in a minute", as a newcomer runs it: an empty directory, a fresh virtual
    environment made by README's own commands, the install line as written except that the
    package ``pytest-reliable`` is this checkout (its path stands where README says
    ``pytest-reliable``; pip's cache has the llama-cpp-python wheel CI's own install built), the
    files exactly as README shows them, then README's command. The run ends as README says
    (1 failed, 1 passed) and prints the output README shows, numbers aside.

    The README's blocks run in one shell (the venv stays activated, as in the reader's
    terminal), the files written between them."""
    readme = [b for b in BLOCKS if b.page == "README.md"]
    setup, run = [b for b in readme if b.kind == "quickstart"]
    files = {b.args[0]: b.text for b in readme if b.kind == "file" and "quickstart" in b.projects}
    assert set(files) == {"test_reviews.py", "reliable.yaml", "pytest.ini"}
    (shown,) = [b for b in readme if b.kind == "output" and b.args == ("quickstart",)]
    assert '"pytest-reliable[local]"' in setup.text
    project = tmp_path / "gate"
    project.mkdir()
    install = setup.text.replace('"pytest-reliable[local]"', f'"{ROOT}[local]"')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RELIABLE_", "PYTEST_", "VIRTUAL_ENV", "OPENAI_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p != VENV_BIN)
    env["COLUMNS"] = "80"  # the width README's output was printed at
    started = time.monotonic()
    made = subprocess.run(["bash", "-eo", "pipefail", "-c", install], cwd=project, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    installed = time.monotonic() - started
    assert made.returncode == 0, made.stdout[-4000:] + made.stderr[-4000:]
    write_project(files, project)
    script = ". .venv/bin/activate\n" + run.text
    result = subprocess.run(["bash", "-o", "pipefail", "-c", script], cwd=project, env=env,
                            capture_output=True, text=True, timeout=1800, check=False)
    ran = time.monotonic() - started - installed
    output = result.stdout + result.stderr
    print(f"quick start: install {installed:.0f} s, first run {ran:.0f} s")
    assert result.returncode == 1, output[-6000:]
    assert re.search(r"\b1 failed, 1 passed in ", output), output[-6000:]
    actual = [normal(line) for line in result.stdout.splitlines()]
    for want in shown.text.splitlines():
        pattern = skeleton(want)
        assert any(pattern.fullmatch(line) for line in actual), (
            f"README shows {want!r}; the run printed:\n{result.stdout[-6000:]}")
    venv_python = project / ".venv" / "bin" / "python"
    assert venv_python.exists()
    where = subprocess.run(
        [str(venv_python), "-c", "import pytest_reliable; print(pytest_reliable.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path)
    assert str(project / ".venv") in where.stdout, "the checkout was not installed into the venv"
