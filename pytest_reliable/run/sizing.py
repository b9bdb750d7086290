"""Sizing before spending: what a reliable test will call (``--reliable-plan``).

No model call and no pytest here. `plan_reliable` takes what a ``reliable.evaluate`` call would
run (dataset, task, marker) and returns a `TestPlan`: the calls (instances x (resamplings + k), a
pilot under ``--reliable-n auto`` and the n* it is likely to find, a stored n* when the store has
one, a baseline's calls), their spend (`run.plan_spend`), per threshold the resolvable value
(`run.plan_figures`) and the size suggestion (`run.plan_size`). `format_plans` writes the
``--reliable-plan`` section: every test's plan, the totals, ``--reliable-budget``'s warnings and
the method. A CheckList test's plan is `run.plan_checklist`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_reliable.contract.vocabulary import DEFAULT_POLICY, RELIABLE_THRESHOLDS, Policy
from pytest_reliable.errors import ReliableError
from pytest_reliable.run.plan_figures import (
    MAX_THRESHOLDS,
    METHOD,
    MIN_THRESHOLDS,
    Resolution,
    resolve,
)
from pytest_reliable.run.plan_size import (
    by_cells,
    named_thresholds,
    plan_design,
    suggest_size,
)
from pytest_reliable.run.plan_spend import PlanSpend, Sizes, estimate_spend, judge_plan
from pytest_reliable.stats.power import Design

if TYPE_CHECKING:
    from pytest_reliable.contract.markers import ReliableSpec
    from pytest_reliable.plan.data import Dataset, Records
    from pytest_reliable.plan.task import Task
    from pytest_reliable.run.session import ReliableSession, ReliableTest
    from pytest_reliable.space import Space


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
        if spec.search_under(settings.search) == "adaptive":
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
                                   spec.search_under(settings.search))
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
                              spec.search_under(settings.search))
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
    adaptive = spec.search_under(settings.search) == "adaptive"
    stop_early = spec.stops_early_under(settings.stop_early)
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

    named = named_thresholds(spec)
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
