"""A CheckList test's plan (``--reliable-plan``): its calls, their spend, what its rates resolve.

No model call and no pytest here. `plan_checklist` counts the test's predictions as the run draws
them (its examples and their perturbed copies) and prices them with a price table
(`plan_spend.checklist_spend`); `resolve_checklist` gives each rate threshold's figure, exact for
a limit of 0 and for independent pairs, else a normal approximation with a design effect for an
example's pairs that go together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_reliable.contract.vocabulary import DEFAULT_POLICY, Policy
from pytest_reliable.run.plan_figures import CHECKLIST_MAX, MAX_THRESHOLDS, Resolution
from pytest_reliable.run.plan_spend import checklist_spend, judge_plan
from pytest_reliable.run.sizing import TestPlan
from pytest_reliable.stats import power
from pytest_reliable.stats.power import POWER, Design

if TYPE_CHECKING:
    from pytest_reliable.contract.markers import ChecklistSpec
    from pytest_reliable.plan.data import Records
    from pytest_reliable.plan.task import Task
    from pytest_reliable.run.session import ReliableSession


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


def _direction(name: str, decide: str) -> int:
    """+1 when the quoted value lies above the limit, -1 below."""
    up = name not in MAX_THRESHOLDS and name not in CHECKLIST_MAX
    return 1 if up != (decide == "fail-on-evidence") else -1


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
