"""CheckList-style behavioural tests: invariance (INV), directional (DIR) and minimum functionality
(MFT), with the built-in perturbations of SPEC section 4.

Everything here is plain Python (no pytest): ``run_checklist`` (`pytest_reliable.run.session`)
resolves the marker's perturbations with `resolve_perturbation` and calls `run_invariance` /
`run_directional` / `run_mft` with a *batched* ``predict``. The modules: `result` (data types),
`text` (helpers), `invariance` and `directional` (the perturbations and their lexicons), `registry`
(names -> perturbations), `run` (running the tests), `report` (what a CheckList test returns).
"""

from __future__ import annotations

from pytest_reliable.checklist.invariance import CITIES, COUNTRIES, FIRST_NAMES, SYNONYM_PAIRS
from pytest_reliable.checklist.registry import (
    DIR_PERTURBATIONS,
    INV_PERTURBATIONS,
    resolve_perturbation,
)
from pytest_reliable.checklist.result import ChecklistResult, Failure, Perturbation, Prediction
from pytest_reliable.checklist.run import (
    check_expectation,
    expected_label,
    run_directional,
    run_invariance,
    run_marked,
    run_mft,
    stable_hash,
)

__all__ = [
    "CITIES",
    "COUNTRIES",
    "DIR_PERTURBATIONS",
    "FIRST_NAMES",
    "INV_PERTURBATIONS",
    "SYNONYM_PAIRS",
    "ChecklistResult",
    "Failure",
    "Perturbation",
    "Prediction",
    "check_expectation",
    "expected_label",
    "resolve_perturbation",
    "run_directional",
    "run_invariance",
    "run_marked",
    "run_mft",
    "stable_hash",
]
