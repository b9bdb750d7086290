"""``--reliable-html PATH.html`` as a user runs it, and the page in a real browser.

The browser is headless Chromium from Debian's ``chromium`` package with JavaScript on. Where it is
absent the browser tests skip with the reason, except under CI (env ``CI``), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.helpers import by_test, run_json, write_project

HOSTILE_CONFTEST = r'''
import pytest

from pytest_reliable import text_model

HOSTILE = (
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
    "<script>document.title='PWNED'</script></table></pre></details>"
    "\x1b[31mred\x1b[0m"
)


def hostile(prompt: str) -> str:
    return HOSTILE + "A" * {padding}


@pytest.fixture
def reliable_model():
    return text_model(hostile, id="<script>document.title='PWNED'</script>")
'''

HOSTILE_TESTS = '''
import pytest

from pytest_reliable import Classification, Dataset, MultipleChoice

DATA = Dataset.from_records([
    {{"question": "<script>document.title='PWNED'</script> Which one?",
      "choices": ["<img src=x onerror=alert(1)>", "</table> two", "three"], "answer": 0}},
    {{"question": "Second <b>question</b>?", "choices": ["a", "b", "c"], "answer": 1}},
])


@pytest.mark.reliable(space="wrappers", n=2, mode="fixed", min_score=0.9)
def test_hostile_gate(reliable):
    reliable.evaluate(DATA, MultipleChoice())


@pytest.mark.mft(min_pass=0.9)
def test_hostile_mft(reliable):
    reliable.mft(Dataset.from_records([
        {{"text": "<script>document.title='PWNED'</script>", "label": "positive"}},
        {{"text": "fine", "label": "negative"}},
    ]), Classification(labels=["positive", "negative"], template="Review: {{{{text}}}}"))
'''


def write_hostile_project(pytester: pytest.Pytester, padding: int = 0) -> None:
    write_project(pytester, test_file=HOSTILE_TESTS,
                  conftest=HOSTILE_CONFTEST.replace("{padding}", str(padding)))


def test_the_page_is_written_and_rebuilds_byte_for_byte_from_the_json(
        pytester: pytest.Pytester) -> None:
    write_project(pytester)
    page = pytester.path / "out" / "gate.html"
    result, report = run_json(pytester, f"--reliable-html={page}", "--reliable-no-cache")
    result.assert_outcomes(passed=1, failed=1)
    text = page.read_text(encoding="utf-8")
    for name, verdict in (("test_passes", "passed"), ("test_fails_on_worst_format", "failed")):
        assert name in text
        assert by_test(report)[name]["verdict"] == verdict
    assert "Release blocked: 1 of 2 tests did not pass." in text
    assert "<b>min_worst</b>: observed 0.000" in text
    rebuilt = pytester.path / "rebuilt.html"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_reliable", "html", str(pytester.path / "report.json"),
         "-o", str(rebuilt)], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert rebuilt.read_bytes() == page.read_bytes()


def test_the_page_needs_no_json_report(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result = pytester.runpytest_subprocess("--reliable-html=page.html", "--reliable-no-cache",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    assert "test_fails_on_worst_format" in (pytester.path / "page.html").read_text()
    assert not list(pytester.path.glob("*.json"))


@pytest.mark.parametrize("where", ["a_file.txt/page.html", "a_directory"])
def test_an_unwritable_path_stops_the_run_before_any_call(pytester: pytest.Pytester,
                                                          where: str) -> None:
    write_project(pytester)
    (pytester.path / "a_file.txt").write_text("not a directory")
    (pytester.path / "a_directory").mkdir()
    result = pytester.runpytest_subprocess(f"--reliable-html={where}", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--reliable-html=*"])
    assert "Traceback" not in result.stderr.str()
    assert "collected" not in result.stdout.str()


@pytest.mark.slow
def test_the_step_summary_mentions_the_page(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester)
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest_subprocess("--reliable-html=gate.html", "-p", "no:randomly")
    text = summary.read_text()
    assert "## pytest-reliable" in text and "`gate.html`" in text
    summary.unlink()
    pytester.runpytest_subprocess("-p", "no:randomly")
    assert "HTML report" not in summary.read_text()


def test_a_hostile_model_breaks_nothing_in_the_page(pytester: pytest.Pytester) -> None:
    write_hostile_project(pytester, padding=1_000_000)
    page = pytester.path / "page.html"
    result = pytester.runpytest_subprocess(f"--reliable-html={page}", "--reliable-no-cache",
                                           "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    text = page.read_text(encoding="utf-8")
    assert len(text.encode()) < 2_000_000 / 10
    assert "more characters not shown" in text
    assert "<script" not in text.lower() and "<img" not in text.lower()
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;&lt;/script&gt;" in text
    assert "\x1b" not in text


AUTO_TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})

@pytest.mark.reliable(space="wrappers", eps=0.05, delta=0.2)
def test_auto(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def test_under_n_auto_the_page_draws_the_pilots_curve_that_gave_n_star(
        pytester: pytest.Pytester) -> None:
    # The page used to recompute a curve from the gate's resamplings with the n* method: not the
    # curve n* was read from. Now the JSON stores the pilot's curves and the page draws them.
    write_project(pytester, test_file=AUTO_TEST)
    page = pytester.path / "page.html"
    _, report = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12",
                         f"--reliable-html={page}")
    entry = by_test(report)["test_auto"]
    curve = entry["n_star_curve"]
    assert entry["n_star_source"] == "pilot" and entry["n_star"] > 12  # the pilot was extended
    assert (curve["computed_from"], curve["method"], curve["n_scores"]) == (
        "pilot", "bootstrap", 12)
    from pytest_reliable import stats  # the check, not the page, computes

    pilot = stats.min_reliable_n(entry["resampling_scores"][:12], eps=0.05, delta=0.2,
                                 method="bootstrap")
    assert pilot.n_star == entry["n_star"]
    assert curve["mean_upper"] == list(pilot.mean_upper)
    assert curve["var_upper"] == list(pilot.var_upper)
    text = page.read_text(encoding="utf-8")
    section = text[text.index("<h3>n* convergence"):]
    drawn = re.findall(r'<polyline points="([^"]+)"', section[:section.index("</svg>")])
    assert [len(points.split()) for points in drawn] == [len(pilot.mean_upper)] * 2
    assert f"n* = {entry['n_star']}</text>" in section
    assert "the pilot's 12 per-resampling scores (bootstrap)" in section

    # The next run takes n* from the store: no pilot ran, so there is no curve to draw.
    again_page = pytester.path / "again.html"
    _, again = run_json(pytester, "--reliable-n=auto", "--reliable-pilot-n=12",
                        f"--reliable-html={again_page}", name="again.json")
    stored = by_test(again)["test_auto"]
    assert (stored["n_star_source"], stored["n_star_curve"]) == ("store", None)
    assert "No curve: n* came from the n* store" in again_page.read_text(encoding="utf-8")


# -- the real browser -----------------------------------------------------------------------
def chromium_or_skip() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed but CI is set: the real-browser test must run "
                        "in CI (.ci/run installs Debian's chromium package).")
        pytest.skip("needs a headless browser: install Debian's chromium package "
                    "(apt-get install -y chromium)")
    return found


def run_chromium(browser: str, page: Path, profile: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             "--window-size=1200,1600"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return subprocess.run([browser, *flags, *mode, page.as_uri()], capture_output=True,
                          text=True, timeout=120, check=False)


def console_problems(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line or "Uncaught" in line or "Refused to" in line]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_real_browser_renders_the_hostile_page_and_runs_nothing(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    browser = chromium_or_skip()
    write_hostile_project(pytester, padding=1000)
    page = pytester.path / "page.html"
    result = pytester.runpytest_subprocess(f"--reliable-html={page}", "--reliable-no-cache",
                                           "-p", "no:randomly")
    result.assert_outcomes(failed=2)

    dumped = run_chromium(browser, page, tmp_path / "profile-dom", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert "test_hostile_gate" in dom and "test_hostile_mft" in dom
    assert dom.count('class="badge failed"') >= 2
    # Text is serialised with "<" escaped, so a "<" starts a real element: none got the mark.
    assert "data-pwned" in dom and not re.search(r"<[^>]*data-pwned", dom)
    assert "<title>pytest-reliable: 2 of 2 tests blocking</title>" in dom
    assert "<script" not in dom.lower()
    assert console_problems(dumped.stderr) == []

    shot = tmp_path / "page.png"
    taken = run_chromium(browser, page, tmp_path / "profile-shot", f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert png_size(shot) == (1200, 1600)
    assert console_problems(taken.stderr) == []


def test_a_real_browser_renders_the_page_of_an_ordinary_run(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    browser = chromium_or_skip()
    write_project(pytester)
    page = pytester.path / "page.html"
    pytester.runpytest_subprocess(f"--reliable-html={page}", "-p", "no:randomly")
    dumped = run_chromium(browser, page, tmp_path / "profile", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert "test_passes" in dumped.stdout and 'class="badge passed"' in dumped.stdout
    assert "test_fails_on_worst_format" in dumped.stdout and "Question number" in dumped.stdout
    assert console_problems(dumped.stderr) == []


def test_pytest_html_users_get_the_reliable_summary(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_html", reason="pytest-html is in the test extra")
    write_project(pytester)
    result = pytester.runpytest_subprocess("--html=reports/tests.html", "--self-contained-html",
                                           "--reliable-html=gate.html", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    theirs = (pytester.path / "reports" / "tests.html").read_text(encoding="utf-8")
    assert '<div class="pytest-reliable"><h2>pytest-reliable</h2>' in theirs
    assert "Release blocked: 1 of 2 tests did not pass." in theirs
    assert '<a href="../gate.html#test-1">test_fails_on_worst_format</a>' in theirs
    # Each test's thresholds travel as a pytest-html extra (escaped into its JSON blob); the
    # passing test's min_score is in no summary line, only in its extra.
    assert "min_score" in theirs
