"""Tasks: what a record means, how its prompt reads, and how an answer is extracted and graded.

Answer extraction for options (`MultipleChoice`, enumerated `Classification`), in this order;
the first step that decides wins:

1. The whole answer is one label or one option text, after markdown (``**``, ``__``, backticks),
   an ``Answer:`` / ``The answer is`` prefix, brackets and trailing punctuation are removed:
   ``B``, ``(B)``, ``B.``, ``**B**``, ``Answer: B``, ``positive``.
2. An explicit pattern anywhere: ``answer is (b)``, ``Answer: B``, ``option 2``, ``choice iii``.
3. Exactly one option text appears in the answer (case-insensitive, whole words; an option text
   contained in a longer matched option text does not count separately); when several appear,
   the one the answer starts with, followed by punctuation or the end (``Positive: ...``).
4. Exactly one distinct label appears wrapped, ``(B)`` / ``[B]`` / the variant's own wrapper.
5. The answer starts with a label followed by punctuation or the end (``B: the falcon``).

Labels are those of the variant's own enumerator (A / a / 1 / I / i / Ⅰ / α / !), matched
case-insensitively. A label that is also an English word (``a``, ``I``) only counts when it is
wrapped or followed by punctuation or the end, never as a word inside a sentence. Anything else is
*unparsed*: scored 0 with ``parsed=False``, never an exception.

Texts are compared after Unicode normalization (NFC, then casefold where case is ignored): "café"
typed as e + combining accent is the label "café".
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_reliable.errors import DatasetError, ReliableError
from pytest_reliable.plan.prompt import Prompt

if TYPE_CHECKING:
    from pytest_reliable.plan.data import Dataset
    from pytest_reliable.tasks.judge import Judge

Example = Mapping[str, Any]

_MARKDOWN = re.compile(r"\*\*|__|`+|^#{1,6}\s+(?=\S)", re.MULTILINE)
_PREFIX = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+|right\s+|final\s+)?(?:answer|option|choice|label|sentiment)"
    r"(?:\s+is)?\s*[:=\-]?\s*)", re.IGNORECASE)
_WORDLIKE = {"a", "i"}
_END = r"(?=$|[\s.,;:!?)\]}'\"])"


@dataclass(frozen=True)
class Grade:
    """The grade of one answer: ``score`` in [0, 1] (or the grader's number), whether the answer
    could be parsed, and the parsed prediction (original option index, label text, or text)."""

    score: float
    parsed: bool
    prediction: Any
    votes: tuple[float | None, ...] = ()
    """A judge's votes behind ``score`` (None: a vote the reply did not yield); empty when no
    judge graded the answer."""


class Task(Protocol):
    """What the plugin needs from a task: the built-in `MultipleChoice`, `Classification` and
    `Generation` satisfy it, and so can your own class (no base class needed).

    A task with options (``options`` returns a list) is graded on the option the answer picks;
    one without (``options`` returns None) shows demos with ``demo_answer``.
    """

    default_instruction: str
    """The instruction a variant without its own ``instruction`` shows."""

    def validate(self, dataset: Dataset) -> None:
        """Raise `pytest_reliable.errors.DatasetError` naming the first bad record and the fix."""
        ...

    def prompt_text(self, example: Example) -> str:
        """The record's question or text, as the prompt shows it."""
        ...

    def options(self, example: Example) -> list[str] | None:
        """The record's options in their original order; None for free-form answers."""
        ...

    def gold_index(self, example: Example) -> int | None:
        """The correct option's original index; None for free-form answers."""
        ...

    def demo_answer(self, example: Example) -> str:
        """A few-shot demo's answer text (used when ``options`` is None)."""
        ...

    def render_plain(self, example: Example) -> str | None:
        """The whole user message for `Space.plain()` prompts, or None for the default layout."""
        ...

    def grade(self, text: str, example: Example, prompt: Prompt | None = None) -> Grade:
        """Score one answer; never raise on a bad answer (unparsed: ``Grade(0.0, False, None)``)."""
        ...


def _nfc(text: str) -> str:
    """One spelling of each character: "é" and "e" + combining accent are the same text."""
    return unicodedata.normalize("NFC", text)


def _fold(text: str) -> str:
    """For comparisons that ignore case: NFC, casefold, NFC again (casefold can decompose)."""
    return _nfc(_nfc(text).casefold())


def lookalike_hint(value: Any, known: Sequence[Any]) -> str:
    """A hint when ``value`` looks like one of ``known`` but differs in invisible characters
    (compatibility forms such as full-width letters, zero-width or format characters)."""
    def skeleton(text: Any) -> str:
        kept = "".join(c for c in unicodedata.normalize("NFKC", str(text))
                       if unicodedata.category(c) != "Cf")
        return _fold(kept.strip())

    for other in known:
        if skeleton(value) == skeleton(other):
            return (f" ({value!r} looks like {other!r} but differs in its Unicode characters: "
                    f"{ascii(str(value))} vs {ascii(str(other))}; retype it or normalize the "
                    "data to NFKC)")
    return ""


def _clean(text: str) -> str:
    text = _MARKDOWN.sub("", text or "")
    return re.sub(r"[ \t]+", " ", text).strip()


def _answer_candidates(text: str) -> list[str]:
    """The answer with, successively, prefixes, punctuation and brackets taken off."""
    core = text.strip()
    out = [core]
    for _ in range(2):
        core = _PREFIX.sub("", core).strip()
    out.append(core)
    core = core.strip(" \t\n.,;:!?\"'")
    out.append(core)
    if len(core) >= 2 and core[0] in "([{<" and core[-1] in ")]}>":
        core = core[1:-1].strip()
    elif core.endswith(")") and "(" not in core:
        core = core[:-1]
    out.append(core.strip())
    return [c for c in out if c]


def _strip_answer(text: str) -> str:
    candidates = _answer_candidates(text)
    return candidates[-1] if candidates else ""


def _label_pattern(labels: Sequence[str]) -> str:
    ordered = sorted({label for label in labels}, key=len, reverse=True)
    return "|".join(re.escape(label) for label in ordered)


def _find_label(labels: Sequence[str], found: str) -> int | None:
    folded = _fold(found)
    for k, label in enumerate(labels):
        if _fold(label) == folded:
            return k
    return None


def _word_like(label: str) -> bool:
    return label.casefold() in _WORDLIKE


def extract_choice(text: str, options: Sequence[str], labels: Sequence[str],
                   wrapper: str = "({})") -> int | None:
    """The display position the answer ``text`` picks among ``options`` shown with ``labels``
    (both in display order), or None when it cannot be read (see the module docstring)."""
    if not isinstance(text, str):
        return None
    cleaned = _clean(_nfc(text))
    if not cleaned:
        return None
    options, labels = [_nfc(str(o)) for o in options], [_nfc(str(x)) for x in labels]
    hit = _whole_answer(cleaned, options, labels)
    if hit is None and labels:
        hit = _explicit_pattern(cleaned, labels)
    if hit is None:
        hit = _one_option_text(_fold(cleaned), options)
    if hit is None and labels:
        hit = _one_wrapped_label(cleaned, labels, wrapper)
    if hit is None and labels:
        hit = _leading_label(cleaned, labels)
    return hit


def _whole_answer(cleaned: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """Step 1: the whole answer (or its first line) is a label or an option text."""
    first_line = next((line for line in cleaned.splitlines() if line.strip()), "")
    for candidate in (cleaned, first_line):
        for core in _answer_candidates(candidate):
            hit = _find_label(labels, core)
            if hit is None:
                hit = _find_label(options, core)
            if hit is not None:
                return hit
    return None


def _explicit_pattern(cleaned: str, labels: Sequence[str]) -> int | None:
    """Step 2: ``answer is (b)``, ``Answer: B``, ``option 2``, ``choice iii`` anywhere."""
    pattern = re.compile(
        r"(?:answer|option|choice)\s*(?:is|would be|will be|:|=|-)?\s*:?\s*"
        r"(?:option\s+|choice\s+)?([(\[]?)(" + _label_pattern(labels) + r")([)\].]?)" + _END,
        re.IGNORECASE)
    for match in pattern.finditer(cleaned):
        label = match.group(2)
        k = _find_label(labels, label)
        if k is None:
            continue
        wrapped = bool(match.group(1)) and bool(match.group(3))
        if _word_like(label) and not wrapped and re.match(r"\s+\w", cleaned[match.end():]):
            continue  # "answer is a good one": the article, not label a
        return k
    return None


def _one_option_text(folded: str, options: Sequence[str]) -> int | None:
    """Step 3: exactly one option text appears (whole words; one inside a longer matched option
    text does not count); when several do, the one the answer starts with, then punctuation."""
    hits = _option_text_hits(folded, options)
    kept = {k for k, s, e in hits if not _inside_longer_hit(s, e, k, hits)}
    if len(kept) == 1:
        return kept.pop()
    leading = [k for k in kept if any(s == 0 and re.match(r"$|[\s]*[.:;,!)\]-]", folded[e:])
                                      for k2, s, e in hits if k2 == k)]
    return leading[0] if len(leading) == 1 else None


def _option_text_hits(folded: str, options: Sequence[str]) -> list[tuple[int, int, int]]:
    """(option index, start, end) of every whole-word occurrence of an option text."""
    hits: list[tuple[int, int, int]] = []
    for k, option in enumerate(options):
        opt = _fold(option).strip()
        if opt:
            hits += [(k, m.start(), m.end())
                     for m in re.finditer(r"(?<!\w)" + re.escape(opt) + r"(?!\w)", folded)]
    return hits


def _inside_longer_hit(start: int, end: int, k: int, hits: list[tuple[int, int, int]]) -> bool:
    return any(k2 != k and s2 <= start and end <= e2 and (e2 - s2) > (end - start)
               for k2, s2, e2 in hits)


def _one_wrapped_label(cleaned: str, labels: Sequence[str], wrapper: str) -> int | None:
    """Step 4: exactly one distinct label appears wrapped: ``(B)``, ``[B]`` or the variant's own
    wrapper (when it has a visible opening or a closing bracket)."""
    alt = _label_pattern(labels)
    forms = [r"\((" + alt + r")\)", r"\[(" + alt + r")\]"]
    if "{}" in wrapper:
        before, after = wrapper.split("{}", 1)
        if before.strip() or after.strip() in (")", "]", ">"):
            forms.append(r"(?<!\w)" + re.escape(before) + "(" + alt + ")" + re.escape(after)
                         + _END)
    found = {_find_label(labels, hit.group(1))
             for form in forms for hit in re.finditer(form, cleaned, re.IGNORECASE)}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def _leading_label(cleaned: str, labels: Sequence[str]) -> int | None:
    """Step 5: the answer starts with a label followed by punctuation or the end, or with a
    one-letter capital label and a space (``B the falcon``; never the words ``a`` or ``I``)."""
    alt = _label_pattern(labels)
    m = re.match(r"^[(\[]?(" + alt + r")(?:[)\].:,\-]|$)", cleaned, re.IGNORECASE)
    if m:
        return _find_label(labels, m.group(1))
    m = re.match(r"^(" + alt + r")\s", cleaned, re.IGNORECASE)
    if m and not _word_like(m.group(1)) and len(m.group(1)) == 1 and m.group(1).isupper():
        return _find_label(labels, m.group(1))
    return None


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
            texts = [_fold(str(c).strip()) for c in choices]
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
    text = _nfc(answer.strip())
    for k, choice in enumerate(choices):
        if _nfc(str(choice).strip()) == text:
            return k
    for k, choice in enumerate(choices):
        if _fold(str(choice).strip()) == _fold(text):
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
        if len({_fold(label) for label in labels}) != len(labels):
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
            if _fold(str(label).strip()) == _fold(known):
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


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_text(text: str) -> str:
    """Lowercase, no punctuation, no articles, single spaces (SQuAD-style)."""
    text = _clean(_nfc(text)).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


GraderFn = Callable[[str, Example], Any]


class Generation:
    """Records ``{"question", "reference"}`` or ``{"question", "references": [...]}``.

    ``grader``: ``"exact"`` (stripped equality), ``"normalized"`` (equality after
    `normalize_text`, of the whole answer or of what follows an ``Answer:`` prefix), ``"regex"``
    (each reference is a pattern searched in the answer), a callable
    ``(answer, example) -> bool | number``: a bool scores 1/0 with the answer text as prediction;
    a number is both the score and the prediction (what ``increase``/``decrease`` DIR tests
    compare), or a `pytest_reliable.Judge` (SPEC section 12): a grader that asks a model, so the
    evaluation grades its answers in a second stage, in one batch through the runner (the grader
    hook is ``judge``). An empty answer, or a callable that raises, is unparsed.
    """

    kind = "generation"
    default_instruction = "Answer the question."

    def __init__(self, grader: str | GraderFn | Judge = "normalized",
                 instruction: str | None = None) -> None:
        self.judge: Judge | None = None
        """The grader when it is a judge: `evaluation.grade_results` asks it, a batch at a time."""
        if hasattr(grader, "grade_all"):  # a Judge; duck-typed so tasks.py stays import-light
            self.judge = grader  # type: ignore[assignment]
        elif isinstance(grader, str) and grader not in ("exact", "normalized", "regex"):
            raise ValueError(f"unknown grader {grader!r}: use exact, normalized, regex or a "
                             "callable")
        elif not isinstance(grader, str) and not callable(grader):
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
        if "references" in example:
            refs = example["references"]
            return [str(r) for r in (refs if isinstance(refs, list | tuple) else [refs])]
        if "reference" in example:
            return [str(example["reference"])]
        return []  # a judged record may have no reference

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
        candidates = {normalize_text(answer), normalize_text(_strip_answer(answer))}
        first = next((line for line in answer.splitlines() if line.strip()), "")
        candidates.add(normalize_text(_strip_answer(first)))
        ok = any(normalize_text(r) in candidates for r in refs)
        return Grade(float(ok), True, normalize_text(_strip_answer(first)))

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
