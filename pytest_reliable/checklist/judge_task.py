"""The judge tested like a model (SPEC section 12): `JudgeTask` and its perturbations.

A `JudgeTask(rubric, scale=...)` is a task whose examples are ``{"question", "answer",
"label"}`` (``label``: the grade the judge should give; optional ``"reference"``). With the
judge as the test's ``reliable_model``, ``mft`` checks that it grades known-good and known-bad
answers right and ``invariance`` that a meaning-preserving change does not change its grade:

- ``rubric_paraphrase``: the rubric framed by other words that keep its meaning;
- ``answer_whitespace``: a doubled space or a trailing space in the answer;
- ``answer_position`` (``JudgeTask(..., pairwise=True)``, examples ``{"question", "answers":
  [first, second], "label": 1 | 2}``): the two answers shown in the other order; the prediction
  is the position, in the record, of the answer the judge preferred, so a judge that follows
  the content and not the position does not flip;
- or a callable ``example -> list[example]``.

The judge sees exactly what a `Judge` asks (`Judge.messages`: rubric, question, reference,
answer), its instruction first; a CheckList test renders one user message, so the instruction
heads it instead of being a system message. Its reply is read as a `Judge` reads a vote
(`Judge.parse`, `Judge.parse_choice`: the grammar of `judge_votes`), so a judge tested here is
read exactly as it will be when it grades.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_reliable.errors import DatasetError
from pytest_reliable.plan.task import Grade
from pytest_reliable.tasks.judge import SCALES, Judge, JudgedItem, JudgeUsageError

RUBRIC_FRAMINGS = (
    "{rubric}",
    "What a good answer does: {rubric}",
    "Grade against this criterion. {rubric}",
    "{rubric} Use this rubric to grade.",
)
"""How the rubric is shown: index 0 as written, the others ``rubric_paraphrase``'s framings."""
FRAMING = "rubric_framing"
"""The example field ``rubric_paraphrase`` sets (an index into RUBRIC_FRAMINGS)."""
PASS_FAIL_LABELS = ("pass", "fail")
ONE_TO_FIVE_LABELS = (1, 2, 3, 4, 5)


class JudgeTask:
    """Records ``{"question", "answer", "label"}`` (+ ``"reference"``) graded by the model under
    test acting as a judge; the prediction is the grade it gave (``"pass"``/``"fail"``, or
    1..5 on the ``"1-5"`` scale)."""

    kind = "judge"
    default_instruction = "Grade the answer."

    def __init__(self, rubric: str, scale: str = "pass/fail", pairwise: bool = False) -> None:
        if scale not in SCALES:
            raise JudgeUsageError(f"JudgeTask: scale={scale!r} is not allowed: 'pass/fail' or "
                                  "'1-5'")
        if not isinstance(rubric, str) or not rubric.strip():
            raise JudgeUsageError(f"JudgeTask: rubric={rubric!r} is not allowed: a non-empty "
                                  "string")
        self.rubric = rubric
        self.scale = scale
        self.pairwise = pairwise
        self.labels: tuple[Any, ...] = (
            (1, 2) if pairwise else PASS_FAIL_LABELS if scale == "pass/fail"
            else ONE_TO_FIVE_LABELS)

    def __repr__(self) -> str:
        return f"JudgeTask(scale={self.scale!r})"

    def _judge(self, example: Mapping[str, Any]) -> Judge:
        framing = RUBRIC_FRAMINGS[int(example.get(FRAMING, 0)) % len(RUBRIC_FRAMINGS)]
        return Judge(None, framing.format(rubric=self.rubric), scale=self.scale,
                     pairwise=self.pairwise)

    def label_index(self, raw: Any) -> int | None:
        """The index in ``labels`` of a record's label: "pass"/"fail" (any case), True/False or
        1/0 on the pass/fail scale; 1..5 on the 1-5 scale; 1 or 2 (the better answer's
        position in ``answers``) for a pairwise judge."""
        if self.pairwise:
            return raw - 1 if isinstance(raw, int) and not isinstance(raw, bool) and raw in (
                1, 2) else None
        if self.scale == "1-5":
            try:
                value = int(raw)
            except (TypeError, ValueError):
                return None
            return value - 1 if 1 <= value <= 5 and value == raw else None
        if isinstance(raw, str):
            lowered = raw.strip().lower()
            return PASS_FAIL_LABELS.index(lowered) if lowered in PASS_FAIL_LABELS else None
        if isinstance(raw, bool | int) and raw in (0, 1):
            return 0 if raw else 1
        return None

    # -- the Task protocol ---------------------------------------------------------------------
    def validate(self, dataset: Any) -> None:
        for index, record in enumerate(dataset):
            where = f"example {index}"
            if not isinstance(record, Mapping):
                raise DatasetError(f"{where}: a JudgeTask example is a mapping with question, "
                                   "answer and label")
            fields = ("question", "answers", "label") if self.pairwise else (
                "question", "answer", "label")
            if self.pairwise and (not isinstance(record.get("answers"), list | tuple)
                                  or len(record["answers"]) != 2):
                raise DatasetError(f"{where}: a pairwise JudgeTask example has 'answers', a "
                                   "list of two answers, and 'label' 1 or 2 (the better one)")
            for key in fields:
                if key not in record:
                    raise DatasetError(f"{where}: field {key!r} is missing (JudgeTask examples "
                                       "are {question, answer, label} + optional reference)")
            if self.label_index(record["label"]) is None:
                allowed = "1 or 2" if self.pairwise else (
                    "'pass' or 'fail'" if self.scale == "pass/fail" else "1 to 5")
                raise DatasetError(f"{where}: label {record['label']!r} is not a grade on the "
                                   f"{self.scale} scale ({allowed})")

    def prompt_text(self, example: Mapping[str, Any]) -> str:
        return str(example["question"])

    def options(self, example: Mapping[str, Any]) -> None:
        return None

    def gold_index(self, example: Mapping[str, Any]) -> None:
        return None

    def demo_answer(self, example: Mapping[str, Any]) -> str:
        return str(example["label"])

    def render_plain(self, example: Mapping[str, Any]) -> str:
        reference = example.get("reference")
        references = () if reference is None else (str(reference),)
        if self.pairwise:
            answers = [str(example["answers"][i]) for i in _shown_order(example)]
            item = JudgedItem(str(example["question"]), references, answers[0])
            messages = self._judge(example).pair_messages(item, answers[0], answers[1])
        else:
            item = JudgedItem(str(example["question"]), references, str(example["answer"]))
            messages = self._judge(example).messages(item)
        (_, instruction), (_, question) = messages
        return f"{instruction}\n\n{question}"

    def grade(self, text: str, example: Mapping[str, Any], prompt: Any = None) -> Grade:
        if self.pairwise:
            return self._grade_choice(text, example)
        vote = self._judge(example).parse(text) if isinstance(text, str) else None
        if vote is None:
            return Grade(0.0, False, None)
        prediction = self.labels[0 if vote == 1.0 else 1] if self.scale == "pass/fail" else (
            int(round(vote * 4)) + 1)
        expected = self.label_index(example.get("label"))
        right = expected is not None and self.labels[expected] == prediction
        return Grade(float(right), True, prediction)

    def _grade_choice(self, text: str, example: Mapping[str, Any]) -> Grade:
        """The record position (1 or 2) of the answer the judge preferred."""
        choice = self._judge(example).parse_choice(text) if isinstance(text, str) else None
        if choice is None:
            return Grade(0.0, False, None)
        prediction = _shown_order(example)[choice - 1] + 1
        return Grade(float(prediction == example.get("label")), True, prediction)

    def predict(self, text: str, example: Mapping[str, Any], prompt: Any = None) -> Any:
        return self.grade(text, example, prompt).prediction


ANSWER_ORDER = "answer_order"
"""The example field ``answer_position`` sets: the record positions of the answers as shown."""


def _shown_order(example: Mapping[str, Any]) -> tuple[int, int]:
    order = example.get(ANSWER_ORDER, (0, 1))
    return (int(order[0]), int(order[1]))


# -- perturbations of a judge's examples (invariance) ------------------------------------------
def rubric_paraphrase(example: Mapping[str, Any], rng: np.random.Generator) -> list[Any]:
    """The example with the rubric framed by other words (each framing of RUBRIC_FRAMINGS that
    is not the example's own); [] for an example that is not a judge's."""
    if "label" not in example or ("answer" not in example and "answers" not in example):
        return []
    own = int(example.get(FRAMING, 0))
    others = [i for i in range(len(RUBRIC_FRAMINGS)) if i != own]
    return [{**example, FRAMING: int(rng.choice(others))}]


def answer_whitespace(example: Mapping[str, Any], rng: np.random.Generator) -> list[Any]:
    """The example with one space of its answer doubled, or a trailing space added."""
    answer = example.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        return []
    spaces = [i for i, ch in enumerate(answer) if ch == " "]
    options = [answer + " "] + [answer[:i] + " " + answer[i:] for i in spaces]
    return [{**example, "answer": options[int(rng.integers(len(options)))]}]


def answer_position(example: Mapping[str, Any], rng: np.random.Generator) -> list[Any]:
    """A pairwise judge's example with its two answers shown in the other order."""
    answers = example.get("answers")
    if not isinstance(answers, list | tuple) or len(answers) != 2:
        return []
    first, second = _shown_order(example)
    return [{**example, ANSWER_ORDER: [second, first]}]
