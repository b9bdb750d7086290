"""The HTML report page (`report.html`): built from the JSON report alone, every text escaped,
any subset of fields rendered, and the rebuild command `python -m pytest_reliable html`."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_reliable import stats
from pytest_reliable.__main__ import main
from pytest_reliable.report.html import (
    CSS,
    LONG_TEXT_CHARS,
    entry_fragment,
    render_html,
    summary_fragment,
    write_html,
)
from pytest_reliable.report.markdown import markdown_summary

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
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


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
    from pytest_reliable.report.model import json_safe

    return dict(json_safe(report))


def test_the_n_star_curve_is_stats_min_reliable_n_of_the_resampling_scores() -> None:
    report = full_report()
    entry = report["tests"][0]
    result = stats.min_reliable_n(entry["resampling_scores"], eps=entry["eps"],
                                  delta=entry["delta"])
    page = render_html({**report, "tests": [entry]})
    section = page[page.index("<h3>n* convergence"):page.index("<h3>Against the baseline")]
    curves = re.findall(r'<polyline points="([^"]+)"', section)
    assert len(curves) == 2
    assert all(len(c.split()) == len(result.mean_upper) for c in curves)
    assert f"n* = {result.n_star}" in section
    # Without per-resampling scores there is no curve, and the page says why.
    del entry["resampling_scores"]
    page = render_html({**report, "tests": [entry]})
    assert "No curve: it needs the per-resampling scores" in page


def test_a_not_reliable_n_star_says_so_with_the_eps_it_vouches_for() -> None:
    page = render_html(full_report())
    assert ('<span class="bad">not reliable at (eps, delta)</span>: the resamplings vouch for '
            "eps = 0.0036") in page


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
    minimal = {"tests": [
        {"nodeid": "t.py::test_bare", "kind": "reliable", "verdict": "passed"},
        {"nodeid": "t.py::test_inv", "kind": "invariance", "verdict": "failed"},
        {"nodeid": "t.py::test_odd", "kind": "something-new", "verdict": "skipped"},
        {"verdict": "error"},
    ]}
    page = render_html(minimal)
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
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "page.html").exists()
