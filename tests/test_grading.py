"""Grading as an interface (`plan.grading.Grader`): a task's own grading, a judge and a pairwise
judge all grade a batch with ``grade(answers, context)``, and the evaluation asks no more."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_reliable import Generation, Judge, MultipleChoice, SamplingParams, text_model
from pytest_reliable.calls.requests import CallResult, Request
from pytest_reliable.errors import ReliableError
from pytest_reliable.evaluate.evaluation import Calls, grade_results, greedy_cells
from pytest_reliable.models.base import ModelResponse
from pytest_reliable.plan.grading import Answer, Grader, GraderCalls, Grades, GradingContext
from pytest_reliable.plan.task import Example, Grade
from pytest_reliable.space import Space
from pytest_reliable.tasks.grading import OwnGrading, grader_of, judge_of

RECORD = {"question": "What is 2 plus 2?", "reference": "4"}
MC = {"question": "Pick b", "choices": ["a", "b", "c"], "answer": 1}


@dataclass
class Counts:
    made: int = 0
    cached: int = 0


@dataclass
class FakeRunner:
    """A runner as a grader sees it (`plan.grading.Asks`): replies from ``reply``, calls
    counted, the requests kept; a reply of None is a call that failed."""

    reply: Callable[[Request], str | None]
    stats: Counts = field(default_factory=Counts)
    asked: list[Request] = field(default_factory=list)

    def run(self, requests: Sequence[Any]) -> list[Any]:
        self.asked += requests
        results = []
        for request in requests:
            text = self.reply(request)
            if text is None:
                results.append(CallResult(None, status="error", error="boom"))
            else:
                self.stats.made += 1
                results.append(CallResult(ModelResponse(text)))
        return results


def user_text(request: Request) -> str:
    return request.messages[-1][1]


def judge(**kwargs: Any) -> Judge:
    return Judge(text_model(str, id="j"), "right", **kwargs)


def test_each_grader_is_a_grader_chosen_by_the_task() -> None:
    by_judge = judge()
    graders: list[Grader] = [OwnGrading(MultipleChoice()), by_judge]
    assert isinstance(grader_of(MultipleChoice()), OwnGrading)
    assert grader_of(Generation(grader=by_judge)) is by_judge is graders[1]
    assert judge_of(Generation(grader="exact")) is None
    assert judge_of(MultipleChoice()) is None


def test_a_tasks_own_grading_is_its_grade_of_each_answer_and_makes_no_call() -> None:
    task = MultipleChoice()
    answers = [Answer("(B)", MC), Answer("(C)", MC), Answer("no idea", MC)]
    grades = OwnGrading(task).grade(answers, GradingContext())
    assert grades == Grades(tuple(task.grade(a.text, a.example) for a in answers))
    assert [g.score for g in grades.each] == [1.0, 0.0, 0.0]
    assert [g.parsed for g in grades.each] == [True, True, False]
    assert grades.calls is None


def test_a_judge_grades_the_batch_through_its_runner_and_counts_its_calls() -> None:
    runner = FakeRunner(lambda r: "PASS" if "Answer: 4" in user_text(r) else "FAIL")
    answers = [Answer(" 4 ", RECORD), Answer("   ", RECORD), Answer("5", RECORD)]
    grades = judge(votes=2).grade(answers, GradingContext(judge=runner))
    assert grades.each == (
        Grade(1.0, True, "4", (1.0, 1.0)),
        Grade(0.0, False, None),  # empty: unparsed, the judge is not asked
        Grade(0.0, True, "5", (0.0, 0.0)),
    )
    assert len(runner.asked) == 4  # two answers x two votes
    assert grades.calls == GraderCalls(made=4, cached=0, problems=())


def test_a_judge_lists_its_failed_calls_and_keeps_its_unread_replies() -> None:
    replies = iter(["PASS", None, "maybe", "FAIL"])
    runner = FakeRunner(lambda r: next(replies))
    grades = judge(votes=2).grade([Answer("4", RECORD), Answer("5", RECORD)],
                                  GradingContext(judge=runner))
    assert [g.votes for g in grades.each] == [(1.0, None), (None, 0.0)]
    assert [g.unread for g in grades.each] == [(), ("maybe",)]
    assert grades.calls is not None and grades.calls.problems == ("judge error: boom",)


def test_a_pairwise_judge_has_the_baseline_answer_the_same_requests() -> None:
    asked = [Request((("user", f"q{i}"),), SamplingParams()) for i in range(3)]
    baseline = FakeRunner(lambda r: None if r.messages[0][1] == "q2" else "worse")

    def prefers_the_candidate(request: Request) -> str:
        first = user_text(request).split("Answer 1: ")[1].split("\n")[0]
        return "1" if first == "better" else "2"

    runner = FakeRunner(prefers_the_candidate)
    answers = [Answer("better", RECORD, None, asked[0]), Answer("", RECORD, None, asked[1]),
               Answer("better", RECORD, None, asked[2])]
    grades = judge(votes=1, pairwise=True).grade(answers, GradingContext(runner, baseline))
    assert baseline.asked == [asked[0], asked[2]]  # the answered cells' own requests
    assert [g.score for g in grades.each] == [1.0, 0.0, 0.5]  # win, no answer, no baseline: tie
    assert len(runner.asked) == 2  # one pair, both orders
    assert grades.calls is not None
    assert grades.calls.problems == ("baseline error: boom",)


def test_a_judge_without_the_runners_it_needs_says_which() -> None:
    with pytest.raises(ReliableError, match="give the evaluation its Judging"):
        judge().grade([Answer("4", RECORD)], GradingContext())
    with pytest.raises(ReliableError, match="give the test a baseline model"):
        judge(pairwise=True).grade([Answer("4", RECORD)], GradingContext(FakeRunner(str)))


def test_generation_knows_a_judge_by_its_class_not_by_its_methods() -> None:
    class LooksLikeAJudge:
        def grade_all(self, *args: Any) -> None: ...

    with pytest.raises(TypeError, match="a callable or a Judge"):
        Generation(grader=LooksLikeAJudge())  # type: ignore[arg-type]


def test_the_evaluation_hands_the_grader_only_the_answers_that_came_back() -> None:
    seen: list[str] = []

    class Counting(MultipleChoice):
        def grade(self, text: str, example: Example, prompt: Any = None) -> Grade:
            seen.append(text)
            return super().grade(text, example, prompt)

    examples = [MC, MC, MC]
    cells = greedy_cells(examples, Counting(), Space.plain(), 8)
    results = [CallResult(ModelResponse("b")), CallResult(None, status="not_run", error="budget"),
               CallResult(ModelResponse("zzz"))]
    calls = Calls()
    graded = grade_results(cells, examples, results, Counting(), None, calls)
    assert seen == ["b", "zzz"]
    assert [(g.status, g.score, g.parsed, g.error) for g in graded] == [
        ("ok", 1.0, True, None), ("not_run", 0.0, False, "budget"), ("ok", 0.0, False, None)]
    assert calls.judge is None  # a task's own grading makes no call
