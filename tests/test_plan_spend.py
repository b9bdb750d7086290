"""``--reliable-plan``'s calls and spend (SPEC sections 11 and 13): the model's, a baseline model's
and a judge's calls priced apart, CheckList tests counted as drawn, the budget's warnings and the
likely n* under ``--reliable-n auto``, through `plan_report` as the plugin calls it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable import Dataset, Generation, Judge, MultipleChoice, openai_model, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.run.plan_spend import PlanSpend
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.run.sizing import PlanBudget, TestPlan, format_plans, plan_reliable
from pytest_reliable.space import Space

# The baseline costs twice the candidate per token; the judge is priced apart.
PRICES = {"models": {"cand": {"input": 1.0, "output": 2.0},
                     "base": {"input": 2.0, "output": 4.0},
                     "judge": {"input": 10.0, "output": 30.0}}}
SPACE = Space.from_mapping("wrappers", {"wrapper": ["({})", "[{}]"]})


def session_of(tmp_path: Path) -> ReliableSession:
    pricing = tmp_path / "prices.yaml"
    pricing.write_text(json.dumps(PRICES))
    return ReliableSession(Settings(rootdir=tmp_path, no_cache=True, pricing_path=pricing),
                           {"wrappers": SPACE})


def questions(count: int) -> Dataset:
    return Dataset.from_records([{"question": f"Q{i}?", "choices": ["a", "b"], "answer": 0}
                                 for i in range(count)])


def generations(count: int) -> Dataset:
    return Dataset.from_records([{"question": f"Q{i}?", "reference": "yes"}
                                 for i in range(count)])


def cost(plan: TestPlan) -> dict[str, Any]:
    assert plan.cost is not None
    return plan.cost


def test_a_baseline_models_calls_are_priced_at_its_own_price(tmp_path: Path) -> None:
    session = session_of(tmp_path)
    candidate = text_model(lambda prompt: "A", id="cand")
    baseline = text_model(lambda prompt: "A", id="base")
    alone = cost(plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                               ReliableSpec(space="wrappers", n=2), candidate))
    compared = cost(plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                                  ReliableSpec(space="wrappers", n=2, max_regression=0.1),
                                  candidate, baseline))
    assert alone["baseline_usd"] == 0 and alone["model_usd"] > 0
    assert compared["model_usd"] == pytest.approx(alone["model_usd"])
    # the same requests on a model twice as dear per token
    assert compared["baseline_usd"] == pytest.approx(2 * alone["model_usd"])
    assert compared["usd"] == pytest.approx(3 * alone["model_usd"])
    assert compared["calls"] == 2 * alone["calls"]
    assert compared["judge_usd"] == 0


def test_a_comparison_without_a_baseline_model_prices_none(tmp_path: Path) -> None:
    session = session_of(tmp_path)
    candidate = text_model(lambda prompt: "A", id="cand")
    spent = cost(plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                               ReliableSpec(space="wrappers", n=2, max_regression=0.1),
                               candidate, None))  # no baseline configured: the run says so, the plan prices none
    assert spent["baseline_usd"] == 0


@pytest.mark.parametrize("votes", [1, 3])
def test_a_judges_calls_are_priced_apart_per_answer_and_vote(tmp_path: Path,
                                                              votes: int) -> None:
    session = session_of(tmp_path)
    candidate = text_model(lambda prompt: "yes", id="cand")
    judge = Judge(text_model(lambda prompt: "PASS", id="judge"), "says yes", votes=votes,
                  max_tokens=4)
    plain = cost(plan_reliable(session, "t.py::t", generations(5), Generation(),
                               ReliableSpec(space="wrappers", n=2), candidate))
    judged = cost(plan_reliable(session, "t.py::t", generations(5), Generation(grader=judge),
                                ReliableSpec(space="wrappers", n=2), candidate))
    assert plain["judge_usd"] == 0
    assert judged["model_usd"] == pytest.approx(plain["model_usd"])
    answers = 5 * (2 + 1)  # every cell's answer: 2 resamplings and the canonical pass
    assert judged["calls"] == plain["calls"] + answers * votes
    # each judge call: at least the judge's 4 output tokens at $30 per million
    assert judged["judge_usd"] >= answers * votes * 4 * 30 / 1e6
    assert judged["usd"] == pytest.approx(judged["model_usd"] + judged["judge_usd"])
    if votes == 3:
        one_vote = cost(plan_reliable(
            session, "t.py::t", generations(5),
            Generation(grader=Judge(text_model(lambda p: "PASS", id="judge"), "says yes",
                                    votes=1, max_tokens=4)),
            ReliableSpec(space="wrappers", n=2), candidate))
        assert judged["judge_usd"] == pytest.approx(3 * one_vote["judge_usd"])


def test_the_plan_text_shows_the_three_apart_and_their_total(tmp_path: Path) -> None:
    session = session_of(tmp_path)
    plan = plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                         ReliableSpec(space="wrappers", n=2, max_regression=0.1),
                         text_model(lambda prompt: "A", id="cand"),
                         text_model(lambda prompt: "A", id="base"))
    text = "\n".join(format_plans([plan, plan]))
    spent = cost(plan)
    assert (f"(model ${spent['model_usd']:.4f}, baseline ${spent['baseline_usd']:.4f}, "
            "judge $0.0000)") in text
    total = PlanSpend.add([spent, spent])
    assert total["baseline_usd"] == pytest.approx(2 * spent["baseline_usd"])
    assert f"total spend: ~${total['usd']:.4f}" in text


def test_a_pairwise_judge_is_counted_and_priced_in_both_orders(tmp_path: Path) -> None:
    session = session_of(tmp_path)
    candidate = text_model(lambda prompt: "yes", id="cand")
    baseline = text_model(lambda prompt: "yes", id="base")

    def judge(pairwise: bool) -> Judge:
        return Judge(text_model(lambda prompt: "A", id="judge"), "the better answer", votes=2,
                     max_tokens=4, pairwise=pairwise)

    pairwise = plan_reliable(session, "t.py::t", generations(5), Generation(grader=judge(True)),
                             ReliableSpec(space="wrappers", n=2, min_win_rate=0.5),
                             candidate, baseline)
    cells = 5 * (2 + 1)
    assert pairwise.judge_calls == cells * 2 * 2  # each cell's comparison: 2 votes x 2 orders
    assert pairwise.judge_detail is not None and "x 2 orders" in pairwise.judge_detail
    # the baseline answers every cell the judge compares, and is priced at its own price
    assert pairwise.calls == 2 * cells
    assert cost(pairwise)["baseline_usd"] == pytest.approx(2 * cost(pairwise)["model_usd"])
    plain = plan_reliable(session, "t.py::t", generations(5), Generation(grader=judge(False)),
                          ReliableSpec(space="wrappers", n=2), candidate)
    assert plain.judge_calls == cells * 2
    # two orders, each at least as long as one answer: more than twice one grading
    assert cost(pairwise)["judge_usd"] > 2 * cost(plain)["judge_usd"]


def test_only_a_live_baseline_is_counted(tmp_path: Path) -> None:
    session = session_of(tmp_path)
    candidate = text_model(lambda prompt: "A", id="cand")
    spec = ReliableSpec(space="wrappers", n=2, max_regression=0.1)
    alone = plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                          ReliableSpec(space="wrappers", n=2), candidate)
    live = plan_reliable(session, "t.py::t", questions(6), MultipleChoice(), spec, candidate,
                         text_model(lambda prompt: "A", id="base"))
    assert live.calls == 2 * alone.calls == 2 * 6 * 3
    assert "the baseline model base: 18 more" in live.calls_detail
    # no baseline model at all (the run says what is missing): no call is counted for one
    missing = plan_reliable(session, "t.py::t", questions(6), MultipleChoice(), spec, candidate)
    assert missing.calls == alone.calls


def test_the_plan_warns_when_its_estimate_exceeds_the_budget(tmp_path: Path) -> None:
    session = session_of(tmp_path)
    plan = plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                         ReliableSpec(space="wrappers", n=2), text_model(lambda p: "A", id="cand"))
    usd, calls = cost(plan)["usd"], cost(plan)["calls"]
    quiet = format_plans([plan], PlanBudget(usd=usd * 1.01, calls=calls))
    assert not any(line.startswith("warning:") for line in quiet)
    loud = "\n".join(format_plans([plan, plan], PlanBudget(usd=usd * 1.01, calls=calls,
                                                           tokens=10)))
    assert (f"warning: the estimated spend ~${2 * usd:.4f} exceeds --reliable-budget "
            f"{usd * 1.01:g}usd") in loud
    assert f"warning: {2 * calls} uncached calls planned exceed --reliable-budget {calls}calls" \
        in loud
    assert "exceed --reliable-budget 10 (tokens)" in loud
    # without a price table only the calls can be checked: every planned call counts
    unpriced = ReliableSession(Settings(rootdir=tmp_path, no_cache=True), {"wrappers": SPACE})
    bare = plan_reliable(unpriced, "t.py::t", questions(6), MultipleChoice(),
                         ReliableSpec(space="wrappers", n=2), text_model(lambda p: "A", id="c"))
    text = "\n".join(format_plans([bare], PlanBudget(usd=0.01, calls=bare.calls - 1)))
    assert f"warning: {bare.calls} calls at most planned exceed" in text
    assert "estimated spend" not in text


def test_an_unpriced_model_is_named_not_counted_as_free(tmp_path: Path) -> None:
    pricing = tmp_path / "prices.yaml"
    pricing.write_text(json.dumps(PRICES))
    session = ReliableSession(Settings(rootdir=tmp_path, no_cache=True, pricing_path=pricing,
                                       budget_usd=1.0), {"wrappers": SPACE})
    plan = plan_reliable(session, "t.py::t", questions(6), MultipleChoice(),
                         ReliableSpec(space="wrappers", n=2),
                         openai_model("mystery", "http://127.0.0.1:9/v1"))
    assert cost(plan)["unpriced_models"] == ["openai:mystery@127.0.0.1"]
    text = "\n".join(format_plans([plan], PlanBudget(usd=1.0)))
    assert "no price for openai:mystery@127.0.0.1: its calls are not in the dollars" in text
    assert ("warning: no price for openai:mystery@127.0.0.1: under --reliable-budget 1usd the "
            "run stops before any call") in text


# -- CheckList tests ----------------------------------------------------------------------------
def test_a_checklist_plan_counts_its_pairs_as_drawn_and_prices_them(tmp_path: Path) -> None:
    from pytest_reliable import Classification
    from pytest_reliable.checklist.run import planned_checklist
    from pytest_reliable.contract.markers import ChecklistSpec
    from pytest_reliable.plan.sampling import derive_seed
    from pytest_reliable.run.plan_checklist import plan_checklist

    session = session_of(tmp_path)
    task = Classification(labels=["positive", "negative"])
    data = [{"text": f"Movie {i} is good.", "label": "positive"} for i in range(8)] + [
        {"text": "ok", "label": "positive"}]  # "ok": nothing to negate
    spec = ChecklistSpec(kind="directional", perturb=("negation",), expect="flip",
                         thresholds={"max_fail_rate": 0.2})
    plan = plan_checklist(session, "t.py::t", data, task, spec,
                          text_model(lambda prompt: "positive", id="cand"))
    drawn = planned_checklist(spec, data, seed=derive_seed(session.settings.seed, "t.py::t"))
    assert plan.calls == drawn.predictions == 2 * sum(drawn.sizes) == 2 * 8
    assert "at most 18 (1 perturbation)" in plan.calls_detail
    assert "as drawn: 8 examples with 8 perturbed copies = 16" in plan.calls_detail
    spent = cost(plan)
    assert spent["model_usd"] > 0 and spent["calls"] == plan.calls  # distinct prompts
    [resolution] = plan.resolutions
    # One pair per example: decided on the exact binomial bound, under which 8 good pairs of 8
    # cannot show a fail rate below 0.2 at 95% (1 - 0.05 ** (1 / 8) = 0.31); 14 can.
    assert resolution.name == "max_fail_rate" and resolution.value is None
    assert "not even all 8 pairs show it: it needs at least 14 pairs" in "\n".join(plan.lines())


@pytest.mark.parametrize("pairs", [1, 10, 100])
def test_a_zero_flip_rate_is_resolved_exactly(pairs: int) -> None:
    """max_flip_rate=0 passes only when no pair flips: with independent pairs at true rate v,
    (1 - v) ** pairs; the figure is the v where that is 80%."""
    from pytest_reliable.run.plan_checklist import resolve_checklist

    found = resolve_checklist("max_flip_rate", 0.0, [1] * pairs, "pass-on-evidence", 0.95)
    assert found.value is not None
    assert (1 - found.value) ** pairs == pytest.approx(0.8)
    failing = resolve_checklist("max_flip_rate", 0.0, [1] * pairs, "fail-on-evidence", 0.95)
    assert failing.value is not None and (1 - failing.value) ** pairs == pytest.approx(0.2)
    perfect = resolve_checklist("min_pass", 1.0, [1] * pairs, "pass-on-evidence", 0.95)
    assert perfect.value is not None and perfect.value ** pairs == pytest.approx(0.8)


def test_a_checklist_rate_figure_holds_through_the_real_gate() -> None:
    """min_pass over one example per example: at the quoted true pass rate, simulated MFT
    gates through gate.checklist_thresholds pass on evidence about 80% of the time."""
    import numpy as np

    from pytest_reliable.run.plan_checklist import resolve_checklist
    from pytest_reliable.verdict.gate import checklist_thresholds

    examples, limit = 200, 0.7
    found = resolve_checklist("min_pass", limit, [1] * examples, "pass-on-evidence", 0.95)
    assert found.value is not None
    rng = np.random.default_rng(3)
    passed = 0
    for _ in range(400):
        counts = list(rng.random(examples) < found.value)
        [check] = checklist_thresholds({"min_pass": limit}, [int(c) for c in counts],
                                       [1] * examples, "pass-on-evidence", 0.95)
        passed += check.passed
    assert 0.72 <= passed / 400 <= 0.88  # 80% within Monte Carlo error (+-4%) and the normal
    # approximation's


# -- --reliable-n auto -------------------------------------------------------------------------
def test_under_n_auto_the_plan_counts_the_likely_n_star_and_the_cap(tmp_path: Path) -> None:
    pricing = tmp_path / "prices.yaml"
    pricing.write_text(json.dumps(PRICES))
    big = Space.from_mapping("big", {"wrapper": ["({})", "[{}]", "{}.", "{})"],
                                     "enumerator": ["upper", "lower", "number", "roman"]})
    session = ReliableSession(Settings(rootdir=tmp_path, no_cache=True, pricing_path=pricing,
                                       n="auto", pilot_n=30, n_max=400), {"big": big})
    plan = plan_reliable(session, "t.py::t", questions(20), MultipleChoice(),
                         ReliableSpec(space="big", eps=0.01), text_model(lambda p: "A", id="cand"))
    assert plan.likely is not None
    likely = plan.likely
    gate = min(likely["n_star"], 400)
    assert likely["low"] <= likely["n_star"] <= likely["high"]
    assert plan.calls == likely["calls"] == 20 * (max(30, gate) + 1)
    assert plan.calls_max == 20 * (400 + 1)
    spent = cost(plan)
    assert plan.usd_max is not None and plan.usd_max >= spent["usd"]
    text = "\n".join(plan.lines())
    assert "likely n*: ~" in text and "An estimate" not in text and "an estimate" in text
    assert f"worst case: {20 * 401} calls, at most ~$" in text
    total = "\n".join(format_plans([plan]))
    assert f"at most {20 * 401} if every n* reaches --reliable-n-max" in total


def test_a_stored_n_star_is_read_with_the_runs_key_and_capped(tmp_path: Path) -> None:
    from pytest_reliable.store.nstar import NStarEntry, NStarKey

    settings = Settings(rootdir=tmp_path, no_cache=True, n="auto", pilot_n=30, n_max=50,
                        n_method="bootstrap")
    session = ReliableSession(settings, {"wrappers": SPACE})
    model = text_model(lambda p: "A", id="cand")
    dataset = questions(6)
    key = NStarKey(nodeid="t.py::t", space_hash=SPACE.hash, dataset_hash=dataset.hash,
                   reference_model="cand", mode="ilr", eps=0.01, delta=0.1, seed=0, pilot_n=30,
                   n_star_method="bootstrap", n_max=50)
    session.nstar_store.put(key, NStarEntry(80, False, 0.02))
    plan = plan_reliable(session, "t.py::t", dataset, MultipleChoice(),
                         ReliableSpec(space="wrappers"), model)
    assert plan.likely is None and plan.calls == 6 * (50 + 1)
    assert "50 resamplings (stored n*, capped at --reliable-n-max=50)" in plan.calls_detail
