"""The contract's vocabulary, typed: policies, modes, groupings, threshold names and directions.

One home for the words the SPEC fixes (sections 4, 8, 9 and 11), each a `Literal` type with its
runtime tuple or table derived from it, so the type a checker sees and the values a marker is
validated against cannot differ. `contract.markers` validates marker arguments with it,
`verdict.gate` decides thresholds with it, `evaluate.stopping` and `run.sizing` read it.

It imports nothing but `typing`: the plugin imports `contract.markers` (and so this) on every
pytest run, so the vocabulary must not carry the gate's numpy and scipy along (`gate` imports
scipy and statsmodels, about a second).
"""

from __future__ import annotations

from typing import Final, Literal, TypeGuard, get_args

# -- how a threshold is decided (SPEC section 11) ----------------------------------------------
Policy = Literal["pass-on-evidence", "fail-on-evidence", "estimate"]
POLICIES: tuple[Policy, ...] = get_args(Policy)
"""Every policy, the default first."""
PASS_ON_EVIDENCE: Final = "pass-on-evidence"
FAIL_ON_EVIDENCE: Final = "fail-on-evidence"
ESTIMATE: Final = "estimate"
DEFAULT_POLICY: Final = PASS_ON_EVIDENCE


def is_policy(value: object) -> TypeGuard[Policy]:
    """Whether ``value`` names one of the POLICIES."""
    return value in POLICIES


# -- how resamplings are planned, and how the cells are grouped (SPEC sections 4 and 8) ----------
Mode = Literal["ilr", "fixed"]
MODES: tuple[Mode, ...] = get_args(Mode)
Grouping = Literal["formats", "dimensions"]
"""``group_by=``'s named groupings (it also takes a list of the space's dimension names)."""
GROUPINGS: tuple[Grouping, ...] = get_args(Grouping)
OrderGrouping = Literal["gold_position", "permutations"]
ORDER_GROUPINGS: tuple[OrderGrouping, ...] = get_args(OrderGrouping)

# -- thresholds and their directions ------------------------------------------------------------
Direction = Literal["min", "max"]
"""``min``: the value must be >= the limit; ``max``: <= the limit."""
ReliableThreshold = Literal[
    "min_score", "min_lower_ci", "min_median", "min_worst", "max_spread", "max_std",
    "min_pass_at_k", "min_pass_hat_k", "min_maj_at_k", "min_win_rate",
    "min_circular",
]
RELIABLE_THRESHOLDS: dict[ReliableThreshold, Direction] = {
    "min_score": "min",
    "min_lower_ci": "min",
    "min_median": "min",
    "min_worst": "min",
    "max_spread": "max",
    "max_std": "max",
    "min_pass_at_k": "min",
    "min_pass_hat_k": "min",
    "min_maj_at_k": "min",
    "min_win_rate": "min",
    "min_circular": "min",
}
"""``@reliable``'s thresholds on its own evaluation, in report order; each limit lies in [0, 1]."""
MAX_REGRESSION: Final = "max_regression"
"""The threshold on a baseline comparison (SPEC section 9): baseline - candidate, a ``max``."""
DIRECTIONS: dict[str, Direction] = {
    # Copied by a comprehension: a dict keyed by the Literal is not a dict keyed by str.
    **{name: direction for name, direction in RELIABLE_THRESHOLDS.items()},
    MAX_REGRESSION: "max",
}
"""Every threshold a reliable test's gate decides, in report order."""

ChecklistKind = Literal["invariance", "directional", "mft"]
ChecklistThreshold = Literal["max_flip_rate", "max_fail_rate", "min_pass"]
CHECKLIST_THRESHOLDS: dict[str, dict[ChecklistThreshold, Direction]] = {
    "invariance": {"max_flip_rate": "max"},
    "directional": {"max_fail_rate": "max"},
    "mft": {"min_pass": "min"},
}
"""Each CheckList marker's (`ChecklistKind`'s) threshold, a rate in [0, 1]."""
CHECKLIST_DIRECTIONS: dict[str, Direction] = {
    name: direction for limits in CHECKLIST_THRESHOLDS.values()
    for name, direction in limits.items()
}
