"""What a new user reads when a gate fails (issue 28 item 4 and its "Also", issue 32): the worst
group's prompt is one the model got wrong, unread answers are named as such, instances are
counted as the dataset counts them, test names stay apart in a narrow table, a space name that
differs in invisible ways says how, the n* page names its method, the progress line counts the
pilot, and a lock update says what it wrote."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_reliable import Dataset, MultipleChoice, text_model
from pytest_reliable.calls.requests import ProgressEvent
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.contract.settings import Settings
from pytest_reliable.report.format import fit_name, fit_names
from pytest_reliable.report.html import n_star_section, worst_variant_section
from pytest_reliable.run.session import ReliableSession, combined_progress
from pytest_reliable.schema.migrate import complete_entry
from pytest_reliable.space import Space, lock_update_summary, lookalike
from pytest_reliable.verdict.summary import summarize
from tests.test_gate import simulated

WRAPPERS = Space.from_mapping("wrappers", {"wrapper": ["({})", "{}."]})
RECORDS = [
    {"question": f"Question number {i}?", "choices": ["right answer", "wrong one", "wrong two"],
     "answer": 0}
    for i in range(6)
]


def letter(prompt: str, option: str) -> str:
    """The label of the first option whose text starts with ``option``."""
    found = re.search(rf"^\W*(\w)\W+\s*{option}", prompt, re.MULTILINE)
    assert found is not None, prompt
    return found.group(1)


def wrong_letter(prompt: str) -> str:
    return letter(prompt, "wrong")


def right_letter(prompt: str) -> str:
    return letter(prompt, "right")


def session(tmp_path: Path, **settings: Any) -> ReliableSession:
    return ReliableSession(Settings(rootdir=tmp_path, no_cache=True, **settings),
                           {"wrappers": WRAPPERS})


# -- the worst group shows a prompt the model got wrong ------------------------------------------
def test_the_worst_groups_example_is_a_cell_the_model_got_wrong() -> None:
    # Right on instance 0 whatever the prompt, wrong on the others under the last format: the
    # group's first cell (instance 0) is right, and it was the one shown.
    def accuracy(cell: Any) -> float:
        return 1.0 if cell.instance == 0 or cell.variant.value("wrapper") == "({})" else 0.0

    space = Space.from_mapping("w", {"wrapper": ["({})", "{}."]})
    matrix, space = simulated(4, "fixed", accuracy, seed=0, space=space)
    summary = summarize(matrix, space, mode="fixed", eps=0.01, delta=0.1)
    worst = summary.formats.worst
    assert worst is not None and worst.example is not None
    assert worst.example.score == 0.0 and worst.example.instance != 0
    first = next(c for c in matrix.resampling_cells() if c.variant.format_key == worst.key)
    assert first.instance == 0 and first.score == 1.0  # what was shown before


def test_the_failure_message_names_the_record_and_says_the_answer_was_wrong(
        tmp_path: Path) -> None:
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": f"Question number {i}?", "answer": 0,
                                        "choices": ["right answer", "wrong one"]}) + "\n"
                            for i in range(6)), encoding="utf-8")

    def right_on_the_first(prompt: str) -> str:
        if "({})".format("A") in prompt or "number 0?" in prompt:
            return right_letter(prompt)
        return wrong_letter(prompt)

    report = session(tmp_path).run_reliable(
        "t.py::t", Dataset.from_file(data), MultipleChoice(),
        ReliableSpec(space="wrappers", n=4, mode="fixed", min_worst=0.5),
        text_model(right_on_the_first, id="m"))
    message = report.failure_message()
    worst = report.entry("failed")["worst_variant"]
    assert worst is not None
    assert worst["answer_score"] == 0.0 and worst["instance"] >= 1
    assert worst["record"] == f"questions.jsonl, line {worst['instance'] + 1}"
    assert (f"an instance the model got wrong in this group: {worst['record']} (resampling "
            in message)
    assert "its rendered prompt for one instance:" in message
    assert re.search(r"the model answered: '\w' \(wrong\)", message)
    assert "instance 0" not in message


def test_every_answer_unread_says_so_instead_of_a_zero_score(tmp_path: Path) -> None:
    report = session(tmp_path).run_reliable(
        "t.py::t", RECORDS, MultipleChoice(),
        ReliableSpec(space="wrappers", n=3, mode="fixed", min_score=0.5, min_worst=0.5),
        text_model(lambda prompt: "I would rather not say", id="shy"))
    message = report.failure_message()
    total = 3 * 6 + 6
    assert (f"{total} of {total} answers could not be read: check the task's answer format"
            in message)
    assert "'I would rather not say'" in message
    lines = message.splitlines()
    # Said before the thresholds it explains; no worst group among groups that all scored 0.
    assert lines[1].startswith(f"  {total} of {total} answers could not be read")
    assert not any(line.startswith("  worst ") for line in lines)
    assert "an instance whose answer could not be read: records, record 1" in message
    assert "(unread (unparsed): scored 0)" in message


def test_some_answers_unread_are_counted_beside_the_thresholds(tmp_path: Path) -> None:
    def half_shy(prompt: str) -> str:
        return "no idea" if "number 1?" in prompt else wrong_letter(prompt)

    report = session(tmp_path).run_reliable(
        "t.py::t", RECORDS, MultipleChoice(),
        ReliableSpec(space="wrappers", n=3, mode="fixed", min_score=0.5),
        text_model(half_shy, id="half-shy"))
    assert ("4 of 24 answers could not be read (scored as wrong); the model answered e.g. "
            "'no idea'") in report.failure_message()


def test_a_score_out_of_range_names_the_record_as_the_file_counts(tmp_path: Path) -> None:
    from pytest_reliable import Generation

    data = tmp_path / "gen.jsonl"
    data.write_text('\n{"question": "q?", "reference": "x"}\n', encoding="utf-8")
    with pytest.raises(Exception, match=r"for the instance at gen\.jsonl, line 2 "):
        session(tmp_path).run_reliable(
            "t.py::t", Dataset.from_file(data), Generation(grader=lambda a, e: 3.7),
            ReliableSpec(n=2), text_model(lambda p: "x", id="x"))


@pytest.mark.parametrize(("worst", "shown"), [
    ({"record": "a.jsonl, line 3", "resampling": 1, "answer_score": 0.0, "answer_parsed": True},
     "a.jsonl, line 3 (resampling 2): answered wrong"),
    ({"record": "r, record 1", "resampling": None, "answer_score": 1.0, "answer_parsed": True},
     "r, record 1 (the canonical pass): answered right: the group has no wrong answer"),
    ({"record": "<b>x</b>", "resampling": True, "answer_score": "0", "answer_parsed": False},
     "&lt;b&gt;x&lt;/b&gt;: its answer could not be read (unparsed)"),
    ({"record": ["not", "text"], "resampling": "2"}, "not reported"),
])
def test_the_page_names_the_worst_groups_instance(worst: dict[str, Any], shown: str) -> None:
    section = worst_variant_section({"worst_variant": {"key": "k", "prompt": "p", **worst}})
    assert shown in section


# -- a narrow table tells parametrized tests apart -------------------------------------------------
def test_a_cut_name_keeps_the_parameter_id_that_tells_it_apart() -> None:
    names = ["test_answers_multiple_choice_questions[gpt-4o-mini-a]",
             "test_answers_multiple_choice_questions[gpt-4o-mini-b]", "test_other"]
    shown = fit_names(names, 24)
    assert shown[0] != shown[1] and shown[2] == "test_other"
    assert shown[0].endswith("[gpt-4o-mini-a]") and shown[1].endswith("[gpt-4o-mini-b]")
    assert all(len(name) <= 24 for name in shown)
    # Only the middle differs: the part around the difference is shown.
    middle = [f"test_x[{'a' * 30}-{i}-{'b' * 30}]" for i in (1, 2)]
    assert [("-1-" in n, "-2-" in n) for n in fit_names(middle, 20)] == [(True, False),
                                                                          (False, True)]


@given(st.text("ab-_[]x", min_size=1, max_size=60), st.lists(
    st.tuples(st.integers(0, 60), st.sampled_from("abz"), st.booleans()), min_size=1,
    max_size=3), st.integers(11, 40))
def test_two_different_names_stay_different_at_any_width(
        base: str, edits: list[tuple[int, str, bool]], width: int) -> None:
    other = list(base)
    for at, char, insert in edits:
        at = min(at, len(other))
        if insert or at == len(other):
            other.insert(at, char)
        else:
            other[at] = char
    a, b = base, "".join(other)
    if a == b:
        return
    fa, fb = fit_names([a, b], width)
    assert fa != fb and len(fa) <= width and len(fb) <= width
    assert fit_name(a, width) == (a if len(a) <= width else fit_name(a, width, ()))


# -- a space name that differs only in invisible ways ---------------------------------------------
@pytest.mark.parametrize(("asked", "declared", "says"), [
    ("caf\u00e9", "cafe\u0301", ("only in Unicode normalisation (how an accent is encoded): "
                                  "the name asked for is NFC, the declared one NFD")),
    ("\uff4d\uff43\uff51", "mcq", "only in compatibility characters"),
    ("m\u200bcq", "mcq", "in invisible characters"),
    ("MCQ", "mcq", "only in case"),
])
def test_a_lookalike_space_name_says_what_differs(asked: str, declared: str, says: str) -> None:
    hint = lookalike(asked, ["other", declared])
    assert hint is not None and says in hint
    assert ascii(asked) in hint and ascii(declared) in hint and "Fix:" in hint
    assert lookalike("mcx", ["mcq", declared]) is None


def test_an_undeclared_space_names_the_file_read(tmp_path: Path) -> None:
    from pytest_reliable.plugin.checks import undeclared_space

    settings = Settings(rootdir=tmp_path)
    said = undeclared_space("mcq", {}, settings, tmp_path)
    assert f"there is no {tmp_path / 'reliable.yaml'}" in said
    (tmp_path / "reliable.yaml").write_text("spaces:\n  yn: {}\n", encoding="utf-8")
    said = undeclared_space("mcq", {"yn": WRAPPERS}, settings, tmp_path)
    assert said == (f"declare it under `spaces:` in {tmp_path / 'reliable.yaml'}, which "
                    "declares: 'yn'")
    # The rootdir moved away from the directory pytest ran in (an option's value read as a path).
    project = tmp_path / "project"
    project.mkdir()
    (project / "reliable.yaml").write_text("spaces:\n  mcq: {}\n", encoding="utf-8")
    cache = tmp_path / "elsewhere.sqlite"
    cache.touch()
    moved = Settings(rootdir=tmp_path / "up")
    said = undeclared_space("mcq", {}, moved, project, ["--reliable-cache", str(cache), "-q"])
    assert f"but there is {project / 'reliable.yaml'}" in said
    assert f"(`--reliable-cache {cache}`)" in said and f"`--reliable-cache={cache}`" in said
    assert f"`--rootdir={project}`" in said


# -- the n* page names the method that drew its curves ------------------------------------------
@pytest.mark.parametrize(("method", "says", "not_says"), [
    ("bootstrap", "the standard deviation of n scores drawn with replacement", "the variance"),
    ("paper", "the variance of n scores drawn without replacement", "standard deviation"),
])
def test_the_n_star_section_describes_its_method(method: str, says: str, not_says: str) -> None:
    entry = complete_entry({
        "kind": "reliable", "n_star": 3, "n_star_method": method, "n_star_source": "pilot",
        "eps": 0.05, "delta": 0.1, "n_star_paper": 2,
        "n_star_curve": {"computed_from": "pilot", "method": method, "n_scores": 4,
                         "mean_upper": [0.2, 0.1, 0.04, 0.01],
                         "var_upper": [0.2, 0.1, 0.04, 0.01]}})
    section = n_star_section(entry)
    assert says in section and not_says not in section
    assert ("sd deviation" in section) == (method == "bootstrap")
    assert ("paper's n*" in section) == (method == "bootstrap")


# -- the progress line counts every run of the test ----------------------------------------------
def test_progress_adds_up_the_runs_of_a_test() -> None:
    pilot = ProgressEvent(done=40, total=40, cached=10, made=30, failed=0)
    extension = ProgressEvent(done=5, total=60, cached=0, made=5, failed=0)
    assert combined_progress([pilot, None, extension]) == ProgressEvent(45, 100, 10, 35, 0)


def test_under_n_auto_the_progress_total_includes_the_pilot(tmp_path: Path) -> None:
    # A bootstrap n* beyond a small pilot extends it: the extension's calls come after the
    # pilot's, and the line counted only the extension's before.
    events: list[ProgressEvent] = []
    s = session(tmp_path, n="auto", pilot_n=5, n_method="bootstrap",
                store_dir=tmp_path / "n_star")
    s.on_progress = lambda nodeid, event: events.append(event)

    def sometimes(prompt: str) -> str:
        right = hashlib.sha256(prompt.encode()).digest()[0] % 3
        return right_letter(prompt) if right else wrong_letter(prompt)

    report = s.run_reliable("t.py::t", RECORDS, MultipleChoice(),
                            ReliableSpec(space="wrappers", eps=0.1), text_model(sometimes, id="s"))
    assert report.n_resamplings > 5  # the pilot was extended
    assert [e.done for e in events] == sorted(e.done for e in events)
    assert events[-1].total == events[-1].done == report.calls_made + report.calls_cached
    assert events[0].total == (5 + 1) * len(RECORDS)  # the pilot with its canonical pass


# -- --reliable-lock-update says what it wrote ------------------------------------------------
def test_the_lock_update_line_says_what_changed() -> None:
    before = {"a": {"hash": "1" * 64, "declaration": {"wrapper": ["x"]}},
              "b": {"hash": "2" * 64, "declaration": {}},
              "gone": {"hash": "3" * 64, "declaration": {}}}
    after = {"a": {"hash": "4" * 64, "declaration": {"wrapper": ["y"]}},
             "b": {"hash": "2" * 64, "declaration": {}},
             "c": {"hash": "5" * 64, "declaration": {}}}
    assert lock_update_summary(before, after) == (
        f"a {'4' * 12} (changed: wrapper), b {'2' * 12} (unchanged), c {'5' * 12} (new), "
        "gone (dropped)")


def test_no_difference_is_never_shown_as_minus_zero() -> None:
    from pytest_reliable.verdict.gate import ThresholdCheck

    check = ThresholdCheck("max_regression", 0.1, -0.0, "max", bound=-1e-17,
                           decide="pass-on-evidence", method="m")
    assert "-0.0000" not in check.describe()
    assert "candidate worse than baseline by 0.0000" in check.describe()
