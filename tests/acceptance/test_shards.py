"""One release decision from many shards (SPEC section 10, issue 22 item 5): the shards of a gate
run as separate pytest processes, their JSON reports merged by ``python -m pytest_reliable merge``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from tests.acceptance.helpers import (
    CONFTEST,
    DATASET,
    RELIABLE_YAML,
    TEST_FILE,
    by_test,
    run_json,
    write_project,
)

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


PRICING = "models:\n  'scripted-*': {input: 1000, output: 1000}\n"
"""The scripted callable priced by its id (its tokens estimated), so every shard's spend shows."""
PRICED = "--reliable-pricing=prices.yaml"
DATA_TESTS = """
def test_the_data_is_balanced():
    assert True


def test_every_label_is_known():
    assert False, "label 'neutral' is not one of the task's"
"""


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gate of `helpers` run as shards, once for this module: shard-1 (a test that passes),
    shard-2 (one that fails), overlap (shard-1's test again, its answers now cached), repaid
    (shard-1's test again on a cache of its own: paid again), other-seed (shard-2's test with
    another seed) and empty (a selection that ran nothing)."""
    project = tmp_path_factory.mktemp("gate")
    (project / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (project / "reliable.yaml").write_text(RELIABLE_YAML, encoding="utf-8")
    (project / "test_gate.py").write_text(TEST_FILE.format(dataset=DATASET), encoding="utf-8")
    (project / "prices.yaml").write_text(PRICING, encoding="utf-8")
    run_shard(project, "shard-1.json", "test_gate.py::test_passes", PRICED)
    run_shard(project, "shard-2.json", "test_gate.py::test_fails_on_worst_format", PRICED)
    run_shard(project, "overlap.json", "test_gate.py::test_passes", PRICED)
    run_shard(project, "repaid.json", "test_gate.py::test_passes", PRICED,
              "--reliable-cache=repaid.sqlite")
    run_shard(project, "other-seed.json", "test_gate.py::test_fails_on_worst_format", PRICED,
              "--reliable-seed=7")
    run_shard(project, "empty.json", "-k", "no_such_test", PRICED)
    return project


@pytest.fixture(scope="module")
def other_model(gate: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """shard-2's test run against another model (its id changed in the conftest)."""
    other = tmp_path_factory.mktemp("other-model")
    for name in ("reliable.yaml", "test_gate.py", "prices.yaml"):
        shutil.copy(gate / name, other / name)
    (other / "conftest.py").write_text(CONFTEST.replace('id="scripted-format-sensitive"',
                                                        'id="scripted-format-sensitive-v2"'),
                                       encoding="utf-8")
    run_shard(other, "other-model.json", "test_gate.py::test_fails_on_worst_format", PRICED)
    return other / "other-model.json"


@pytest.fixture(scope="module")
def strict_gate(gate: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gate with its failing test marked ``xfail(strict=True)`` (as README's example gate
    marks the bars its model misses) beside plain tests, one of which fails: its shards
    strict.json (the gate) and data.json (the plain tests), and tests.txt, the list of its
    tests as ``pytest --collect-only -q`` prints it."""
    strict = tmp_path_factory.mktemp("strict")
    for name in ("conftest.py", "reliable.yaml", "prices.yaml"):
        shutil.copy(gate / name, strict / name)
    marked = TEST_FILE.replace(
        "\n@pytest.mark.reliable(space=\"wrappers\", n=4, mode=\"fixed\", min_worst=0.5)",
        "\n@pytest.mark.xfail(strict=True, reason=\"the worst format is known to fail\")"
        "\n@pytest.mark.reliable(space=\"wrappers\", n=4, mode=\"fixed\", min_worst=0.5)")
    assert marked != TEST_FILE
    (strict / "test_gate.py").write_text(marked.format(dataset=DATASET), encoding="utf-8")
    (strict / "test_data.py").write_text(DATA_TESTS, encoding="utf-8")
    run_shard(strict, "strict.json", "test_gate.py", PRICED)
    run_shard(strict, "data.json", "test_data.py")
    # The exact command a user types, through a shell.
    subprocess.run(f"{shlex.quote(sys.executable)} -m pytest --collect-only -q -p no:randomly "
                   "> tests.txt", shell=True, cwd=strict, check=True, timeout=300)
    return strict


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
    assert "**merge** of 2 shards: 1 of 2 tests failed or errored: the gate blocks the release " \
        "\\(exit 1\\)" in summary.read_text(encoding="utf-8")
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
    # A test whose calls did not all complete, as pytest reports it: verdict error, test failed.
    errored = dict(one, tests=[dict(one["tests"][0], nodeid="test_gate.py::test_other",
                                    verdict="error", outcome="failed")],
                   outcomes={"test_gate.py::test_other": "failed"})
    (tmp_path / "errored.json").write_text(json.dumps(errored), encoding="utf-8")
    done = merge(tmp_path, one_path, "errored.json", "-o", "merged.json")
    assert done.returncode == 1, done.stderr


@pytest.mark.parametrize("field, value", [("seed", 7), ("space_hash", "0" * 64),
                                          ("schema_version", 99),
                                          ("pytest_reliable_version", "0.0.9")])
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


def test_a_strict_xfail_that_pytest_passes_passes_the_merged_gate(
        tmp_path: Path, strict_gate: Path) -> None:
    """README's example gate: the tests that miss their bar are xfail(strict=True)."""
    strict = json.loads((strict_gate / "strict.json").read_text(encoding="utf-8"))
    assert sorted((e["verdict"], e["outcome"]) for e in strict["tests"]) == \
        [("failed", "xfailed"), ("passed", "passed")]
    done = merge(tmp_path, strict_gate / "strict.json", "-o", "merged.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 of 2 tests failed or errored (1 more failed as expected: xfail): the gate " \
        "passes (exit 0)" in done.stdout


@pytest.mark.parametrize("edit, said", [
    ({"verdict": "passed"}, 'verdict is "passed", but outcome is "failed"'),
    ({"verdict": None}, "verdict is null, not one of passed, failed, error"),
    ({"verdict": "pased"}, 'verdict is "pased", not one of passed, failed, error'),
    ({"verdict": "passed", "outcome": "passed"},
     'verdict is "passed", but thresholds[0] ("min_worst") has passed: false'),
    ({"outcome": "passed"}, 'outcome is "passed", but verdict is "failed"'),
    ({}, "verdict is absent"),
])
def test_an_edited_shard_cannot_pass_a_failed_test(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]],
        edit: dict[str, Any], said: str) -> None:
    one_path, _, _, two = shards
    failed = dict(two["tests"][0], **edit)
    if not edit:
        del failed["verdict"]
    (tmp_path / "edited.json").write_text(json.dumps(dict(two, tests=[failed])),
                                          encoding="utf-8")
    done = merge(tmp_path, one_path, "edited.json", "-o", "merged.json", "--html", "page.html")
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("edited.json: test 'test_gate.py::test_fails_on_worst_format' (tests[0]): "
            + said) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "merged.json").exists() and not (tmp_path / "page.html").exists()


def test_shards_of_another_model_or_that_ran_nothing_are_refused(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]],
        other_model: Path) -> None:
    one_path, _, _, _ = shards
    shutil.copy(other_model, tmp_path / "other-model.json")
    other = merge(tmp_path, one_path, "other-model.json", "-o", "merged.json")
    assert other.returncode == 2
    assert ('other-model.json: model is "scripted-format-sensitive-v2", but '
            f'{one_path} has "scripted-format-sensitive"') in other.stderr, other.stderr
    empty = json.loads((tmp_path / "empty.json").read_text(encoding="utf-8"))
    assert empty["tests"] == [] and empty["outcomes"] == {}
    nothing = merge(tmp_path, one_path, "empty.json", "-o", "merged.json")
    assert nothing.returncode == 2
    assert "empty.json: tests is empty and it has no pytest outcome" in nothing.stderr
    alone = merge(tmp_path, "empty.json", "-o", "merged.json")
    assert alone.returncode == 2 and "empty.json: tests is empty" in alone.stderr
    assert "Traceback" not in other.stderr + nothing.stderr + alone.stderr
    assert not (tmp_path / "merged.json").exists()


def test_the_merged_spend_is_every_shards(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]]) -> None:
    one_path, two_path, one, two = shards
    repaid = json.loads((tmp_path / "repaid.json").read_text(encoding="utf-8"))
    # The same test run again on another cache paid for its answers again.
    assert one["cost"]["usd"] > 0 and repaid["cost"]["usd"] == one["cost"]["usd"]
    done = merge(tmp_path, one_path, two_path, "repaid.json", "-o", "merged.json")
    assert done.returncode == 1, done.stderr
    merged = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    assert len(merged["tests"]) == 2  # the test the two shards ran counts once
    for field in ("usd", "cached_usd_saved"):
        assert merged["cost"][field] == pytest.approx(
            one["cost"][field] + two["cost"][field] + repaid["cost"][field], abs=2e-6)
    for field in ("prompt_tokens", "completion_tokens"):
        assert merged["cost"][field] == \
            one["cost"][field] + two["cost"][field] + repaid["cost"][field]
    assert [s["cost"] for s in merged["shards"]] == [one["cost"], two["cost"], repaid["cost"]]
    assert f"all 3 shards: spend: ${merged['cost']['usd']:.4f}" in done.stdout


def test_expected_tests_from_pytest_collect_only_catch_a_lost_shard(
        tmp_path: Path, strict_gate: Path) -> None:
    strict = strict_gate
    assert (strict / "tests.txt").read_text(encoding="utf-8").splitlines()[:4] == [
        "test_data.py::test_the_data_is_balanced", "test_data.py::test_every_label_is_known",
        "test_gate.py::test_passes", "test_gate.py::test_fails_on_worst_format"]
    lost = merge(tmp_path, strict / "strict.json", "-o", "merged.json",
                 "--expect-tests", strict / "tests.txt")
    assert lost.returncode == 2, lost.stdout + lost.stderr
    assert (f"2 of the 4 tests that --expect-tests {strict / 'tests.txt'} lists are in no "
            "shard: 'test_data.py::test_every_label_is_known', "
            "'test_data.py::test_the_data_is_balanced'. A shard's report is missing") \
        in lost.stderr
    assert not (tmp_path / "merged.json").exists()

    # With every shard: the plain test that failed in its shard blocks the merged gate.
    done = merge(tmp_path, strict / "strict.json", strict / "data.json", "-o", "merged.json",
                 "--expect-tests", strict / "tests.txt")
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("1 of 2 other tests (without a reliable entry) failed or errored: "
            "test_data.py::test_every_label_is_known: the gate blocks the release (exit 1)") \
        in done.stdout
    merged = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    assert merged["outcomes"] == {
        "test_data.py::test_every_label_is_known": "failed",
        "test_data.py::test_the_data_is_balanced": "passed",
        "test_gate.py::test_fails_on_worst_format": "xfailed",
        "test_gate.py::test_passes": "passed"}
    # The list may come from a JSON report of the whole gate too.
    again = merge(tmp_path, strict / "strict.json", strict / "data.json", "-o", "again.json",
                  "--expect-tests", "merged.json")
    assert again.returncode == 1, again.stderr


def test_an_unwritable_step_summary_is_an_error_and_nothing_says_the_gate_passed(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]]) -> None:
    one_path, _, _, _ = shards
    (tmp_path / "summary-dir").mkdir()
    done = merge(tmp_path, one_path, "-o", "merged.json", "--html", "page.html",
                 env={"GITHUB_STEP_SUMMARY": str(tmp_path / "summary-dir")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write $GITHUB_STEP_SUMMARY {tmp_path / 'summary-dir'}" in done.stderr
    assert "The gate is not decided (page.html, merged.json removed)" in done.stderr
    assert "Traceback" not in done.stderr and "the gate passes" not in done.stdout
    assert not (tmp_path / "merged.json").exists() and not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("output", ["shard-1.json", "link.json", "--html"])
def test_an_output_that_names_an_input_is_refused(
        tmp_path: Path, shards: tuple[Path, Path, dict[str, Any], dict[str, Any]],
        output: str) -> None:
    one_path, two_path, _, _ = shards
    before = one_path.read_bytes()
    (tmp_path / "link.json").symlink_to(one_path)
    args = ["-o", "merged.json", "--html", "shard-1.json"] if output == "--html" \
        else ["-o", output]
    done = merge(tmp_path, one_path, two_path, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is also the input" in done.stderr and "Traceback" not in done.stderr
    assert one_path.read_bytes() == before and not (tmp_path / "merged.json").exists()


def test_every_test_pytest_ran_is_in_the_reports_outcomes(pytester: pytest.Pytester) -> None:
    """Under pytest-xdist too: the controller records every test, reliable or plain, with
    pytest's last word on it (a teardown that failed: error)."""
    write_project(pytester)
    pytester.makepyfile(test_plain="""
        import pytest

        @pytest.fixture
        def breaks_on_teardown():
            yield
            raise RuntimeError("teardown")

        def test_ok():
            pass

        def test_teardown(breaks_on_teardown):
            pass

        @pytest.mark.skip(reason="later")
        def test_skipped():
            pass

        @pytest.mark.xfail(strict=True)
        def test_strict_xpass():
            pass

        @pytest.fixture
        def broken():
            raise RuntimeError("setup")

        def test_setup_error(broken):
            pass
    """)
    result, report = run_json(pytester, "-n", "2")
    result.assert_outcomes(passed=3, failed=2, errors=2, skipped=1)
    assert report["outcomes"] == {
        "test_gate.py::test_fails_on_worst_format": "failed",
        "test_gate.py::test_passes": "passed",
        "test_plain.py::test_ok": "passed",
        "test_plain.py::test_setup_error": "error",
        "test_plain.py::test_skipped": "skipped",
        "test_plain.py::test_strict_xpass": "failed",
        "test_plain.py::test_teardown": "error",
    }
    assert {e["nodeid"]: e["outcome"] for e in report["tests"]}.items() <= \
        report["outcomes"].items()
