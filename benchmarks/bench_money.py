"""Benchmark: what a gate costs (SPEC section 13), measured against the server's own bill.

Run from the repository root::

    python benchmarks/bench_money.py [--questions 12] [--n 4] [--budget 0.5] [--tests 6]
        [--batch-delay 2] [--parts spend,budget,batch,resume,run]

One gate (``--questions`` multiple-choice questions, two wrappers, ``--n`` resamplings) runs as a
user runs it (``python -m pytest`` in a fresh directory) against the scripted OpenAI-compatible
server, which counts every token it bills. It prints:

1. spend: the JSON report's ``cost.usd`` against the server's bill at the same prices (to the cent
   and to the micro-dollar), and what a replay from the cache saved;
2. budget: with ``--reliable-budget Xusd`` the server's bill, the limit, and how far below it the
   run stopped, in units of one call's reservation (target: below the limit, within one call);
3. batch: with ``--reliable-batch`` the chat-completions calls made (target 0), batches and lines,
   the bill at the batch multiplier, and whether the JSON verdicts equal those of the direct run;
4. resume: a batch run SIGKILLed while it waits, then run again: batches and lines the server saw
   (target: one batch, each line once);
5. run: ``--tests`` gates in one run with ``--reliable-batch``, each batch taking
   ``--batch-delay`` seconds: the batches the server saw and the run's wall time (target: one batch
   for the whole run's first round, so about one batch's latency, not one per test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_reliable.testing import ScriptedServer

PRICES = {"input": 1500.0, "output": 6000.0, "cached_input": 750.0}
YAML = 'spaces:\n  wrappers:\n    wrapper: ["({})", "{}."]\n'
GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n={n}, mode="fixed", min_score=0.5)
def test_gate(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


RUN_GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.parametrize("part", range({tests}))
@pytest.mark.reliable(space="wrappers", n={n}, mode="fixed", min_score=0.5)
def test_gate(reliable, part):
    reliable.evaluate([dict(r, question=f"part {{part}}: {{r['question']}}") for r in DATA],
                      MultipleChoice())
'''


def right_option(messages: Any, params: dict[str, Any]) -> str:
    prompt = messages if isinstance(messages, str) else messages[-1]["content"]
    found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.MULTILINE)
    return found.group(1) if found else "no idea"


def project(root: Path, name: str, questions: int, n: int, tests: int = 0) -> Path:
    directory = root / name
    directory.mkdir()
    records = []
    for i in range(questions):
        choices = ["wrong one", "wrong two"]
        choices.insert(i % 3, "right answer")
        records.append({"question": f"question {i}?", "choices": choices, "answer": i % 3})
    (directory / "reliable.yaml").write_text(YAML)
    gate = (RUN_GATE.format(dataset=records, n=n, tests=tests) if tests
            else GATE.format(dataset=records, n=n))
    (directory / "test_gate.py").write_text(gate)
    (directory / "prices.yaml").write_text(json.dumps(
        {"models": {"scripted": {**PRICES, "batch": 0.5}}}))
    return directory


def command(server: ScriptedServer, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--reliable-model=scripted", f"--reliable-base-url={server.base_url}",
            "--reliable-pricing=prices.yaml", "--reliable-report=report.json", *args]


def run(directory: Path, server: ScriptedServer, *args: str) -> dict[str, Any]:
    subprocess.run(command(server, *args), check=False, cwd=directory, capture_output=True,
                   timeout=600)
    return dict(json.loads((directory / "report.json").read_text()))


def verdicts(report: dict[str, Any]) -> list[Any]:
    return [(e["verdict"], e["mean"], e["canonical"], e["formats"], e["thresholds"])
            for e in report["tests"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--tests", type=int, default=6)
    parser.add_argument("--batch-delay", type=float, default=2.0)
    parser.add_argument("--parts", default="spend,budget,batch,resume,run")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-money-"))
    q, n = options.questions, options.n
    parts = set(options.parts.split(","))
    if "spend" in parts:
        spend(root, q, n)
    if "budget" in parts:
        budget(root, q, n, options.budget)
    if "batch" in parts:
        batch(root, q, n)
    if "resume" in parts:
        resume(root, q, n)
    if "run" in parts:
        whole_run(root, q, n, options.tests, options.batch_delay)


def whole_run(root: Path, q: int, n: int, tests: int, delay: float) -> None:
    with ScriptedServer(right_option, batch_delay=delay) as server:
        directory = project(root, "run", q, n, tests)
        started = time.perf_counter()
        report = run(directory, server, "--reliable-batch", "--reliable-no-cache")
        took = time.perf_counter() - started
        passed = sum(e["verdict"] == "passed" for e in report["tests"])
        print(f"run: {tests} tests, {len(server.batches)} batches / {server.batch_lines} lines, "
              f"{server.paths['/v1/chat/completions']} chat-completions calls, {passed} passed; "
              f"wall {took:.1f} s with each batch taking {delay:g} s")


def spend(root: Path, q: int, n: int) -> None:
    with ScriptedServer(right_option, cached_prompt_tokens=lambda body: 2) as server:
        directory = project(root, "spend", q, n)
        paid = run(directory, server)["cost"]
        bill = server.billed_usd(**PRICES)
        replay = run(directory, server)["cost"]
    print(f"spend: report ${paid['usd']:.6f}, server's bill ${bill:.6f}, difference "
          f"${abs(paid['usd'] - bill):.2e} (equal to the cent: "
          f"{round(paid['usd'], 2) == round(bill, 2)}); replay paid ${replay['usd']:.6f}, "
          f"saved ${replay['cached_usd_saved']:.6f}")


def budget(root: Path, q: int, n: int, limit: float) -> None:
    with ScriptedServer(right_option) as server:
        directory = project(root, "budget", q, n)
        report = run(directory, server, "--reliable-no-cache",
                     f"--reliable-budget={limit}usd", "--reliable-concurrency=4")
        bill = server.billed_usd(**PRICES)
        one_call = (60 * PRICES["input"] + 32 * PRICES["output"]) / 1e6
        print(f"budget: limit ${limit:.4f}, server's bill ${bill:.4f} after "
              f"{server.completed} calls (report ${report['cost']['usd']:.4f}); stopped "
              f"${limit - bill:.4f} below the limit = "
              f"{(limit - bill) / one_call:.2f} of one call's most possible cost "
              f"(${one_call:.4f}); verdict {report['tests'][0]['verdict']}")


def batch(root: Path, q: int, n: int) -> None:
    with ScriptedServer(right_option, batch_delay=0.5) as server:
        directory = project(root, "batch", q, n)
        batched = run(directory, server, "--reliable-batch", "--reliable-no-cache")
        chat, batches, lines = (server.paths["/v1/chat/completions"], len(server.batches),
                                server.batch_lines)
        batch_bill = server.billed_usd(**PRICES, batch=0.5)
        direct = run(directory, server, "--reliable-no-cache")
    print(f"batch: {chat} chat-completions calls, {batches} batch of {lines} lines; report "
          f"${batched['cost']['usd']:.6f} vs server's batch bill ${batch_bill:.6f}; direct run "
          f"${direct['cost']['usd']:.6f}; JSON verdicts equal: "
          f"{verdicts(batched) == verdicts(direct)}")


def resume(root: Path, q: int, n: int) -> None:
    with ScriptedServer(right_option, batch_delay=3600) as server:
        directory = project(root, "resume", q, n)
        first = subprocess.Popen(command(server, "--reliable-batch"), cwd=directory,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        deadline = time.monotonic() + 120
        while not server.batches and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        before = (len(server.batches), server.batch_lines)
        server.batch_delay = 0.0
        started = time.perf_counter()
        report = run(directory, server, "--reliable-batch")
        print(f"resume: killed while waiting after {before[0]} batch / {before[1]} lines; the "
              f"rerun took {time.perf_counter() - started:.1f} s, the server saw "
              f"{len(server.batches)} batch / {server.batch_lines} lines in all, "
              f"{server.paths['/v1/chat/completions']} chat-completions calls; verdict "
              f"{report['tests'][0]['verdict']}, calls made {report['tests'][0]['calls']['made']}")


if __name__ == "__main__":
    main()
