"""The built-in tasks: `MultipleChoice`, `Classification` and `Generation`, what a record means
to each, how its prompt reads and how an answer is graded (read by `tasks.extraction`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pytest_reliable.errors import DatasetError, ReliableError
from pytest_reliable.plan.task import Example, Grade
from pytest_reliable.tasks.extraction import (
    extract_choice,
    fold,
    lookalike_hint,
    nfc,
    normalize_text,
    strip_answer,
)
from pytest_reliable.tasks.judge import Judge, references_of


def _where(dataset: Any, i: int) -> str:
    where = getattr(dataset, "where", None)
    if callable(where):
        return str(where(i))
    name = getattr(dataset, "name", None) or "records"
    return f"{name}, record {i + 1}"


def _records(
    dataset: Any, fields: tuple[str, ...], need: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, record) for each record, after the checks every task shares: a dataset that is not
    empty, records that are mappings with ``fields``. ``need`` says what a record must hold."""
    records = list(dataset)
    if not records:
        raise DatasetError(f"{getattr(dataset, 'name', None) or 'dataset'}: the dataset is "
                           "empty. Fix: give at least one record.")
    for i, record in enumerate(records):
        where = _where(dataset, i)
        if not isinstance(record, Mapping):
            raise DatasetError(f"{where}: a record must be a mapping, got "
                               f"{type(record).__name__}")
        for key in fields:
            if key not in record:
                raise DatasetError(f"{where}: field {key!r} is missing. Fix: {need}.")
            if record[key] is None:
                # Never send "None" to a model (or grade against it): a null is a data bug.
                raise DatasetError(f"{where}: field {key!r} is null. Fix: {need}, each a value.")
        yield where, record


class _OptionTask:
    """Shared grading for tasks whose answers are options."""

    kind = "options"
    default_instruction = "Answer with the label of the correct option."

    def options(self, example: Example) -> list[str] | None:
        raise NotImplementedError

    def gold_index(self, example: Example) -> int | None:
        raise NotImplementedError

    def render_plain(self, example: Example) -> str | None:
        return None

    def demo_answer(self, example: Example) -> str:
        """The correct option's text (render.py shows a demo's answer as its wrapped label)."""
        gold = self.gold_index(example)
        options = self.options(example)
        if gold is None or options is None:
            raise DatasetError(f"{self!r}: no correct option to show for a demo")
        return options[gold]

    def _choice(self, text: str, example: Example, prompt: Any) -> int | None:
        options = self.options(example) or []
        if prompt is not None and getattr(prompt, "displayed", None):
            displayed = tuple(prompt.displayed)
            labels = tuple(prompt.labels)
            wrapper = getattr(prompt, "wrapper", "({})")
        else:
            from pytest_reliable.space import enumerator_labels

            displayed = tuple(range(len(options)))
            labels = enumerator_labels("upper", len(options))
            wrapper = "({})"
        shown = [options[j] for j in displayed]
        if labels == tuple(shown):  # plain rendering: the labels are the option texts
            labels = ()
        try:
            position = extract_choice(text, shown, labels, wrapper)
        except (re.error, IndexError, TypeError, ValueError):
            return None
        return displayed[position] if position is not None else None

    def grade(self, text: str, example: Example, prompt: Any = None) -> Grade:
        """Score 1 when the extracted option is the correct one; unparsed scores 0."""
        choice = self._choice(text, example, prompt)
        if choice is None:
            return Grade(0.0, False, None)
        return Grade(float(choice == self.gold_index(example)), True, self._prediction(choice))

    def predict(self, text: str, example: Example, prompt: Any = None) -> Any:
        """The parsed prediction, or None when unparsed."""
        choice = self._choice(text, example, prompt)
        return None if choice is None else self._prediction(choice)

    def _prediction(self, choice: int) -> Any:
        return choice


class MultipleChoice(_OptionTask):
    """Records ``{"question", "choices", "answer"}``; ``answer`` is an index, a label (``"B"``,
    ``"(B)"``) or the text of a choice. The prediction is the original option index."""

    kind = "multiple_choice"

    def __init__(self, instruction: str | None = None) -> None:
        if instruction is not None:
            self.default_instruction = instruction

    def __repr__(self) -> str:
        return "MultipleChoice()"

    def prompt_text(self, example: Example) -> str:
        return str(example["question"])

    def options(self, example: Example) -> list[str]:
        return [str(c) for c in example["choices"]]

    def gold_index(self, example: Example) -> int:
        index = answer_index(example["answer"], example["choices"])
        if index is None:
            raise DatasetError(f"answer {example['answer']!r} is not among the choices")
        return index

    def validate(self, dataset: Any) -> None:
        """DatasetError naming the record's file/line and field for the first bad record."""
        for where, record in _records(
            dataset, ("question", "choices", "answer"),
            "MultipleChoice records need question, choices and answer",
        ):
            choices = record["choices"]
            if not isinstance(choices, list | tuple) or len(choices) < 2:
                raise DatasetError(f"{where}: field 'choices' must be a list of at least two "
                                   f"options, got {choices!r}")
            texts = [fold(str(c).strip()) for c in choices]
            if len(set(texts)) != len(texts):
                raise DatasetError(f"{where}: field 'choices' has duplicate options {choices!r}. "
                                   "Fix: make every option distinct.")
            if answer_index(record["answer"], choices) is None:
                raise DatasetError(f"{where}: field 'answer' {record['answer']!r} is not among the "
                                   f"choices {choices!r}"
                                   f"{lookalike_hint(record['answer'], choices)}. Fix: give an "
                                   "index, a label such as 'B', or the text of a choice.")


def answer_index(answer: Any, choices: Sequence[Any]) -> int | None:
    """The original index of ``answer`` (an index, a label "B"/"(B)", or a choice's text)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int):
        return answer if 0 <= answer < len(choices) else None
    if not isinstance(answer, str):
        return None
    text = nfc(answer.strip())
    for k, choice in enumerate(choices):
        if nfc(str(choice).strip()) == text:
            return k
    for k, choice in enumerate(choices):
        if fold(str(choice).strip()) == fold(text):
            return k
    m = re.fullmatch(r"[(\[]?([A-Za-z])[)\].]?", text)
    if m:
        k = ord(m.group(1).upper()) - ord("A")
        return k if 0 <= k < len(choices) else None
    if text.isdigit():
        k = int(text)
        return k if 0 <= k < len(choices) else None
    return None


class Classification(_OptionTask):
    """Records ``{"text", "label"}``; ``labels`` are the classes.

    ``template`` (with a ``{text}`` slot) is the whole user message when the prompt comes from
    `Space.plain()` (CheckList tests without ``space=``); a space renders the labels as its
    enumerated, permutable option list. The prediction is the label text.
    """

    kind = "classification"

    def __init__(self, labels: Sequence[str], template: str | None = None,
                 instruction: str | None = None) -> None:
        labels = [str(label) for label in labels]
        if len(labels) < 2:
            raise ValueError("Classification needs at least two labels")
        if len({fold(label) for label in labels}) != len(labels):
            raise ValueError(f"Classification labels must be distinct: {labels!r}")
        if template is not None and "{text}" not in template:
            raise ValueError("Classification template needs a {text} slot")
        self.labels: tuple[str, ...] = tuple(labels)
        self.template = template
        self.default_instruction = instruction or (
            "Classify the text. Answer with the label of the correct option.")

    def __repr__(self) -> str:
        return f"Classification(labels={list(self.labels)!r})"

    def prompt_text(self, example: Example) -> str:
        return str(example["text"])

    def options(self, example: Example) -> list[str]:
        return list(self.labels)

    def gold_index(self, example: Example) -> int:
        index = self.label_index(example["label"])
        if index is None:
            raise DatasetError(f"label {example['label']!r} is not one of {list(self.labels)!r}"
                               f"{lookalike_hint(example['label'], self.labels)}")
        return index

    def label_index(self, label: Any) -> int | None:
        if isinstance(label, int) and not isinstance(label, bool):
            return label if 0 <= label < len(self.labels) else None
        for k, known in enumerate(self.labels):
            if fold(str(label).strip()) == fold(known):
                return k
        return None

    def render_plain(self, example: Example) -> str:
        text = str(example["text"])
        if self.template is not None:
            try:
                return self.template.format_map({**example, "text": text})
            except (KeyError, IndexError, ValueError):
                return self.template.replace("{text}", text)
        return f"{text}\nAnswer with one of these labels: {', '.join(self.labels)}."

    def _prediction(self, choice: int) -> str:
        return self.labels[choice]

    def validate(self, dataset: Any) -> None:
        for where, record in _records(
            dataset, ("text", "label"), "Classification records need text and label"
        ):
            if self.label_index(record["label"]) is None:
                raise DatasetError(f"{where}: field 'label' {record['label']!r} is not one of the "
                                   f"labels {list(self.labels)!r}"
                                   f"{lookalike_hint(record['label'], self.labels)}")


GraderFn = Callable[[str, Example], Any]


class Generation:
    """Records ``{"question", "reference"}`` or ``{"question", "references": [...]}``.

    ``grader``: ``"exact"`` (stripped equality), ``"normalized"`` (equality after
    `normalize_text`, of the whole answer or of what follows an ``Answer:`` prefix), ``"regex"``
    (each reference is a pattern searched in the answer), a callable
    ``(answer, example) -> bool | number``: a bool scores 1/0 with the answer text as prediction;
    a number is both the score and the prediction (what ``increase``/``decrease`` DIR tests
    compare), or a `pytest_reliable.Judge` (SPEC section 12): a grader that asks a model, so the
    evaluation grades the batch's answers with it (`tasks.grading.grader_of`), in one batch
    through the judge's runner. An empty answer, or a callable that raises, is unparsed.
    """

    kind = "generation"
    default_instruction = "Answer the question."

    def __init__(self, grader: str | GraderFn | Judge = "normalized",
                 instruction: str | None = None) -> None:
        self.judge: Judge | None = grader if isinstance(grader, Judge) else None
        """The grader when it is a judge: `tasks.grading.grader_of` grades with it, a batch at
        a time."""
        if isinstance(grader, str) and grader not in ("exact", "normalized", "regex"):
            raise ValueError(f"unknown grader {grader!r}: use exact, normalized, regex or a "
                             "callable")
        if self.judge is None and not isinstance(grader, str) and not callable(grader):
            raise TypeError("grader must be exact, normalized, regex, a callable or a Judge")
        self.grader = grader
        if instruction is not None:
            self.default_instruction = instruction

    def __repr__(self) -> str:
        if self.judge is not None:
            return f"Generation(grader={self.judge!r})"
        name = self.grader if isinstance(self.grader, str) else getattr(
            self.grader, "__name__", "callable")
        return f"Generation(grader={name!r})"

    def prompt_text(self, example: Example) -> str:
        return str(example["question"])

    def options(self, example: Example) -> None:
        return None

    def gold_index(self, example: Example) -> None:
        return None

    def references(self, example: Example) -> list[str]:
        return references_of(example)  # what a judge shows as the reference too

    def demo_answer(self, example: Example) -> str:
        return (self.references(example) or [""])[0]

    def render_plain(self, example: Example) -> None:
        return None

    def grade(self, text: str, example: Example, prompt: Any = None) -> Grade:
        if not isinstance(text, str) or not text.strip():
            return Grade(0.0, False, None)
        answer = text.strip()
        grader = self.grader
        if self.judge is not None:
            raise ReliableError(f"{self!r}: a Judge grades answers through the runner, a batch "
                                "at a time: use reliable.evaluate (or evaluation.grade_results "
                                "with a judge runner), not task.grade")
        if callable(grader):
            try:
                value = grader(answer, example)
            except Exception:  # noqa: BLE001 - a grader bug must not crash the evaluation
                return Grade(0.0, False, None)
            if isinstance(value, bool):
                return Grade(float(value), True, answer)
            if isinstance(value, int | float):
                return Grade(float(value), True, float(value))
            return Grade(0.0, False, None)
        refs = self.references(example)
        if grader == "exact":
            ok = any(answer == r.strip() for r in refs)
            return Grade(float(ok), True, answer)
        if grader == "regex":
            ok = False
            for ref in refs:
                try:
                    ok = ok or re.search(ref, answer) is not None
                except re.error:
                    continue
            return Grade(float(ok), True, answer)
        candidates = {normalize_text(answer), normalize_text(strip_answer(answer))}
        first = next((line for line in answer.splitlines() if line.strip()), "")
        candidates.add(normalize_text(strip_answer(first)))
        ok = any(normalize_text(r) in candidates for r in refs)
        return Grade(float(ok), True, normalize_text(strip_answer(first)))

    def predict(self, text: str, example: Example, prompt: Any = None) -> Any:
        return self.grade(text, example, prompt).prediction

    def validate(self, dataset: Any) -> None:
        for where, record in _records(
            dataset, ("question",),
            "Generation records need question and reference (or references)",
        ):
            if "reference" not in record and "references" not in record and self.judge is None:
                raise DatasetError(f"{where}: field 'reference' is missing (or give "
                                   "'references', a list)")
            if self.grader == "regex":
                for ref in self.references(record):
                    try:
                        re.compile(ref)
                    except re.error as error:
                        raise DatasetError(f"{where}: field 'reference' {ref!r} is not a valid "
                                           f"regular expression ({error})") from None
