"""One release decision from many shards (SPEC section 10, issue 22 item 5): the shards of a gate
run as separate pytest processes, their JSON reports merged by ``python -m pytest_reliable merge``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from tests.acceptance.helpers import CONFTEST, DATASET, RELIABLE_YAML, TEST_FILE, by_test

MERGE = [sys.executable, "-m", "pytest_reliable", "merge"]


def merge(cwd: Path, *args: str | Path, env: dict[str, str] | None = None) \
        -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": "160"}
    environment.pop("GITHUB_STEP_SUMMARY", None)  # only where a test sets it
    environment.update(env or {})
    return subprocess.run([*MERGE, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=environment, check=False)


def run_shard(project: Path, name: str, *args: str) -> dict[str, Any]:
    """One shard: a pytest process in the project directory, writing its JSON report."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly",
                           "-p", "no:cacheprovider", f"--reliable-report={name}", *args],
                          cwd=project, capture_output=True, text=True, timeout=300, check=False)
    assert (project / name).exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return cast(dict[str, Any], json.loads((project / name).read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gate of `helpers` run as shards, once for this module: shard-1 (a test that passes),
    shard-2 (one that fails), overlap (shard-1's test again, its answers now cached) and
    other-seed (shard-2's test with another seed)."""
    project = tmp_path_factory.mktemp("gate")
    (project / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (project / "reliable.yaml").write_text(RELIABLE_YAML, encoding="utf-8")
    (project / "test_gate.py").write_text(TEST_FILE.format(dataset=DATASET), encoding="utf-8")
    run_shard(project, "shard-1.json", "test_gate.py::test_passes")
    run_shard(project, "shard-2.json", "test_gate.py::test_fails_on_worst_format")
    run_shard(project, "overlap.json", "test_gate.py::test_passes")
    run_shard(project, "other-seed.json", "test_gate.py::test_fails_on_worst_format",
              "--reliable-seed=7")
    return project


@pytest.fixture
def shards(gate: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """A fresh copy of the gate's reports in ``tmp_path`` (where each test merges)."""
    for report in gate.glob("*.json"):
        shutil.copy(report, tmp_path / report.name)
    one, two = (json.loads((tmp_path / f"shard-{i}.json").read_text(encoding="utf-8"))
                for i in (1, 2))
    assert [e["verdict"] for e in one["tests"] + two["tests"]] == ["passed", "failed"]
    return tmp_path / "shard-1.json", tmp_path / "shard-2.json", one, two


def test_two_shards_merge_into_one_report_table_page_and_exit_code(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]],
) -> None:
    one_path, two_path, one, two = shards
    summary = tmp_path / "summary.md"
    done = merge(tmp_path, one_path, two_path, "-o", "merged.json", "--html", "merged.html",
                 env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 1, done.stderr  # one shard's test failed: the gate blocks

    merged = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    # The entries are the shards' own, not recomputed: byte-for-byte the same JSON values.
    assert merged["tests"] == sorted(one["tests"] + two["tests"], key=lambda e: e["nodeid"])
    assert {k: merged[k] for k in ("schema_version", "seed", "space_hash", "model")} == \
        {k: one[k] for k in ("schema_version", "seed", "space_hash", "model")}
    assert merged["created"] == max(one["created"], two["created"])
    assert [(s["file"], s["tests"]) for s in merged["shards"]] == \
        [(str(one_path), 1), (str(two_path), 1)]
    verdicts = {name: entry["verdict"] for name, entry in by_test(merged).items()}
    assert verdicts == {"test_passes": "passed", "test_fails_on_worst_format": "failed"}

    # The table is the one pytest prints: both tests, one row each, with their verdicts.
    assert "reliable summary: 2 tests from 2 shards" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("test_")]
    assert len(rows) == 2 and any("passed" in r for r in rows) and any("failed" in r for r in rows)
    assert "1 of 2 tests failed or errored" in done.stdout
    assert "test_passes" in summary.read_text(encoding="utf-8")
    assert "test_fails_on_worst_format" in summary.read_text(encoding="utf-8")
    page = (tmp_path / "merged.html").read_text(encoding="utf-8")
    assert "test_passes" in page and "test_fails_on_worst_format" in page

    # The merged report is a report: the page rebuilds from it, and a re-merge is the same.
    again = merge(tmp_path, one_path, two_path, "-o", "again.json")
    assert (tmp_path / "again.json").read_bytes() == \
        (tmp_path / "merged.json").read_bytes(), again.stderr


def test_a_gate_whose_shards_all_pass_exits_0(
        tmp_path: Path,
        shards: tuple[Path, Path, dict[str, Any], dict[str, Any]]) -> None:
    one_path, _, _, _ = shards
    done = merge(tmp_path, one_path, "-o", "merged.json")
    assert done.returncode == 0, done.stderr
    assert "0 of 1 tests failed or errored" in done.stdout


def test_an_errored_test_blocks_the_merged_gate(tmp_path: Path,
                                                shards: tuple[Path, Path, dict[str, Any],
                                                              dict[str, Any]]) -> None:
    one_path, _, one, _ = shards
    errored = dict(one, tests=[dict(one["tests"][0], nodeid="test_gate.py::test_other",
                                    verdict="error")])
    (tmp_path / "errored.json").write_text(json.dumps(errored), encoding="utf-8")
    done = merge(tmp_path, one_path, "errored.json", "-o", "merged.json")
    assert done.returncode == 1, done.stderr


@pytest.mark.parametrize("field, value", [("seed", 7), ("space_hash", "0" * 64),
                                          ("schema_version", 99)])
def test_shards_of_different_runs_are_refused_naming_the_shard_and_the_field(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]],
        field: str, value: Any) -> None:
    one_path, _, _, two = shards
    if field == "seed":  # a real shard run with another seed, not an edited file
        shutil.copy(tmp_path / "other-seed.json", tmp_path / "other.json")
    else:
        (tmp_path / "other.json").write_text(json.dumps(dict(two, **{field: value})),
                                             encoding="utf-8")
    done = merge(tmp_path, one_path, "other.json", "-o", "merged.json")
    assert done.returncode == 2
    # A newer schema_version is already refused by the loader, in its words.
    said = "other.json has" if field == "schema_version" else "other.json:"
    assert f"{said} {field} {'' if field == 'schema_version' else 'is '}{json.dumps(value)}" \
        in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "merged.json").exists()


def test_a_test_in_two_shards_counts_once_when_identical_and_is_refused_when_not(
        tmp_path: Path,
        shards: tuple[Path, Path, dict[str, Any], dict[str, Any]]) -> None:
    one_path, two_path, one, _ = shards
    # The same test run again in another shard (an overlapping split): the same entry, but for
    # the made/cached split of its calls (its answers are cached now), which SPEC 10 leaves free.
    overlap = json.loads((tmp_path / "overlap.json").read_text(encoding="utf-8"))
    assert overlap["tests"][0]["calls"] != one["tests"][0]["calls"]
    shutil.copy(one_path, tmp_path / "copy.json")  # and an identical duplicate
    done = merge(tmp_path, one_path, two_path, "overlap.json", "copy.json", "-o", "merged.json")
    assert done.returncode == 1, done.stderr
    merged = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    assert [e["nodeid"] for e in merged["tests"]].count(one["tests"][0]["nodeid"]) == 1
    assert by_test(merged)["test_passes"] == one["tests"][0]  # the first shard's entry

    entry = dict(one["tests"][0], mean=0.75)
    (tmp_path / "conflict.json").write_text(json.dumps(dict(one, tests=[entry])),
                                            encoding="utf-8")
    refused = merge(tmp_path, one_path, "conflict.json", "-o", "refused.json")
    assert refused.returncode == 2
    assert "conflict.json" in refused.stderr and "test_passes" in refused.stderr
    assert "mean: 0.5 vs 0.75" in refused.stderr and str(one_path) in refused.stderr
    assert not (tmp_path / "refused.json").exists()


@pytest.mark.parametrize("content", ["{not json", '{"tests": []}', "[1, 2]", ""])
def test_a_malformed_shard_is_refused_naming_the_file(
        tmp_path: Path, content: str) -> None:
    (tmp_path / "broken.json").write_text(content, encoding="utf-8")
    done = merge(tmp_path, "broken.json", "-o", "merged.json")
    assert done.returncode == 2
    assert "broken.json" in done.stderr and "Traceback" not in done.stderr
    missing = merge(tmp_path, "absent.json", "-o", "merged.json")
    assert missing.returncode == 2 and "absent.json does not exist" in missing.stderr
