"""Thresholds -> verdict. Each threshold becomes a `ThresholdCheck`; the gate fails if any fails."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Direction = Literal["min", "max"]


@dataclass(frozen=True)
class ThresholdCheck:
    """One threshold of a test: ``observed`` must be >= ``limit`` (min) or <= ``limit`` (max)."""

    name: str
    limit: float
    observed: float | None
    direction: Direction

    @property
    def passed(self) -> bool:
        if self.observed is None:
            return False
        if self.direction == "min":
            return self.observed >= self.limit - 1e-12
        return self.observed <= self.limit + 1e-12

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["direction"]
        data["passed"] = self.passed
        return data

    def describe(self) -> str:
        relation = ">=" if self.direction == "min" else "<="
        shown = "n/a" if self.observed is None else f"{self.observed:.4f}"
        return f"{self.name}: observed {shown}, required {relation} {self.limit:g}"
