"""Running INV / DIR / MFT tests with a *batched* ``predict`` (one call for all originals, one
for all perturbed examples). Perturbations are deterministic given ``(seed, perturbation name,
example index)``."""

from __future__ import annotations

import math
import numbers
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_reliable.checklist.registry import resolve_perturbation
from pytest_reliable.checklist.result import (
    ChecklistResult,
    Example,
    Failure,
    Perturbation,
    Prediction,
)
from pytest_reliable.checklist.text import text_key
from pytest_reliable.contract.markers import ChecklistSpec
from pytest_reliable.contract.vocabulary import Policy
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.plan.task import Task
from pytest_reliable.stats import wilson_interval
from pytest_reliable.verdict.gate import DEFAULT_POLICY, checklist_thresholds


def stable_hash(name: str) -> int:
    """A process-independent hash of a perturbation name (CRC-32; never Python's ``hash``)."""
    return zlib.crc32(name.encode("utf-8"))


def _rng(seed: int, name: str, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) % (1 << 64), stable_hash(name), int(index)])



Predict = Callable[[Sequence[Example]], Sequence[Any]]


def _coerce(prediction: Any) -> Prediction:
    if isinstance(prediction, Prediction):
        return prediction
    return Prediction(prediction, prediction is not None, "" if prediction is None
                      else str(prediction))


def _predict(predict: Predict, batch: list[Example]) -> list[Prediction]:
    if not batch:
        return []
    out = [_coerce(p) for p in predict(batch)]
    if len(out) != len(batch):
        raise ValueError(f"predict returned {len(out)} predictions for {len(batch)} examples")
    return out


def _shown(prediction: Prediction) -> str:
    if prediction.text:
        return prediction.text
    if prediction.parsed:
        return repr(prediction.value)
    return "<no output>"


def _example_text(example: Any) -> str:
    key = text_key(example)
    if key is not None:
        return str(example[key])
    return repr(example)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip().replace(",", ""))
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


@dataclass(frozen=True)
class _Pair:
    index: int
    perturbation: str
    example: Example


def _pairs(examples: Sequence[Example], perturbations: Sequence[Perturbation],
           seed: int) -> list[_Pair]:
    pairs = []
    for perturbation in perturbations:
        for index, example in enumerate(examples):
            for perturbed in perturbation(example, _rng(seed, perturbation.name, index)):
                pairs.append(_Pair(index, perturbation.name, perturbed))
    return pairs


def _result(kind: str, counts: Sequence[int], sizes: Sequence[int], unparsed: int,
            failures: list[Failure], limits: dict[str, float | None], confidence: float,
            decide: Policy) -> ChecklistResult:
    """``counts[i]`` of ``sizes[i]`` pairs made from example i are bad (INV, DIR) or passed (MFT,
    one pair per example); the thresholds are decided in `gate.checklist_thresholds`."""
    hits, pairs = int(sum(counts)), int(sum(sizes))
    if pairs == 0:
        rate, interval = 0.0, (0.0, 1.0)
    else:
        rate = hits / pairs
        interval = wilson_interval(hits, pairs, confidence)
    return ChecklistResult(
        kind=kind, rate=rate, interval=(float(interval[0]), float(interval[1])), pairs=pairs,
        unparsed=unparsed, failures=failures,
        thresholds=checklist_thresholds(limits, counts, sizes, decide, confidence),
        confidence=confidence, decide=decide,
    )


def _per_example(pairs: Sequence[_Pair], bad: Sequence[bool],
                 n_examples: int) -> tuple[list[int], list[int]]:
    """(bad pairs, pairs) per example: the clusters of the rate's bound."""
    counts, sizes = [0] * n_examples, [0] * n_examples
    for pair, is_bad in zip(pairs, bad):
        sizes[pair.index] += 1
        counts[pair.index] += int(is_bad)
    return counts, sizes


def _paired(examples: Sequence[Example], perturbations: Sequence[Any],
            seed: int) -> tuple[list[_Pair], list[int]]:
    """The pairs, and the examples that have a perturbed copy (the originals to predict)."""
    pairs = _pairs(examples, [resolve_perturbation(p, kind="directional")
                              if not isinstance(p, Perturbation) else p
                              for p in perturbations], seed)
    return pairs, sorted({pair.index for pair in pairs})


def _run_pairs(examples: Sequence[Example], perturbations: Sequence[Perturbation],
               predict: Predict, seed: int,
               ) -> tuple[list[_Pair], dict[int, Prediction], list[Prediction], int]:
    examples = list(examples)
    pairs, originals = _paired(examples, perturbations, seed)
    if not pairs:
        return [], {}, [], 0
    before_list = _predict(predict, [examples[i] for i in originals])
    after = _predict(predict, [pair.example for pair in pairs])
    before = dict(zip(originals, before_list))
    unparsed = sum(not p.parsed for p in before_list) + sum(not p.parsed for p in after)
    return pairs, before, after, unparsed


def _flipped(a: Prediction, b: Prediction, tolerance: float | None) -> bool:
    if not a.parsed and not b.parsed:
        return False
    if a.parsed != b.parsed:
        return True
    if tolerance is not None:
        x, y = _number(a.value), _number(b.value)
        if x is not None and y is not None:
            return abs(x - y) > tolerance
    try:
        return bool(a.value != b.value)
    except (TypeError, ValueError):  # e.g. arrays with ambiguous truth values
        return repr(a.value) != repr(b.value)


def run_invariance(
    examples: Sequence[Example],
    perturbations: Sequence[Perturbation],
    predict: Predict,
    *,
    seed: int = 0,
    confidence: float = 0.95,
    tolerance: float | None = None,
    decide: Policy = DEFAULT_POLICY,
    max_flip_rate: float | None = 0.0,
) -> ChecklistResult:
    """INV: the flip rate over (example, perturbed example) pairs, ``max_flip_rate`` decided
    under policy ``decide`` (`gate.checklist_thresholds`)."""
    pairs, before, after, unparsed = _run_pairs(examples, perturbations, predict, seed)
    failures, flipped = [], []
    for pair, prediction in zip(pairs, after):
        original = before[pair.index]
        flipped.append(_flipped(original, prediction, tolerance))
        if flipped[-1]:
            failures.append(_failure(examples[pair.index], pair, original, prediction))
    counts, sizes = _per_example(pairs, flipped, len(examples))
    return _result("invariance", counts, sizes, unparsed, failures,
                   {"max_flip_rate": max_flip_rate}, confidence, decide)


def _failure(example: Example, pair: _Pair, before: Prediction, after: Prediction) -> Failure:
    return Failure(
        original=_example_text(example), perturbed=_example_text(pair.example),
        before=_shown(before), after=_shown(after), perturbation=pair.perturbation,
        before_value=before.value, after_value=after.value,
    )


NUMERIC_RELATIONS = ("increase", "decrease")
LABEL_TASKS = ("options", "multiple_choice", "classification")
"""Task kinds whose predictions are labels or options, never numbers."""


def check_expectation(expect: Any, task: Task) -> None:
    """Before any model call: ``expect="increase"``/``"decrease"`` needs numeric predictions,
    which a task answering with labels never gives (SPEC section 4: a usage error)."""
    kind = getattr(task, "kind", None)
    if isinstance(expect, str) and expect in NUMERIC_RELATIONS and kind in LABEL_TASKS:
        raise ReliableConfigError(
            f"directional(expect={expect!r}) needs numeric predictions, but "
            f"{type(task).__name__} predicts labels. Fix: use expect='flip', a label, or a "
            "callable (before, after) -> bool; or a Generation whose grader returns a number."
        )


def expected_label(task: Task) -> Callable[[Example], Any] | None:
    """MFT's expected prediction: the record's label spelt as the task predicts it (a
    Classification accepts "Positive" or the index 0 for its label "positive"); None when
    the task has no labels (the raw "label" is compared)."""
    labels = getattr(task, "labels", None)
    label_index = getattr(task, "label_index", None)
    if labels is None or not callable(label_index):
        return None

    def expected(example: Example) -> Any:
        raw = example.get("label") if isinstance(example, dict) else None
        index = label_index(raw)
        return labels[index] if index is not None else raw

    return expected


def _expectation(expect: Any) -> Callable[[Prediction, Prediction], bool]:
    if expect is None:
        raise ValueError("directional needs expect=: a label, 'flip', 'increase', 'decrease' "
                         "or a callable (before, after) -> bool")
    if callable(expect) and not isinstance(expect, str):
        return lambda b, a: a.parsed and bool(expect(b.value, a.value))
    if isinstance(expect, str) and expect == "flip":
        def flip(b: Prediction, a: Prediction) -> bool:
            if not a.parsed:
                return False
            return not (b.parsed and not _flipped(b, a, None))
        return flip
    if isinstance(expect, str) and expect in ("increase", "decrease"):
        def numeric(b: Prediction, a: Prediction) -> bool:
            if not a.parsed or not b.parsed:
                return False
            x, y = _number(b.value), _number(a.value)
            for value, number in ((b.value, x), (a.value, y)):
                if number is None:
                    raise ValueError(
                        f"expect={expect!r} needs numeric predictions (e.g. a Generation whose "
                        f"grader returns a number); got {value!r}"
                    )
            assert x is not None and y is not None
            return y > x if expect == "increase" else y < x
        return numeric

    def label(b: Prediction, a: Prediction) -> bool:
        try:
            return a.parsed and bool(a.value == expect)
        except (TypeError, ValueError):
            return False
    return label


def run_directional(
    examples: Sequence[Example],
    perturbations: Sequence[Perturbation],
    predict: Predict,
    *,
    expect: Any,
    seed: int = 0,
    confidence: float = 0.95,
    decide: Policy = DEFAULT_POLICY,
    max_fail_rate: float | None = 0.0,
) -> ChecklistResult:
    """DIR: the fail rate over pairs (the "after" prediction is not as ``expect`` says),
    ``max_fail_rate`` decided under policy ``decide``."""
    ok = _expectation(expect)
    pairs, before, after, unparsed = _run_pairs(examples, perturbations, predict, seed)
    failures, failed = [], []
    for pair, prediction in zip(pairs, after):
        original = before[pair.index]
        failed.append(not ok(original, prediction))
        if failed[-1]:
            failures.append(_failure(examples[pair.index], pair, original, prediction))
    counts, sizes = _per_example(pairs, failed, len(examples))
    return _result("directional", counts, sizes, unparsed, failures,
                   {"max_fail_rate": max_fail_rate}, confidence, decide)


def run_mft(
    examples: Sequence[Example],
    predict: Predict,
    *,
    confidence: float = 0.95,
    decide: Policy = DEFAULT_POLICY,
    min_pass: float | None = None,
    expected: Callable[[Example], Any] | None = None,
) -> ChecklistResult:
    """MFT: the pass rate over labelled examples (``expected(example)``, default its "label"),
    ``min_pass`` decided under policy ``decide``."""
    examples = list(examples)
    labels = []
    for index, example in enumerate(examples):
        if expected is not None:
            labels.append(expected(example))
        elif isinstance(example, dict) and "label" in example:
            labels.append(example["label"])
        else:
            raise ValueError(f"mft needs a 'label' in every example (or expected=); example "
                             f"{index + 1} (counted from 1) has none")
    predictions = _predict(predict, examples)
    failures, passed = [], []
    for example, label, prediction in zip(examples, labels, predictions):
        try:
            good = prediction.parsed and bool(prediction.value == label)
        except (TypeError, ValueError):
            good = False
        passed.append(int(good))
        if not good:
            failures.append(Failure(
                original=_example_text(example), perturbed=None, before=f"expected {label!r}",
                after=_shown(prediction), before_value=label, after_value=prediction.value,
            ))
    unparsed = sum(not p.parsed for p in predictions)
    return _result("mft", passed, [1] * len(examples), unparsed, failures,
                   {"min_pass": min_pass}, confidence, decide)


@dataclass(frozen=True)
class PlannedChecklist:
    """What `run_marked` will ask ``predict``, known without calling it (``--reliable-plan``
    counts and prices it): the batches of examples in order, and the pairs each example makes
    (MFT: one per example; INV / DIR: its perturbed copies, 0 where no perturbation applies)."""

    batches: list[list[Example]]
    sizes: list[int]

    @property
    def predictions(self) -> int:
        return sum(len(batch) for batch in self.batches)


def planned_checklist(spec: ChecklistSpec, examples: Sequence[Example], *,
                      seed: int) -> PlannedChecklist:
    """The predictions of the CheckList test ``spec`` describes, with the perturbations drawn
    exactly as `run_marked` draws them (the same seed): MFT predicts its examples; INV and DIR
    the examples that have a perturbed copy, then the copies."""
    examples = list(examples)
    if spec.kind == "mft":
        return PlannedChecklist([examples], [1] * len(examples))
    perturb = [resolve_perturbation(p, kind=spec.kind) for p in spec.perturb]
    pairs, originals = _paired(examples, perturb, seed)
    sizes = [0] * len(examples)
    for pair in pairs:
        sizes[pair.index] += 1
    batches = [[examples[i] for i in originals], [pair.example for pair in pairs]] if pairs else []
    return PlannedChecklist(batches, sizes)


def run_marked(
    spec: ChecklistSpec, examples: Sequence[Example], predict: Predict, task: Task, *,
    seed: int, decide: Policy,
) -> ChecklistResult:
    """The test a CheckList marker describes: ``spec.kind`` with its perturbations, thresholds
    and confidence, decided under ``decide``. Bad expectations raise before ``predict`` runs."""
    if spec.kind == "directional":
        check_expectation(spec.expect, task)
    perturb = [resolve_perturbation(p, kind=spec.kind) for p in spec.perturb]
    if spec.kind == "invariance":
        return run_invariance(examples, perturb, predict, seed=seed, confidence=spec.confidence,
                              tolerance=spec.tolerance, decide=decide, **spec.thresholds)
    if spec.kind == "directional":
        return run_directional(examples, perturb, predict, expect=spec.expect, seed=seed,
                               confidence=spec.confidence, decide=decide, **spec.thresholds)
    return run_mft(examples, predict, confidence=spec.confidence, decide=decide,
                   min_pass=spec.thresholds["min_pass"], expected=expected_label(task))
