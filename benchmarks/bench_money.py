"""Benchmark: what a gate costs (SPEC section 13), measured against the server's own bill.

Run from the repository root::

    python benchmarks/bench_money.py [--questions 12] [--n 4] [--budget 0.5] [--tests 6]
        [--batch-delay 2] [--trials 5] [--parts spend,budget,batch,resume,run,plan,unpriced]

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
   for the whole run's first round, so about one batch's latency, not one per test);
6. plan: ``--trials`` gates under ``--reliable-n auto --reliable-pilot-n 30`` on a model whose
   questions differ in difficulty (each prompt answered right with its question's accuracy,
   Beta-distributed, one answer per prompt): ``--reliable-plan``'s likely n*, its range, calls
   and spend beside what the run then found and paid (target: the real n* inside the range, the
   spend near the estimate; the worst case at ``--reliable-n-max`` above both);
7. unpriced: a gate priced and a CheckList module whose own model is not, under a USD budget,
   with and without ``-n 2``: exit code (target 4), calls the server saw (target 0), whether an
   xdist ``Interrupted`` or a traceback shows (target no), and the wall time of the price pass.
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


AUTO_YAML = ('spaces:\n  wide:\n    wrapper: ["({})", "{}.", "[{}]", "{})"]\n'
             '    enumerator: [upper, lower, number, roman]\n'
             '    option_separator: ["\\n", "; ", " | "]\n    option_order: permute\n')
AUTO_GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wide", eps=0.03, min_score=0.5)
def test_auto(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''
UNPRICED_CHECKLIST = '''
import pytest
from pytest_reliable import Classification, openai_model


@pytest.fixture
def reliable_model():
    return openai_model("unpriced-checker")


@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.5)
def test_inv(reliable):
    data = [{{"text": f"A fine review number {{i}}.", "label": "positive"}} for i in range(6)]
    reliable.invariance(data, Classification(labels=["positive", "negative"]))
'''


def _uniform(text: str) -> float:
    """A stable uniform in [0, 1) of ``text`` (one answer per prompt, in every run)."""
    import hashlib

    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16) / 16 ** 15


def difficulty_model(icc: float = 0.2, score: float = 0.5) -> Any:
    """Right with its question's accuracy (Beta(mean ``score``, intra-class correlation
    ``icc``), drawn from the question's text), the same answer to the same prompt."""
    import functools

    from scipy import stats

    concentration = 1 / icc - 1

    @functools.cache
    def accuracy_of(question: str) -> float:
        return float(stats.beta.ppf(_uniform(question), score * concentration,
                                    (1 - score) * concentration))

    def rule(messages: Any, params: dict[str, Any]) -> str:
        prompt = messages if isinstance(messages, str) else messages[-1]["content"]
        question = re.search(r"question \d+ of trial \d+\?", prompt)
        # options one per line, or on one line ("(A) wrong one; (B) right answer; ...")
        labels = re.findall(r"(\w+)\W{1,3}(right answer|wrong one|wrong two)", prompt)
        right = [str(label) for label, text in labels if text == "right answer"]
        wrong = [str(label) for label, text in labels if text != "right answer"]
        if question is None or not right or not wrong:
            return "no idea"
        return right[0] if _uniform(prompt) < accuracy_of(question.group(0)) else wrong[0]

    return rule


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
                   timeout=3600)
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
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--parts", default="spend,budget,batch,resume,run,plan,unpriced")
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
    if "plan" in parts:
        plan_against_run(root, options.questions, options.trials)
    if "unpriced" in parts:
        unpriced(root, q, n)


def plan_against_run(root: Path, questions: int, trials: int) -> None:
    """The plan's likely n* and spend, then the run's, on the same gate (module docstring)."""
    inside = 0
    for trial in range(trials):
        directory = root / f"plan{trial}"
        directory.mkdir()
        records = [{"question": f"question {i} of trial {trial}?",
                    "choices": ["right answer", "wrong one", "wrong two"], "answer": 0}
                   for i in range(questions)]
        (directory / "reliable.yaml").write_text(AUTO_YAML)
        (directory / "test_gate.py").write_text(AUTO_GATE.format(dataset=records))
        (directory / "prices.yaml").write_text(json.dumps({"models": {"scripted": PRICES}}))
        auto = ("--reliable-n", "auto", "--reliable-pilot-n", "30", "--reliable-n-max", "1000",
                "--reliable-no-cache", "--reliable-concurrency=2")
        with ScriptedServer(difficulty_model()) as server:
            planned = subprocess.run(command(server, "--reliable-plan", *auto), cwd=directory,
                                     capture_output=True, text=True, timeout=600,
                                     check=False).stdout
            likely = re.search(r"likely n\*: ~(\d+)(?: \((\d+)-(\d+) for)?.*?, (\d+) calls, "
                               r"~\$([\d.]+)", planned)
            worst = re.search(r"worst case: (\d+) calls, at most ~\$([\d.]+)", planned)
            assert likely is not None and worst is not None, planned
            report = run(directory, server, *auto)
            bill = server.billed_usd(**PRICES)
        entry = report["tests"][0]
        n_star, low, high = int(likely[1]), int(likely[2] or likely[1]), int(likely[3] or likely[1])
        if entry["n_star"] is None:  # the run did not complete (a fault): no n* to compare
            print(f"plan: trial {trial}: the run ended in {entry['verdict']}: "
                  f"{entry.get('message', '')[:200]}")
            continue
        inside += low <= entry["n_star"] <= high
        calls = entry["calls"]["made"] + entry["calls"]["cached"]
        print(f"plan: trial {trial}: likely n* ~{n_star} ({low}-{high}), {likely[4]} calls, "
              f"~${float(likely[5]):.4f} (worst {worst[1]} calls, ${float(worst[2]):.4f}); the "
              f"run: n* {entry['n_star']}, {calls} calls, paid ${entry['cost']['usd']:.4f} "
              f"(server's bill ${bill:.4f})")
    print(f"plan: the run's n* inside the plan's range in {inside} of {trials} trials")


def unpriced(root: Path, q: int, n: int) -> None:
    """An unpriced CheckList model under a USD budget, with and without pytest-xdist."""
    for workers in ((), ("-n", "2")):
        directory = project(root, f"unpriced{len(workers)}", q, n)
        (directory / "test_inv.py").write_text(UNPRICED_CHECKLIST.format())
        with ScriptedServer(right_option) as server:
            started = time.perf_counter()
            done = subprocess.run(command(server, "--reliable-budget=5usd", *workers),
                                  cwd=directory, capture_output=True, text=True, timeout=600,
                                  check=False)
            took = time.perf_counter() - started
            out = done.stdout + done.stderr
        print(f"unpriced: {' '.join(workers) or 'one process'}: exit code {done.returncode}, "
              f"{server.requests} calls, Interrupted shown: {'Interrupted' in out}, traceback "
              f"shown: {'Traceback' in out}; wall {took:.1f} s")


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
