"""Which `Grader` grades a task's answers (`grader_of`): the task's judge when it grades with one
(``Generation(grader=Judge(...))``), else the task's own grading (`OwnGrading`: `Task.grade` of
each answer). `judge_of` names the judge, for what runs and reports it (its model, its votes,
whether it is pairwise).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_reliable.plan.grading import Answer, Grader, Grades, GradingContext
from pytest_reliable.plan.task import Task
from pytest_reliable.tasks.builtin import Generation
from pytest_reliable.tasks.judge import Judge


class OwnGrading:
    """A task's own grading as a `Grader`: `Task.grade` of each answer against its record and
    the prompt it answered (the option it picks, exact or normalized text, a regex, a user's
    callable). It makes no call, so it needs nothing of the context."""

    def __init__(self, task: Task) -> None:
        self.task = task

    def __repr__(self) -> str:
        return f"OwnGrading({self.task!r})"

    def grade(self, answers: Sequence[Answer], context: GradingContext) -> Grades:
        return Grades(tuple(self.task.grade(answer.text, answer.example, answer.prompt)
                            for answer in answers))


def judge_of(task: Task) -> Judge | None:
    """The task's judge when it grades with one (``Generation(grader=Judge(...))``)."""
    return task.judge if isinstance(task, Generation) else None


def grader_of(task: Task) -> Grader:
    """What grades ``task``'s answers: its judge, or its own `Task.grade`."""
    judge = judge_of(task)
    return judge if judge is not None else OwnGrading(task)
