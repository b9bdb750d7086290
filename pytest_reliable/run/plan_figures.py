"""What each threshold of a test can resolve at its size: ``--reliable-plan``'s figures.

No model call and no pytest here. Per threshold, the *resolvable value* (`resolve`, a
`Resolution`): the true value at which the threshold goes the way its policy promises with 80%
probability at this N and n; and whether the most favourable truth gets there at all
(`reachable`, what `run.plan_size` searches sizes with).

The numbers (the simulated gates, the exact binomial cases) are `pytest_reliable.stats.power`'s,
whose docstring gives the method; this module builds each threshold's `Resolution` from those
numbers and writes its text, and `METHOD`, printed under every plan. A CheckList test's rates are
`run.plan_checklist`'s. `benchmarks/bench_gate_errors.py` checks these figures against the real
gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_reliable.contract.vocabulary import CHECKLIST_DIRECTIONS, RELIABLE_THRESHOLDS
from pytest_reliable.stats import power
from pytest_reliable.stats.looks import FINAL_SHARE
from pytest_reliable.stats.power import POWER, Design

METHOD = (
    f"min_score and min_win_rate by up to {power.MEAN_REPS} seeded simulated gates of the planned "
    "design through the gate's own bound, ranges (min_worst, max_spread, min_median) by "
    f"{power.RANGE_REPS} through the gate's own estimator and bounds for the hardest model at "
    f"each value, each under {len(power.STRUCTURES)} answer structures "
    f"({', '.join(s.label for s in power.STRUCTURES)}; one answer per prompt): the main figure is "
    "the least favourable structure's, the range beside it spans them; pass@k, pass^k, maj@k "
    "and circular exact (binomial through the exact bound); min_lower_ci exact (binomial through "
    "the Wilson bound); max_std by simulation too, for a model whose resamplings differ by chance "
    "alone; a search by cells' min_worst through its own exact bound of each format at its last "
    "look (earlier looks only add chances for it to go the policy's way: the figure is on the "
    "safe side)"
)
RANGES = ("min_worst", "max_spread", "min_median")
BINOMIAL = ("min_pass_at_k", "min_pass_hat_k", "min_maj_at_k", "min_circular")
"""Thresholds on one independent 0/1 outcome per instance."""
MIN_THRESHOLDS = tuple(name for name, way in RELIABLE_THRESHOLDS.items() if way == "min")
MAX_THRESHOLDS = tuple(name for name, way in RELIABLE_THRESHOLDS.items() if way == "max")
CHECKLIST_MAX = tuple(name for name, way in CHECKLIST_DIRECTIONS.items() if way == "max")
"""A CheckList test's rates that must stay low (flip rate, fail rate); ``min_pass`` is a min."""
WHAT = {
    "min_score": "score",
    "min_lower_ci": "canonical score",
    "min_median": "median group score",
    "min_worst": "worst group's score",
    "max_spread": "spread",
    "max_std": "std over resamplings",
    "min_pass_at_k": "pass@k",
    "min_pass_hat_k": "pass^k",
    "min_maj_at_k": "maj@k",
    "min_win_rate": "win rate",
    "min_circular": "circular score",
    "max_regression": "regression",
    "max_flip_rate": "flip rate",
    "max_fail_rate": "fail rate",
    "min_pass": "pass rate",
}


@dataclass(frozen=True)
class Resolution:
    """What one threshold can tell apart at this size, under the test's policy."""

    name: str
    limit: float
    value: float | None
    """The true value at which the policy's outcome has 80% probability (None: unreachable)."""
    low: float | None = None
    high: float | None = None
    """The value's span over the simulated answer structures (None when it does not apply)."""
    note: str = ""
    over: str = "the simulated answer structures"
    """What ``low``-``high`` spans, as the text says it."""

    @property
    def is_max(self) -> bool:
        return self.name in MAX_THRESHOLDS or self.name in CHECKLIST_MAX

    def describe(self, decide: str) -> str:
        what = WHAT.get(self.name, self.name)
        head = f"{self.name}={self.limit:g}"
        if self.value is None:
            verb = "fail" if decide == "fail-on-evidence" else "pass"
            return f"{head}: cannot {verb} on evidence at this size{self._note()}"
        fails = decide == "fail-on-evidence"
        relation = "<=" if self.is_max != fails else ">="
        outcome = {
            "pass-on-evidence": "passes on evidence",
            "fail-on-evidence": "fails on evidence",
            "estimate": "passes (estimate, no error control)",
        }[decide]
        digits = 3 if self.name == "max_std" else 2  # stds of a few points
        spread = ""
        if (self.low is not None and self.high is not None
                and abs(self.high - self.low) >= 0.5 * 10.0**-digits):
            spread = (f" ({min(self.low, self.high):.{digits}f}-"
                      f"{max(self.low, self.high):.{digits}f} for {self.over})")
        return (f"{head}: {outcome} with {POWER:.0%} probability only if the true {what} is "
                f"{relation} {self.value:.{digits}f}{spread}{self._note()}")

    def _note(self) -> str:
        return f"; {self.note}" if self.note else ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "limit": self.limit, "value": self.value, "low": self.low,
                "high": self.high, "note": self.note, "over": self.over}


# -- each threshold's resolvable value (the numbers are stats.power's) -------------------------
def resolve_mean(name: str, limit: float, design: Design) -> Resolution:
    """``min_score`` / ``min_win_rate``: by simulation of the planned gate's own bound under every
    answer structure (`stats.power.mean_values_simulated`); the figure is the least favourable
    structure's, ``low``-``high`` spans them. When under some structure not even the most
    favourable model reaches 80%, no figure holds whatever the structure: none is quoted."""
    found = power.mean_values_simulated(design, limit)
    if found.value is not None and not found.unreachable:
        return Resolution(name, limit, found.value, found.low, found.high,
                          over="the simulated answer structures")
    failing = design.decide == "fail-on-evidence"
    best = "a score of 0" if failing else "a perfect model"
    verb = "fails" if failing else "passes"
    rates = " / ".join(f"{rate:.0%}" for rate in found.at_best if rate is not None)
    return Resolution(name, limit, None, note=(
        f"even {best} {verb} only {rates} of simulated gates: more instances, or another "
        "limit"))


def resolve_binomial(name: str, limit: float, design: Design) -> Resolution:
    """A threshold on one independent 0/1 outcome per instance (pass@k, pass^k, maj@k,
    circular): exact, from the binomial distribution through the exact bound the gate uses."""
    value, count = power.binomial_value(limit, design)
    if value is None:
        need = power.binomial_needs_instances(limit, design.confidence)
        more = (f": it needs N >= {need} instances" if design.decide == "pass-on-evidence"
                and need > design.instances else "")
        return Resolution(name, limit, None, note=f"not even all {design.instances} instances "
                          f"show it{more}")
    which = ("at least" if design.decide != "fail-on-evidence" else "at most")
    return Resolution(name, limit, value, note=(
        f"it turns on {which} {count} of {design.instances} instances; exact (binomial)"))


def resolve_range(name: str, limit: float, design: Design) -> Resolution:
    """``min_worst`` / ``max_spread`` / ``min_median``: by simulation of the planned gate
    (`stats.power.range_values`): every group's (pair's) bound must clear under pass-on-evidence;
    one must breach at Holm's level under fail-on-evidence. The figure is the least favourable
    answer structure's; ``low``-``high`` spans the structures. When under some structure not
    even the most favourable model reaches 80%, no figure holds whatever the structure: none is
    quoted, and the note gives the other structures' figure."""
    assert design.layout is not None
    found = power.range_values(design.layout, design, name, limit)
    failing = design.decide == "fail-on-evidence"
    verb = "fails" if failing else "passes"
    if found.value is not None and not found.unreachable:
        return Resolution(name, limit, found.value, found.low, found.high,
                          note=_range_note(name, design), over="the simulated answer structures")
    claims = (f"{design.layout.pairs} pairs each need |d| + t*se <= {limit:g}"
              if name == "max_spread" and not failing else
              f"{design.layout.groups} groups" if name != "max_spread" else
              f"{design.layout.pairs} pairs")
    advice = "more instances or resamplings, fewer groups, or another limit"
    best = _best_model(name, failing)
    if found.value is None:
        return Resolution(name, limit, None, note=(
            f"even {best} {verb} only {max(r or 0.0 for r in found.at_best):.0%} of simulated "
            f"gates ({claims}): "
            f"{advice}"))
    lost = [(s.label, rate) for s, rate in zip(power.STRUCTURES, found.at_best)
            if rate is not None and rate < POWER]
    kept = " and ".join(s.label for s, v in zip(power.STRUCTURES, found.per_structure)
                        if v is not None)
    relation = "<=" if (name in MAX_THRESHOLDS) != failing else ">="
    return Resolution(name, limit, None, note=(
        f"even {best} {verb} only {' / '.join(f'{rate:.0%}' for _, rate in lost)} of simulated "
        f"gates ({claims}) if answers hang together as "
        f"{' / '.join(label for label, _ in lost)}; under {kept} it {verb} with 80% probability "
        f"only if the true {WHAT[name]} is {relation} {found.value:.2f}: {advice}"))


def _best_model(name: str, failing: bool) -> str:
    """The most favourable truth for the policy's outcome, in words."""
    return {"max_spread": "a model with no effect at all" if not failing else "a spread of 1",
            "min_worst": "a perfect model" if not failing else "a worst group at 0",
            "min_median": "a perfect model" if not failing else "a median group at 0"}[name]


def _range_note(name: str, design: Design) -> str:
    assert design.layout is not None
    if name == "min_worst" and design.cells_chunk and design.decide != "estimate":
        return (f"simulated: every one of {design.layout.groups} formats through the search's "
                "exact bounds at its last look (Clopper-Pearson at "
                f"{FINAL_SHARE:g} of alpha; its earlier looks only add chances: on the safe "
                f"side), under the least favourable of {len(power.STRUCTURES)} answer structures")
    what = (f"every one of {design.layout.pairs} pairs" if name == "max_spread"
            else f"every one of {design.layout.groups} groups" if name == "min_worst"
            else f"the median of {design.layout.groups} groups")
    how = "point estimates" if design.decide == "estimate" else "bounds"
    return (f"simulated: {what} through the gate's {how}, under the least favourable of "
            f"{len(power.STRUCTURES)} answer structures")


def resolve_lower_ci(limit: float, design: Design) -> Resolution:
    """``min_lower_ci``: exact over the canonical pass's first samples (one per instance)."""
    needed = power.lower_ci_needed(limit, design)
    if needed is None:
        return Resolution("min_lower_ci", limit, None)
    note = (f"it needs {needed} of {design.instances} canonical answers right; "
            "the same rule under every policy")
    return Resolution("min_lower_ci", limit, power.lower_ci_value(needed, design), note=note)


def resolve_std(limit: float, design: Design) -> Resolution:
    """``max_std``: by simulation of the gate's own bound (`stats.power.std_values_simulated`)
    for a model whose resamplings differ by chance alone, under every answer structure; the
    figure is the least favourable structure's."""
    if design.resamplings < 2:
        return Resolution("max_std", limit, None, note="one resampling has no std")
    least = _max_std_least_instances(design)
    if design.instances < least:
        return Resolution("max_std", limit, None, note=(
            f"refused: under fail-on-evidence in {design.mode} mode with n={design.resamplings} "
            f"it needs N >= {least} instances (the run stops with a usage error before any "
            "call)"))
    found = power.std_values_simulated(design, limit)
    failing = design.decide == "fail-on-evidence"
    blocked = [(s.label, rate) for s, rate, v in zip(power.STRUCTURES, found.at_best,
                                                    found.per_structure)
               if v is None and rate is not None]
    if found.value is not None and not blocked:
        return Resolution("max_std", limit, found.value, found.low, found.high,
                          over="the simulated answer structures")
    top = (0.25 / design.instances) ** 0.5
    if found.value is None and not blocked:  # no structure's model comes near the limit
        if failing:
            return Resolution("max_std", limit, None, note=(
                "no model whose resamplings differ by chance alone breaches it: their std is "
                f"at most {top:.3f} at N={design.instances}"))
        return Resolution("max_std", limit, top, note=(
            "every model whose resamplings differ by chance alone does: their std is at most "
            f"{top:.3f} at N={design.instances}"))
    best = ("a std of 0" if not failing else
            "the largest std such a model can have (at most "
            f"{top:.3f} at N={design.instances})")
    verb = "fails" if failing else "passes"
    extra = (" (fixed mode: the bound keeps room for a format no resampling drew; it needs "
             "many resamplings)" if design.mode == "fixed" and not failing else "")
    return Resolution("max_std", limit, None, note=(
        f"even {best} {verb} only {' / '.join(f'{rate:.0%}' for _, rate in blocked)} of "
        f"simulated gates if answers hang together as "
        f"{' / '.join(label for label, _ in blocked)}{extra}"))


def _max_std_least_instances(design: Design) -> int:
    """The fewest instances ``max_std`` is decided on under the design's policy and mode."""
    from pytest_reliable.contract.markers import max_std_least_instances

    if design.decide != "fail-on-evidence":
        return 1
    return max_std_least_instances(design.mode, design.resamplings)


def resolve(name: str, limit: float, design: Design) -> Resolution:
    """The resolvable value of one threshold under ``design``."""
    if name == "min_lower_ci":
        return resolve_lower_ci(limit, design)
    if name == "max_std":
        return resolve_std(limit, design)
    if name in RANGES:
        if design.layout is None:
            return Resolution(name, limit, None, note="the grouping is not known for this space")
        return resolve_range(name, limit, design)
    if name in BINOMIAL:
        # One 0/1 outcome per instance (any / all of its k samples right).
        return resolve_binomial(name, limit, design)
    return resolve_mean(name, limit, design)


def reachable(name: str, limit: float, design: Design) -> bool:
    """Whether ``name`` can go the policy's way with 80% probability at this size under every
    simulated answer structure: the most favourable truth gets there (the plan quotes a figure)."""
    if design.decide == "estimate" and name != "max_std":
        return True
    if name == "min_lower_ci":
        return power.lower_ci_needed(limit, design) is not None
    if name == "max_std":
        return (design.instances >= _max_std_least_instances(design)
                and power.std_reachable(design, limit))
    if name in RANGES:
        return design.layout is not None and power.range_reachable(design.layout, design, name,
                                                                   limit)
    if name in BINOMIAL:
        return power.binomial_value(limit, design)[0] is not None
    return power.mean_reachable(design, limit)
