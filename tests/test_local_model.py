"""End to end with the embedded real model (SmolLM2-135M under llama.cpp's server)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from pytest_reliable.cache import ResponseCache
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.local import LOCAL_MODEL_NAME, LocalModelServer, find_gguf
from pytest_reliable.runner import Runner, number_samples

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason='llama_cpp is not importable: pip install "pytest-reliable[local]"',
    ),
]

QUESTIONS = [
    "What is 2 + 2?",
    "Name a colour.",
    "What is the capital of France?",
    "Say hello.",
    "Is water wet? Answer yes or no.",
    "Name an animal.",
    "What is 10 - 3?",
    "Name a fruit.",
    "What day comes after Monday?",
    "Spell the word cat.",
]


def test_embedded_model_runner_cache_and_clean_stop(tmp_path: Path) -> None:
    gguf = find_gguf()
    assert gguf.suffix == ".gguf" and "Q4_1" in gguf.name
    server = LocalModelServer()
    try:
        server.start()
        assert (
            server.identity.startswith(f"local:{LOCAL_MODEL_NAME}:")
            and len(server.identity.split(":")[-1]) == 12
        )
        assert server.base_url.startswith("http://127.0.0.1:")
        model = server.model()
        assert model.identity == server.identity
        params = SamplingParams(temperature=0.0, max_tokens=16)
        requests = number_samples(
            [
                (
                    [
                        {"role": "system", "content": "Answer briefly."},
                        {"role": "user", "content": q},
                    ],
                    params,
                )
                for q in QUESTIONS
            ],
            "tests/test_local_model.py::e2e",
        )
        path = tmp_path / "cache.sqlite"
        cache = ResponseCache.open(path)
        first = Runner(model, cache, concurrency=1, timeout=60).run(requests)
        assert [r.status for r in first] == ["ok"] * 10, [r.error for r in first]
        assert not any(r.cached for r in first)
        assert all(r.response.text.strip() for r in first)
        assert all((r.response.completion_tokens or 0) > 0 for r in first)
        replay = Runner(model, cache, concurrency=1).run(requests)
        assert all(r.cached for r in replay)
        assert [r.response.text for r in replay] == [r.response.text for r in first]
        assert cache.count() == 10
        cache.close()
        proc = server.proc
        assert proc is not None and proc.poll() is None
        pid = proc.pid
    finally:
        server.stop()
    assert proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failed_start_reports_the_server_output(tmp_path: Path) -> None:
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"not a gguf file")
    server = LocalModelServer(bogus, startup_timeout=60)
    with pytest.raises(Exception) as info:
        server.start()
    assert type(info.value).__name__ == "ModelSetupError"
    assert "last output" in str(info.value)
    assert server.proc is None
