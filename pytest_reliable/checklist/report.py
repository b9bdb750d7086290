"""What a CheckList test produced (`ChecklistReport`, what ``reliable.invariance``, ``directional``
and ``mft`` return) and its SPEC section 8 JSON entry; a reliable test's is
`pytest_reliable.verdict.results.ReliableReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from pytest_reliable.calls.pricing import Spend
from pytest_reliable.checklist.result import ChecklistResult, Failure
from pytest_reliable.schema.entries import ChecklistEntry, json_safe
from pytest_reliable.verdict.gate import ThresholdCheck


@dataclass
class ChecklistReport:
    """The result of ``reliable.invariance/directional/mft``: a CheckList result with context."""

    nodeid: str
    model: str
    space_hash: str | None
    result: ChecklistResult
    calls_made: int
    calls_cached: int
    problems: list[str] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)
    run_scoped: str | None = None
    """As `ReliableReport.run_scoped`."""

    # The CheckList result's fields, as in the JSON entry (SPEC section 8).
    @property
    def kind(self) -> str:
        """``invariance``, ``directional`` or ``mft``."""
        return self.result.kind

    @property
    def rate(self) -> float:
        """INV: the flip rate, DIR: the fail rate, MFT: the pass rate."""
        return self.result.rate

    @property
    def interval(self) -> tuple[float, float]:
        """The rate's Wilson interval at the marker's ``confidence``."""
        return self.result.interval

    @property
    def pairs(self) -> int:
        """Pairs (MFT: examples) the rate is over."""
        return self.result.pairs

    @property
    def unparsed(self) -> int:
        return self.result.unparsed

    @property
    def failures(self) -> list[Failure]:
        return self.result.failures

    @property
    def thresholds(self) -> list[ThresholdCheck]:
        return self.result.thresholds

    @property
    def confidence(self) -> float:
        return self.result.confidence

    def message(self) -> str:
        """The CheckList result's own summary (rate, interval, failing cases)."""
        return self.result.message()

    def as_dict(self) -> dict[str, Any]:
        return self.result.as_dict()

    @property
    def passed(self) -> bool:
        return not self.problems and bool(self.result.passed)

    def failure_message(self) -> str:
        lines = [f"{self.result.kind} test failed for {self.nodeid} (model {self.model})"]
        for problem in list(dict.fromkeys(self.problems))[:5]:
            lines.append(f"  not evaluated: {problem}")
        lines.append(self.result.message())
        return "\n".join(lines)

    def entry(self, verdict: str) -> ChecklistEntry:
        data = dict(self.result.as_dict())
        data.update(
            {
                "nodeid": self.nodeid,
                "kind": self.result.kind,
                "verdict": verdict,
                "model": self.model,
                "model_cache": "store" if self.run_scoped is None else "run",
                "space_hash": self.space_hash,
                "calls": {"made": self.calls_made, "cached": self.calls_cached},
                "cost": self.spend.entry(),
                "message": None if self.passed else self.failure_message(),
                "outcome": None,
                "xfail_reason": None,
            }
        )
        if verdict == "error":
            # Not every call completed: no rate (a missing answer is not a failed case).
            data["rate"] = None
            data["interval"] = [None, None]
            data["thresholds"] = [
                {**check.as_dict(), "observed": None, "bound": None, "passed": False}
                for check in self.thresholds
            ]
        return cast(ChecklistEntry, json_safe(data))
