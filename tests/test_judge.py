"""The judge as a grader (SPEC section 12): votes as runner calls, parsing, the judge's noise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable import Dataset, Generation, Judge, chat_model, openai_model, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.models.base import Message
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.tasks.grading import judge_of
from pytest_reliable.tasks.judge import JudgeUsageError
from pytest_reliable.testing import ScriptedServer

DATA = Dataset.from_records(
    [{"question": f"What is {i} plus {i}?", "reference": str(2 * i)} for i in range(6)]
)


def half_right(prompt: str) -> str:
    """Right on even instances, a wrong number on odd ones."""
    i = int(re.findall(r"What is (\d+) plus", prompt)[-1])
    return str(2 * i) if i % 2 == 0 else str(2 * i + 1)


def field(messages: list[Message] | str, name: str) -> str:
    text = messages if isinstance(messages, str) else messages[-1]["content"]
    found = re.search(rf"^{name}: (.*)$", text, re.M)
    return found.group(1) if found else ""


def exact_judge(messages: list[Message] | str, params: dict[str, Any]) -> str:
    return "PASS" if field(messages, "Answer") == field(messages, "Reference answer") else "FAIL"


def session(tmp_path: Path, **settings: Any) -> ReliableSession:
    return ReliableSession(Settings(rootdir=tmp_path, **settings), {})


@pytest.mark.parametrize(("scale", "reply", "vote"), [
    ("pass/fail", "PASS", 1.0), ("pass/fail", "fail.", 0.0), ("pass/fail", "It passes.", 1.0),
    ("pass/fail", "PASS or FAIL?", None), ("pass/fail", "I cannot say", None),
    ("pass/fail", "This answer does not pass.", 0.0), ("pass/fail", "fails", 0.0),
    ("pass/fail", "The answer fails to add up. Verdict: PASS", 1.0),
    ("1-5", "4", 0.75), ("1-5", "Score: 1/5", 0.0), ("1-5", "5", 1.0), ("1-5", "3 or 4", None),
    ("1-5", "7", None), ("1-5", "", None), ("1-5", "Grade (1-5): 4", 0.75),
    ("1-5", "The answer 3 is wrong", None),
])
def test_a_reply_yields_one_vote_or_none(scale: str, reply: str, vote: float | None) -> None:
    assert Judge(text_model(str), "r", scale=scale).parse(reply) == vote


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"votes": 0}, "votes=0"), ({"votes": 2.5}, "votes=2.5"), ({"scale": "1-10"}, "scale='1-10'"),
    ({"temperature": -1}, "temperature=-1"), ({"rubric": " "}, "rubric=' '"),
    ({"model": 42}, "model=42"), ({"max_unparsed": 1.5}, "max_unparsed=1.5"),
    ({"max_unparsed": "10%"}, "max_unparsed='10%'"),
])
def test_a_bad_judge_is_a_usage_error_naming_the_argument(
    tmp_path: Path, kwargs: dict[str, Any], fragment: str
) -> None:
    args: dict[str, Any] = {"model": text_model(str, id="j"), "rubric": "correct", **kwargs}
    judge = Judge(args.pop("model"), args.pop("rubric"), **args)
    s = session(tmp_path, no_cache=True)
    try:
        with pytest.raises(JudgeUsageError, match=re.escape(fragment)):
            s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=2),
                           text_model(half_right, id="m"))
    finally:
        s.close()


def test_votes_are_cached_calls_of_the_judge_keyed_by_rubric_and_answer(tmp_path: Path) -> None:
    with ScriptedServer(exact_judge) as server:
        def run(rubric: str) -> dict[str, Any]:
            judge = Judge(openai_model("judge", base_url=server.base_url), rubric, votes=3)
            s = session(tmp_path)
            try:
                report = s.run_reliable("t::x", DATA, Generation(grader=judge),
                                        ReliableSpec(n=4), text_model(half_right, id="m"))
            finally:
                s.close()
            return dict(report.entry("passed"))

        first = run("The answer equals the reference.")
        # 6 distinct answers (one per question, whatever the variant) x 3 votes, asked once.
        assert server.completed == 18
        assert first["judge"]["calls"] == {"made": 18, "cached": (4 + 1) * 6 * 3 - 18}
        assert first["calls"]["made"] + first["calls"]["cached"] == (4 + 1) * 6  # judge apart
        assert first["mean"] == pytest.approx(0.5) and first["canonical"]["score"] == 0.5
        assert first["judge"]["agreement"] == 1.0 and first["judge"]["unparsed_votes"] == 0
        assert first["judge"]["id"] == f"openai:judge@{server.base_url.split('//')[1].split(':')[0]}"

        again = run("The answer equals the reference.")
        assert server.completed == 18 and again["judge"]["calls"]["made"] == 0
        assert again["mean"] == first["mean"]

        run("The answer is the reference number.")  # a changed rubric is never served old grades
        assert server.completed == 36


def _unsure_on(answers: set[str]) -> Any:
    def judge(messages: list[Message] | str, params: dict[str, Any]) -> str:
        return "hmm" if field(messages, "Answer") in answers else "PASS"
    return judge


def _judged_run(tmp_path: Path, judge: Judge, n: int = 3) -> Any:
    s = session(tmp_path, no_cache=True)
    try:
        return s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=n),
                              text_model(half_right, id="m"))
    finally:
        s.close()


def test_unparsed_votes_fail_and_are_counted(tmp_path: Path) -> None:
    with ScriptedServer(_unsure_on({"3", "7", "11"})) as server:
        judge = Judge(openai_model("judge", base_url=server.base_url), "correct", votes=2,
                      max_unparsed=0.5)
        report = _judged_run(tmp_path, judge)
    entry = report.entry("passed")
    assert report.mean == pytest.approx(0.5) and not report.problems  # half unread: allowed
    assert entry["judge"] is not None
    assert entry["judge"]["unparsed_votes"] == (3 + 1) * 3 * 2  # odd instances' cells x votes
    assert entry["judge"]["agreement"] == 1.0  # over the parsed votes: the even instances'
    assert report.unparsed == 0  # the answers were parsed; the votes were not


@pytest.mark.parametrize(("max_unparsed", "errors"), [(0.2, False), (0.15, True), (0.0, True)])
def test_more_unread_votes_than_max_unparsed_are_the_judges_error(
    tmp_path: Path, max_unparsed: float, errors: bool
) -> None:
    # One instance of 6 ("3") is unread: its 5 cells x 1 vote of 30 votes, a share of 1/6.
    judge = Judge(chat_model(lambda m: _unsure_on({"3"})(m, {}), id="j"), "correct", votes=1,
                  max_unparsed=max_unparsed)
    report = _judged_run(tmp_path, judge, n=4)
    assert bool(report.problems) == errors
    if errors:
        assert report.problems[0] == (
            "judge j could not be read: 5 of 30 votes (17%) came back without PASS or FAIL, "
            f"more than max_unparsed={max_unparsed:g}; one reply: 'hmm'. Fix: a judge that "
            "replies as asked (max_tokens=16 enough?), or a higher Judge(max_unparsed=...)")


def test_a_judge_none_of_whose_replies_parse_errors_instead_of_failing_the_model(
    tmp_path: Path,
) -> None:
    """The issue's case: every reply unread used to score every answer 0 (the model's gate
    failed, its right answers shown as the worst) and report agreement 1.000."""
    reply = "I cannot grade this: 'quoted'\n<b>" + "x" * 300
    judge = Judge(chat_model(lambda messages: reply, id="chatty-judge"), "correct", votes=3)
    s = session(tmp_path, no_cache=True)
    try:
        report = s.run_reliable("t::x", DATA, Generation(grader=judge),
                                ReliableSpec(n=2, min_score=0.3), text_model(half_right, id="m"))
    finally:
        s.close()
    assert not report.passed
    message = report.failure_message()
    assert message.splitlines()[1] == (
        "  not evaluated: judge chatty-judge could not be read: 54 of 54 votes (100%) came back "
        "without PASS or FAIL, more than max_unparsed=0.1; one reply: "
        + repr(reply[:100] + f"[... {len(reply) - 100:,} more characters cut]")
        + ". Fix: a judge that replies as asked (max_tokens=16 enough?), or a higher "
        "Judge(max_unparsed=...)")
    assert "\\n<b>" in message and "worst" not in message and "min_score" not in message
    entry = report.entry("error")
    assert entry["mean"] is None and entry["thresholds"][0]["observed"] is None
    assert entry["judge"] is not None and entry["judge"]["id"] == "chatty-judge"
    assert entry["judge"]["unparsed_votes"] == 54 and entry["judge"]["agreement"] is None
    assert not any("agreement" in note for note in entry["notes"])


def test_agreement_is_over_parsed_votes_and_null_without_two(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from pytest_reliable.verdict.judged import judge_entry

    def agreement(*cells: tuple[float | None, ...], votes: int = 3) -> float | None:
        judge = Judge(text_model(str), "r", votes=votes)
        graded: Any = [SimpleNamespace(votes=v) for v in cells]  # all judge_entry reads
        entry = judge_entry(judge, "j", graded, 0, 0)
        return entry["agreement"]

    assert agreement((1.0, None, 1.0), (0.0, 0.0, 0.0)) == 1.0
    assert agreement((1.0, None, 0.0), (0.0, 0.0, 0.0)) == 0.5
    assert agreement((1.0, None, None), (0.0, 0.0, 0.0)) == 1.0  # one parsed vote tells nothing
    assert agreement((None, None, None), (None, None, None)) is None  # never 1.000 unread
    assert agreement((1.0,), (0.0,), votes=1) is None  # one vote per answer cannot disagree


def test_a_noisy_judge_shows_its_noise_and_scores_stay_means_of_votes(tmp_path: Path) -> None:
    flips = iter([0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0] * 100)

    def coin(messages: list[Message]) -> str:
        return "PASS" if next(flips) else "FAIL"

    judge = Judge(chat_model(coin, id="coin"), "correct", votes=4, scale="pass/fail")
    s = session(tmp_path, no_cache=True)
    try:
        report = s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=2),
                                text_model(half_right, id="m"))
    finally:
        s.close()
    assert judge_of(Generation(grader=judge)) is judge
    entry = report.entry("passed")["judge"]
    assert entry is not None
    scores = {c.score for c in report.matrix.cells}
    assert scores <= {0.0, 0.25, 0.5, 0.75, 1.0}
    assert entry["agreement"] is not None and entry["agreement"] < 1.0
    share = entry["judge_variance_share"]
    assert share is not None and share > 0.5  # the answers do not matter to this judge
    assert report.canonical["interval_method"].startswith("clustered")


def test_a_one_to_five_judge_maps_grades_to_quarters(tmp_path: Path) -> None:
    judge = Judge(chat_model(lambda messages: "Grade: 4", id="four"), "helpful", votes=1,
                  scale="1-5")
    s = session(tmp_path, no_cache=True)
    try:
        report = s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=2),
                                text_model(half_right, id="m"))
    finally:
        s.close()
    assert report.mean == pytest.approx(0.75)
    assert report.entry("passed")["judge"]["judge_variance_share"] is None  # one vote


def test_a_judged_task_cannot_be_graded_one_answer_at_a_time() -> None:
    task = Generation(grader=Judge(text_model(str, id="j"), "r"))
    with pytest.raises(Exception, match="through the runner"):
        task.grade("4", {"question": "2+2?", "reference": "4"})


def test_the_page_and_the_notes_show_the_judge_escaped(tmp_path: Path) -> None:
    from pytest_reliable.report.html import entry_section

    judge = Judge(chat_model(lambda messages: "PASS", id="<script>j</script>"), "correct")
    s = session(tmp_path, no_cache=True)
    try:
        report = s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=2),
                                text_model(half_right, id="m"))
    finally:
        s.close()
    entry = report.entry("passed")
    page = entry_section(1, entry, "x", opened=True)
    assert "<h3>Judge</h3>" in page and "&lt;script&gt;j" in page and "<script>j" not in page
    assert any("graded by judge <script>j</script>: 3 votes per answer, agreement 1.000" in note
               for note in entry["notes"])


def test_maj_at_k_is_the_majority_of_the_k_samples_with_ties_wrong(tmp_path: Path) -> None:
    from pytest_reliable import MultipleChoice
    from pytest_reliable.models.base import request_seed

    data = Dataset.from_records([
        {"question": f"Question {i}?", "choices": ["right", "wrong", "other"], "answer": 0}
        for i in range(12)
    ])

    def sometimes_right(prompt: str) -> str:
        seed = request_seed.get() or 0
        return "right" if seed % 5 < 3 else ("wrong" if seed % 2 else "other")

    s = session(tmp_path, no_cache=True)
    try:
        report = s.run_reliable("t::x", data, MultipleChoice(),
                                ReliableSpec(n=1, k=4, temperature=0.8, min_maj_at_k=0.1,
                                             decide="estimate"),
                                text_model(sometimes_right, id="m"))
    finally:
        s.close()
    expected = []
    for i in range(len(data)):
        picks = [c.prediction for c in report.matrix.canonical_cells() if c.instance == i]
        counts = sorted(((picks.count(p), p) for p in set(picks)), reverse=True)
        tie = len(counts) > 1 and counts[0][0] == counts[1][0]
        expected.append(0.0 if tie else float(counts[0][1] == 0))
    assert report.maj_at_k == pytest.approx(sum(expected) / len(expected))
    assert 0.0 < report.maj_at_k < 1.0
    check = next(c for c in report.thresholds if c.name == "min_maj_at_k")
    assert check.observed == report.maj_at_k and check.passed
    assert report.entry("passed")["maj_at_k"] == report.maj_at_k


def _pairwise_run(tmp_path: Path, judge_fn: Any, candidate: Any, baseline: Any,
                  **spec: Any) -> Any:
    judge = Judge(chat_model(judge_fn, id="pair-judge"), "the better answer", votes=1,
                  pairwise=True)
    s = session(tmp_path, no_cache=True)
    try:
        return s.run_reliable("t::x", DATA, Generation(grader=judge),
                              ReliableSpec(n=4, **spec), text_model(candidate, id="cand"),
                              user_baseline=text_model(baseline, id="base"))
    finally:
        s.close()


def _answers(messages: list[Message]) -> tuple[str, str]:
    return field(messages, "Answer 1"), field(messages, "Answer 2")


def test_a_pairwise_judge_asks_both_orders_and_reports_wins(tmp_path: Path) -> None:
    def fair(messages: list[Message]) -> str:
        first, second = _answers(messages)
        return "1" if first == "good" else "2"

    report = _pairwise_run(tmp_path, fair, lambda p: "good", lambda p: "bad", min_win_rate=0.5)
    pairwise = report.entry("passed")["pairwise"]
    cells = (4) * 6
    assert pairwise["win"] == cells and pairwise["tie"] == pairwise["loss"] == 0
    assert pairwise["win_rate"]["estimate"] == 1.0 and pairwise["position_bias"] == 0.0
    check = next(c for c in report.thresholds if c.name == "min_win_rate")
    assert check.passed and report.baseline is None


def test_swapping_removes_a_first_position_bias_from_the_win_rate(tmp_path: Path) -> None:
    from pytest_reliable.models.base import request_seed

    def coin(*parts: object) -> float:
        import hashlib
        return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16) / 16**8

    def equal_quality(tag: str) -> Any:
        def answer(prompt: str) -> str:
            right = coin(tag, prompt) < 0.6
            return f"{'right' if right else 'wrong'} {tag}"
        return answer

    def first_biased(messages: list[Message]) -> str:
        first, second = _answers(messages)
        one_right = first.startswith("right") != second.startswith("right")
        if one_right and coin("judge", request_seed.get(), first, second) >= 0.8:
            return "1" if first.startswith("right") else "2"
        return "1"  # 80% of the time (and whenever both are alike): the answer shown first

    report = _pairwise_run(tmp_path, first_biased, equal_quality("cand"),
                           equal_quality("base"))
    pairwise = report.entry("passed")["pairwise"]
    cells = report.matrix.resampling_cells()
    # Shown first only (no swap), the candidate would win whenever the judge prefers position 1.
    unswapped = sum(c.votes[0] == 1.0 for c in cells) / len(cells)
    assert unswapped > 0.8
    low, high = pairwise["win_rate"]["low"], pairwise["win_rate"]["high"]
    assert low <= 0.5 <= high and abs(pairwise["win_rate"]["estimate"] - 0.5) < 0.15
    assert pairwise["position_bias"] > 0.35


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"min_win_rate": 0.5, "pairwise": False}, "needs a pairwise judge"),
    ({"max_regression": 0.1, "pairwise": True}, "use min_win_rate"),
])
def test_pairwise_usage_errors(tmp_path: Path, kwargs: dict[str, Any], fragment: str) -> None:
    pairwise = kwargs.pop("pairwise")
    judge = Judge(chat_model(lambda m: "1", id="j"), "better", votes=1, pairwise=pairwise)
    s = session(tmp_path, no_cache=True)
    try:
        with pytest.raises(JudgeUsageError, match=fragment):
            s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=2, **kwargs),
                           text_model(half_right, id="m"),
                           user_baseline=text_model(half_right, id="b"))
    finally:
        s.close()


def test_the_table_and_the_page_show_the_win_rate(tmp_path: Path) -> None:
    from pytest_reliable.report.format import WIN_RATE_COLUMN
    from pytest_reliable.report.html import entry_section
    from pytest_reliable.report.terminal import summary_table

    def fair(messages: list[Message]) -> str:
        return "1" if _answers(messages)[0] == "good" else "2"

    entry = _pairwise_run(tmp_path, fair, lambda p: "good", lambda p: "bad").entry("passed")
    table = "\n".join(summary_table([entry]))
    assert WIN_RATE_COLUMN in table and "1.00 [" in table
    page = entry_section(1, entry, "x", opened=True)
    assert "Pairwise against the baseline" in page and "24 / 0 / 0" in page


def test_the_pairwise_entry_names_the_baseline_and_its_cells_add_up(tmp_path: Path) -> None:
    def instance(prompt: str) -> int:
        return int(re.findall(r"What is (\d+) plus", prompt)[-1])

    def candidate(prompt: str) -> str:  # wins on 0-1, gives no answer on 2, ties on 3, loses after
        return {0: "good", 1: "good", 2: "", 3: "same"}.get(instance(prompt), "bad")

    def baseline(prompt: str) -> str:
        return "same" if instance(prompt) == 3 else "ok"

    rank = {"good": 3, "ok": 2, "same": 1, "bad": 0}

    def judge(messages: list[Message]) -> str:
        first, second = _answers(messages)
        return "1" if rank[first] >= rank[second] else "2"  # alike: the first, in both orders

    report = _pairwise_run(tmp_path, judge, candidate, baseline)
    pairwise = report.entry("passed")["pairwise"]
    assert pairwise["baseline_model"] == "base"
    # 4 resamplings x 6 instances: the empty answer was never judged and is a loss, as the win
    # rate (the gate's mean) counts it.
    assert (pairwise["win"], pairwise["tie"], pairwise["loss"], pairwise["cells"]) == (
        8, 4, 12, 24)
    assert pairwise["win_rate"]["estimate"] == pytest.approx((8 + 4 / 2) / 24) == report.mean
    assert report.entry("passed")["judge"]["unparsed_votes"] == 0

    from pytest_reliable.report.html import entry_section

    page = entry_section(1, report.entry("passed"), "x", opened=True)
    assert "<dt>baseline model</dt><dd>base</dd>" in page and "8 / 4 / 12 of 24" in page


def test_a_pairwise_judge_that_cannot_be_read_errors_and_keeps_the_baseline_named(
    tmp_path: Path,
) -> None:
    from pytest_reliable.report.format import WIN_RATE_COLUMN
    from pytest_reliable.report.terminal import summary_table

    report = _pairwise_run(tmp_path, lambda messages: "Both are fine.", lambda p: "good",
                           lambda p: "bad", min_win_rate=0.5)
    # (4 resamplings + k=1) x 6 instances, each pair asked in both orders, 1 vote each.
    assert report.problems[0].startswith(
        "judge pair-judge could not be read: 60 of 60 votes (100%) came back without 1 or 2, ")
    entry = report.entry("error")
    assert entry["pairwise"] == {
        "baseline_model": "base", "cells": None, "win": None, "tie": None, "loss": None,
        "win_rate": {"estimate": None, "low": None, "high": None}, "position_bias": None}
    table = "\n".join(summary_table([entry]))
    assert WIN_RATE_COLUMN in table and "1.00 [" not in table


def test_a_cell_whose_baseline_did_not_answer_is_a_problem_with_no_votes_cast(
    tmp_path: Path,
) -> None:
    def baseline(prompt: str) -> str:
        if "What is 0 plus" in prompt:
            raise RuntimeError("baseline down")
        return "bad"

    def fair(messages: list[Message]) -> str:
        return "1" if _answers(messages)[0] == "good" else "2"

    judge = Judge(chat_model(fair, id="pair-judge"), "the better answer", votes=1, pairwise=True)
    s = session(tmp_path, no_cache=True, max_retries=0)
    try:
        report = s.run_reliable("t::x", DATA, Generation(grader=judge), ReliableSpec(n=4),
                                text_model(lambda p: "good", id="cand"),
                                user_baseline=text_model(baseline, id="base"))
    finally:
        s.close()
    assert any("baseline down" in p for p in report.problems)
    down = [c for c in report.matrix.resampling_cells() if c.instance == 0]
    assert {(c.score, c.votes) for c in down} == {(0.5, ())}  # a tie; no vote was asked
    judge_entry = report.entry("error")["judge"]
    assert judge_entry is not None and judge_entry["unparsed_votes"] == 0


def test_judge_task_reads_the_judges_verdict_not_a_keyword(tmp_path: Path) -> None:
    def worded(prompt: str) -> str:
        return "It passes." if exact(prompt) == "PASS" else "This answer does not pass."

    report = _checklist(tmp_path, "mft", worded, min_pass=1.0)
    assert report.rate == 1.0 and report.passed and report.unparsed == 0


JUDGE_EXAMPLES = [
    {"question": "What is 2 plus 2?", "reference": "4", "answer": "4", "label": "pass"},
    {"question": "What is 3 plus 3?", "reference": "6", "answer": "It is 7", "label": "fail"},
    {"question": "Capital of France?", "reference": "Paris", "answer": "Paris", "label": "pass"},
    {"question": "Capital of Spain?", "reference": "Madrid", "answer": "Lisbon is", "label": "fail"},
]


def _checklist(tmp_path: Path, kind: str, judge_fn: Any, **kwargs: Any) -> Any:
    from pytest_reliable import JudgeTask
    from pytest_reliable.contract.markers import parse_checklist
    from pytest_reliable.plugin.markers import perturbation_exists

    spec = parse_checklist(kind, (), kwargs, space_exists=lambda s: False,
                           perturbation_exists=perturbation_exists)
    s = session(tmp_path, no_cache=True)
    try:
        return s.run_checklist("t::judge", JUDGE_EXAMPLES, JudgeTask("The answer is right."),
                               spec, text_model(judge_fn, id="judge-under-test"))
    finally:
        s.close()


def exact(prompt: str) -> str:
    answer, reference = field(prompt, "Answer"), field(prompt, "Reference answer")
    return "PASS" if answer.split() == reference.split() else "FAIL"


def test_judge_task_mft_checks_known_good_and_bad_answers(tmp_path: Path) -> None:
    report = _checklist(tmp_path, "mft", exact, min_pass=1.0)
    assert report.rate == 1.0 and report.passed
    lenient = _checklist(tmp_path, "mft", lambda prompt: "PASS", min_pass=1.0)
    assert lenient.rate == 0.5 and not lenient.passed
    assert {f.after_value for f in lenient.failures} == {"pass"}


def test_judge_task_invariance_catches_a_judge_that_reads_the_wording(tmp_path: Path) -> None:
    steady = _checklist(tmp_path, "invariance", exact,
                        perturb=["rubric_paraphrase", "answer_whitespace"], max_flip_rate=0.0)
    assert steady.rate == 0.0 and steady.pairs == 8 and steady.passed

    def fussy(prompt: str) -> str:  # grades the wording, not the meaning
        answer = re.search(r"^Answer: (.*)$", prompt, re.M)
        if "  " in prompt or (answer and answer.group(1).endswith(" ")):
            return "FAIL"
        return "FAIL" if "criterion" in prompt else exact(prompt)

    shaken = _checklist(tmp_path, "invariance", fussy,
                        perturb=["rubric_paraphrase", "answer_whitespace"], max_flip_rate=0.0)
    assert shaken.rate > 0.0 and not shaken.passed


MC = Dataset.from_records([
    {"question": f"Question {i}?", "choices": ["right", "wrong", "other"], "answer": 0}
    for i in range(10)
])


def _labelled(prompt: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in re.finditer(r"^\W*(\w)\W+\s*(\w+)$", prompt, re.M)}


def test_circular_counts_an_instance_only_if_right_under_every_shift(tmp_path: Path) -> None:
    from pytest_reliable import MultipleChoice

    def always_right(prompt: str) -> str:
        return _labelled(prompt)["right"]

    def not_when_last(prompt: str) -> str:
        labels = _labelled(prompt)
        return labels["right"] if list(labels)[-1] != "right" else list(labels.values())[0]

    s = session(tmp_path, no_cache=True)
    try:
        good = s.run_reliable("t::c", MC, MultipleChoice(),
                              ReliableSpec(n=1, circular=True, min_circular=0.5),
                              text_model(always_right, id="good"))
        biased = s.run_reliable("t::c", MC, MultipleChoice(),
                                ReliableSpec(n=1, circular=True, min_circular=0.5),
                                text_model(not_when_last, id="biased"))
    finally:
        s.close()
    assert good.circular is not None and good.circular["score"] == 1.0
    assert good.circular["calls"]["made"] + good.circular["calls"]["cached"] == 3 * 10
    assert good.circular["calls"]["cached"] == 10  # the shift by 0 is the canonical prompt
    assert biased.canonical["score"] == 1.0  # right is first in the canonical order
    assert biased.circular is not None and biased.circular["score"] == 0.0
    assert [c.passed for c in good.thresholds if c.name == "min_circular"] == [True]
    assert [c.passed for c in biased.thresholds if c.name == "min_circular"] == [False]


def test_circular_usage_errors(tmp_path: Path) -> None:
    from pytest_reliable.contract.markers import MarkerArgumentError, parse_reliable
    from pytest_reliable.evaluate.circular import CircularUsageError

    with pytest.raises(MarkerArgumentError, match="needs circular=True"):
        parse_reliable({"min_circular": 0.5}, space_exists=lambda s: True)
    s = session(tmp_path, no_cache=True)
    try:
        with pytest.raises(CircularUsageError, match="needs a task with options"):
            s.run_reliable("t::c", DATA, Generation(), ReliableSpec(n=1, circular=True),
                           text_model(half_right, id="m"))
    finally:
        s.close()


def test_the_plan_counts_the_circular_shifts(tmp_path: Path) -> None:
    from pytest_reliable import MultipleChoice
    from pytest_reliable.run.sizing import plan_reliable

    s = session(tmp_path, no_cache=True)
    try:
        plan = plan_reliable(s, "t::c", MC, MultipleChoice(), ReliableSpec(n=2, circular=True))
    finally:
        s.close()
    assert plan.calls == 10 * (2 + 1) + 30 and "30 cyclic shifts" in plan.calls_detail


PAIRS = [
    {"question": "What is 2 plus 2?", "answers": ["4", "5"], "label": 1},
    {"question": "Capital of France?", "answers": ["Lyon", "Paris"], "label": 2},
    {"question": "Legs of a spider?", "answers": ["eight", "six"], "label": 1},
    {"question": "Colour of the sky?", "answers": ["green", "blue"], "label": 2},
]


def _pair_checklist(tmp_path: Path, kind: str, judge_fn: Any, **kwargs: Any) -> Any:
    from pytest_reliable import JudgeTask
    from pytest_reliable.contract.markers import parse_checklist
    from pytest_reliable.plugin.markers import perturbation_exists

    spec = parse_checklist(kind, (), kwargs, space_exists=lambda s: False,
                           perturbation_exists=perturbation_exists)
    s = session(tmp_path, no_cache=True)
    try:
        return s.run_checklist("t::pairs", PAIRS, JudgeTask("correct", pairwise=True), spec,
                               text_model(judge_fn, id="pair-judge-under-test"))
    finally:
        s.close()


def test_a_pairwise_judge_task_catches_position_bias_with_answer_position(
    tmp_path: Path,
) -> None:
    truth = {"4", "Paris", "eight", "blue"}

    def by_content(prompt: str) -> str:
        return "1" if field(prompt, "Answer 1") in truth else "2"

    assert _pair_checklist(tmp_path, "mft", by_content, min_pass=1.0).rate == 1.0
    steady = _pair_checklist(tmp_path, "invariance", by_content, perturb=["answer_position"],
                             max_flip_rate=0.0)
    assert steady.rate == 0.0 and steady.pairs == 4 and steady.passed
    first = _pair_checklist(tmp_path, "invariance", lambda prompt: "1",
                            perturb=["answer_position"], max_flip_rate=0.0)
    assert first.rate == 1.0 and not first.passed
