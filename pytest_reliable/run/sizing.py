"""Sizing before spending: what a test will call and what its gate can resolve (``--reliable-plan``).

No model call and no pytest here. `plan_reliable` takes what a ``reliable.evaluate`` call would
run (dataset, task, marker) and returns a `TestPlan`: the calls (instances x (resamplings + k), a
pilot under ``--reliable-n auto``, a stored n* when the store has one, a baseline's calls) and, per
threshold, the *resolvable value*: the true value at which the threshold goes the way its policy
promises with 80% probability at this N and n; and the size suggestion (`suggest_size`): the
smallest n at which every threshold can go its policy's way at all, or the N that could.

The numbers (the simulated gates, the exact binomial cases) are `pytest_reliable.stats.power`'s,
whose docstring gives the method; this module plans the calls, builds each threshold's
`Resolution` from those numbers and writes the text, with `METHOD` printed under every plan.
`benchmarks/bench_gate_errors.py` checks these figures against the real gate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_reliable.contract.vocabulary import (
    CHECKLIST_DIRECTIONS,
    DEFAULT_POLICY,
    RELIABLE_THRESHOLDS,
    Mode,
    Policy,
)
from pytest_reliable.errors import ReliableError
from pytest_reliable.stats import power
from pytest_reliable.stats.looks import FINAL_SHARE

# The power calculations are `stats.power`'s; --reliable-plan's names for them stay importable here.
from pytest_reliable.stats.power import POWER as POWER
from pytest_reliable.stats.power import Design as Design
from pytest_reliable.stats.power import RangeLayout as RangeLayout

if TYPE_CHECKING:
    from pytest_reliable.calls.pricing import Price
    from pytest_reliable.contract.markers import ChecklistSpec, ReliableSpec
    from pytest_reliable.plan.data import Dataset, Records
    from pytest_reliable.plan.task import Task
    from pytest_reliable.run.session import ReliableSession, ReliableTest
    from pytest_reliable.space import Space

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


@dataclass
class TestPlan:
    __test__ = False  # not a pytest test class

    """One test's plan: calls it will make and what each of its thresholds can resolve."""

    nodeid: str
    kind: str
    instances: int
    calls: int
    calls_detail: str
    decide: str = DEFAULT_POLICY
    grouping: str | None = None
    resolutions: list[Resolution] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judge_calls: int = 0
    """A judge's calls (SPEC section 12), counted apart: at most one per answer and vote."""
    judge_detail: str | None = None
    cost: dict[str, Any] | None = None
    """The estimated spend (`PlanSpend.as_dict`; SPEC section 13), None when not estimated.
    Under ``--reliable-n auto`` without a stored n*: at the likely n*."""
    likely: dict[str, Any] | None = None
    """``--reliable-n auto`` without a stored n*: the n* its pilot is likely to find
    (`LikelyPlan.as_dict`); ``calls`` and ``cost`` are then at that n*."""
    calls_max: int | None = None
    """The most calls the test may make (a bootstrap n* at ``--reliable-n-max``), with
    ``usd_max`` the most it may cost (None: no price table)."""
    usd_max: float | None = None
    size: str | None = None
    """The size at which every threshold can go the policy's way (`suggest_size`), as text."""

    def lines(self) -> list[str]:
        head = f"{self.nodeid} ({self.kind}"
        head += f", {self.decide})" if self.kind == "reliable" else ")"
        out = [head, f"  calls: {self.calls_detail}"]
        if self.likely is not None:
            out.append(f"  likely n*: {LikelyPlan.describe(self.likely)}")
        if self.calls_max is not None and self.calls_max > self.calls:
            spent = "" if self.usd_max is None else f", at most ~${self.usd_max:.4f}"
            out.append(f"  worst case: {self.calls_max} calls{spent} (n* at its cap, "
                       "--reliable-n-max)")
        if self.judge_detail:
            out.append(f"  judge calls: {self.judge_detail}")
        if self.cost is not None:
            at = " (at the likely n*)" if self.likely is not None else ""
            out.append(f"  spend: {PlanSpend.describe(self.cost)}{at}")
        if self.grouping:
            out.append(f"  ranges grouped by {self.grouping}")
        out += [f"  {r.describe(self.decide)}" for r in self.resolutions]
        if self.size:
            out.append(f"  {self.size}")
        out += [f"  note: {note}" for note in self.notes]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid, "kind": self.kind, "instances": self.instances,
            "calls": self.calls, "calls_detail": self.calls_detail, "decide": self.decide,
            "grouping": self.grouping, "resolutions": [r.as_dict() for r in self.resolutions],
            "notes": list(self.notes), "judge_calls": self.judge_calls,
            "judge_detail": self.judge_detail, "cost": self.cost, "likely": self.likely,
            "calls_max": self.calls_max, "usd_max": self.usd_max, "size": self.size,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TestPlan:
        """Back from `as_dict` (plans travel from pytest-xdist workers as plain data)."""
        values = dict(data)
        values["resolutions"] = [Resolution(**r) for r in values.get("resolutions", [])]
        return cls(**values)


@dataclass(frozen=True)
class PlanBudget:
    """``--reliable-budget``: what the plan's totals are checked against (None: no limit)."""

    usd: float | None = None
    calls: int | None = None
    tokens: int | None = None

    @classmethod
    def of(cls, settings: Any) -> PlanBudget:
        return cls(getattr(settings, "budget_usd", None), getattr(settings, "budget_calls", None),
                   getattr(settings, "budget_tokens", None))


def format_plans(plans: Sequence[TestPlan], budget: PlanBudget | None = None) -> list[str]:
    """The ``--reliable-plan`` section: one block per test, the totals, a warning for each
    limit of ``budget`` the plan's estimate exceeds, and the method."""
    if not plans:
        return ["no reliable or CheckList test reached its evaluate call: nothing to plan"]
    out: list[str] = []
    for plan in plans:
        out += plan.lines()
    total = sum(plan.calls for plan in plans)
    most = sum(plan.calls_max if plan.calls_max is not None else plan.calls for plan in plans)
    likely = any(plan.likely is not None for plan in plans)
    at = (f" (at the likely n*; at most {most} if every n* reaches --reliable-n-max)"
          if likely and most > total else "")
    out.append(f"total: {total} model calls planned over {len(plans)} tests{at} (cached answers "
               "are not called again); no model call was made")
    judged = sum(plan.judge_calls for plan in plans)
    if judged:
        out.append(f"judge calls: at most {judged} more, counted apart (one per answer and "
                   "vote; a repeated answer shares its votes)")
    costs = [plan.cost for plan in plans if plan.cost is not None]
    spend = PlanSpend.add(costs) if costs else None
    usd_max = None
    if spend is not None:
        out.append(f"total spend: {PlanSpend.describe(spend)}")
        usd_max = sum(plan.usd_max if plan.usd_max is not None else
                      (plan.cost or {}).get("usd") or 0.0 for plan in plans)
        if usd_max > spend["usd"] + 5e-5:
            out.append(f"total spend at most: ~${usd_max:.4f} if every n* reaches "
                       "--reliable-n-max")
    out += budget_warnings(budget, total, judged, spend, usd_max)
    out.append(f"method: {METHOD}")
    return out


def budget_warnings(budget: PlanBudget | None, calls: int, judged: int,
                    spend: Mapping[str, Any] | None, usd_max: float | None) -> list[str]:
    """A warning for each ``--reliable-budget`` limit the plan's estimate exceeds (the run would
    stop calling part-way and leave tests without answers), and a note for one that only the
    worst case exceeds."""
    if budget is None:
        return []
    out = []
    fix = ("raise the budget, or plan fewer instances or resamplings (a cached answer is not "
           "paid again)")
    if budget.usd is not None and spend is not None:
        flag = f"--reliable-budget {budget.usd:g}usd"
        if spend.get("unpriced_models"):
            out.append(f"warning: no price for {', '.join(spend['unpriced_models'])}: under "
                       f"{flag} the run stops before any call; add a price to "
                       "--reliable-pricing's file")
        if spend["usd"] > budget.usd:
            out.append(f"warning: the estimated spend ~${spend['usd']:.4f} exceeds {flag}: the "
                       "run would stop calling once it is spent, and the tests left without "
                       f"answers end in errors; {fix}")
        elif usd_max is not None and usd_max > budget.usd:
            out.append(f"note: within {flag} at the likely n*, but the worst case (~${usd_max:.4f},"
                       " every n* at --reliable-n-max) exceeds it")
    if budget.calls is not None:
        # Priced plans count the distinct uncached requests; otherwise every planned call.
        planned = spend["calls"] if spend is not None else calls + judged
        counted = "uncached calls" if spend is not None else "calls at most"
        if planned > budget.calls:
            out.append(f"warning: {planned} {counted} planned exceed --reliable-budget "
                       f"{budget.calls}calls: the run would stop calling part-way; {fix}")
    if budget.tokens is not None and spend is not None:
        tokens = int(spend["prompt_tokens"]) + int(spend["completion_tokens"])
        if tokens > budget.tokens:
            out.append(f"warning: ~{tokens} tokens planned exceed --reliable-budget "
                       f"{budget.tokens} (tokens): the run would stop calling part-way; {fix}")
    return out


def judge_plan(task: Task, answers: int) -> tuple[int, str | None]:
    """At most how many calls the task's judge makes grading ``answers`` answers, and the
    text; (0, None) when no judge grades the task. A pairwise judge asks each comparison in
    both orders. A bad judge is a usage error here too."""
    from pytest_reliable.tasks.grading import judge_of

    judge = judge_of(task)
    if judge is None:
        return 0, None
    judge.check()
    orders = 2 if judge.pairwise else 1
    calls = answers * judge.votes * orders
    what = (f"{answers} comparisons with the baseline's answers x {judge.votes} votes x 2 "
            "orders" if judge.pairwise else f"{answers} answers x {judge.votes} votes")
    return calls, (f"at most {what} = {calls} (fewer when answers repeat; judged in a second "
                   "stage, after the answers)")


# -- each threshold's resolvable value (the numbers are stats.power's) -------------------------
def _direction(name: str, decide: str) -> int:
    """+1 when the quoted value lies above the limit, -1 below."""
    up = name not in MAX_THRESHOLDS and name not in CHECKLIST_MAX
    return 1 if up != (decide == "fail-on-evidence") else -1


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


# -- the size that can go the policy's way (issue 31 item 5) ------------------------------------
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


@dataclass(frozen=True)
class SizeSuggestion:
    """The smallest n at which every threshold of a test can go its policy's way (`reachable`),
    and when no n up to the cap can, the smallest N that could at the cap (None: not found up to
    `SIZE_N_FACTOR` times the dataset)."""

    n: int | None
    n_max: int
    instances: int | None = None
    blocking: tuple[str, ...] = ()
    """The thresholds no n up to the cap makes reachable."""

    def describe(self, decide: str, n_now: int) -> str:
        way = {"pass-on-evidence": "pass on evidence", "fail-on-evidence": "fail on evidence",
               "estimate": "pass"}[decide]
        if self.n is not None:
            now = ("this test's n" if self.n == n_now else
                   f"this test runs n={n_now}")
            return (f"size: every threshold can {way} with {POWER:.0%} probability from "
                    f"n={self.n} ({now}) under every simulated answer structure")
        text = (f"size: no n up to --reliable-n-max={self.n_max} lets "
                f"{', '.join(self.blocking)} {way} with {POWER:.0%} probability under every "
                "simulated answer structure")
        if self.instances is not None:
            text += f"; N >= {self.instances} instances would, at n={self.n_max}"
        else:
            text += "; more instances, fewer groups, or another limit"
        return text


SIZE_N_FACTOR = 64
"""How far past the dataset the size suggestion looks for the instances a test needs."""


def suggest_size(spec: Any, space: Any, instances: int, n_options: int, decide: Policy,
                 n_max: int, search: str | None = None) -> SizeSuggestion | None:
    """The smallest n in [1, ``n_max``] at which every threshold of ``spec`` is `reachable`
    (bisection: more resamplings never make a threshold harder to reach), and when none is, the
    smallest N that is at ``n_max`` (doubling, then bisection). None: no threshold."""
    names = [name for name in (*MIN_THRESHOLDS, *MAX_THRESHOLDS)
             if getattr(spec, name, None) is not None]
    if not names:
        return None

    @functools.cache
    def blocking(n: int, n_inst: int) -> tuple[str, ...]:
        design, _ = plan_design(spec, space, n_inst, n, n_options, decide, search)
        return tuple(name for name in names
                     if not reachable(name, float(getattr(spec, name)), design))

    n = _least_passing(lambda m: not blocking(m, instances), 2 if "max_std" in names else 1,
                       n_max)
    if n is not None:
        return SizeSuggestion(n, n_max)
    found = _least_passing(lambda m: not blocking(n_max, m), instances + 1,
                           instances * SIZE_N_FACTOR)
    return SizeSuggestion(None, n_max, found, blocking(n_max, instances))


def _least_passing(ok: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest m in [low, high] with ``ok(m)`` (``ok`` monotone); None when ``ok(high)``
    fails. Doubles from ``low`` first, so a small answer costs few checks."""
    if low > high:
        return None
    step, probe = 1, low
    last_bad = low - 1
    while probe < high:
        if ok(probe):
            break
        last_bad = probe
        probe = min(high, low + step)
        step *= 2
    else:
        if not ok(high):
            return None
        probe = high
    lo, hi = last_bad, probe  # ok(hi), not ok(lo) (or lo below the range)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# -- groups and calls ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Grouping:
    label: str
    groups: int
    pairs: int
    smallest_cells: float
    layout: RangeLayout


def grouping_of(space: Any, mode: Mode, group_by: Any, instances: int, resamplings: int,
                n_options: int) -> Grouping | None:
    """The test's pre-registered grouping, its smallest group's expected cell count and its
    layout of groups over cells (what the plan simulates)."""
    from pytest_reliable.plan.sampling import n_listed_units

    if group_by is None:
        group_by = "formats" if mode == "fixed" else "dimensions"
    cells = instances * resamplings
    units = n_listed_units(space, max(n_options, 2))
    sampled = mode == "fixed" and (units is None or resamplings < units)
    if group_by == "formats":
        formats = int(space.n_valid_formats(max(n_options, 2)))
        groups = max(1, min(resamplings, formats)) if mode == "fixed" else max(1, formats)
        layout = RangeLayout(mode, formats=groups, sampled=sampled)
        return Grouping("formats", groups, groups * (groups - 1) // 2, cells / groups, layout)
    dims = space.dimensions
    names = list(dims) if group_by == "dimensions" else list(group_by)
    sizes = [len(dims[d]) for d in names if d in dims and len(dims[d]) >= 2]
    if not sizes:
        return None
    label = "dimensions" if group_by == "dimensions" else "dimensions:" + ",".join(names)
    layout = RangeLayout(mode, tuple(sizes), sampled=sampled)
    return Grouping(label, sum(sizes), sum(v * (v - 1) // 2 for v in sizes), cells / max(sizes),
                    layout)


def searched(spec: Any, settings: Any = None) -> str:
    """The test's search (SPEC section 14): its marker's, else ``--reliable-search``'s."""
    return str(getattr(spec, "search", None) or getattr(settings, "search", None) or "uniform")


def by_cells(spec: Any, search: str) -> bool:
    """Whether a test searched by ``search`` is decided by a search by cells
    (`evaluate.cell_rounds.applies` on its thresholds and grouping)."""
    from pytest_reliable.evaluate import cell_rounds

    return search == "adaptive" and cell_rounds.applies(_named(spec), spec.grouping())


def _named(spec: Any) -> dict[str, None]:
    return dict.fromkeys(name for name in RELIABLE_THRESHOLDS
                         if getattr(spec, name, None) is not None)


def plan_design(spec: Any, space: Any, instances: int, resamplings: int, n_options: int,
                decide: Policy, search: str | None = None) -> tuple[Design, Grouping | None]:
    """The design ``--reliable-plan`` simulates; ``search`` (None: the marker's, else uniform)
    says whether a search by cells decides ``min_worst`` (`Design.cells_chunk`)."""
    from pytest_reliable.evaluate import cell_rounds

    thresholds = [name for name in (*MIN_THRESHOLDS, *MAX_THRESHOLDS)
                  if getattr(spec, name, None) is not None]
    grouping = None
    if any(name in ("min_worst", "max_spread", "min_median") for name in thresholds):
        grouping = grouping_of(space, spec.mode, getattr(spec, "group_by", None), instances,
                               resamplings, n_options)
    hypotheses = len(thresholds)
    if grouping is not None:
        if getattr(spec, "min_worst", None) is not None:
            hypotheses += grouping.groups - 1
        if getattr(spec, "max_spread", None) is not None:
            hypotheses += grouping.pairs - 1
    from pytest_reliable.plan.sampling import n_listed_units

    units = n_listed_units(space, max(n_options, 2))
    mode: Mode = getattr(spec, "mode", "ilr")
    design = Design(
        instances=instances, resamplings=resamplings, k=spec.k, confidence=spec.confidence,
        decide=decide, layout=grouping.layout if grouping else None,
        groups=grouping.groups if grouping else 0, pairs=grouping.pairs if grouping else 0,
        hypotheses=max(hypotheses, 1), mode=mode, units=units or 0,
        sampled=mode == "fixed" and (units is None or resamplings < units),
        cells_chunk=(cell_rounds.chunk_for(instances)
                     if by_cells(spec, search or searched(spec)) else 0),
    )
    return design, grouping


def plan_reliable(session: ReliableSession, nodeid: str, data: Records, task: Task,
                  spec: ReliableSpec,
                  user_model: Any = None, user_baseline: Any = None) -> TestPlan:
    """The plan of one ``reliable.evaluate(data, task)`` under ``spec``: no model is called."""
    from pytest_reliable.plan.sampling import dataset_option_count
    from pytest_reliable.tasks.grading import judge_of

    dataset = session.dataset(data)
    task.validate(dataset)
    space = session.space(spec.space)
    settings = session.settings
    instances = len(dataset)
    decide: Policy = getattr(spec, "decide", None) or getattr(settings, "decide", None) \
        or DEFAULT_POLICY
    notes: list[str] = []
    k = spec.k
    priced = session.settings.pricing_path is not None
    # The model is resolved only to price its calls: without prices the plan needs no API key
    # and does not start (or hash) the embedded model.
    test = session.reliable_test(nodeid, data, task, spec,
                                 user_model if priced else _not_resolved())
    likely: LikelyPlan | None = None
    worst: Sizes | None = None
    if spec.n is not None or settings.n != "auto":
        n = int(spec.n or (settings.n if isinstance(settings.n, int) else 10))
        sizes = Sizes(n, n)
        detail = f"{instances} instances x ({_resamplings(n)} + k={k}) = {instances * (n + k)}"
        if searched(spec, settings) == "adaptive":
            detail += _adaptive_rounds(spec, n, instances, k)
    else:
        n_max = int(getattr(settings, "n_max", 1000))
        stored = stored_n_star(session, nodeid, dataset, spec, space, user_model)
        if stored is not None:
            n = min(stored, n_max)
            sizes = Sizes(n, n)
            capped = f", capped at --reliable-n-max={n_max}" if stored > n_max else ""
            detail = (f"{instances} instances x ({_resamplings(n)} (stored n*{capped}) + k={k}) "
                      f"= {instances * (n + k)}")
        else:
            n = int(settings.pilot_n)
            reference = n if settings.reference_model else 0
            sizes = Sizes(n, n, reference)
            detail = (f"{instances} instances x ({n} pilot resamplings + k={k}) = "
                      f"{instances * (n + k)}; the gate runs on the pilot's first n* resamplings")
            if getattr(settings, "n_method", "bootstrap") == "bootstrap":
                detail += (f"; a bootstrap n* may extend it up to --reliable-n-max={n_max} "
                           f"({instances * (n_max + k)} calls)")
                likely = likely_plan(test, n, n_max, spec)
                gate = min(likely.n_star, n_max)
                sizes = Sizes(gate if reference else max(n, gate), gate, reference)
                worst = Sizes(n_max if reference else max(n, n_max), n_max, reference)
            if settings.reference_model:
                detail += "; the pilot runs on the reference model, then n* on the model under test"
            notes.append(f"figures below are at n = {n} (the pilot); the gate's n* is known "
                         "only after the pilot")
    baseline = _baseline_model(session, test, user_baseline)
    judge = judge_of(task)
    pairwise = judge is not None and judge.pairwise
    calls = sizes.calls(instances, k, baseline is not None, pairwise)
    if baseline is not None:
        on_baseline = instances * ((sizes.model if pairwise else sizes.gate) + k)
        detail += f"; the baseline model {baseline.identity}: {on_baseline} more"
    elif getattr(spec, "max_regression", None) is not None or getattr(spec, "baseline", None):
        detail += "; the baseline: none (a stored baseline report makes no call)"
    # Spend is estimated only with a price table (without one the plan says nothing about
    # money, as the run's table does not).
    spend: PlanSpend | None = None
    usd_max: float | None = None
    if priced:
        spend = estimate_spend(session, test, sizes, baseline, k)
        if worst is not None:
            usd_max = spend.extrapolate(sizes, worst)
    shifts = 0
    if getattr(spec, "circular", False):
        shifts = sum(len(task.options(example) or ()) for example in dataset)
        detail += (f"; circular=True: {shifts} cyclic shifts (the {instances} unshifted ones "
                   "are the canonical prompts, cached at temperature 0)")
        calls += shifts
    if likely is not None:
        likely = replace(likely, calls=calls, usd=None if spend is None else spend.total_usd)
    n_options = dataset_option_count(dataset)
    design, grouping = plan_design(spec, space, instances, n, n_options, decide,
                                   searched(spec, settings))
    if spec.k > 1 and (spec.temperature or 0.0) == 0.0 and \
            float(space.canonical_variant().temperature) == 0.0:
        notes.append(f"k={spec.k} at temperature 0: the k samples repeat one answer")
    resolutions = [resolve(name, float(getattr(spec, name)), design)
                   for name in (*MIN_THRESHOLDS, *MAX_THRESHOLDS)
                   if getattr(spec, name, None) is not None]
    detail += _expected_stop(spec, settings, design, resolutions, instances, k)
    if grouping is not None and grouping.smallest_cells < getattr(spec, "min_cells", 20):
        notes.append(f"groups of about {grouping.smallest_cells:.0f} cells: thin "
                     f"(min_cells={spec.min_cells})")
    judge_calls, judge_detail = judge_plan(
        task, sizes.answers(instances, k, baseline is not None, pairwise))
    calls_max = None
    if worst is not None:
        calls_max = worst.calls(instances, k, baseline is not None, pairwise) + shifts
    suggestion = suggest_size(spec, space, instances, n_options, decide,
                              int(getattr(settings, "n_max", None) or 1000),
                              searched(spec, settings))
    return TestPlan(nodeid, "reliable", instances, calls, detail, decide,
                    grouping.label if grouping else None, resolutions, notes,
                    judge_calls, judge_detail, spend.as_dict() if spend is not None else None,
                    likely.as_dict() if likely is not None else None, calls_max, usd_max,
                    suggestion.describe(decide, n) if suggestion is not None else None)


def _expected_stop(spec: Any, settings: Any, design: Design, resolutions: list[Resolution],
                   instances: int, k: int) -> str:
    """For a fixed-n test that stops early or searches adaptively on the mean alone, the
    resamplings it is expected to run at ``min_score``'s figure (`run.expected_calls`)."""
    from pytest_reliable.run.expected_calls import expected_stop, settled_by_the_mean

    if spec.n is None and settings.n == "auto":
        return ""
    adaptive = searched(spec, settings) == "adaptive"
    stop_early = spec.stop_early if spec.stop_early is not None else settings.stop_early
    thresholds: dict[str, tuple[str, float]] = {
        name: (direction, float(getattr(spec, name)))
        for name, direction in RELIABLE_THRESHOLDS.items() if getattr(spec, name, None) is not None}
    figure = next((r.value for r in resolutions if r.name in ("min_score", "min_win_rate")
                   and r.value is not None), None)
    if not (adaptive or stop_early) or figure is None or not settled_by_the_mean(thresholds):
        return ""
    found = expected_stop(design, thresholds, figure, adaptive=adaptive)
    if found.low >= design.resamplings:  # no saving expected: the worst case says it all
        return ""
    return "; " + found.describe(instances, k, design.resamplings)


def _adaptive_rounds(spec: Any, n: int, instances: int, k: int) -> str:
    """An adaptive test's worst case and first round (the expected calls of a range are not
    simulated: the worst case is what a plan can promise)."""
    from pytest_reliable.evaluate import cell_rounds
    from pytest_reliable.evaluate.stopping import batch_size

    named = _named(spec)
    worst = f"; search='adaptive': that is the worst case (all {n} resamplings); "
    if by_cells(spec, "adaptive"):
        first = cell_rounds.first_rows(named, n)
        return worst + (f"single cells, {cell_rounds.chunk_for(instances)} instances per look of "
                        f"a format, stop once every threshold is settled, at least "
                        f"{instances * (first + k)} calls (the first round)")
    return worst + (f"rounds of {batch_size(n)} resamplings stop once every threshold is "
                    f"settled, at least {instances * (min(batch_size(n), n) + k)} calls "
                    "(the first round)")


def _never_called(prompt: str) -> str:
    raise AssertionError("--reliable-plan called a model")  # pragma: no cover


def _not_resolved() -> Any:
    """Stands for the model under test in a plan without prices (it is never called)."""
    from pytest_reliable.models.callables import text_model

    return text_model(_never_called, id="(not resolved: no price table)")


@dataclass(frozen=True)
class Sizes:
    """How many resamplings each model of a reliable test runs (its canonical pass aside)."""

    model: int
    """On the model under test: the gate's, or a pilot's when the pilot runs on it and is
    longer than the gate (its calls are paid all the same)."""
    gate: int
    """The gate's: what a baseline model answers too (a max_regression comparison)."""
    reference: int = 0
    """A ``--reliable-n auto`` pilot on another reference model (0: none)."""

    def calls(self, instances: int, k: int, baseline: bool, pairwise: bool) -> int:
        """Every call: the model's, the reference pilot's and a live baseline's (a pairwise
        judge's baseline answers every cell the judge compares: the model's)."""
        total = instances * (self.model + k)
        if self.reference:
            total += instances * (self.reference + k)
        if baseline:
            total += instances * ((self.model if pairwise else self.gate) + k)
        return total

    def answers(self, instances: int, k: int, baseline: bool, pairwise: bool) -> int:
        """The answers a judge grades: every one of the models' (a pairwise judge compares the
        model's with the baseline's, one comparison per cell)."""
        if pairwise:
            return instances * (self.model + k) + (
                instances * (self.reference + k) if self.reference else 0)
        return self.calls(instances, k, baseline, pairwise)


@dataclass(frozen=True)
class LikelyPlan:
    """``--reliable-n auto`` without a stored n*: the n* the pilot is likely to find
    (`stats.likely_n.likely_n_star`), and the calls and spend of the test at it."""

    n_star: int
    low: int
    high: int
    score: float
    pilot_n: int
    n_max: int
    mode: str
    calls: int = 0
    usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"n_star": self.n_star, "low": self.low, "high": self.high, "score": self.score,
                "pilot_n": self.pilot_n, "n_max": self.n_max, "mode": self.mode,
                "calls": self.calls, "usd": self.usd}

    @staticmethod
    def describe(likely: Mapping[str, Any]) -> str:
        n_star, n_max, pilot = int(likely["n_star"]), int(likely["n_max"]), int(likely["pilot_n"])
        head = f"~{n_star}" if n_star <= n_max else f"~{n_star}, above the cap: {n_max} run"
        if likely["low"] != likely["high"]:
            head += (f" ({likely['low']}-{likely['high']} for 80% of simulated pilots, over "
                     "the answer structures)")
        run = ("the pilot's first n* resamplings gate" if min(n_star, n_max) <= pilot
               else f"the pilot extends to {min(n_star, n_max)} resamplings")
        usd = "" if likely.get("usd") is None else f", ~${likely['usd']:.4f}"
        fixed = ("; a model whose score depends on the format varies more in fixed mode and "
                 "needs more" if likely.get("mode") == "fixed" else "")
        return (f"{head}: {run}, {likely['calls']} calls{usd} (an estimate, not a promise: "
                "the bootstrap n* of simulated pilots of this design, for a model right "
                f"{likely['score']:.0%} of the time whatever the format{fixed}; the pilot's "
                "own answers decide)")


def likely_plan(test: ReliableTest, pilot_n: int, n_max: int, spec: ReliableSpec) -> LikelyPlan:
    """Simulate pilots of the test's own plan (which cells share one prompt, and so one answer)
    and read the n* they give (`stats.likely_n`). The model is simulated at ``min_score``'s
    limit when the test has one (a model near its limit is the one the gate must tell apart),
    else at 0.5 (where 0/1 answers vary most)."""
    import numpy as np

    from pytest_reliable.evaluate.evaluation import CANONICAL, plan_cells
    from pytest_reliable.stats.likely_n import likely_n_star

    cells = [c for c in plan_cells(test.dataset, test.task, test.space,
                                   replace(test.evaluation(), n=pilot_n))
             if c.resampling != CANONICAL]
    ids: dict[tuple[Any, ...], int] = {}
    answer_ids = np.array([ids.setdefault((c.instance, c.request.messages, c.request.params,
                                           c.request.sample_index), len(ids)) for c in cells],
                          dtype=np.int64).reshape(pilot_n, len(test.dataset))
    limit = getattr(spec, "min_score", None)
    found = likely_n_star(answer_ids, eps=spec.eps, delta=spec.delta, n_max=n_max,
                          score=0.5 if limit is None else float(limit))
    return LikelyPlan(found.n_star, found.low, found.high, found.score, pilot_n, n_max,
                      spec.mode)


def _resamplings(n: int) -> str:
    return f"{n} resampling" + ("" if n == 1 else "s")


def stored_n_star(session: ReliableSession, nodeid: str, dataset: Dataset, spec: ReliableSpec,
                  space: Space, user_model: Any) -> int | None:
    """n* from the store when a previous ``--reliable-n auto`` run left one for this test."""
    from pytest_reliable.store.nstar import NStarKey

    settings = session.settings
    try:
        reference = (session.model_named(settings.reference_model) if settings.reference_model
                     else session.resolve_model(user_model))
        key = NStarKey(
            nodeid=nodeid, space_hash=space.hash, dataset_hash=dataset.hash,
            reference_model=reference.identity, mode=spec.mode, eps=spec.eps,
            delta=spec.delta, seed=settings.seed, pilot_n=settings.pilot_n,
            n_star_method=settings.n_method, n_max=settings.n_max,  # the run's key exactly
        )
        stored = session.nstar_store.get(key)
    except (TypeError, ValueError, OSError, ReliableError):
        # A key shape or a model this plan cannot build: treat it as not stored.
        return None
    return None if stored is None else stored.n_star


def plan_checklist(session: ReliableSession, nodeid: str, data: Records, task: Task,
                   spec: ChecklistSpec, user_model: Any = None) -> TestPlan:
    """A CheckList test's calls (its examples and their perturbed copies, drawn as the run draws
    them), their spend with a price table, and what each rate threshold can resolve at this
    size."""
    from pytest_reliable.checklist.run import planned_checklist
    from pytest_reliable.plan.sampling import derive_seed

    dataset = session.dataset(data)
    task.validate(dataset)
    instances = len(dataset)
    planned = planned_checklist(spec, list(dataset),
                                seed=derive_seed(session.settings.seed, nodeid))
    calls = planned.predictions
    if spec.kind == "mft":
        detail = f"{instances} examples = {calls}"
    else:
        per = len(spec.perturb)
        copies, originals = sum(planned.sizes), sum(1 for size in planned.sizes if size)
        detail = (f"{instances} examples + their perturbed copies: at most "
                  f"{instances * (1 + per)} ({per} perturbation{'s' if per != 1 else ''}); as "
                  f"drawn: {originals} examples with {copies} perturbed copies = {calls}")
    decide = spec.decide or getattr(session.settings, "decide", None) or DEFAULT_POLICY
    limits = {name: limit for name, limit in spec.thresholds.items() if limit is not None}
    resolutions = [resolve_checklist(name, float(limit), planned.sizes, decide, spec.confidence,
                                     len(limits))
                   for name, limit in limits.items()]
    spend = (checklist_spend(session, task, spec, planned.batches, user_model)
             if session.settings.pricing_path is not None else None)
    judge_calls, judge_detail = judge_plan(task, calls)
    return TestPlan(nodeid, spec.kind, instances, calls, detail, decide,
                    resolutions=resolutions, judge_calls=judge_calls, judge_detail=judge_detail,
                    cost=spend.as_dict() if spend is not None else None)


def resolve_checklist(name: str, limit: float, sizes: Sequence[int], decide: Policy,
                      confidence: float, thresholds: int = 1) -> Resolution:
    """What a CheckList rate (``max_flip_rate``, ``max_fail_rate``, ``min_pass``) can resolve
    over the pairs ``sizes`` gives per example, as `gate.checklist_thresholds` decides it.

    A limit of 0 on a flip or fail rate (1 on ``min_pass``) is decided exactly: it passes only
    when no pair is bad. Its figure is the true rate at which that happens with 80% probability
    (20% under fail-on-evidence), for independent pairs: pairs of one example that go together
    make it likelier, so the figure is on the safe side. Other limits: a normal approximation
    for a rate over examples with their pairs correlated (as the gate's bound, clustered by
    example), at the assumed correlation, with the range over it."""
    pairs = int(sum(sizes))
    examples = sum(1 for size in sizes if size)
    if pairs == 0:
        return Resolution(name, limit, None, note="no example can be perturbed: the test fails")
    is_max = name in CHECKLIST_MAX
    if limit == (0.0 if is_max else 1.0):
        target = 1 - POWER if decide == "fail-on-evidence" else POWER
        good = target ** (1 / pairs)  # P(all pairs good) = good ** pairs
        note = (f"decided exactly: only if none of the {pairs} "
                f"{'pairs' if is_max else 'examples'} {'is bad' if is_max else 'fails'} "
                "(taking them as independent)")
        return Resolution(name, limit, 1 - good if is_max else good, note=note)
    per_example = pairs / examples
    if max(sizes) <= 1:
        # Independent pairs: the gate decides on the exact binomial bound, and so does the
        # figure (a max_* rate of bad pairs is one minus a rate of good ones).
        design = Design(instances=pairs, resamplings=1, confidence=confidence, decide=decide,
                        hypotheses=max(thresholds, 1))
        value, count = power.binomial_value(1 - limit if is_max else limit, design)
        unit = "pairs" if is_max else "examples"
        if value is None or count is None:
            need = power.binomial_needs_instances(1 - limit if is_max else limit, confidence)
            more = (f": it needs at least {need} {unit}" if decide == "pass-on-evidence"
                    and need > pairs else "")
            return Resolution(name, limit, None,
                              note=f"not even all {pairs} {unit} show it{more}")
        policy_side = "at most" if decide != "fail-on-evidence" else "at least"
        turns = (f"{policy_side} {pairs - count} bad of {pairs} pairs" if is_max else
                 f"{'at least' if decide != 'fail-on-evidence' else 'at most'} {count} passed "
                 f"of {pairs} examples")
        return Resolution(name, limit, 1 - value if is_max else value,
                          note=f"it turns on {turns}; exact (binomial)")
    multiplier = _margin_multiplier(decide, confidence, max(thresholds, 1))
    toward = _direction(name, decide)
    values = [_solve(limit, functools.partial(_clustered_se, examples, per_example, rho),
                     multiplier, toward) for rho in CHECKLIST_RHOS]
    if values[0] is None:
        return Resolution(name, limit, None)
    return Resolution(name, limit, values[0], values[1], values[2],
                      over="correlation of one example's pairs 0-1")


# -- a CheckList rate over correlated pairs: a normal approximation with a design effect --------
CHECKLIST_RHOS = (0.5, 0.0, 1.0)
"""The correlations of one example's pairs the figure is quoted at: the main figure's, then the
range's ends."""


def _clustered_se(examples: int, per_example: float, rho: float, p: float) -> float:
    """Standard error of a rate over ``examples`` x ``per_example`` pairs correlated at ``rho``
    within an example."""
    c = max(per_example, 1.0)
    return math.sqrt(max(p * (1 - p), 0.0) * (1 + (c - 1) * rho) / (examples * c))


def _margin_multiplier(decide: str, confidence: float, hypotheses: int) -> float:
    """How many standard errors the 80%-probability value lies from the limit, toward the side
    the policy needs evidence for."""
    from scipy.stats import norm

    alpha = 1 - confidence
    if decide == "fail-on-evidence":
        return float(norm.ppf(1 - alpha / hypotheses) + norm.ppf(POWER))
    if decide == "estimate":
        return float(norm.ppf(POWER))
    return float(norm.ppf(confidence) + norm.ppf(POWER))


def _solve(limit: float, se: Callable[[float], float], multiplier: float,
           toward: int) -> float | None:
    """The x in [0, 1] with ``x = limit + toward * multiplier * se(x)`` (bisection); None: no
    such x. ``toward``: +1 when the value lies above the limit, -1 below."""

    def gap(x: float) -> float:
        return toward * (x - limit) - multiplier * se(x)

    end = 1.0 if toward > 0 else 0.0
    if gap(end) < 0:
        return None
    if gap(limit) >= 0:
        return limit
    lo, hi = (limit, end) if toward > 0 else (end, limit)
    for _ in range(60):
        mid = (lo + hi) / 2
        if (gap(mid) >= 0) == (toward > 0):
            hi = mid
        else:
            lo = mid
    return hi if toward > 0 else lo


def checklist_spend(session: ReliableSession, task: Task, spec: ChecklistSpec,
                    batches: Sequence[Sequence[Any]], user_model: Any) -> PlanSpend:
    """The estimated USD of a CheckList test's predictions (one prompt per example at the
    space's canonical variant, temperature 0: a repeated prompt is one call) and of a judge's
    calls on their answers."""
    from pytest_reliable.evaluate.evaluation import greedy_cells
    from pytest_reliable.space import Space

    space = session.space(spec.space) if spec.space is not None else Space.plain()
    model = session.resolve_model(user_model)
    cells = [(batch, greedy_cells(list(batch), task, space, spec.max_tokens))
             for batch in batches]
    priced = _price_cells(session, model, [cell for _, planned in cells for cell in planned])
    spend = PlanSpend(usd=priced.usd, prompt_tokens=priced.prompt_tokens,
                      completion_tokens=priced.completion_tokens,
                      cached_usd_saved=priced.cached_usd_saved, calls=priced.calls,
                      output_from="max_tokens" if priced.output_tokens is None else "cache mean",
                      unpriced=[priced.unpriced] if priced.unpriced else [])
    judged = _price_judge(session, task, [(batch[c.instance], c.request.params.max_tokens)
                                          for batch, planned in cells for c in planned],
                          priced.output_tokens)
    if judged is not None:
        spend.judge_usd = judged.usd
        spend.prompt_tokens += judged.prompt_tokens
        spend.completion_tokens += judged.completion_tokens
        spend.calls += judged.calls
        if judged.unpriced:
            spend.unpriced.append(judged.unpriced)
    return spend


# -- money (SPEC section 13) ---------------------------------------------------------------------
@dataclass
class PlanSpend:
    """The estimated USD of a test's planned calls: the model's, a baseline model's and a
    judge's apart (SPEC 13: "model and judge apart").

    Prompt tokens come from the rendered prompts (`pricing.estimate_tokens`), output tokens from
    the cache's mean for the model when it has answers of it, else the request's ``max_tokens``
    (an upper bound). Answers already in the cache cost nothing now: their price is
    ``cached_usd_saved``. A judge's calls (SPEC section 12) are priced at most: one per answer
    and vote (two orders for a pairwise judge), the answer as long as the model's output
    estimate, none known to be cached (they depend on the answers). A model the table does not
    price (`pricing.unpriced`) counts no dollars and is named in ``unpriced``."""

    usd: float = 0.0
    """The model under test's calls (and a ``--reliable-n auto`` pilot's on a reference
    model)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_usd_saved: float = 0.0
    calls: int = 0
    """Calls the plan would pay for (distinct uncached requests, and the judge's at most)."""
    judge_usd: float = 0.0
    baseline_usd: float = 0.0
    """A baseline model's calls (the same requests on it), none from a stored report."""
    output_from: str = "max_tokens"
    """Where the output tokens came from: "max_tokens" or "cache mean"."""
    unpriced: list[str] = field(default_factory=list)
    """Models the price table does not price: their calls are counted, their dollars unknown."""
    per_model_resampling: float = 0.0
    per_gate_resampling: float = 0.0
    """What one more resampling on the model under test (one more of the gate's, which a
    baseline model answers too) would cost, judge included: read off the last resamplings
    planned, to extrapolate to ``--reliable-n-max``."""

    @property
    def total_usd(self) -> float:
        return self.usd + self.baseline_usd + self.judge_usd

    def extrapolate(self, sizes: Sizes, worst: Sizes) -> float:
        """The most the test may cost at ``worst`` (every n* at ``--reliable-n-max``): what
        ``sizes`` costs, plus each extra resampling at what the last ones planned cost (at
        temperature 0 a small space's prompts repeat: a later resampling is mostly cached)."""
        return (self.total_usd
                + max(0, worst.model - sizes.model) * self.per_model_resampling
                + max(0, worst.gate - sizes.gate) * self.per_gate_resampling)

    def as_dict(self) -> dict[str, Any]:
        return {"usd": round(self.total_usd, 6),
                "model_usd": round(self.usd, 6), "baseline_usd": round(self.baseline_usd, 6),
                "judge_usd": round(self.judge_usd, 6), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cached_usd_saved": round(self.cached_usd_saved, 6), "estimated": True,
                "calls": self.calls, "output_from": self.output_from,
                "unpriced_models": sorted(set(self.unpriced))}

    @staticmethod
    def add(costs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        total: dict[str, Any] = {name: 0 for name in (
            "usd", "model_usd", "baseline_usd", "judge_usd", "prompt_tokens",
            "completion_tokens", "cached_usd_saved", "calls")}
        for cost in costs:
            for name in total:
                total[name] += cost.get(name) or 0
        total["estimated"] = True
        total["output_from"] = ", ".join(sorted({str(c.get("output_from")) for c in costs}))
        total["unpriced_models"] = sorted({str(m) for c in costs
                                           for m in c.get("unpriced_models") or ()})
        return total

    @staticmethod
    def describe(cost: Mapping[str, Any]) -> str:
        text = (f"~${cost['usd']:.4f} (model ${cost['model_usd']:.4f}, baseline "
                f"${cost.get('baseline_usd') or 0:.4f}, judge ${cost['judge_usd']:.4f}) for "
                f"{cost['calls']} uncached calls: {cost['prompt_tokens']} prompt + "
                f"{cost['completion_tokens']} output tokens (output from {cost['output_from']})")
        if cost.get("cached_usd_saved"):
            text += f"; the cache saves ${cost['cached_usd_saved']:.4f}"
        if cost.get("unpriced_models"):
            text += (f"; no price for {', '.join(cost['unpriced_models'])}: its calls are "
                     "not in the dollars")
        return text


@dataclass
class _Priced:
    """One model's share of a plan's spend."""

    usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_usd_saved: float = 0.0
    calls: int = 0
    output_tokens: float | None = None
    """The output estimate of one answer (the cache's mean; None: each request's max_tokens)."""
    tail: float = 0.0
    """USD per resampling over the last quarter of the resamplings priced (first-seen requests
    only: what one more resampling would cost)."""
    unpriced: str | None = None


def estimate_spend(session: ReliableSession, test: ReliableTest, sizes: Sizes,
                   baseline: Any, k: int) -> PlanSpend:
    """Render the test's resamplings and canonical pass on each model that runs them (as the run
    would: ``sizes``), and price the distinct requests the cache does not hold: on the model
    under test (and a reference model's pilot), on a live baseline model, and a judge's calls
    on the answers."""
    from pytest_reliable.tasks.grading import judge_of

    rendered: dict[int, list[Any]] = {}

    def cells(n: int) -> list[Any]:
        if n not in rendered:
            from pytest_reliable.evaluate.evaluation import plan_cells

            rendered[n] = plan_cells(test.dataset, test.task, test.space,
                                     replace(test.evaluation(), n=n))
        return rendered[n]

    judge = judge_of(test.task)
    pairwise = judge is not None and judge.pairwise
    instances = len(test.dataset)
    model = _price_cells(session, test.model, cells(sizes.model))
    spend = PlanSpend(output_from="max_tokens" if model.output_tokens is None else "cache mean")
    shares = [model]
    answered = list(cells(sizes.model))
    spend.usd, spend.per_model_resampling = model.usd, model.tail
    if sizes.reference:
        reference = session.model_named(session.settings.reference_model)
        pilot = _price_cells(session, reference, cells(sizes.reference))
        spend.usd += pilot.usd
        shares.append(pilot)
        answered += cells(sizes.reference)
    if baseline is not None:
        on_baseline = cells(sizes.model if pairwise else sizes.gate)
        priced = _price_cells(session, baseline, on_baseline)
        spend.baseline_usd = priced.usd
        if pairwise:  # it answers every cell the judge compares: the model's
            spend.per_model_resampling += priced.tail
        else:  # the gate's resamplings, and its answers are judged too
            spend.per_gate_resampling += priced.tail
            answered += on_baseline
        shares.append(priced)
    judged = _price_judge(session, test.task, [(test.dataset[c.instance],
                                                c.request.params.max_tokens) for c in answered],
                          model.output_tokens)
    if judged is not None:
        spend.judge_usd = judged.usd
        per_resampling = judged.usd / max(len(answered), 1) * instances
        spend.per_model_resampling += per_resampling
        if baseline is not None and not pairwise:
            spend.per_gate_resampling += per_resampling
        shares.append(judged)
    for share in shares:
        spend.prompt_tokens += share.prompt_tokens
        spend.completion_tokens += share.completion_tokens
        spend.cached_usd_saved += share.cached_usd_saved
        spend.calls += share.calls
        if share.unpriced is not None:
            spend.unpriced.append(share.unpriced)
    return spend


def _plan_price(session: ReliableSession, model: Any) -> Price:
    """The model's price; one without a price (even under a USD budget, where the run stops
    before calling it) counts no dollars here and is named."""
    from pytest_reliable.calls.pricing import PricingError, unpriced

    try:
        return session.price_of(model)
    except PricingError:
        return unpriced(model.identity)


def _price_cells(session: ReliableSession, model: Any, cells: Sequence[Any]) -> _Priced:
    """The distinct requests of ``cells`` on ``model``: those the cache holds are saved, the
    others priced (output at the cache's mean for the model, else at ``max_tokens``)."""
    from pytest_reliable.calls.cache import cache_key
    from pytest_reliable.calls.pricing import call_cost, estimate_tokens, prompt_text
    from pytest_reliable.evaluate.evaluation import CANONICAL

    price = _plan_price(session, model)
    keyed: dict[str, Any] = {}
    for cell in cells:
        r = cell.request
        keyed.setdefault(cache_key(model.identity, r.messages, r.params, r.sample_index,
                                   r.scope), cell)
    hits: dict[str, Any] = {}
    priced = _Priced(unpriced=price.unknown_for)
    if session.has_stored_answers():  # a plan never creates the cache file
        store = session.cache
        hits = dict(store.get_many(list(keyed))) if store.reads else {}
        priced.output_tokens = store.mean_completion_tokens(model.identity)
    by_resampling: dict[int, float] = {}
    for key, cell in keyed.items():
        request = cell.request
        if key in hits:
            priced.cached_usd_saved += call_cost(price, request.messages, hits[key]).usd
            continue
        prompt = estimate_tokens(prompt_text(request.messages))
        output = (request.params.max_tokens if priced.output_tokens is None
                  else min(request.params.max_tokens, round(priced.output_tokens)))
        priced.calls += 1
        priced.prompt_tokens += prompt
        priced.completion_tokens += output
        usd = price.usd(prompt, output)
        priced.usd += usd
        if cell.resampling != CANONICAL:
            by_resampling[cell.resampling] = by_resampling.get(cell.resampling, 0.0) + usd
    resamplings = 1 + max((c.resampling for c in cells if c.resampling != CANONICAL), default=-1)
    if resamplings:
        last = range(resamplings - max(1, resamplings // 4), resamplings)
        priced.tail = sum(by_resampling.get(r, 0.0) for r in last) / len(last)
    return priced


def _baseline_model(session: ReliableSession, test: Any, user_baseline: Any) -> Any:
    """The model a comparing test's baseline runs on (None: it does not compare, or it
    compares with a stored report, which makes no call)."""
    from pytest_reliable.tasks.grading import judge_of

    judge = judge_of(test.task)
    try:
        choice = session.baseline_for(test, user_baseline,
                                      pairwise=judge is not None and judge.pairwise)
    except ReliableError:
        return None  # the run says what is wrong with the comparison; the plan prices none
    if choice is None or choice.kind == "report":
        return None
    try:
        return session.baseline_model(choice)
    except ReliableError:  # e.g. no API key here: its calls are counted, priced by its name
        from pytest_reliable.models.callables import text_model

        return text_model(_never_called, id=choice.name or "the reliable_baseline fixture's")


def _price_judge(session: ReliableSession, task: Task, answered: Sequence[tuple[Any, int]],
                 answer_tokens: float | None) -> _Priced | None:
    """At most what the task's judge costs grading ``answered`` ((example, max_tokens) of each
    answer): one call per answer and vote, two orders for a pairwise judge; each answer as long
    as ``answer_tokens`` (else its max_tokens), each reply the judge's max_tokens."""
    from pytest_reliable.calls.pricing import CHARS_PER_TOKEN, estimate_tokens, prompt_text
    from pytest_reliable.tasks.grading import judge_of
    from pytest_reliable.tasks.judge import JudgedItem

    judge = judge_of(task)
    judge_model = session.judge_model(task)
    if judge is None or judge_model is None:
        return None
    price = _plan_price(session, judge_model)
    references = getattr(task, "references", None)
    per_answer = judge.votes * (2 if judge.pairwise else 1)
    priced = _Priced(unpriced=price.unknown_for)
    for example, max_tokens in answered:
        length = round(answer_tokens) if answer_tokens is not None else max_tokens
        answer = "x" * (min(length, max_tokens) * CHARS_PER_TOKEN)
        item = JudgedItem(task.prompt_text(example),
                          tuple(references(example)) if callable(references) else (), answer)
        messages = (judge.pair_messages(item, answer, answer) if judge.pairwise
                    else judge.messages(item))
        prompt = estimate_tokens(prompt_text(messages))
        priced.calls += per_answer
        priced.prompt_tokens += prompt * per_answer
        priced.completion_tokens += judge.max_tokens * per_answer
        priced.usd += price.usd(prompt, judge.max_tokens) * per_answer
    return priced
