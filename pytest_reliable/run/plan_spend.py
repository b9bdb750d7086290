"""What a plan's calls cost before any is made (SPEC section 13), and a judge's calls (section 12).

No model call and no pytest here. `Sizes` says how many resamplings each model of a reliable
test runs; `estimate_spend` renders them as the run would and prices the distinct requests the
cache does not hold, the model's, a baseline model's and a judge's apart (`PlanSpend`);
`checklist_spend` does the same for a CheckList test's predictions; `judge_plan` counts a judge's
calls at most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_reliable.calls.pricing import Price
    from pytest_reliable.contract.markers import ChecklistSpec
    from pytest_reliable.plan.task import Task
    from pytest_reliable.run.session import ReliableSession, ReliableTest


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
