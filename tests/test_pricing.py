"""Prices (SPEC section 13): the table's format and checks, usage to USD, estimates, budgets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.pricing import (
    FREE,
    MAX_PRICE,
    Price,
    PriceTable,
    PricingError,
    Spend,
    _checked,
    call_cost,
    calls_an_api,
    estimate_tokens,
    max_call_usd,
    model_names,
    unpriced,
)
from pytest_reliable.models.base import ModelResponse


def table(tmp_path: Path, text: str) -> PriceTable:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    return PriceTable.load(path)


def test_the_spec_format_with_exact_names_before_globs(tmp_path: Path) -> None:
    prices = table(tmp_path, """
models:
  "gpt-4o*": {input: 2.5, output: 10}
  gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075, batch: 0.5}
""")
    mini = prices.price_for(["gpt-4o-mini", "openai:gpt-4o-mini@api.openai.com"])
    assert mini == Price(0.15, 0.60, 0.075, 0.5, "gpt-4o-mini")
    big = prices.price_for(["gpt-4o-2024", "openai:gpt-4o-2024@api.openai.com"])
    assert big is not None and (big.cached_input, big.batch) == (2.5, 1.0)  # the defaults
    assert prices.price_for(["claude", "openai:claude@x"]) is None
    # the identity matches too (a callable's id, the adapter's openai:NAME@HOST)
    assert table(tmp_path, "models: {'openai:*@127.0.0.1': {input: 1, output: 1}}").price_for(
        ["scripted", "openai:scripted@127.0.0.1"]) is not None


def test_usage_to_usd_with_cached_prompt_tokens_and_the_batch_multiplier() -> None:
    price = Price(input=1.0, output=4.0, cached_input=0.5, batch=0.5)
    assert price.usd(1000, 100) == pytest.approx((1000 * 1 + 100 * 4) / 1e6)
    assert price.usd(1000, 100, 400) == pytest.approx((600 * 1 + 400 * 0.5 + 400) / 1e6)
    assert price.usd(1000, 100, batch=True) == pytest.approx(0.5 * 1400 / 1e6)
    response = ModelResponse("ok", prompt_tokens=1000, completion_tokens=100,
                             extra={"cached_prompt_tokens": 400, "batch": True})
    cost = call_cost(price, (("user", "x"),), response)
    assert cost.usd == pytest.approx(0.5 * (600 + 200 + 400) / 1e6) and not cost.estimated
    assert FREE.usd(10**9, 10**9) == 0


def test_without_usage_the_tokens_are_estimated_at_four_characters_each() -> None:
    price = Price(1.0, 1.0, 1.0)
    cost = call_cost(price, (("system", "a" * 10), ("user", "b" * 30)), ModelResponse("c" * 9))
    # the prompt's contents joined by a blank line: 10 + 2 + 30 = 42 characters -> 11 tokens
    assert (cost.prompt_tokens, cost.completion_tokens, cost.estimated) == (11, 3, True)
    assert max_call_usd(price, (("user", "b" * 40),), 32) == pytest.approx((10 + 32) / 1e6)


@given(st.text(max_size=200))
def test_an_estimate_is_never_zero_for_text_and_grows_with_it(text: str) -> None:
    assert estimate_tokens(text) == 0 if not text else 1 <= estimate_tokens(text) <= len(text)
    assert estimate_tokens(text + "abcd") == estimate_tokens(text) + 1


@pytest.mark.parametrize(("text", "said"), [
    ("models: {m: {input: 1}}", "models.m.output is missing"),
    ("models: {m: {input: '1', output: 1}}", "models.m.input is '1': give a number >= 0"),
    ("models: {m: {input: 1, output: 1, batch: .nan}}", "models.m.batch is nan"),
    ("models: {m: {input: true, output: 1}}", "models.m.input is True"),
    ("models: {m: 3}", "models.m must be a mapping"),
    ("models: {m: {input: 1, output: 1, cache: 1}}", "models.m.cache is not a price field"),
    ("{}", "needs a top-level 'models' mapping"),
    ("models: {}\nextra: 1", "unknown top-level field 'extra'"),
    ("models: {m: [", "is not valid YAML"),
])
def test_a_bad_table_names_the_file_and_the_field(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(PricingError) as error:
        table(tmp_path, text)
    assert said in str(error.value) and "prices.yaml" in str(error.value)


def test_a_missing_file_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(PricingError, match="does not exist: give --reliable-pricing"):
        PriceTable.load(tmp_path / "nope.yaml")


def test_a_usd_budget_grants_what_fits_and_settles_to_the_real_cost() -> None:
    budget = Budget(max_usd=1.0)
    assert budget.try_start(0.6) and not budget.try_start(0.6)
    assert budget.outstanding_usd == pytest.approx(0.6)
    budget.add_tokens(10, 0.1 - 0.6, released=0.6)  # it cost 0.10
    assert (budget.usd, budget.outstanding_usd) == (pytest.approx(0.1), 0.0)
    assert budget.try_start(0.6) and budget.describe() == "--reliable-budget 1usd"


def test_spend_adds_up_and_is_the_json_cost() -> None:
    total = Spend.total([Spend(0.1, 10, 2), Spend(0.2, 5, 1, 0.05, True)])
    assert total.entry() == {"usd": pytest.approx(0.3), "prompt_tokens": 15,
                             "completion_tokens": 3, "cached_usd_saved": 0.05, "estimated": True,
                             "priced": True, "unpriced_models": []}


def test_an_unpriced_models_spend_is_unknown_not_zero() -> None:
    """An API model without a price: its calls count their tokens but no dollars, and the
    JSON says the dollars are unknown (null), which of them, and for which model."""
    response = ModelResponse("ok", prompt_tokens=100, completion_tokens=10)
    priced, nobody = Price(1.0, 2.0, 1.0), unpriced("openai:mystery@api.example.com")
    spend = Spend()
    spend.pay(call_cost(priced, (("user", "x"),), response))
    spend.save(call_cost(priced, (("user", "x"),), response))
    assert spend.entry()["priced"] is True
    spend.pay(call_cost(nobody, (("user", "y"),), response))
    entry = spend.entry()
    assert entry["usd"] is None and entry["priced"] is False
    assert entry["cached_usd_saved"] == pytest.approx(120 / 1e6)  # only paid ones are unknown
    assert entry["unpriced_models"] == ["openai:mystery@api.example.com"]
    assert entry["prompt_tokens"] == 200  # the tokens are known all the same
    # served from the cache: what it saved is unknown, what was paid now is known
    served = Spend()
    served.save(call_cost(nobody, (("user", "y"),), response))
    assert (served.entry()["usd"], served.entry()["cached_usd_saved"]) == (0.0, None)
    # free by definition (the embedded model, a callable without a price) stays priced
    free = Spend()
    free.pay(call_cost(FREE, (("user", "y"),), response))
    assert (free.entry()["usd"], free.entry()["priced"]) == (0.0, True)
    assert not Spend.total([free, served]).priced


@pytest.mark.parametrize(("text", "said"), [
    ("models: {m: {input: %s, output: 1}}" % ("9" * 400),
     "models.m.input is 999999999999... (a number of 400 digits): above $10,000 per million"),
    ("models: {m: {input: 1, output: 1.0e+308}}", "models.m.output is 1e+308: above $10,000"),
    ("models: {m: {input: 1, output: 10000.5}}", "models.m.output is 10000.5: above $10,000"),
    ("models: {m: {input: .inf, output: 1}}", "models.m.input is inf: give a finite number"),
    ("models: {m: {input: 1, output: 1, cached_input: -.inf}}", "cached_input is -inf"),
    ("models: {m: {input: 1e308, output: 1}}", "YAML read it as text"),
    ("models: {m: {input: 1, output: 1, batch: 2}}",
     "models.m.batch is 2: above 1, but the batch API is a discount"),
    ("models: {m: {input: %s, output: 1}}" % ("9" * 5000), "cannot be read (Exceeds the limit"),
])
def test_an_absurd_price_is_refused_naming_the_file_model_and_field(
    tmp_path: Path, text: str, said: str,
) -> None:
    with pytest.raises(PricingError) as error:
        table(tmp_path, text)
    assert said in str(error.value) and "prices.yaml" in str(error.value)


@given(st.one_of(st.integers(min_value=-10, max_value=10**500), st.floats()))
def test_every_accepted_price_keeps_a_ledger_finite(value: float) -> None:
    """Whatever number a table holds, it is refused or it prices a million-token call at a
    finite amount that a budget can compare (a NaN never passes as 'within budget')."""
    try:
        price = _checked("models.m.input", "input", value)
    except PricingError:
        assert not (0 <= value <= MAX_PRICE)  # NaN compares False: refused too
        return
    assert 0 <= price <= MAX_PRICE
    assert math.isfinite(Price(price, price, price).usd(10**6, 10**6, 10**5))


def test_a_judges_id_over_an_api_model_is_priced_by_the_api_name_too() -> None:
    from pytest_reliable.models.callables import as_async_model
    from pytest_reliable.models.openai_compat import OpenAICompatibleModel

    api = OpenAICompatibleModel("gpt-4o-mini", "http://127.0.0.1:9/v1")
    judged = as_async_model(api, id="my-judge-v2")
    assert model_names(judged) == ["gpt-4o-mini", "my-judge-v2", "openai:gpt-4o-mini@127.0.0.1"]
    assert calls_an_api(judged) and calls_an_api(api)
    assert not calls_an_api(as_async_model(lambda prompt: "A"))


def test_a_judges_calls_are_in_the_tests_spend(tmp_path: Path) -> None:
    """The judge's calls are paid in this run: the JSON cost counts them (the ledger did, the
    report did not), for a reliable test and for a CheckList one."""
    import json

    from pytest_reliable import Dataset, Generation, Judge, text_model
    from pytest_reliable.contract.markers import ChecklistSpec, ReliableSpec
    from pytest_reliable.run.session import ReliableSession, Settings

    pricing = tmp_path / "prices.yaml"
    pricing.write_text(json.dumps({"models": {"cand": {"input": 0, "output": 0},
                                              "judge": {"input": 1000, "output": 1000}}}))
    session = ReliableSession(Settings(rootdir=tmp_path, no_cache=True, pricing_path=pricing))
    data = Dataset.from_records([{"question": f"Q{i}?", "reference": "yes", "label": "yes"}
                                 for i in range(3)])
    judge = Judge(text_model(lambda prompt: "PASS", id="judge"), "says yes", votes=1)
    candidate = text_model(lambda prompt: "yes", id="cand")
    try:
        report = session.run_reliable("t.py::t", data, Generation(grader=judge),
                                      ReliableSpec(n=2), candidate)
        checked = session.run_checklist("t.py::c", data, Generation(grader=judge),
                                        ChecklistSpec(kind="mft", thresholds={"min_pass": 0.5}),
                                        candidate)
    finally:
        session.close()
    # the candidate is free: every dollar is the judge's, one call per distinct answer and vote
    assert report.spend.usd > 0 and report.spend.prompt_tokens > 0
    assert checked.spend.usd + checked.spend.cached_usd_saved > 0
