"""Money (SPEC section 13), as users run it: a price table, a gate against the scripted server that
bills the tokens it serves, the JSON report's ``cost``, a budget in US dollars, and the usage errors
of a price table that cannot be used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.testing import ScriptedServer
from tests.acceptance.helpers import (
    CONFTEST,
    RELIABLE_YAML,
    kill_while_the_batch_waits,
    run_json,
    write_project,
)
from tests.acceptance.test_many_machines import GATE, questions, right_option

# Dear on purpose, so a difference of one token shows in the cents.
PRICES = {"input": 1500.0, "output": 6000.0, "cached_input": 750.0}
PRICING = {"models": {"scripted": PRICES, "other-*": {"input": 1, "output": 2}}}


def write_gate(pytester: pytest.Pytester, *, count: int = 6, n: int = 4,
               pricing: dict[str, Any] | str = PRICING) -> Path:
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_gate=GATE.format(dataset=questions(count), n=n))
    path = pytester.path / "prices.yaml"
    path.write_text(pricing if isinstance(pricing, str) else json.dumps(pricing))
    return path


def remote(server: ScriptedServer, pricing: Path) -> list[str]:
    return ["--reliable-model=scripted", f"--reliable-base-url={server.base_url}",
            f"--reliable-pricing={pricing}"]


def test_spend_from_usage_equals_the_servers_bill_and_the_cache_saves_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pricing = write_gate(pytester)
    summary, page = pytester.path / "summary.md", pytester.path / "page.html"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("COLUMNS", "200")  # a narrow terminal drops the optional columns
    with ScriptedServer(right_option, cached_prompt_tokens=lambda body: 2) as server:
        result, report = run_json(pytester, *remote(server, pricing), f"--reliable-html={page}")
        result.assert_outcomes(passed=1)
        # the table, the step summary and the page show it
        shown = f"{report['cost']['usd']:.4f}"
        result.stdout.fnmatch_lines(["*spend $*verdict*", f"test_gate*{shown}*passed",
                                     f"spend: ${shown} (* prompt + * completion tokens paid)*"])
        assert f"spend: ${shown}" in summary.read_text()
        assert "spend (USD)" in page.read_text() and shown in page.read_text()
        bill = server.billed_usd(**PRICES)
        [entry] = report["tests"]
        cost = entry["cost"]
        assert bill > 0.1  # tens of cents, not rounding noise
        assert cost["usd"] == pytest.approx(bill, abs=1e-6)
        assert round(cost["usd"], 2) == round(bill, 2)  # to the cent
        assert (cost["prompt_tokens"], cost["completion_tokens"]) == (
            server.billed["prompt"], server.billed["completion"])
        # Fixed mode, 2 wrappers, n=4: each prompt twice at temperature 0, paid once, reused once.
        assert cost["estimated"] is False
        # (and the canonical pass reuses the first wrapper's answers).
        calls = entry["calls"]
        assert cost["cached_usd_saved"] == pytest.approx(
            cost["usd"] * calls["cached"] / calls["made"], abs=1e-6)
        assert report["cost"]["usd"] == cost["usd"]
        # The next run is served from the cache: nothing paid now, the first run's cost saved.
        requests = server.requests
        result, replay = run_json(pytester, *remote(server, pricing), name="replay.json")
        result.assert_outcomes(passed=1)
        assert server.requests == requests
    again = replay["tests"][0]["cost"]
    assert again["usd"] == 0
    assert again["cached_usd_saved"] == pytest.approx(cost["usd"] + cost["cached_usd_saved"],
                                                      abs=1e-6)
    assert replay["cost"]["cached_usd_saved"] == again["cached_usd_saved"]


def test_a_usd_budget_stops_within_one_call_of_its_limit(pytester: pytest.Pytester) -> None:
    pricing = write_gate(pytester, count=12)
    limit = 0.5
    with ScriptedServer(right_option) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-no-cache",
                                  f"--reliable-budget={limit}usd", "--reliable-concurrency=4")
        bill = server.billed_usd(**PRICES)
        calls = server.completed
    result.assert_outcomes(failed=1)
    [entry] = report["tests"]
    assert entry["verdict"] == "error"
    result.stdout.fnmatch_lines(["*--reliable-budget 0.5usd is spent for the whole run*"])
    assert 0 < calls < 12 * 2
    # A call reserves its most possible cost (prompt estimate + max_tokens at the output price):
    # the bill never passes the limit, and stops short of it by less than one such call.
    one_call_at_most = (60 * PRICES["input"] + 32 * PRICES["output"]) / 1e6
    assert bill <= limit
    assert limit - bill < one_call_at_most
    assert entry["cost"]["usd"] == pytest.approx(bill, abs=1e-6)


def test_a_callable_is_priced_by_its_id_on_estimated_tokens(pytester: pytest.Pytester) -> None:
    write_project(pytester)  # the scripted callable text_model(..., id="scripted-format-...")
    pricing = pytester.path / "prices.yaml"
    pricing.write_text("models:\n  'scripted-format-*': {input: 1000, output: 1000}\n")
    result, report = run_json(pytester, f"--reliable-pricing={pricing}", "--reliable-no-cache")
    result.assert_outcomes(passed=1, failed=1)
    # At temperature 0 the two tests share their 10 distinct prompts: 10 calls are paid once.
    assert all(entry["cost"]["estimated"] is True for entry in report["tests"])
    total = report["cost"]
    made = sum(entry["calls"]["made"] for entry in report["tests"])
    assert made == 10 and total["estimated"] is True
    # 4 characters a token: the prompts are ~130 characters, the answers one letter (1 token).
    assert total["completion_tokens"] == made and total["prompt_tokens"] > 25 * made
    assert total["usd"] == pytest.approx(
        (total["prompt_tokens"] + total["completion_tokens"]) * 1000 / 1e6)
    # What the cache served (in-run reuse) is counted as saved, at the same estimated price.
    assert total["cached_usd_saved"] > total["usd"]


def test_without_a_price_table_nothing_is_charged(pytester: pytest.Pytester) -> None:
    write_project(pytester, conftest=CONFTEST)
    _, report = run_json(pytester, "--reliable-no-cache")
    assert all(entry["cost"]["usd"] == 0 for entry in report["tests"])
    assert report["cost"]["usd"] == 0
    # a user's callable is free by definition: known to cost nothing
    assert report["cost"]["priced"] is True and report["cost"]["unpriced_models"] == []


@pytest.mark.parametrize(("pricing", "said"), [
    ("models:\n  scripted: {input: 1}\n", "*prices.yaml: models.scripted.output is missing*"),
    ("models:\n  scripted: {input: 1, output: -2}\n",
     "*models.scripted.output is -2: give a number >= 0*"),
    ("models:\n  scripted: {input: 1, output: 2, bacth: 0.5}\n",
     "*models.scripted.bacth is not a price field*"),
    ("prices: {}\n", "*prices.yaml: unknown top-level field 'prices'*"),
    ("models: [\n", "*prices.yaml is not valid YAML*"),
])
def test_a_bad_price_table_is_a_usage_error_naming_file_and_field(
    pytester: pytest.Pytester, pricing: str, said: str,
) -> None:
    path = write_gate(pytester, pricing=pricing)
    if "top-level" in said:
        said = "*prices.yaml: needs a top-level 'models' mapping*"
    result = pytester.runpytest_subprocess(f"--reliable-pricing={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([said])


def test_a_usd_budget_needs_a_price_for_every_model_before_any_call(
    pytester: pytest.Pytester,
) -> None:
    pricing = write_gate(pytester)
    result = pytester.runpytest_subprocess("--reliable-budget=5usd")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--reliable-budget 5usd needs prices: give --reliable-pricing*"])
    with ScriptedServer(right_option) as server:
        result = pytester.runpytest_subprocess(
            "--reliable-model=unpriced", f"--reliable-base-url={server.base_url}",
            f"--reliable-pricing={pricing}", "--reliable-budget=5usd,100calls")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            ["*--reliable-budget 5usd: model openai:unpriced@127.0.0.1 has no price in *"])
        assert server.requests == 0


def test_an_unpriced_model_fixture_under_a_usd_budget_stops_before_its_calls(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester)
    pricing = pytester.path / "prices.yaml"
    pricing.write_text("models:\n  gpt-4o-mini: {input: 0.15, output: 0.6}\n")
    result = pytester.runpytest_subprocess(f"--reliable-pricing={pricing}",
                                           "--reliable-budget=1usd", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = ["*model scripted-format-sensitive has no price in *; nothing was run.",
            ("*scripted-format-sensitive: called by test_gate.py::test_passes, "
             "test_gate.py::test_fails_on_worst_format")]
    result.stdout.fnmatch_lines(said)
    result.stderr.fnmatch_lines(said)


# -- every model a run calls is priced before the first call ------------------------------------
# A CheckList test module with its own model, a judge named in a test body: neither is known at
# start-up, nor to the pytest-xdist controller (which never collects).
CHECKLIST_MODULE = '''
import pytest
from pytest_reliable import Classification, openai_model

@pytest.fixture
def reliable_model():
    return openai_model("unpriced-checker")

@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.5)
def test_inv(reliable):
    data = [{"text": f"A fine review number {i}.", "label": "positive"} for i in range(6)]
    reliable.invariance(data, Classification(labels=["positive", "negative"]))
'''

JUDGED_MODULE = '''
import pytest
from pytest_reliable import Generation, Judge, openai_model

DATA = [{"question": f"Say yes {i}.", "reference": "yes"} for i in range(4)]

@pytest.mark.reliable(n=2)
def test_judged(reliable):
    judge = Judge(openai_model("unpriced-judge"), "The answer says yes.", votes=1)
    reliable.evaluate(DATA, Generation(grader=GRADER))
'''


def models_called(calls: list[str]) -> Any:
    """The scripted model, recording which model each request named."""
    def rule(messages: Any, params: dict[str, Any]) -> str:
        calls.append(str(params.get("model")))
        return right_option(messages, params) if "right answer" in str(messages) else "yes"
    return rule


@pytest.mark.parametrize("workers", [
    (), pytest.param(("-n", "2"), marks=pytest.mark.slow, id="xdist")])
def test_a_usd_budget_with_an_unpriced_checklist_model_stops_before_any_call(
    pytester: pytest.Pytester, workers: tuple[str, ...],
) -> None:
    if workers:
        pytest.importorskip("xdist")
    pricing = write_gate(pytester)
    pytester.makepyfile(test_inv=CHECKLIST_MODULE)
    calls: list[str] = []
    with ScriptedServer(models_called(calls)) as server:
        result = pytester.runpytest_subprocess(*remote(server, pricing), "--reliable-budget=5usd",
                                               "-p", "no:randomly", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert calls == []  # not one call, not even the priced gate's
    result.stdout.fnmatch_lines([
        "*--reliable-budget 5usd: model openai:unpriced-checker@127.0.0.1 has no price in *",
        "*openai:unpriced-checker@127.0.0.1: called by test_inv.py::test_inv"])
    out = result.stdout.str() + result.stderr.str()
    assert "Interrupted" not in out and "Traceback" not in out and "INTERNALERROR" not in out


def test_a_usd_budget_with_an_unpriced_judge_stops_before_any_call(
    pytester: pytest.Pytester,
) -> None:
    pricing = write_gate(pytester)
    pytester.makepyfile(test_judged=JUDGED_MODULE.replace("GRADER", "judge"))
    calls: list[str] = []
    with ScriptedServer(models_called(calls)) as server:
        result = pytester.runpytest_subprocess(*remote(server, pricing), "--reliable-budget=5usd",
                                               "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert calls == []
    result.stderr.fnmatch_lines(["*model openai:unpriced-judge@127.0.0.1 has no price in *",
                                 "*called by test_judged.py::test_judged"])


def test_a_model_found_only_in_a_later_call_fails_its_test_alone_without_calling_it(
    pytester: pytest.Pytester,
) -> None:
    """What the price pass cannot see (a second evaluate with another judge): that test fails
    before its judge's first call, cleanly; the other tests run; the run ends as a usage
    error (exit code 4), not an interrupted one."""
    pricing = write_gate(pytester)
    pytester.makepyfile(test_judged=JUDGED_MODULE.replace(
        "    reliable.evaluate(DATA, Generation(grader=GRADER))",
        "    reliable.evaluate(DATA, Generation(grader='normalized'))\n"
        "    reliable.evaluate(DATA, Generation(grader=judge))"))
    calls: list[str] = []
    with ScriptedServer(models_called(calls)) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-budget=5usd")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.assert_outcomes(passed=1, failed=1)
    assert "unpriced-judge" not in calls and calls.count("scripted") > 0
    result.stdout.fnmatch_lines(
        [("*test_judged.py::test_judged: --reliable-budget 5usd: model "
          "openai:unpriced-judge@127.0.0.1 has no price in *")])
    out = result.stdout.str()
    assert "Interrupted" not in out and "During handling" not in out
    first, second = sorted((e for e in report["tests"] if e["nodeid"].endswith("test_judged")),
                           key=lambda e: e["verdict"] == "error")
    assert first["mean"] == 1.0 and second["verdict"] == "error" and second["mean"] is None
    assert "unpriced-judge@127.0.0.1 has no price" in second["message"]


@pytest.mark.parametrize("budget", ["5usd,0.0001usd", "100,200", "10calls,20calls"])
def test_a_budget_that_limits_one_unit_twice_is_a_usage_error(
    pytester: pytest.Pytester, budget: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_gate(pytester)
    result = pytester.runpytest_subprocess(f"--reliable-budget={budget}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{budget!r} is not valid: it limits * twice*"])
    monkeypatch.setenv("RELIABLE_BUDGET", budget)  # the environment's value, checked the same
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*RELIABLE_BUDGET*{budget!r} is not valid: it limits * twice*"])


def test_an_api_model_without_a_price_has_an_unknown_spend_in_the_json(
    pytester: pytest.Pytester,
) -> None:
    """Not $0.00: the JSON says the dollars are unknown and for which model. A callable
    without a price costs nothing by definition (SPEC 13): see
    test_without_a_price_table_nothing_is_charged."""
    pricing = write_gate(pytester, pricing={"models": {"other-*": {"input": 1, "output": 2}}})
    with ScriptedServer(right_option) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-no-cache")
    result.assert_outcomes(passed=1)
    for cost in (report["tests"][0]["cost"], report["cost"]):
        assert cost["usd"] is None and cost["priced"] is False
        assert cost["unpriced_models"] == ["openai:scripted@127.0.0.1"]
        assert cost["prompt_tokens"] > 0  # the tokens are known; their price is not


def test_the_plan_estimates_the_spend_per_test_and_in_total_and_the_run_stays_under_it(
    pytester: pytest.Pytester,
) -> None:
    pricing = write_gate(pytester, count=6, n=4)
    with ScriptedServer(right_option) as server:
        plan = pytester.runpytest_subprocess(*remote(server, pricing), "--reliable-plan")
        assert plan.ret == 0 and server.requests == 0
        out = plan.stdout.str()
        # 6 questions x 2 wrappers: 12 distinct prompts at temperature 0, output at max_tokens 32
        plan.stdout.fnmatch_lines(["*spend: ~$* (model $*, judge $0.0000) for 12 uncached calls:"
                                   "* output tokens (output from max_tokens)*",
                                   "total spend: ~$*"])
        planned = float(out.split("spend: ~$")[1].split(" ")[0])
        result, report = run_json(pytester, *remote(server, pricing))
        result.assert_outcomes(passed=1)
        paid = report["cost"]["usd"]
        assert 0 < paid <= planned  # max_tokens is an upper bound on the answers
        # After a run, the cache knows the model's answers: the plan says they cost nothing now
        # and what they saved; a new question's output is priced at the cache's mean.
        plan = pytester.runpytest_subprocess(*remote(server, pricing), "--reliable-plan")
        plan.stdout.fnmatch_lines(["*spend: ~$0.0000 * for 0 uncached calls*the cache saves $*"])


# -- --reliable-batch ------------------------------------------------------------------------------
BATCH_PRICING = {"models": {"scripted": {**PRICES, "batch": 0.5}}}


def verdicts(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(e["nodeid"], e["verdict"], e["mean"], e["canonical"], e["formats"],
             [(t["name"], t["observed"], t["bound"], t["passed"]) for t in e["thresholds"]])
            for e in report["tests"]]


def test_batch_mode_makes_no_chat_call_pays_half_and_gives_the_same_verdicts(
    pytester: pytest.Pytester,
) -> None:
    pricing = write_gate(pytester, count=6, n=4, pricing=BATCH_PRICING)
    with ScriptedServer(right_option, batch_delay=0.5) as server:
        result, batched = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                   "--reliable-no-cache", name="batched.json")
        result.assert_outcomes(passed=1)
        assert server.paths["/v1/chat/completions"] == 0
        assert (len(server.batches), server.batch_lines) == (1, 12)  # 12 distinct prompts
        bill = server.billed_usd(**PRICES, batch=0.5)
        live, direct = run_json(pytester, *remote(server, pricing), "--reliable-no-cache",
                                name="direct.json")
        live.assert_outcomes(passed=1)
        assert server.paths["/v1/chat/completions"] == 12
    assert verdicts(batched) == verdicts(direct)
    assert batched["cost"]["usd"] == pytest.approx(bill, abs=1e-6)
    assert batched["cost"]["usd"] == pytest.approx(direct["cost"]["usd"] / 2, abs=1e-6)
    assert batched["tests"][0]["calls"] == {**direct["tests"][0]["calls"]}


def test_failed_batch_lines_are_sent_once_more(pytester: pytest.Pytester) -> None:
    pricing = write_gate(pytester, count=6, n=4, pricing=BATCH_PRICING)
    failed_once: set[str] = set()

    def fail_first_time(line: dict[str, Any]) -> bool:
        key = line["custom_id"]
        if key in failed_once or len(failed_once) >= 5:
            return False
        failed_once.add(key)
        return True

    with ScriptedServer(right_option, batch_failures=fail_first_time) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                  "--reliable-no-cache")
        result.assert_outcomes(passed=1)
        assert (len(server.batches), server.batch_lines) == (2, 12 + 5)
        assert server.paths["/v1/chat/completions"] == 0
    assert report["tests"][0]["verdict"] == "passed"


def test_an_expired_batch_leaves_an_error_not_a_wrong_answer(pytester: pytest.Pytester) -> None:
    pricing = write_gate(pytester, count=6, n=4, pricing=BATCH_PRICING)
    with ScriptedServer(right_option, batch_expires=True) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                  "--reliable-no-cache")
        # half of each batch expires: 12 lines, then the 6 left, then 3 of them stay unanswered
        assert (len(server.batches), server.batch_lines) == (2, 12 + 6)
    result.assert_outcomes(failed=1)
    [entry] = report["tests"]
    assert entry["verdict"] == "error" and entry["mean"] is None
    result.stdout.fnmatch_lines(["*batch_expired*"])


def test_a_run_killed_while_its_batch_runs_resumes_that_batch(pytester: pytest.Pytester) -> None:
    import subprocess
    import sys

    pricing = write_gate(pytester, count=6, n=4, pricing=BATCH_PRICING)
    with ScriptedServer(right_option, batch_delay=3600) as server:
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                *remote(server, pricing), "--reliable-batch", "--reliable-report=report.json"]
        kill_while_the_batch_waits(pytester.path, args, server)
        assert (len(server.batches), server.batch_lines) == (1, 12)
        server.batch_delay = 0.0
        rerun = subprocess.run(args, cwd=pytester.path, capture_output=True, text=True,
                               timeout=300)
        assert rerun.returncode == 0, rerun.stdout
        # the same batch was collected: nothing sent, nothing paid again
        assert (len(server.batches), server.batch_lines) == (1, 12)
        assert server.paths["/v1/chat/completions"] == 0 and server.paths["/v1/files"] == 1
    entry = json.loads((pytester.path / "report.json").read_text())["tests"][0]
    assert entry["verdict"] == "passed" and entry["calls"]["made"] == 12


def test_one_usd_budget_for_every_host_sharing_a_store(
    tmp_path: Path, postgres_server: Any, postgres_url: str,
) -> None:
    """SPEC 13 with section 10: three hosts, one run id, one PostgreSQL ledger in dollars."""
    from tests.acceptance.test_many_machines import finish, project, start_host

    limit = 0.5
    with ScriptedServer(right_option, latency=0.02) as server:
        hosts = [project(tmp_path, f"host{i}", GATE, count=10, prefix=f"host {i}: ")
                 for i in range(3)]
        for host in hosts:
            (host / "prices.yaml").write_text(json.dumps(PRICING))
        running = [start_host(h, server, postgres_url, "--reliable-run-id=ci-usd",
                              "--reliable-pricing=prices.yaml", f"--reliable-budget={limit}usd")
                   for h in hosts]
        outcomes = [finish(host) for host in running]
        bill = server.billed_usd(**PRICES)
    # each host's 20 prompts would cost about $0.9: together they stop below $0.50, within one
    # call (a host whose own calls are in flight waits for them before it gives up)
    one_call_at_most = (60 * PRICES["input"] + 32 * PRICES["output"]) / 1e6
    assert limit - one_call_at_most < bill <= limit, [out for _, out in outcomes]
    rows = postgres_server.execute(postgres_url.rsplit("/", 1)[1],
                                   "SELECT usd FROM reliable_budget WHERE run = %s", "ci-usd")
    assert float(rows[0][0]) == pytest.approx(bill, abs=1e-6)
    assert any("--reliable-budget 0.5usd is spent for the whole run" in out for _, out in outcomes)
