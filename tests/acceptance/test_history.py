"""The release history (SPEC section 10, issue 22 item 6): ``--reliable-history DIR`` keeps each
run's JSON report (with a store, in the store too), and ``python -m pytest_reliable history``
draws per test, across the kept runs in time order, the canonical score with its interval and the
format min/median/max, marking the runs whose gate failed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.report.history import render_history
from pytest_reliable.store.reports import git_commit, keep_in_dir, kept_report
from tests.acceptance.helpers import write_project
from tests.acceptance.test_html_report import chromium_or_skip, console_problems, run_chromium


def history(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_reliable", "history", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def kept(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))]


def commit_all(path: Path) -> str | None:
    """Make ``path`` a git repository with one commit; None without git."""
    if shutil.which("git") is None:
        return None
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c",
           "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "gate"]):
        subprocess.run([*git, *args], cwd=path, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_runs_are_kept_by_run_id_and_drawn_in_time_order_with_failed_runs_marked(
        pytester: pytest.Pytester) -> None:
    write_project(pytester)
    commit = commit_all(pytester.path)
    first = pytester.runpytest_subprocess("--reliable-history=hist", "--reliable-run-id=r1",
                                          "-p", "no:randomly")
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(["reliable history: run r1 kept in *hist*r1.json"])
    # The second run is sharded: two pytest sessions of one CI run id, the ini giving the DIR.
    pytester.makeini("[pytest]\nreliable_history = hist\n")
    for test in ("test_passes", "test_fails_on_worst_format"):
        shard = pytester.runpytest_subprocess(f"test_gate.py::{test}", "-p", "no:randomly",
                                              "--reliable-run-id=r2")
        assert shard.ret in (0, 1)
    kept_runs = kept(pytester.path / "hist")
    assert sorted(p.name for p in (pytester.path / "hist").glob("*.json")) == \
        ["r1.json", "r2.2.json", "r2.json"]
    assert {k["run_id"] for k in kept_runs} == {"r1", "r2"}
    assert len({k["part"] for k in kept_runs}) == 3  # each session its own part
    for report in kept_runs:
        assert report["git_commit"] == commit
        assert report["model"] == "scripted-format-sensitive" and report["created"]
        assert report["schema_version"] == 1 and report["tests"]

    page_path = pytester.path / "page.html"
    done = history(pytester.path, "hist", "-o", str(page_path))
    assert done.returncode == 0, done.stderr
    assert "2 runs from hist, 2 with a failed gate" in done.stdout
    page = page_path.read_text(encoding="utf-8")
    # Two runs (r2's two parts read as one run with both tests), newest first in the table.
    assert re.findall(r'<tr class="(\w+-run)"><td>(r\d)</td>', page) == \
        [("failed-run", "r2"), ("failed-run", "r1")]
    # Per test: a chart with one column per run; the failing test's two runs are marked.
    sections = page.split('<section class="history"')[1:]
    assert len(sections) == 2
    failing = next(s for s in sections if "test_fails_on_worst_format" in s)
    passing = next(s for s in sections if "test_passes" in s)
    assert failing.count('class="failed-run"') == 2 and failing.count("failed-mark") == 2
    assert passing.count('class="failed-run"') == 0
    assert "the gate failed in 2" in failing and "the gate failed in 0" in passing
    # The numbers are the reports' own: the passing test's canonical and format range.
    entry = next(e for k in kept_runs for e in k["tests"] if e["nodeid"].endswith("test_passes"))
    formats = entry["formats"]
    assert f"{formats['min']:.3f}/{formats['median']:.3f}/{formats['max']:.3f}" in passing
    canonical = entry["canonical"]
    assert (f"{canonical['score']:.3f} [{canonical['wilson_low']:.3f}, "
            f"{canonical['wilson_high']:.3f}]") in passing
    if commit:
        assert commit[:12] in page


def test_a_conftest_names_the_commit_ci_knows_and_git_is_not_asked(
        pytester: pytest.Pytester) -> None:
    """`pytest_reliable_generate_commit_info` (issue 29 item 5, as pytest-benchmark's hook): the
    kept report names the commit the hook returns, here in a directory that is no repository."""
    write_project(pytester)
    pytester.makeconftest(pytester.path.joinpath("conftest.py").read_text(encoding="utf-8") + (
        "\n\ndef pytest_reliable_generate_commit_info(config):\n"
        "    return 'c0ffee' * 6 + 'c0ff'\n"))
    done = pytester.runpytest_subprocess("--reliable-history=hist", "--reliable-run-id=r1",
                                         "-p", "no:randomly", "test_gate.py::test_passes")
    done.assert_outcomes(passed=1)
    [report] = kept(pytester.path / "hist")
    assert report["git_commit"] == "c0ffee" * 6 + "c0ff"


def test_without_git_the_commit_is_null_and_nothing_fails(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None
    assert git_commit(tmp_path / "missing") is None


def test_bad_history_inputs_exit_2_naming_the_problem(tmp_path: Path) -> None:
    neither = history(tmp_path, "-o", "page.html")
    assert neither.returncode == 2 and "DIR" in neither.stderr and "--store" in neither.stderr
    (tmp_path / "empty").mkdir()
    empty = history(tmp_path, "empty", "-o", "page.html")
    assert empty.returncode == 2 and "no kept runs in empty" in empty.stderr
    (tmp_path / "empty" / "notes.json").write_text("{oops", encoding="utf-8")
    broken = history(tmp_path, "empty", "-o", "page.html")
    assert broken.returncode == 2 and "notes.json" in broken.stderr
    assert "no kept runs in empty (1 skipped: see above)" in broken.stderr
    assert "Traceback" not in broken.stderr + empty.stderr + neither.stderr
    missing = history(tmp_path, "nowhere", "-o", "page.html")
    assert missing.returncode == 2 and "nowhere is not a directory" in missing.stderr
    assert not (tmp_path / "page.html").exists()


def test_an_unwritable_history_directory_stops_the_run_at_start(
        pytester: pytest.Pytester) -> None:
    write_project(pytester)
    (pytester.path / "taken").write_text("a file, not a directory", encoding="utf-8")
    result = pytester.runpytest_subprocess("--reliable-history=taken", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = "*--reliable-history=*taken: *taken is a file: give a directory (it is made when*"
    result.stderr.fnmatch_lines([said])


def attribute_names(page: str) -> set[str]:
    names: set[str] = set()

    class Attributes(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            names.update(name for name, _ in attrs)

    Attributes().feed(page)
    return names


HOSTILE = '</script><img src=x onerror="document.title=\'pwned\'"> \'quoted\' & "double"'


def hostile_reports() -> list[dict[str, Any]]:
    """Kept reports whose test names, run id, model and commit carry markup and quotes."""
    entry = {
        "nodeid": f"test_gate.py::test_x[{HOSTILE}]", "kind": "reliable", "verdict": "failed",
        "model": HOSTILE, "canonical": {"score": 0.4, "wilson_low": 0.2, "wilson_high": 0.6},
        "formats": {"min": 0.1, "median": 0.4, "max": 0.7, "grouping": "formats"},
    }
    reports = []
    for day, verdict in ((1, "passed"), (2, "failed"), (3, "error")):
        report = {"schema_version": 1, "created": f"2026-01-0{day}T00:00:00+00:00",
                  "seed": 0, "model": HOSTILE, "space_hash": None,
                  "tests": [dict(entry, verdict=verdict,
                                 canonical=None if verdict == "error" else entry["canonical"])]}
        reports.append(kept_report(report, run_id=f"{HOSTILE}-{day}", commit=f"{day}'\"<b>"))
    return reports


def test_a_hostile_history_page_runs_nothing_in_a_real_browser(tmp_path: Path) -> None:
    page = render_history(hostile_reports())
    assert "<img" not in page and "<script" not in page.lower() and "<b>" not in page
    assert "&lt;/script&gt;&lt;img" in page
    # Self-contained, and no handler: no element has an attribute that loads, links or runs.
    assert not attribute_names(page) & {"src", "href", "srcset", "action"}
    assert not {name for name in attribute_names(page) if name.startswith("on")}
    assert page.count('class="failed-mark"') == 2  # the failed and the errored run
    path = tmp_path / "history.html"
    path.write_text(page, encoding="utf-8")

    browser = chromium_or_skip()
    dumped = run_chromium(browser, path, tmp_path / "profile", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert "<title>pytest-reliable release history: 3 runs, 2 failed</title>" in dom
    assert "pwned" not in dom.split("<body", 1)[0]  # the title was not rewritten by a script
    assert not re.search(r"<img[^>]*onerror", dom)
    assert dom.count('class="failed-run"') == 2 + 2  # two chart columns, two table rows
    assert "test_x[" in dom
    assert console_problems(dumped.stderr) == []


def test_with_a_store_the_runs_are_kept_in_the_store_and_drawn_from_it(
        pytester: pytest.Pytester, postgres_url: str) -> None:
    write_project(pytester)
    for run_id in ("s1", "s2"):
        result = pytester.runpytest_subprocess(
            f"--reliable-store={postgres_url}", "--reliable-history=hist",
            f"--reliable-run-id={run_id}", "-p", "no:randomly")
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines([f"reliable history: run {run_id} kept in *and in the store"])
    shutil.rmtree(pytester.path / "hist")  # the store alone must give the history
    page_path = pytester.path / "page.html"
    done = history(pytester.path, "--store", postgres_url, "-o", str(page_path))
    assert done.returncode == 0, done.stderr
    assert "2 runs from the store, 2 with a failed gate" in done.stdout
    page = page_path.read_text(encoding="utf-8")
    assert re.findall(r'<tr class="\w+-run"><td>(s\d)</td>', page) == ["s2", "s1"]
    assert "test_passes" in page and "test_fails_on_worst_format" in page
    password = postgres_url.split(":")[2].split("@")[0]
    assert password not in done.stdout + done.stderr + page


def test_a_stray_json_in_the_history_directory_is_skipped_with_a_note(tmp_path: Path) -> None:
    hist = tmp_path / "hist"
    for report in hostile_reports()[:2]:
        keep_in_dir(hist, report)
    (hist / "package.json").write_text('{"name": "web", "version": "1.0.0"}', encoding="utf-8")
    (hist / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    done = history(tmp_path, "hist", "-o", "page.html")
    assert done.returncode == 0, done.stderr
    assert "wrote page.html: 2 runs from hist, 1 with a failed gate (2 kept reports skipped: " \
        "not reports)" in done.stdout
    notes = done.stderr.splitlines()
    assert [note.split(" is ")[0].split(" nests ")[0] for note in notes] == [
        f"python -m pytest_reliable history: note: skipped hist/{name}"
        for name in ("deep.json", "package.json")], done.stderr
    assert "Traceback" not in done.stderr
    # The page's -o may not name a kept report (it would be read as one next time).
    over = history(tmp_path, "hist", "-o", str(hist / "package.json"))
    assert over.returncode == 2 and "is also the input" in over.stderr


def test_a_crafted_row_in_the_store_is_skipped_with_a_note(tmp_path: Path,
                                                         postgres_url: str) -> None:
    from pytest_reliable.store.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    try:
        good = json.dumps(hostile_reports()[1])
        store.keep_report("r1", "p1", "2026-01-02T00:00:00+00:00", "m", None, good)
        store.keep_report("crafted", "p2", None, None, None, "[" * 100_000 + "]" * 100_000)
        store.keep_report("other", "p3", None, None, None, '{"tests": "none"}')
    finally:
        store.close()
    done = history(tmp_path, "--store", postgres_url, "-o", "page.html")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert "1 runs from the store, 1 with a failed gate (2 kept reports skipped" in done.stdout
    assert "note: skipped kept report 2 in the store at" in done.stderr
    assert "nests arrays or objects more than 100 deep" in done.stderr
    assert "note: skipped kept report 3 in the store at" in done.stderr
    assert "reliable_reports" in done.stderr
    password = postgres_url.split(":")[2].split("@")[0]
    assert password not in done.stdout + done.stderr
