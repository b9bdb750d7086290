"""FormatSpread-style exploration (SPEC section 14, ``search="thompson"``; no pytest here).

The question FormatSpread (Sclar et al., 2024) asks is "which format of the space is best, and
which is worst?" under a call budget smaller than evaluating every format. Its answer is a
bandit: each format is an arm with a Beta posterior over its accuracy, Thompson sampling picks
the next arm to evaluate, half of the budget hunting the best arm (argmax of the sampled
accuracies), half the worst (argmin). This is our own reading of that idea on the plugin's plan:

- an arm is a format of a fixed-mode plan (every cell of a resampling shares its variant); a
  pull runs the arm's next resampling in plan order (its cells are plan cells, so the cache
  serves a rerun, and the same answers lead to the same pulls: the sampler is seeded with the
  test's seed);
- every format of the space is an arm (the plan is extended, prefix-consistently, until it lists
  each); the budget is the test's ``n`` resamplings; the first pull is the plan's first resampling
  (with the canonical pass), then pulls alternate between the best and the worst hunt;
- the posterior of an arm is Beta(1 + sum of its cell scores, 1 + its cells - that sum).

What comes out is exploration, never a verdict: the best and worst formats found, their observed
scores and how many cells each got (`exploration_entry`). The thresholds are decided as under
``search="uniform"`` on the cells drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_reliable.evaluate.evaluation import ScoreMatrix, StagedEvaluation, append_resamplings
from pytest_reliable.schema.entries import ExplorationEntry, ExplorationFormat

EXPLORATION_LABEL = ("exploration (FormatSpread-style Thompson sampling over formats): not a "
                     "verdict; thresholds are decided on the cells it drew")


@dataclass
class Arm:
    key: str
    description: str
    rows: list[int]
    """The plan's resamplings of this format, in plan order, not pulled yet."""
    cells: int = 0
    total: float = 0.0
    pulls: int = 0

    @property
    def score(self) -> float | None:
        return self.total / self.cells if self.cells else None


@dataclass(frozen=True)
class ThompsonRun:
    matrix: ScoreMatrix
    arms: list[Arm]
    pulls: list[tuple[str, str]]
    """(hunt, format key) of every pull after the first: hunt is "best" or "worst"."""


def run_thompson(staged: StagedEvaluation, *, budget: int, seed: int,
                 arm_of: Callable[[int], tuple[str, str]]) -> ThompsonRun:
    """Spend ``budget`` of ``staged``'s resamplings as FormatSpread's search would (module
    docstring); ``staged``'s plan may be longer (it lists every format of the space, so an arm
    exists for each). ``arm_of(r)``: the format key and description of the plan's resampling r."""
    n = budget
    arms: dict[str, Arm] = {}
    for r in range(staged.settings.n):
        key, description = arm_of(r)
        arms.setdefault(key, Arm(key, description, [])).rows.append(r)
    rng = np.random.default_rng(seed)
    matrix = staged.run(0, 1, canonical=True)
    first = arms[arm_of(0)[0]]
    first.rows.remove(0)
    _update(first, matrix.scores[0])
    pulls: list[tuple[str, str]] = []
    for t in range(1, n):
        if matrix.problems:  # a missing answer is never scored
            break
        live = [arm for arm in arms.values() if arm.rows]
        if not live:
            break
        draws = rng.beta(1.0 + np.array([a.total for a in live]),
                         1.0 + np.array([a.cells - a.total for a in live]))
        hunt = "best" if t % 2 == 1 else "worst"
        arm = live[int(np.argmax(draws) if hunt == "best" else np.argmin(draws))]
        row = arm.rows.pop(0)
        tail = staged.run_rows([row], first_row=matrix.n_resamplings)
        matrix = append_resamplings(matrix, tail)
        _update(arm, tail.scores[0])
        pulls.append((hunt, arm.key))
    return ThompsonRun(matrix, list(arms.values()), pulls)


def _update(arm: Arm, scores: np.ndarray) -> None:
    arm.cells += int(scores.size)
    arm.total += float(scores.sum())
    arm.pulls += 1


def exploration_entry(run: ThompsonRun) -> ExplorationEntry:
    """The JSON entry's ``exploration``: best and worst formats found (by observed score over
    the formats pulled), the cells the search asked for, and per format what it got."""
    pulled = [a for a in run.arms if a.cells]
    best = max(pulled, key=lambda a: a.total / a.cells)
    worst = min(pulled, key=lambda a: a.total / a.cells)

    def shown(arm: Arm) -> ExplorationFormat:
        return {"key": arm.key, "description": arm.description, "score": arm.score,
                "cells": arm.cells, "pulls": arm.pulls}

    return {
        "label": EXPLORATION_LABEL,
        "best": shown(best),
        "worst": shown(worst),
        "calls": sum(a.cells for a in run.arms),
        "formats": len(run.arms),
        "per_format": {a.key: shown(a) for a in run.arms},
    }


def exploration_note(entry: ExplorationEntry) -> str:
    """The terminal's note for an exploration entry."""
    best, worst = entry["best"], entry["worst"]
    pulled = sum(1 for f in entry["per_format"].values() if f["cells"])
    return (f"exploration (search='thompson', not a verdict): best format {best['key']} "
            f"{best['score'] or 0.0:.3f} ({best['cells']} cells), worst {worst['key']} "
            f"{worst['score'] or 0.0:.3f} ({worst['cells']} cells); {pulled} of "
            f"{entry['formats']} formats pulled, {entry['calls']} cells")


__all__ = ["EXPLORATION_LABEL", "Arm", "ThompsonRun", "exploration_entry", "exploration_note",
           "run_thompson"]
