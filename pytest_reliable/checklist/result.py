"""CheckList data types: a prediction, a perturbation, a failing case and a test's result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_reliable.contract.vocabulary import Policy
from pytest_reliable.verdict.gate import ThresholdCheck

Example = dict[str, Any]
PerturbFn = Callable[[Example, np.random.Generator], list[Example]]


@dataclass(frozen=True)
class Prediction:
    """One model prediction: the graded ``value``, whether it ``parsed``, and the raw ``text``."""

    value: Any
    parsed: bool
    text: str


@dataclass(frozen=True)
class Perturbation:
    """A named perturbation: ``perturbation(example, rng) -> [perturbed example]`` ([] = n/a)."""

    name: str
    fn: PerturbFn = field(repr=False, compare=False)

    def __call__(self, example: Example, rng: np.random.Generator) -> list[Example]:
        return self.fn(example, rng)


@dataclass(frozen=True)
class Failure:
    """One failing case. MFT failures have ``perturbed=None`` and ``before`` = the expected label."""

    original: str
    perturbed: str | None
    before: str
    after: str
    perturbation: str | None = None
    before_value: Any = None
    after_value: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "perturbed": self.perturbed,
            "before": self.before,
            "after": self.after,
        }


RATE_NAMES = {"invariance": "flip rate", "directional": "fail rate", "mft": "pass rate"}
SHOWN_FAILURES = 3


@dataclass
class ChecklistResult:
    """The outcome of one CheckList test (INV: flip rate, DIR: fail rate, MFT: pass rate)."""

    kind: str
    rate: float
    interval: tuple[float, float]
    pairs: int
    unparsed: int
    failures: list[Failure] = field(default_factory=list)
    thresholds: list[ThresholdCheck] = field(default_factory=list)
    confidence: float = 0.95
    decide: Policy | None = None
    """The policy the thresholds were decided under (SPEC section 11)."""

    @property
    def passed(self) -> bool:
        return self.pairs > 0 and all(check.passed for check in self.thresholds)

    def _empty_message(self) -> str:
        if self.kind == "mft":
            return "no example to check"
        return "no example could be perturbed"

    def message(self) -> str:
        if self.pairs == 0:
            return self._empty_message()
        unit = "examples" if self.kind == "mft" else "pairs"
        if self.pairs == 1:
            unit = unit[:-1]
        low, high = self.interval
        lines = [
            f"{RATE_NAMES.get(self.kind, 'rate')} {self.rate:.2f} [{low:.2f}, {high:.2f}] over "
            f"{self.pairs} {unit} ({_percent(self.confidence)} Wilson)"
            + (f"; {self.unparsed} unparsed prediction{'s' if self.unparsed != 1 else ''}"
               if self.unparsed else "")
        ]
        for check in self.thresholds:
            if not check.passed:
                lines.append(f"failed {check.describe()}")
        if self.failures:
            shown = self.failures[:SHOWN_FAILURES]
            lines.append(f"failing cases (showing {len(shown)} of {len(self.failures)}):")
            for failure in shown:
                tag = f"[{failure.perturbation}] " if failure.perturbation else ""
                if failure.perturbed is None:
                    lines.append(f"  - {tag}input: {_clip(failure.original)!r}")
                    lines.append(f"    {failure.before}; model output: {_clip(failure.after)!r}")
                else:
                    lines.append(f"  - {tag}original:  {_clip(failure.original)!r}")
                    lines.append(f"    perturbed: {_clip(failure.perturbed)!r}")
                    lines.append(f"    output before: {_clip(failure.before)!r}; "
                                 f"after: {_clip(failure.after)!r}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rate": float(self.rate),
            "interval": [float(self.interval[0]), float(self.interval[1])],
            "pairs": int(self.pairs),
            "decide": self.decide,
            "unparsed": int(self.unparsed),
            "failures": [failure.as_dict() for failure in self.failures[:SHOWN_FAILURES]],
            "thresholds": [check.as_dict() for check in self.thresholds],
        }


def _percent(confidence: float) -> str:
    return f"{confidence * 100:.10g}%"


def _clip(text: str, limit: int = 200) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."
