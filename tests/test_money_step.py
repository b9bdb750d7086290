"""Money as a step of its own (issue 29 step 2, `pytest_reliable.calls.money`): one planned call is
priced where it is reserved (each attempt, before it is sent) and where it is paid (once, after
its answer is stored), on both transports; the budget settles to the real cost and every
reservation is given back."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.calls import money
from pytest_reliable.calls.batch import BatchTransport
from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.calls.pricing import Price
from pytest_reliable.calls.requests import Request, number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.openai_compat import OpenAICompatibleModel
from pytest_reliable.testing import Fault, ScriptedServer, scripted_model

P0 = SamplingParams(temperature=0.0, max_tokens=8)
PRICE = Price(input=1.0, output=2.0, cached_input=1.0, batch=0.5)


def reqs(n: int) -> list[Request]:
    return number_samples(
        [([{"role": "user", "content": f"q {i}"}], P0) for i in range(n)], "t::money")


@pytest.fixture
def pricings(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often a call was priced: at its reservation (``reserve``) and its payment (``pay``)."""
    seen: Counter[str] = Counter()
    reserve, pay = money.max_call_usd, money.call_cost

    def counted_reserve(*args: Any, **kwargs: Any) -> float:
        seen["reserve batch" if kwargs.get("batch") else "reserve"] += 1
        return reserve(*args, **kwargs)

    def counted_pay(*args: Any, **kwargs: Any) -> Any:
        seen["pay"] += 1
        return pay(*args, **kwargs)

    monkeypatch.setattr(money, "max_call_usd", counted_reserve)
    monkeypatch.setattr(money, "call_cost", counted_pay)
    return seen


def test_a_direct_call_is_priced_at_each_attempt_and_once_when_paid(
    pricings: Counter[str],
) -> None:
    budget = Budget(max_usd=10.0)
    with scripted_model(faults=[Fault("500")]) as model:
        runner = Runner(model, None, budget=budget, price=PRICE, backoff_base=0.01,
                        backoff_max=0.02)
        results = runner.run(reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    attempts = sum(r.attempts for r in results)
    assert attempts == 4  # one attempt failed and was sent again
    assert pricings == {"reserve": attempts, "pay": 3}
    paid = sum(r.cost.usd for r in results if r.cost is not None)
    assert paid > 0
    # the budget holds the real cost, no reservation is left, and the test's spend says the same
    assert budget.usd == pytest.approx(paid) == pytest.approx(runner.stats.spend.usd)
    assert budget.outstanding_usd == pytest.approx(0.0)
    assert budget.calls == attempts and runner.stats.made == 3


def test_a_batched_call_is_priced_once_reserved_and_once_paid_at_the_batch_price(
    tmp_path: Path, pricings: Counter[str],
) -> None:
    budget = Budget(max_usd=10.0)
    with ScriptedServer() as server:
        model = OpenAICompatibleModel("scripted", server.base_url, api_key="sk-scripted")
        store = ResponseCache.open(tmp_path / "cache.sqlite")
        try:
            transport = BatchTransport(model, store, poll_first_s=0.01, poll_max_s=0.05)
            runner = Runner(model, store, budget=budget, price=PRICE, transport=transport)
            results = runner.run(reqs(4))
            assert store.count() == 4
        finally:
            store.close()
    assert [r.status for r in results] == ["ok"] * 4
    assert pricings == {"reserve batch": 4, "pay": 4}
    costs = [r.cost for r in results if r.cost is not None]
    assert len(costs) == 4
    direct = sum(PRICE.usd(c.prompt_tokens, c.completion_tokens) for c in costs)
    assert budget.usd == pytest.approx(direct * PRICE.batch) == pytest.approx(
        runner.stats.spend.usd)
    assert budget.outstanding_usd == pytest.approx(0.0)


def test_a_call_that_brings_no_answer_gives_its_reservations_back(
    pricings: Counter[str],
) -> None:
    budget = Budget(max_usd=10.0)
    with scripted_model(faults=[Fault("500")] * 10) as model:
        runner = Runner(model, None, budget=budget, price=PRICE, max_retries=2,
                        backoff_base=0.01, backoff_max=0.02)
        [result] = runner.run(reqs(1))
    assert result.status == "error" and result.attempts == 3
    assert pricings == {"reserve": 3}  # never paid: priced at its reservations only
    assert budget.usd == pytest.approx(0.0) and budget.outstanding_usd == pytest.approx(0.0)
    assert budget.calls == 3 and runner.stats.spend.usd == 0.0
