"""Runner + OpenAICompatibleModel (the real openai client) against the scripted server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.calls.requests import ProgressEvent, Request, number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import ModelSetupError, SamplingParams
from pytest_reliable.models.openai_compat import OpenAICompatibleModel
from pytest_reliable.testing import Fault, ScriptedServer, scripted_model

P0 = SamplingParams(temperature=0.0, max_tokens=8)


def reqs(n: int, params: SamplingParams = P0, prefix: str = "q") -> list[Request]:
    return number_samples(
        [([{"role": "user", "content": f"{prefix} {i}"}], params) for i in range(n)], "t::x"
    )


def rows(path: Path) -> int:
    with sqlite3.connect(path) as c:
        return int(c.execute("SELECT COUNT(*) FROM responses").fetchone()[0])


def fast_runner(model, cache, **kw) -> Runner:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_max", 0.05)
    kw.setdefault("timeout", 2.0)
    return Runner(model, cache, **kw)


# -- number_samples -----------------------------------------------------------------------------
def test_number_samples_temperature_positive_counts_occurrences() -> None:
    hot = SamplingParams(temperature=0.7)
    m = [{"role": "user", "content": "a"}]
    out = number_samples(
        [(m, hot), (m, hot), ([{"role": "user", "content": "b"}], hot), (m, hot)], "n::1"
    )
    assert [r.sample_index for r in out] == [0, 1, 0, 2]
    assert all(r.scope == "n::1" for r in out)


def test_number_samples_temperature_zero_shares_index_zero() -> None:
    m = [{"role": "user", "content": "a"}]
    out = number_samples([(m, P0), (m, P0), (m, P0)], "n::1")
    assert [r.sample_index for r in out] == [0, 0, 0]
    assert all(r.scope is None for r in out)
    assert out[0] == out[1] and hash(out[0]) == hash(out[1])


# -- faults -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fault",
    [
        Fault("429", retry_after=0.05),
        Fault("500"),
        Fault("503", retry_after=0.01),
        Fault("drop"),
        Fault("malformed"),
        Fault("slow", delay=1.0),
    ],
    ids=lambda f: f.kind,
)
def test_every_fault_is_retried_and_every_paid_call_cached_once(
    tmp_path: Path, fault: Fault
) -> None:
    path = tmp_path / "c.sqlite"
    # every third request hits the fault
    with scripted_model(faults=lambda n, body: fault if n % 3 == 1 else None) as model:
        cache = ResponseCache.open(path)
        runner = fast_runner(
            model, cache, concurrency=4, timeout=0.4 if fault.kind == "slow" else 2.0
        )
        results = runner.run(reqs(12))
        cache.close()
        server = model.server
    assert [r.status for r in results] == ["ok"] * 12
    assert [r.response.text for r in results] == [f"q {i}" for i in range(12)]
    assert server.fault_counts[fault.kind] >= 1
    assert (
        runner.stats.retries == server.fault_counts[fault.kind] == sum(r.retries for r in results)
    )
    assert runner.stats.made == 12
    assert rows(path) == 12
    if fault.kind != "slow":  # a slow answer finishes on the server after the client gave up
        assert server.completed == 12


def test_retry_after_is_honoured() -> None:
    with scripted_model(faults=[Fault("429", retry_after=0.3)]) as model:
        runner = fast_runner(model, None, concurrency=1)
        t = time.perf_counter()
        [res] = runner.run(reqs(1))
        assert res.status == "ok" and res.retries == 1
        assert time.perf_counter() - t >= 0.3


def test_gives_up_after_max_retries() -> None:
    with scripted_model(faults=lambda n, b: "500") as model:
        runner = fast_runner(model, None, max_retries=2)
        [res] = runner.run(reqs(1))
        assert res.status == "error" and "gave up after 3 attempts" in (res.error or "")
        assert model.server.requests == 3


def test_401_is_not_retried_and_names_the_variable_not_the_key(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "sk-SECRET-MARKER-401-xyzzy"
    monkeypatch.setenv("MY_KEY_VAR", marker)
    caplog.set_level(logging.DEBUG)
    with ScriptedServer(faults=lambda n, b: "401") as server:
        model = OpenAICompatibleModel("gpt-x", server.base_url, api_key_env="MY_KEY_VAR")
        runner = fast_runner(model, None)
        [res] = runner.run(reqs(1))
        assert server.requests == 1
    assert res.status == "error" and res.retries == 0
    assert "MY_KEY_VAR" in (res.error or "")
    assert marker not in (res.error or "")
    assert marker not in caplog.text


def test_400_is_not_retried() -> None:
    with scripted_model(faults=lambda n, b: "400") as model:
        [res] = fast_runner(model, None).run(reqs(1))
        assert res.status == "error" and model.server.requests == 1


def test_missing_key_for_remote_url_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ModelSetupError, match="NOPE_KEY"):
        OpenAICompatibleModel("gpt-x", "https://api.example.com/v1", api_key_env="NOPE_KEY")
    # a loopback server works without a key
    m = OpenAICompatibleModel("gpt-x", "http://127.0.0.1:9/v1", api_key_env="NOPE_KEY")
    assert m.identity == "openai:gpt-x@127.0.0.1"
    assert OpenAICompatibleModel("gpt-4o", api_key="k").identity == "openai:gpt-4o@api.openai.com"


def test_budget_stops_new_calls_and_marks_the_rest_not_run(tmp_path: Path) -> None:
    budget = Budget(max_calls=5)
    with scripted_model() as model:
        cache = ResponseCache.open(tmp_path / "c.sqlite")
        runner = fast_runner(model, cache, concurrency=2, budget=budget)
        results = runner.run(reqs(9))
        assert [r.status for r in results].count("ok") == 5
        assert [r.status for r in results].count("not_run") == 4
        assert runner.stats.not_run == 4 and model.server.requests == 5
        # cache hits are still served once the budget is spent
        again = fast_runner(model, cache, budget=budget).run(reqs(9))
        assert sum(r.cached for r in again) == 5 and model.server.requests == 5
        cache.close()


def test_token_budget() -> None:
    budget = Budget(max_tokens=6)
    with scripted_model() as model:
        results = fast_runner(model, None, concurrency=1, budget=budget).run(reqs(5))
    # each call: 2 prompt + 2 completion tokens
    assert [r.status for r in results] == ["ok", "ok", "not_run", "not_run", "not_run"]
    assert budget.tokens == 8


def test_identical_concurrent_requests_sent_once_and_order_kept() -> None:
    with scripted_model(latency=0.05) as model:
        events: list[ProgressEvent] = []
        runner = fast_runner(
            model, ResponseCache.memory(), concurrency=8, on_progress=events.append
        )
        rs = reqs(3) * 4
        results = runner.run(rs)
        assert model.server.requests == 3
    assert [r.response.text for r in results] == [f"q {i % 3}" for i in range(12)]
    assert sum(r.cached for r in results) == 9 and runner.stats.made == 3
    assert events[-1] == ProgressEvent(done=12, total=12, cached=9, made=3, failed=0)
    assert [e.done for e in events] == list(range(1, 13))


def test_temperature_positive_samples_are_independent() -> None:
    hot = SamplingParams(temperature=1.0)
    with scripted_model() as model:
        results = fast_runner(model, ResponseCache.memory()).run(
            number_samples([([{"role": "user", "content": "same"}], hot)] * 3, "t::hot")
        )
        assert model.server.requests == 3 and not any(r.cached for r in results)


def test_run_inside_a_running_event_loop() -> None:
    with scripted_model() as model:
        runner = fast_runner(model, None)

        async def inner() -> list:
            return runner.run(reqs(3))

        results = asyncio.run(inner())
    assert [r.status for r in results] == ["ok"] * 3


def test_completions_endpoint_with_logprobs() -> None:
    with scripted_model(lambda p, params: "B") as model:
        [res] = fast_runner(model, None).run(reqs(1, SamplingParams(logprobs=2)))
        assert model.server.paths["/v1/completions"] == 1
    assert (
        res.response.text == "B"
        and res.response.logprobs
        and res.response.logprobs[0]["token"] == "B"
    )
    assert res.response.prompt_tokens == 2 and res.response.latency_s > 0


def test_record_none_replays_and_reports_misses(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with scripted_model() as model:
        cache = ResponseCache.open(path)
        fast_runner(model, cache).run(reqs(3))
        cache.close()
        replay = ResponseCache.open(path, "none")
        results = fast_runner(model, replay, context="tests/t.py::test_x").run(reqs(5))
        replay.close()
        assert model.server.requests == 3
    assert [r.cached for r in results[:3]] == [True] * 3
    for r in results[3:]:
        assert r.status == "error"
        assert "CacheMissError" in r.error and "tests/t.py::test_x" in r.error
        assert "--reliable-record none replays only" in r.error and "q 3" in results[3].error


def test_record_all_calls_again_and_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    answers = iter(["one", "two"])
    with scripted_model(lambda m, p: next(answers)) as model:
        for mode in ("new", "all"):
            cache = ResponseCache.open(path, mode)
            fast_runner(model, cache).run(reqs(1))
            cache.close()
        assert model.server.requests == 2
    assert rows(path) == 1
    c = ResponseCache.open(path)
    assert next(iter(c.get_many([fast_runner(model, c).key(reqs(1)[0])]).values())).text == "two"
    c.close()


def test_api_key_in_no_cache_file_log_or_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "sk-UNIQUE-MARKER-5f1e2d3c"
    monkeypatch.setenv("OPENAI_API_KEY", marker)
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "c.sqlite"
    with ScriptedServer(faults=[None, "500", "401"]) as server:
        model = OpenAICompatibleModel("m", server.base_url)
        cache = ResponseCache.open(path)
        results = fast_runner(model, cache, concurrency=1, max_retries=1).run(reqs(3))
        cache.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert marker.encode() not in blob
    assert marker not in caplog.text
    assert all(marker not in (r.error or "") for r in results)
    assert marker not in repr(model) and marker not in model.identity


# -- crash safety -------------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import sys
    from pytest_reliable.calls.cache import ResponseCache
    from pytest_reliable.models.base import SamplingParams
    from pytest_reliable.models.openai_compat import OpenAICompatibleModel
    from pytest_reliable.calls.runner import Runner
    from pytest_reliable.calls.requests import number_samples
    base_url, path = sys.argv[1], sys.argv[2]
    model = OpenAICompatibleModel("m", base_url, api_key="k")
    reqs = number_samples([([{"role": "user", "content": f"q {i}"}], SamplingParams())
                           for i in range(200)], "t::crash")
    print("go", flush=True)
    Runner(model, ResponseCache.open(path), concurrency=4).run(reqs)
    print("done", flush=True)
    """
)


def test_sigkill_midway_keeps_every_completed_call(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with ScriptedServer(latency=0.02) as server:
        proc = subprocess.Popen(
            [sys.executable, str(script), server.base_url, str(path)],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while server.completed < 60 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        completed = server.completed
    assert proc.returncode == -signal.SIGKILL
    before = rows(path)
    assert 0 < before < 200
    # at most the 4 in-flight answers differ (received but not yet stored, or stored before the
    # server thread counted them)
    assert abs(completed - before) <= 4

    with scripted_model(model="m") as model:
        replay = ResponseCache.open(path, "none")
        results = fast_runner(model, replay, context="t::crash").run(
            number_samples(
                [([{"role": "user", "content": f"q {i}"}], SamplingParams()) for i in range(200)],
                "t::crash",
            )
        )
        replay.close()
        assert model.server.requests == 0
    replayed = [r for r in results if r.status == "ok"]
    assert len(replayed) == before and all(r.cached for r in replayed)
    missing = [r for r in results if r.status != "ok"]
    assert len(missing) == 200 - before
    assert all("t::crash" in r.error and "--reliable-record new" in r.error for r in missing)


# -- a model's KeyboardInterrupt keeps what the other calls bring back ---------------------------
def test_a_models_keyboard_interrupt_keeps_the_answers_of_the_calls_in_flight(
    tmp_path: Path,
) -> None:
    """Issue 32: the calls in flight were cancelled at once, so answers coming back just then
    were paid and dropped. Now no new call starts, and the calls in flight come back and are
    stored before the interrupt goes on."""
    import threading

    from pytest_reliable.models.callables import text_model

    together = threading.Barrier(4)
    started: list[str] = []

    def model(prompt: str) -> str:
        started.append(prompt)
        together.wait(5)  # four calls in flight
        if prompt.endswith(" 0"):
            raise KeyboardInterrupt
        time.sleep(0.3)  # still in flight when the interrupt comes
        return "A"

    path = tmp_path / "c.sqlite"
    cache = ResponseCache.open(path)
    with pytest.raises(KeyboardInterrupt):
        fast_runner(text_model(model, id="interrupting"), cache, concurrency=4).run(reqs(8))
    cache.close()
    assert len(started) == 4  # no call started after the interrupt
    assert rows(path) == 3  # the three answers in flight came back and were stored


# -- a sync callable that never returns ---------------------------------------------------------
def test_timeout_holds_for_a_sync_callable_that_never_returns() -> None:
    from pytest_reliable.models.callables import text_model

    def hung(prompt: str) -> str:
        if prompt.endswith("1"):
            time.sleep(10**6)
        return "fine"

    start = time.monotonic()
    results = fast_runner(text_model(hung, id="hung"), None, timeout=0.5, max_retries=0).run(
        reqs(3)
    )
    assert time.monotonic() - start < 5
    assert [r.status for r in results] == ["ok", "error", "ok"]
    assert (results[1].error or "").startswith("timed out")


HUNG_CHILD = textwrap.dedent(
    """
    import time
    from pytest_reliable.models.base import SamplingParams
    from pytest_reliable.models.callables import text_model
    from pytest_reliable.calls.runner import Runner
    from pytest_reliable.calls.requests import number_samples
    model = text_model(lambda p: time.sleep(10**6), id="hung")
    reqs = number_samples([([{"role": "user", "content": "q"}], SamplingParams())], "t::hung")
    [result] = Runner(model, None, timeout=0.5, max_retries=0).run(reqs)
    print(result.status, result.error, flush=True)
    """
)


def test_a_hung_call_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(HUNG_CHILD)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("error timed out")


# -- paid answers survive a failing store -------------------------------------------------------
def test_answers_survive_a_failing_store_and_the_failure_is_warned_once(tmp_path: Path) -> None:
    from pytest_reliable.calls.cache import StoreWarning

    path = tmp_path / "c.sqlite"
    cache = ResponseCache.open(path)
    assert cache._conn is not None
    cache._conn.execute("PRAGMA query_only=ON")  # writes fail as on a full disk
    with scripted_model() as model:
        with pytest.warns(StoreWarning, match=str(path)):
            first = fast_runner(model, cache).run(reqs(4))
        assert [r.status for r in first] == ["ok"] * 4
        # the answers paid for are served for the rest of the run; no second warning
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = fast_runner(model, cache).run(reqs(4))
        assert all(r.cached for r in again) and model.server.requests == 4
    cache.close()
    assert rows(path) == 0


def test_lone_surrogate_answer_is_stored_and_replayed(tmp_path: Path) -> None:
    from pytest_reliable.models.callables import text_model

    path = tmp_path / "c.sqlite"
    model = text_model(lambda p: "A\ud800", id="surrogates")
    cache = ResponseCache.open(path)
    first = fast_runner(model, cache).run(reqs(3))
    cache.close()
    assert rows(path) == 3
    replay = ResponseCache.open(path, "none")
    again = fast_runner(model, replay).run(reqs(3))
    replay.close()
    assert [r.response.text for r in first] == [r.response.text for r in again] == ["A\ud800"] * 3
    assert all(r.cached for r in again)


# -- one budget for the whole run ---------------------------------------------------------------
def test_a_shared_ledger_limits_every_runner_of_the_run(tmp_path: Path) -> None:
    from pytest_reliable.calls.cache import BudgetLedger

    path = tmp_path / "budget.sqlite"
    with scripted_model() as model:
        budgets = [Budget(max_calls=5, ledger=BudgetLedger(path, "run")) for _ in range(2)]
        results = [fast_runner(model, None, budget=b).run(reqs(4, prefix=f"w{j}"))
                   for j, b in enumerate(budgets)]
        assert model.server.requests == 5
    statuses = [r.status for rs in results for r in rs]
    assert statuses.count("ok") == 5 and statuses.count("not_run") == 3
    skipped = [r.error for r in results[1] if r.status == "not_run"]
    assert skipped and all(
        e == "--reliable-budget 5calls is spent for the whole run: 3 of 4 calls of this "
        "evaluation were not started" for e in skipped
    )


# -- secrets ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["403", "500"])
def test_a_key_echoed_by_the_server_is_redacted(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    from pytest_reliable.redact import install_log_redaction

    install_log_redaction()
    caplog.set_level(logging.DEBUG)
    key = "sk-ECHOED-" + kind + "-9a8b7c6d5e"
    with ScriptedServer(faults=lambda n, body: Fault(kind, echo_key=True)) as server:
        model = OpenAICompatibleModel("m", server.base_url, api_key=key)
        [res] = fast_runner(model, None, max_retries=1).run(reqs(1))
    assert res.status == "error" and f"scripted {kind}" in (res.error or "")
    assert "***" in (res.error or "") and key not in (res.error or "")
    assert key not in caplog.text


def test_url_credentials_and_query_secrets_are_redacted() -> None:
    from pytest_reliable.redact import redact, register_secret

    assert redact("http://u:sk-KEY123@host/v1") == "http://***@host/v1"
    assert redact("https://h/v1?api-key=sk-abc&x=1") == "https://h/v1?api-key=***&x=1"
    register_secret("sk-registered-42")
    assert redact("body: {'key': 'sk-registered-42'}") == "body: {'key': '***'}"
    assert redact("plain text, http://host/v1") == "plain text, http://host/v1"


# -- the run's event loop -----------------------------------------------------------------------
def test_calls_run_on_one_loop_or_on_the_given_one() -> None:
    from pytest_reliable.calls.loop import call_loop, use_loop
    from pytest_reliable.models.callables import text_model

    loops: list[asyncio.AbstractEventLoop] = []

    async def where(prompt: str) -> str:
        loops.append(asyncio.get_running_loop())
        return "x"

    model = text_model(where, id="where")
    fast_runner(model, None).run(reqs(2))
    fast_runner(model, None).run(reqs(2, prefix="again"))
    assert set(loops) == {call_loop()}

    async def test_body() -> asyncio.AbstractEventLoop:
        mine = asyncio.get_running_loop()
        with use_loop(mine):
            await asyncio.to_thread(fast_runner(model, None).run, reqs(2, prefix="own"))
        return mine

    own = asyncio.run(test_body())
    assert loops[-2:] == [own, own]


def test_the_runs_end_stops_its_loop_with_abandoned_calls_and_closes_the_models() -> None:
    import threading

    from pytest_reliable.calls.loop import call_loop, stop_call_loop

    stubborn_started = threading.Event()

    async def stubborn() -> None:  # an abandoned call: it ignores its first cancellation
        stubborn_started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.1)  # then ends when cancelled again at the run's end

    closed: list[str] = []

    async def close_model() -> None:
        closed.append("model")

    loop = call_loop()
    task = asyncio.run_coroutine_threadsafe(stubborn(), loop)
    assert stubborn_started.wait(5)
    loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks(loop)])
    stop_call_loop([close_model()])
    assert closed == ["model"]
    assert loop.is_closed() and task.done()
    assert not any(t.name == "pytest-reliable-loop" and t.is_alive()
                   for t in threading.enumerate())
    assert call_loop() is not loop  # the next run starts a loop of its own


def test_one_slot_model_gets_its_calls_in_prefix_order() -> None:
    from pytest_reliable.models.callables import text_model

    seen: list[str] = []
    model = text_model(lambda p: seen.append(p) or p, id="order")
    prompts = ["b x", "a y", "b a", "a a"]
    requests = number_samples([([{"role": "user", "content": p}], P0) for p in prompts], "t")
    results = fast_runner(model, None, concurrency=1, prefix_order=True).run(requests)
    assert seen == sorted(prompts)
    assert [r.response.text for r in results] == prompts  # plan order kept


def test_prompt_tokens_evaluated_estimate_the_shared_prefix() -> None:
    from pytest_reliable.models.base import ModelResponse

    class OneSlot:
        identity = "one-slot-estimate"
        max_concurrency = 1

        async def acomplete(self, messages, params):  # type: ignore[no-untyped-def]
            return ModelResponse("x", prompt_tokens=len(messages[-1]["content"]))

        async def aclose(self) -> None:
            pass

    prompts = ["abcdefgh-1", "abcdefgh-2", "zzzzzzzzzz"]
    requests = number_samples([([{"role": "user", "content": p}], P0) for p in prompts], "t")
    runner = fast_runner(OneSlot(), None, concurrency=1)
    runner.run(requests)
    assert runner.stats.prompt_tokens == 30
    # 10 new, then 1 of 10 after the 9 shared characters, then 10 new
    assert runner.stats.prompt_tokens_evaluated == 21


# -- per-call seeds (the embedded model's reproducible samples) ----------------------------------
def test_each_call_sends_the_seed_of_its_cache_key_on_every_attempt() -> None:
    """The seed is a function of the cache key alone: other calls, their order, a retry or a
    fresh runner do not change it, and it is not part of the key."""
    from pytest_reliable.calls.cache import cache_key
    from pytest_reliable.models.base import seed_from_key

    sent: list[tuple[str, int]] = []

    def picker(n: int, body: dict) -> str | None:  # type: ignore[type-arg]
        sent.append((body["messages"][-1]["content"], body["seed"]))
        return "500" if n == 1 else None  # the first attempt fails and is retried

    hot = SamplingParams(temperature=0.7, max_tokens=8)
    prompts = [[{"role": "user", "content": f"q {i}"}] for i in range(3)] * 2
    requests = number_samples([(m, hot) for m in prompts], "t::x")  # sample indexes 0 and 1
    assert [r.sample_index for r in requests] == [0, 0, 0, 1, 1, 1]
    with scripted_model(lambda m, p: str(p["seed"]), faults=picker) as model:
        model.send_seed = True
        results = fast_runner(model, None, concurrency=1).run(requests)
        runner = fast_runner(model, None, concurrency=1, prefix_order=True)
        again = runner.run(list(reversed(requests)))
    seeds = [int(r.response.text) for r in results]
    assert [int(r.response.text) for r in reversed(again)] == seeds
    assert len(set(seeds)) == 6  # sample 0 and sample 1 of a prompt are different draws
    for req, seed, res in zip(requests, seeds, results):
        key = cache_key(model.identity, req.messages, req.params, req.sample_index, req.scope)
        assert runner.key(req) == key and seed == seed_from_key(key)
        assert res.response.extra == {"seed": seed} and 0 <= seed < 2**31
    assert sent[0] == sent[1]  # the retried attempt asked for the same sample


def test_the_openai_compatible_adapter_sends_no_seed_unless_asked() -> None:
    with scripted_model(lambda m, p: str(p.get("seed"))) as model:
        [res] = fast_runner(model, None).run(reqs(1, SamplingParams(temperature=0.7)))
    assert res.response.text == "None" and res.response.extra == {}


def test_a_refused_connection_is_one_attempt_for_the_whole_run() -> None:
    # Issue 20 item 19 at the runner: the first call meets the refusal (one attempt, not retried);
    # every later call, in this runner or another one on the same model, fails before it is sent
    # and before it takes its share of the budget.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    model = OpenAICompatibleModel("m", url, api_key="sk-test-not-used")
    budget = Budget(max_calls=100)
    first = fast_runner(model, None, concurrency=1, budget=budget, max_retries=5).run(reqs(3))
    second = fast_runner(model, None, concurrency=1, budget=budget).run(reqs(2, prefix="r"))
    results = first + second
    assert [r.status for r in results] == ["error"] * 5
    assert {r.error for r in results} == {
        f"connection refused at {url}: no server is listening there (start the server, or fix "
        "--reliable-base-url); no other call of this run is sent to it"}
    assert [(r.attempts, r.retries) for r in results] == [(1, 0)] + [(0, 0)] * 4
    assert budget.calls == 1
