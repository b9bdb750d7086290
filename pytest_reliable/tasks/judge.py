"""LLM-as-judge graders (SPEC section 12): a judge is a model, its votes are calls.

A `Judge` is a `Grader` (`plan.grading`): it grades a `Generation`'s answers by asking a model
(any model object: `chat_model`, `text_model`, `openai_model`, `local_model`, a protocol object)
to grade each answer against a rubric, ``votes`` times at ``temperature``. Its votes are
requests like the model's own, run by the same `Runner` (cache, budget, retries, concurrency,
record modes, progress): the cache key holds the judge's identity, the messages (which hold the
rubric, the question, the reference and the answer, so a changed rubric or answer is a new key)
and the vote index, so votes 0..votes-1 are independent draws and a changed judge or rubric is
never served old grades. Two cells whose model gave the same answer to the same question share
their votes: grading stays a function of the response.

A cell's score is the mean of its votes, in [0, 1]; a vote the reply does not yield (or whose
call did not complete) is a failing vote, counted in ``unparsed_votes``. The bounds of section 11
(clustered by instance) then hold for the judged cells as for any other score in [0, 1]. The
judge returns typed grades (votes, unread replies, its calls); what the report says of it (how
noisy it was, its win rate) is the verdict stage's (`verdict.judged`). How a reply yields a vote
is `judge_votes`' grammar: the form the judge was asked for, and only unambiguous variants of it.

A judge whose replies cannot be read is the judge's failure, not the model's: when more than
``max_unparsed`` of a test's votes came back but yielded no grade, `verdict.judged.unread_judge`
names the judge, the share and one such reply, and the test reports an error (no statistics), as
a test whose calls did not complete does: a missing grade is not a wrong answer.

The judge is checked when a test uses it (`Judge.check`), not when it is built, so a bad
argument stops the run with a usage error before any call, wherever the judge was written.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_reliable.calls.requests import CallResult, Request
from pytest_reliable.errors import ReliableConfigError, ReliableError
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.named import NamedModel
from pytest_reliable.plan.grading import Answer, Asks, GraderCalls, Grades, GradingContext
from pytest_reliable.plan.task import Grade
from pytest_reliable.tasks.judge_votes import read_choice, read_one_to_five, read_pass_fail

SCALES = ("pass/fail", "1-5")
JUDGE_SCOPE = "judge"
"""The requests' scope: a judge's vote never shares a key with a call of the model under test."""
MAX_UNPARSED = 0.1
"""The default share of a test's votes that may come back unreadable before the test errors: a
sampled judge's occasional off-format reply stays a failing vote (SPEC section 12), while a judge
whose replies do not follow its prompt (a chat model too small, a reply cut by ``max_tokens``)
stops the test instead of failing the model on votes it never gave. At 0.1 unread replies move a
judged score by at most 0.1; a judge whose replies are off-format 5% of the time (the noisy
judges of benchmarks/bench_judge_errors.py) passes it in 97 of 100 runs at one vote per answer
and 99 of 100 at three."""


class JudgeUsageError(ReliableConfigError):
    """A judge that cannot be used as written (bad votes, scale, temperature, rubric, model).
    The plugin turns it into a usage error: the run stops with exit code 4."""


@dataclass(frozen=True)
class JudgedItem:
    """What the judge sees of one answer."""

    question: str
    references: tuple[str, ...]
    answer: str

    @classmethod
    def of(cls, example: Mapping[str, Any], answer: str) -> JudgedItem:
        """The item of ``answer`` to a `Generation` record (the only task that takes a grader):
        its question and its references."""
        return cls(str(example["question"]), tuple(references_of(example)), answer)


def references_of(example: Mapping[str, Any]) -> list[str]:
    """A `Generation` record's references: ``references`` (a list, or one value), else
    ``reference``, else none (a judged record may have no reference)."""
    if "references" in example:
        refs = example["references"]
        return [str(r) for r in (refs if isinstance(refs, list | tuple) else [refs])]
    if "reference" in example:
        return [str(example["reference"])]
    return []


@dataclass(frozen=True)
class Verdict:
    """A judged answer: its votes (None: a vote the reply did not yield, or that did not run),
    its score (the mean vote, failing votes 0) and the problems of the calls that did not
    complete."""

    votes: tuple[float | None, ...]
    problems: tuple[str, ...] = ()
    outcome: float | None = None
    """A pairwise verdict's win 1, tie 0.5 or loss 0 (the votes then say which answer each
    vote preferred: 1 the candidate, 0 the baseline)."""
    unread: tuple[str, ...] = ()
    """The replies that came back but yielded no vote (what `unread_judge` quotes)."""

    @property
    def score(self) -> float:
        if self.outcome is not None:
            return self.outcome
        return sum(v or 0.0 for v in self.votes) / len(self.votes) if self.votes else 0.0

    @property
    def unparsed(self) -> int:
        return sum(v is None for v in self.votes)


class Judge:
    """A grader that asks a model: ``Generation(grader=Judge(model, rubric))``; a `Grader`
    (`plan.grading`) whose calls run through ``context.judge``.

    ``scale``: ``"pass/fail"`` (a vote is 1 or 0) or ``"1-5"`` (mapped to 0, 0.25, ..., 1).
    ``pairwise=True``: a judge of two answers (candidate vs baseline, SPEC section 9).
    ``id``: the judge's identity in the cache and the report (default: its model's).
    ``max_unparsed``: the share of a test's votes that may come back unreadable (each a failing
    vote) before the test errors as the judge's failure (default `MAX_UNPARSED`, 0.1; 1.0 never
    errors).
    """

    def __init__(
        self,
        model: Any,
        rubric: str,
        *,
        votes: int = 3,
        temperature: float = 0.7,
        scale: str = "pass/fail",
        id: str | None = None,
        pairwise: bool = False,
        max_tokens: int = 16,
        max_unparsed: float = MAX_UNPARSED,
    ) -> None:
        self.model = model
        self.rubric = rubric
        self.votes = votes
        self.temperature = temperature
        self.scale = scale
        self.id = id
        self.pairwise = pairwise
        self.max_tokens = max_tokens
        self.max_unparsed = max_unparsed

    def __repr__(self) -> str:
        return (f"Judge(id={self.id!r}, votes={self.votes!r}, scale={self.scale!r}, "
                f"rubric={self.rubric_hash})")

    @property
    def rubric_hash(self) -> str:
        return hashlib.sha256(str(self.rubric).encode()).hexdigest()[:12]

    def check(self) -> None:
        """Raise `JudgeUsageError` naming the argument, the value and what is allowed."""
        def bad(argument: str, value: Any, allowed: str) -> JudgeUsageError:
            return JudgeUsageError(f"Judge: {argument}={value!r} is not allowed: {allowed}")

        if isinstance(self.votes, bool) or not isinstance(self.votes, int) or self.votes < 1:
            raise bad("votes", self.votes, "an integer >= 1")
        if (isinstance(self.temperature, bool) or not isinstance(self.temperature, int | float)
                or not math.isfinite(self.temperature) or self.temperature < 0):
            raise bad("temperature", self.temperature, "a number >= 0")
        if self.scale not in SCALES:
            raise bad("scale", self.scale, "'pass/fail' or '1-5'")
        if not isinstance(self.rubric, str) or not self.rubric.strip():
            raise bad("rubric", self.rubric, "a non-empty string saying what a good answer is")
        if self.id is not None and (not isinstance(self.id, str) or not self.id):
            raise bad("id", self.id, "a non-empty string or None")
        if not isinstance(self.pairwise, bool):
            raise bad("pairwise", self.pairwise, "True or False")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or (
                self.max_tokens < 1):
            raise bad("max_tokens", self.max_tokens, "an integer >= 1")
        if (isinstance(self.max_unparsed, bool) or not isinstance(self.max_unparsed, int | float)
                or not 0 <= self.max_unparsed <= 1):
            raise bad("max_unparsed", self.max_unparsed,
                      "a share from 0 to 1 of the test's votes (1 never errors)")
        if self.model is None or not (isinstance(self.model, NamedModel) or callable(self.model)
                                      or hasattr(self.model, "acomplete")
                                      or hasattr(self.model, "complete")):
            raise bad("model", self.model, "a model object: chat_model(...), text_model(...), "
                      "openai_model(...), local_model() or an object with acomplete/complete")

    # -- asking ------------------------------------------------------------------------------
    @property
    def params(self) -> SamplingParams:
        return SamplingParams(temperature=float(self.temperature), max_tokens=self.max_tokens)

    def instruction(self) -> str:
        if self.scale == "1-5":
            return ("You grade answers. Grade the answer by the rubric on a scale from 1 (worst) "
                    "to 5 (best). Reply with the number only.")
        return ("You grade answers. Decide whether the answer meets the rubric. Reply with PASS "
                "or FAIL only.")

    def messages(self, item: JudgedItem) -> tuple[tuple[str, str], ...]:
        """What the judge is asked about one answer: the rubric, the question, the reference
        when there is one, and the answer."""
        parts = [f"Rubric: {self.rubric}", f"Question: {item.question}"]
        if item.references:
            parts.append("Reference answer: " + " | ".join(item.references))
        parts.append(f"Answer: {item.answer}")
        parts.append("Grade (1-5):" if self.scale == "1-5" else "Grade (PASS or FAIL):")
        return (("system", self.instruction()), ("user", "\n\n".join(parts)))

    def requests(self, item: JudgedItem) -> list[Request]:
        """The votes of one answer: vote index 0..votes-1 (independent draws at temperature
        > 0; at temperature 0 the votes are asked as distinct draws too, so a deterministic
        judge's agreement is measured, not assumed)."""
        messages = self.messages(item)
        return [Request(messages, self.params, vote, JUDGE_SCOPE) for vote in range(self.votes)]

    def parse(self, reply: str) -> float | None:
        """A vote in [0, 1], or None when the reply does not yield one (`judge_votes`)."""
        return read_one_to_five(reply) if self.scale == "1-5" else read_pass_fail(reply)

    @property
    def asked_for(self) -> str:
        """The reply the judge's prompt asks for, as a failure message names it."""
        if self.pairwise:
            return "1 or 2"
        return "a number from 1 to 5" if self.scale == "1-5" else "PASS or FAIL"

    def verdict(self, results: Sequence[CallResult]) -> Verdict:
        votes: list[float | None] = []
        problems: list[str] = []
        unread: list[str] = []
        for result in results:
            if result.status != "ok" or result.response is None:
                votes.append(None)
                problems.append(f"judge {result.status}: {result.error or result.status}")
                continue
            vote = self.parse(result.response.text)
            votes.append(vote)
            if vote is None:
                unread.append(result.response.text)
        return Verdict(tuple(votes), tuple(problems), unread=tuple(unread))

    # -- grading (the Grader protocol) --------------------------------------------------------
    def grade(self, answers: Sequence[Answer], context: GradingContext) -> Grades:
        """Every answer judged in one batch through ``context.judge`` (the judge's own model:
        same cache and budget as the model's calls): an empty answer is unparsed without asking
        the judge; every other answer gets ``votes`` votes and scores their mean, or for a
        pairwise judge its win, tie or loss against ``context.baseline``'s answer
        (`compare_with_baseline`). The calls are counted by the judge's runner, their problems
        listed in cell order."""
        runner = context.judge
        if runner is None:
            raise ReliableError(f"{self!r} grades through its model: give the evaluation its "
                                "Judging (the judge's runner)")
        if self.pairwise and context.baseline is None:
            raise ReliableError("a pairwise Judge compares the candidate with its baseline: give "
                                "the test a baseline model (baseline=NAME, a reliable_baseline "
                                "fixture or --reliable-baseline-model)")
        judged = [j for j, answer in enumerate(answers) if answer.text.strip()]
        items = [JudgedItem.of(answers[j].example, answers[j].text.strip()) for j in judged]
        before = (runner.stats.made, runner.stats.cached)
        if context.baseline is not None and self.pairwise:
            verdicts = self.compare_with_baseline([answers[j] for j in judged], items, runner,
                                                  context.baseline)
        else:
            verdicts = self.grade_all(items, runner)
        calls = GraderCalls(runner.stats.made - before[0], runner.stats.cached - before[1],
                            tuple(p for verdict in verdicts for p in verdict.problems))
        grades = [Grade(0.0, False, None)] * len(answers)
        for j, item, verdict in zip(judged, items, verdicts):
            grades[j] = Grade(verdict.score, True, item.answer, verdict.votes, verdict.unread)
        return Grades(tuple(grades), calls)

    def grade_all(self, items: Sequence[JudgedItem], runner: Asks) -> list[Verdict]:
        """Every item's votes, in one batch through ``runner`` (the judge's model's runner)."""
        requests = [req for item in items for req in self.requests(item)]
        results: list[CallResult] = runner.run(requests)
        return [self.verdict(results[j * self.votes:(j + 1) * self.votes])
                for j in range(len(items))]


    # -- pairwise (SPEC sections 9 and 12) ---------------------------------------------------
    def pair_messages(self, item: JudgedItem, first: str, second: str
                      ) -> tuple[tuple[str, str], ...]:
        parts = [f"Rubric: {self.rubric}", f"Question: {item.question}"]
        if item.references:
            parts.append("Reference answer: " + " | ".join(item.references))
        parts += [f"Answer 1: {first}", f"Answer 2: {second}", "Better answer (1 or 2):"]
        instruction = ("You compare two answers. Decide which answer meets the rubric better. "
                       "Reply with 1 or 2 only.")
        return (("system", instruction), ("user", "\n\n".join(parts)))

    def parse_choice(self, reply: str) -> int | None:
        """1 or 2 (the position of the better answer), or None (`judge_votes`)."""
        return read_choice(reply)

    def compare_with_baseline(self, answers: Sequence[Answer], items: Sequence[JudgedItem],
                              runner: Asks, baseline: Asks) -> list[Verdict]:
        """A pairwise judge's verdicts: ``baseline`` answers the same requests as ``answers``
        (so the same cache keys on its own model), then the judge compares each pair in both
        orders (`compare_all`). A cell whose baseline call did not complete gets no decision (a
        tie) and a problem line."""
        replies: list[CallResult] = baseline.run([answer.request for answer in answers])
        others = [r.response.text.strip() if r.status == "ok" and r.response is not None
                  else None for r in replies]
        verdicts = self.compare_all(items, others, runner)
        return [v if other is not None else replace(v, problems=v.problems + (
            f"baseline {reply.status}: {reply.error or reply.status}",))
            for v, other, reply in zip(verdicts, others, replies)]

    def compare_all(self, items: Sequence[JudgedItem], baseline: Sequence[str | None],
                    runner: Asks) -> list[Verdict]:
        """Each candidate answer (``items``) against the baseline's answer of the same cell, in
        both orders, ``votes`` votes each. Per order the decision is the majority of its votes
        (no majority: no decision); the two orders agreeing give a win (1) or a loss (0), else
        a tie (0.5). A cell without a baseline answer is a tie with no votes cast (and its
        baseline call a problem of the test)."""
        requests: list[Request] = []
        for item, other in zip(items, baseline):
            if other is None:
                continue
            for first, second in ((item.answer, other), (other, item.answer)):
                messages = self.pair_messages(item, first, second)
                requests += [Request(messages, self.params, vote, JUDGE_SCOPE)
                             for vote in range(self.votes)]
        ran: list[CallResult] = runner.run(requests)
        results = iter(ran)
        verdicts = []
        for other in baseline:
            if other is None:
                verdicts.append(Verdict((), (), 0.5))
                continue
            votes: list[float | None] = []
            problems: list[str] = []
            unread: list[str] = []
            for candidate_at in (1, 2):
                for _ in range(self.votes):
                    result = next(results)
                    if result.status != "ok" or result.response is None:
                        votes.append(None)
                        problems.append(f"judge {result.status}: {result.error or result.status}")
                        continue
                    choice = self.parse_choice(result.response.text)
                    votes.append(None if choice is None else float(choice == candidate_at))
                    if choice is None:
                        unread.append(result.response.text)
            shown_first = self._decision(votes[:self.votes])  # the candidate shown first
            shown_second = self._decision(votes[self.votes:])
            outcome = shown_first if shown_first is not None and shown_first == shown_second \
                else 0.5
            verdicts.append(Verdict(tuple(votes), tuple(problems), outcome, tuple(unread)))
        return verdicts

    def _decision(self, votes: Sequence[float | None]) -> float | None:
        """1.0 (candidate) or 0.0 (baseline) when more than half the votes say so, else None."""
        for side in (1.0, 0.0):
            if sum(v == side for v in votes) * 2 > len(votes):
                return side
        return None
