"""The HTML report page (`report.html`): built from the JSON report alone, every text escaped,
any subset of fields rendered, and the rebuild command `python -m pytest_reliable html`."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable import Dataset, MultipleChoice, Space, stats, text_model
from pytest_reliable.cli.main import main
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.report.html import (
    CSS,
    LONG_TEXT_CHARS,
    entry_fragment,
    render_html,
    summary_fragment,
    write_html,
)
from pytest_reliable.report.markdown import markdown_summary
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.schema.entries import ReliableEntry, json_safe
from pytest_reliable.schema.load import check_report, load_report

FIXTURE = Path(__file__).parent / "data" / "report_full.json"
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "div", "span", "a",
    "b", "br", "code", "pre", "table", "thead", "tbody", "tr", "th", "td", "details", "summary",
    "dl", "dt", "dd", "svg", "line", "rect", "circle", "polyline", "text",
}
HOSTILE = [
    "<script>document.title='PWNED'</script>",
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">",
    "</table></pre></details></svg><b>",
    "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x00\x08",
    "lone \ud800 surrogate \udfff",
    "\" onmouseover=\"alert(1)\" x=\"",
]


def full_report() -> dict[str, Any]:
    """The fixture as the viewers get it: read by `load_report` (it was written by an earlier
    version, so reading completes its entries)."""
    return dict(load_report(FIXTURE))


class TagCollector(HTMLParser):
    """Every start tag and attribute as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.open_count: dict[str, int] = {}
        self.close_count: dict[str, int] = {}
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self.open_count[tag] = self.open_count.get(tag, 0) + 1
        self._in_title = tag == "title"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        self.close_count[tag] = self.close_count.get(tag, 0) + 1
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def parse(page: str) -> TagCollector:
    collector = TagCollector()
    collector.feed(page)
    collector.close()
    return collector


def assert_inert(page: str) -> TagCollector:
    """Only the tags the page itself writes, no event handler, balanced containers."""
    parsed = parse(page)
    assert {tag for tag, _ in parsed.tags} <= ALLOWED_TAGS
    for tag, attrs in parsed.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            assert name not in ("src", "srcdoc", "data-pwned"), (tag, name)
            if name == "href":
                assert value is not None and not value.lower().startswith(("javascript", "data"))
    for tag in ("table", "pre", "details", "svg", "dl", "div"):
        assert parsed.open_count.get(tag, 0) == parsed.close_count.get(tag, 0), tag
    assert "\x1b" not in page and "\x00" not in page
    page.encode("utf-8")  # no lone surrogate left: the page can be written
    return parsed


def test_the_page_shows_the_decision_first_then_every_section() -> None:
    page = render_html(full_report())
    summary, _, details = page.partition("<h2>Tests</h2>")
    assert "Release blocked: 3 of 5 tests did not pass." in summary
    # Blocking tests first, each with why: threshold, observed, bound, limit, policy.
    assert summary.index("test_bbh_date_understanding") < summary.index("test_basic_arithmetic")
    assert "<b>min_worst</b>: observed 0.460, bound 0.369, limit 0.500 (pass-on-evidence)" in summary
    assert "<b>max_flip_rate</b>: observed 0.080, bound 0.151, limit 0.050" in summary
    assert "no statistics: the evaluation did not complete" in summary
    for heading in ("Thresholds", "Score distributions", "Formats", "Orders",
                    "Per-dimension marginals", "n* convergence", "Against the baseline",
                    "Worst variant", "Failing cases (first 2)"):
        assert f"<h3>{heading}" in details, heading
    assert "IV. Him and me went." in details and "Which came frist" in details
    assert page.count("<svg") >= 10
    assert_inert(page)


def test_few_blocking_tests_start_open_passing_ones_closed() -> None:
    page = render_html(full_report())
    opened = re.findall(r'<details class="test (\w+)" id="test-\d+"( open)?>', page)
    assert opened == [("failed", " open"), ("passed", ""), ("failed", " open"),
                      ("passed", ""), ("error", " open")]


def test_the_page_forbids_scripts_and_loads_nothing() -> None:
    page = render_html(full_report())
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp is not None
    policy = csp.group(1)
    assert "default-src 'none'" in policy and "script-src 'none'" in policy
    style_hash = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
    assert f"style-src 'sha256-{style_hash}'" in policy
    assert f"<style>{CSS}</style>" in page  # the hash is of exactly the inline style
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "@import" not in page and "url(" not in page
    assert len(page.encode()) < 200_000


def test_the_page_is_a_function_of_the_json_alone() -> None:
    report = full_report()
    page = render_html(report)
    # In-run dicts carry tuples and NaN; the page equals the one rebuilt from the written JSON.
    in_run = copy.deepcopy(report)
    in_run["tests"][0]["canonical"]["interval_method"] = ("Wilson 95%")
    in_run["tests"][3]["interval"] = tuple(in_run["tests"][3]["interval"])
    in_run["tests"][1]["std"] = float("nan")
    rebuilt = json.loads(json.dumps(json_round(in_run)))
    assert render_html(in_run) == render_html(rebuilt)
    assert render_html(report) == page  # deterministic


def json_round(report: dict[str, Any]) -> dict[str, Any]:
    return dict(json_safe(report))


def n_star_polylines(page: str) -> list[list[tuple[float, float]]]:
    section = page[page.index("<h3>n* convergence"):]
    section = section[:section.index("</svg>")] if "</svg>" in section else ""
    return [[tuple(map(float, point.split(","))) for point in found.split()]  # type: ignore[misc]
            for found in re.findall(r'<polyline points="([^"]+)"', section)]


def test_the_page_draws_the_stored_n_star_curve_and_computes_none() -> None:
    report = full_report()
    entry = report["tests"][0]
    curve = entry["n_star_curve"]
    assert curve["computed_from"] == "resamplings" and curve["method"] == "paper"
    # The stored curve is the one the run computed from its resamplings (summary.summarize).
    result = stats.min_reliable_n(entry["resampling_scores"], eps=entry["eps"],
                                  delta=entry["delta"])
    assert curve["mean_upper"] == list(result.mean_upper)
    assert curve["var_upper"] == list(result.var_upper)
    page = render_html({**report, "tests": [entry]})
    lines = n_star_polylines(page)
    assert [len(line) for line in lines] == [len(curve["mean_upper"]), len(curve["var_upper"])]
    assert f"n* = {entry['n_star']}" in page
    assert "this test's 40 per-resampling scores (paper)" in page
    # The page draws what is stored, not a recomputation: without the scores the curve stays,
    # and a changed curve is drawn changed.
    entry["resampling_scores"] = None
    assert n_star_polylines(render_html({**report, "tests": [entry]})) == lines
    curve["mean_upper"] = [0.1] * len(curve["mean_upper"])
    flat = n_star_polylines(render_html({**report, "tests": [entry]}))[0]
    assert len({y for _, y in flat}) == 1 and flat != lines[0]


@pytest.mark.parametrize(("source", "why"), [
    ("store", "n* came from the n* store (an earlier run's pilot), which keeps n*, not the "
              "pilot's curves"),
    ("resamplings", "the report carries no n* curve"),
])
def test_without_a_stored_curve_the_page_says_why(source: str, why: str) -> None:
    report = full_report()
    entry = report["tests"][0]
    entry.update(n_star_curve=None, n_star_source=source)
    page = render_html({**report, "tests": [entry]})
    assert f"No curve: {why}" in page
    assert n_star_polylines(page) == []
    assert_inert(page)


def right_or_unsure(prompt: str) -> str:
    """The right option's label on about 60% of the prompts (fixed per prompt), else "?"."""
    right = next((line.strip()[1] for line in prompt.splitlines() if "right" in line), "?")
    return right if hashlib.sha256(prompt.encode()).digest()[0] < 150 else "?"


def n_star_session(tmp_path: Path, n: int | str, method: str = "paper") -> ReliableSession:
    space = Space.from_mapping("fmt", {"wrapper": ["({})", "[{}]", "{}."],
                                       "casing": ["identity", "upper", "lower"]})
    settings = Settings(rootdir=tmp_path, no_cache=True, n=n, pilot_n=20, n_method=method,
                        store_dir=tmp_path / f"n_star_{method}")
    return ReliableSession(settings, {"fmt": space})


def run_entry(session: ReliableSession) -> ReliableEntry:
    data = Dataset.from_records([
        {"question": f"Question {i}?", "choices": ["wrong", "right", "other"], "answer": "right"}
        for i in range(8)])
    report = session.run_reliable("t.py::t", data, MultipleChoice(),
                                  ReliableSpec(space="fmt", eps=0.05), text_model(
                                      right_or_unsure, id="m"))
    return report.entry("passed")


def first_crossing(curve: list[float], eps: float) -> int:
    return next(n for n, value in enumerate(curve, start=1) if value <= eps + 1e-12)


def test_under_n_auto_the_curve_is_the_pilots_that_gave_n_star(tmp_path: Path) -> None:
    # paper: the pilot's 20 scores gave n* < 20; the gate is the pilot's first n* resamplings.
    entry = run_entry(n_star_session(tmp_path, "auto"))
    curve = entry["n_star_curve"]
    assert curve is not None and entry["n_star"] is not None and entry["n_resamplings"]
    assert (entry["n_star_source"], curve["computed_from"], curve["method"]) == (
        "pilot", "pilot", "paper")
    assert curve["n_scores"] == len(curve["mean_upper"]) == 20 > entry["n_resamplings"]
    n_star = max(first_crossing(curve["mean_upper"], 0.05), first_crossing(curve["var_upper"], 0.05))
    assert n_star == entry["n_star"] == entry["n_resamplings"]
    # The same 20 resamplings run with a fixed n store the same curve (plans are prefix-consistent):
    # the pilot's, not one over the gate's n* resamplings (what the page drew before).
    fixed = run_entry(n_star_session(tmp_path, 20))
    assert fixed["n_star_curve"] is not None
    assert fixed["n_star_curve"]["computed_from"] == "resamplings"
    assert fixed["n_star_curve"]["mean_upper"] == curve["mean_upper"]
    assert fixed["n_star_curve"]["var_upper"] == curve["var_upper"]
    assert entry["resampling_scores"] == fixed["resampling_scores"][:n_star]
    page = render_html({"tests": [entry]})
    assert [len(line) for line in n_star_polylines(page)] == [20, 20]
    assert f"n* = {n_star}" in page and "the pilot's 20 per-resampling scores" in page
    # The next run reads n* from the store: no pilot ran, so no curve, and the page says so.
    stored = run_entry(n_star_session(tmp_path, "auto"))
    assert (stored["n_star_source"], stored["n_star_curve"]) == ("store", None)
    assert "No curve: n* came from the n* store" in render_html({"tests": [stored]})


def test_under_n_auto_bootstrap_the_curve_is_the_pilots_bootstrap_curve(tmp_path: Path) -> None:
    entry = run_entry(n_star_session(tmp_path, "auto", method="bootstrap"))
    curve = entry["n_star_curve"]
    assert curve is not None and entry["resampling_scores"] is not None
    assert (curve["computed_from"], curve["method"], curve["n_scores"]) == (
        "pilot", "bootstrap", 20)
    # n* > 20 here: the gate extended the pilot, so the pilot is the gate's first 20 resamplings.
    assert entry["n_star"] is not None and entry["n_star"] > 20
    pilot = stats.min_reliable_n(entry["resampling_scores"][:20], eps=0.05, delta=0.1,
                                 method="bootstrap")
    assert curve["mean_upper"] == list(pilot.mean_upper)
    assert curve["var_upper"] == list(pilot.var_upper)
    assert pilot.n_star == entry["n_star"]


def test_a_not_reliable_n_star_says_so_with_the_eps_it_vouches_for() -> None:
    page = render_html(full_report())
    assert ('<span class="bad">not reliable at (eps, delta)</span>: the resamplings vouch for '
            "eps = 0.0036") in page


def test_an_n_star_from_a_small_bootstrap_pilot_says_what_it_can_miss() -> None:
    report = full_report()
    entry = report["tests"][0]
    assert "small pilot" not in render_html(report)
    entry.update(n_star_source="pilot", n_star_method="bootstrap", pilot_n=10)
    page = render_html(report)
    assert ('<span class="bad">small pilot</span>: n* = 18 from a bootstrap pilot of 10 '
            "resamplings: a pilot under 30 can miss a rare failure mode") in page


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_anywhere_is_escaped(text: str) -> None:
    report = full_report()
    reliable, _, checklist = report["tests"][0], report["tests"][1], report["tests"][2]
    reliable["nodeid"] = f"tests/test_x.py::test_[{text}]"
    reliable["model"] = text
    reliable["worst_variant"].update(prompt=text, answer=text, description=text, key=text)
    reliable["formats"]["per_variant"][text] = {"score": 0.5, "description": text, "cells": 3}
    reliable["dimensions"][text] = {text: 0.5}
    reliable["thresholds"][1]["method"] = text
    reliable["message"] = text
    reliable["baseline"]["groups"][text] = {"estimate": -0.1, "description": text}
    checklist["failures"][0].update(original=text, perturbed=text, before=text, after=text)
    report["model"] = text
    parsed = assert_inert(render_html(report))
    assert "PWNED" not in parsed.title
    assert_inert(summary_fragment(report, "page.html"))
    assert_inert(entry_fragment(reliable))


def test_a_megabyte_answer_is_cut_with_a_note() -> None:
    report = full_report()
    report["tests"][0]["worst_variant"]["answer"] = "<b>" * 350_000
    page = render_html(report)
    assert len(page.encode()) < 200_000
    hidden = 350_000 * 3 - LONG_TEXT_CHARS
    assert f"[{hidden:,} more characters not shown; the JSON report has the full text]" in page
    assert_inert(page)


def test_missing_fields_read_not_reported() -> None:
    minimal = {"schema_version": 1, "tests": [
        {"nodeid": "t.py::test_bare", "kind": "reliable", "verdict": "passed"},
        {"nodeid": "t.py::test_inv", "kind": "invariance", "verdict": "failed"},
        {"nodeid": "t.py::test_odd", "kind": "something-new", "verdict": "skipped"},
        {"verdict": "error"},
    ]}
    page = render_html(check_report(minimal, "minimal.json"))  # as the page gets a file
    assert page.count("not reported") >= 20
    assert "test_bare" in page and "test_odd" in page
    assert_inert(page)
    assert "No pytest-reliable tests" in render_html({})


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None)
@given(replacements=st.dictionaries(st.sampled_from(sorted(full_report()["tests"][0])),
                                    JSON_VALUES, max_size=6),
       index=st.integers(0, 4))
def test_any_value_in_any_field_renders_an_inert_page(replacements: dict[str, Any],
                                                      index: int) -> None:
    report = full_report()
    report["tests"][index].update(replacements)
    assert_inert(render_html(report))


def test_markdown_summary_mentions_the_html_file() -> None:
    report = full_report()
    assert "HTML report" not in markdown_summary(report)
    assert "written to `out/gate.html`" in markdown_summary(report, html_path="out/gate.html")


def test_the_rebuild_command_writes_the_same_page(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    direct = tmp_path / "direct.html"
    write_html(full_report(), direct)
    assert main(["html", str(FIXTURE), "-o", str(tmp_path / "rebuilt.html")]) == 0
    assert (tmp_path / "rebuilt.html").read_bytes() == direct.read_bytes()
    assert "wrote" in capsys.readouterr().out
    copy_path = tmp_path / "gate.json"
    copy_path.write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["html", str(copy_path)]) == 0  # default: next to the JSON
    assert (tmp_path / "gate.html").read_bytes() == direct.read_bytes()


@pytest.mark.parametrize(("content", "expected"), [
    (None, "does not exist: give the file that --reliable-report PATH.json wrote"),
    ('{"tests": [', "is not valid JSON (line 1, column 12"),
    ('[1, 2]', "is JSON but not a pytest-reliable report (it has no 'tests' list)"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    ('{"schema_version": 99, "pytest_reliable_version": "9.1.0", "tests": []}',
     "has schema_version 99, written by pytest-reliable 9.1.0; this pytest-reliable (0.1.0) "
     "reads schema_version 1: upgrade pytest-reliable (python -m pip install -U "
     "pytest-reliable) and rebuild the page with it."),
    ('{"schema_version": "1", "tests": []}',
     'has schema_version "1", which no pytest-reliable writes (this one reads 1)'),
    ('{"schema_version": true, "tests": []}', "has schema_version true, which no"),
    ('{"tests": []}', "has no schema_version, so it is not a report pytest-reliable wrote"),
    ('{"schema_version": 1, "tests": "all passed"}',
     "'tests' is a string, not a list of test entries"),
    ('{"schema_version": 1, "tests": [{"nodeid": "t"}, 7]}',
     "tests[1] is an integer, not an object (one test's entry)"),
    ('{"schema_version": 1, "seed": "zero", "tests": []}', "'seed' is a string, not an integer"),
    ('{"schema_version": 1, "tests": []}'.replace("[]", "[" * 100_000 + "]" * 100_000),
     "nests arrays or objects more than 100 deep (a report nests about 6 deep)"),
    ('{"schema_version": 1, "tests": [{"nodeid": "t", "baseline": %s}]}'
     % ("[" * 500 + "]" * 500), "nests arrays or objects more than 100 deep"),
    ('{"schema_version": 1, "seed": 1%s, "tests": []}' % ("0" * 5000), "is not JSON this reader"),
])
def test_the_rebuild_command_explains_a_bad_report(tmp_path: Path, content: Any, expected: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exited:
        main(["html", str(path), "-o", str(tmp_path / "page.html")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and str(path) in err and "Traceback" not in err
    assert not (tmp_path / "page.html").exists()


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


@pytest.mark.parametrize(("content", "expected"), [
    ("[" * 100_000 + "]" * 100_000, "nests arrays or objects more than 100 deep"),
    ('{"schema_version": 99, "tests": []}', "has schema_version 99, written by a newer "
                                            "pytest-reliable"),
])
def test_the_rebuild_command_stops_cleanly_on_a_hostile_report(tmp_path: Path, content: str,
                                                               expected: str) -> None:
    # Issue 20, hostile items 10 and 13, as a user meets them: exit 2, the file named, no trace.
    path = tmp_path / "hostile.json"
    path.write_text(content)
    done = run_module("-m", "pytest_reliable", "html", str(path))
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and str(path) in done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert not path.with_suffix(".html").exists()


def imported_modules(importtime_stderr: str) -> set[str]:
    """The modules a ``python -X importtime`` run imported (its stderr's last column)."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime_stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


VIEWER_OUTSIDE_REPORT = {"pytest_reliable", "pytest_reliable.__main__", "pytest_reliable.cli",
                         "pytest_reliable.cli.main", "pytest_reliable.files"}
"""What the viewer may load from the package besides ``pytest_reliable.report`` and the report's
schema (``pytest_reliable.schema``)."""
HEAVY = {"numpy", "scipy", "statsmodels", "pytest"}


def assert_only_the_viewer(modules: set[str]) -> None:
    assert "pytest_reliable.report.html" in modules
    assert not modules & HEAVY, sorted(modules & HEAVY)
    ours = {m for m in modules if m.split(".")[0] == "pytest_reliable"}
    assert {m for m in ours
            if not m.startswith(("pytest_reliable.report", "pytest_reliable.schema"))} <= \
        VIEWER_OUTSIDE_REPORT, sorted(ours)


def test_the_viewer_imports_no_numpy_nor_any_statistics() -> None:
    # DESIGN: report/ is a pure viewer, importable without numpy (a saved JSON renders anywhere).
    modules = [f"pytest_reliable.report.{p.stem}" for p in
               (Path(__file__).resolve().parent.parent / "pytest_reliable" / "report").glob("*.py")
               if p.stem != "__init__"]
    done = run_module("-X", "importtime", "-c", "; ".join(f"import {m}" for m in modules))
    assert done.returncode == 0, done.stderr
    assert_only_the_viewer(imported_modules(done.stderr))


def test_rebuilding_the_page_from_the_cli_imports_no_numpy(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    done = run_module("-X", "importtime", "-m", "pytest_reliable", "html", str(FIXTURE), "-o",
                      str(page))
    assert done.returncode == 0, done.stderr
    assert_only_the_viewer(imported_modules(done.stderr))
    assert page.read_text(encoding="utf-8") == render_html(full_report())
