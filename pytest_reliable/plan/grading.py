"""The `Grader` protocol: a batch of answers -> their grades, in one call.

``grade(answers, context) -> Grades`` is the one thing the evaluation asks of whatever grades a
task's answers, and it never asks which kind it holds:

- a task's own grading (`tasks.grading.OwnGrading`: `Task.grade` of each answer: exact match,
  normalized text, a regex, the option an answer picks, or a user's callable) makes no call;
- a `Judge` (`tasks.judge`) asks a model about each answer, and a pairwise judge has the
  baseline answer the same requests and compares the two; both make their calls through the
  runners in the ``context``, and say what those calls were in `Grades.calls`.

The evaluation hands a grader only the answers that came back (a call that did not complete is
no answer: it scores 0, unparsed, and is a problem of the test).

It sits beside the `Task` protocol (`plan.task`, whose `Grade` it returns and whose `Prompt`
an answer carries), below the runners: a runner is typed here by what a grader needs of it
(`Asks`), which `calls.runner.Runner` satisfies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_reliable.plan.prompt import Prompt
from pytest_reliable.plan.task import Example, Grade


@dataclass(frozen=True)
class Answer:
    """One answer to grade: the text that came back, the record it answers, the prompt it
    answered (which options it showed, in which order) and the request that asked it."""

    text: str
    example: Example
    prompt: Prompt | None = None
    request: Any = None
    """The `calls.requests.Request` that asked it: a pairwise judge's baseline answers the same
    request (same plan, same cache key on its own model)."""


class CallCounts(Protocol):
    """A runner's running counts (`calls.requests.RunStats`)."""

    @property
    def made(self) -> int: ...

    @property
    def cached(self) -> int: ...


class Asks(Protocol):
    """What a grader's calls run through: a `calls.runner.Runner` (the run's cache, budget,
    retries, concurrency and progress), ``run`` taking `calls.requests.Request` and returning a
    `calls.requests.CallResult` per request, in order."""

    @property
    def stats(self) -> CallCounts: ...

    def run(self, requests: Sequence[Any]) -> list[Any]: ...


@dataclass(frozen=True)
class GradingContext:
    """What a grader may call: the judge's model's runner, and for a pairwise judge the
    baseline's (None: not given; a grader that needs one says so)."""

    judge: Asks | None = None
    baseline: Asks | None = None


@dataclass(frozen=True)
class GraderCalls:
    """The calls a grader made grading a batch (counted apart from the model's): made, served
    from the cache, and one line per call that did not complete."""

    made: int = 0
    cached: int = 0
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Grades:
    """A batch's grades, one per answer in the order given, and the grader's own calls (None:
    a grader that makes none, whose grade is a function of the answer alone)."""

    each: tuple[Grade, ...]
    calls: GraderCalls | None = None


class Grader(Protocol):
    """Grades a batch of answers at once; never raises on a bad answer (an answer it cannot
    read is ``Grade(0.0, False, None)``)."""

    def grade(self, answers: Sequence[Answer], context: GradingContext) -> Grades:
        """One `Grade` per answer, in order, and the calls made grading them."""
        ...
