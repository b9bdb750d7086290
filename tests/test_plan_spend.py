"""``--reliable-plan``'s spend (SPEC section 13): the model's, a baseline model's and a judge's
calls priced apart, through `plan_report.plan_reliable` as the plugin calls it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable import Dataset, Generation, Judge, MultipleChoice, text_model
from pytest_reliable.markerspec import ReliableSpec
from pytest_reliable.plan_report import PlanSpend, TestPlan, format_plans, plan_reliable
from pytest_reliable.session import ReliableSession, Settings
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
