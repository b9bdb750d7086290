"""Call order on the embedded model: ``python benchmarks/bench_prefix_order.py [-k SUBSTRING]``.

Runs the example gate's first run (examples/: every reliable test, a fresh in-memory cache each
time) twice in one process against one embedded SmolLM2 server: calls dispatched in plan order,
then sorted by prompt (what the runner does for a one-slot model). Prints the wall time and the
prompt tokens sent and evaluated of both. Tokens evaluated are the runner's estimate (llama.cpp's
server reports no cached-token count): the share of each prompt after its common prefix with the
previous request. ``-k`` keeps only the tests whose name contains SUBSTRING.

Measured once on the shared 2-core machine (``-k sentiment_accuracy``, 88 calls per order):
plan 923 s / 5414 tokens evaluated, prefix 213 s / 2873 (6009 sent each); the times were
distorted by the machine's load (load average 13 falling to 8 during the plan-order run), the
tokens are not.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path
from typing import Any

from pytest_reliable.calls.runner import Runner
from pytest_reliable.contract.markers import parse_reliable
from pytest_reliable.plan.data import Dataset
from pytest_reliable.run.session import ReliableSession, Settings
from pytest_reliable.space import load_spaces
from pytest_reliable.tasks.builtin import Classification, MultipleChoice

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class OrderedSession(ReliableSession):
    """A session whose runners dispatch in plan order or in prefix order, as told."""

    prefix_order: bool = True

    def runner(self, model: Any, nodeid: str) -> Runner:
        runner = super().runner(model, nodeid)
        runner.prefix_order = self.prefix_order
        return runner


def gate_tests(keep: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, marker kwargs) of every reliable test in the example gate."""
    tree = ast.parse((EXAMPLES / "test_release_gate.py").read_text())
    tests = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or keep not in node.name:
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "pytest.mark.reliable":
                tests.append((node.name, {k.arg: ast.literal_eval(k.value) for k in deco.keywords}))
    return tests


def run(session: OrderedSession, tests: list[tuple[str, dict[str, Any]]]) -> tuple[float, int, int]:
    data = {
        "sentiment": (Dataset.from_file(EXAMPLES / "data" / "sentiment.jsonl"),
                      Classification(labels=["positive", "negative"])),
        "movies": (Dataset.from_bbh(EXAMPLES / "data" / "bbh" / "movie_recommendation.json"),
                   MultipleChoice()),
    }
    start = time.perf_counter()
    sent = evaluated = 0
    for name, kwargs in tests:
        dataset, task = data[kwargs["space"]]
        spec = parse_reliable(kwargs, space_exists=session.space_exists)
        report = session.run_reliable(f"examples/test_release_gate.py::{name}", dataset, task, spec)
        sent += report.prompt_tokens["prompt_tokens_sent"]
        evaluated += report.prompt_tokens["prompt_tokens_evaluated"]
    return time.perf_counter() - start, sent, evaluated


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-k", default="", help="keep tests whose name contains this")
    keep = parser.parse_args().k
    tests = gate_tests(keep)
    if not tests:
        sys.exit(f"no example test matches {keep!r}")
    spaces = load_spaces(EXAMPLES / "reliable.yaml")
    session = OrderedSession(Settings(rootdir=EXAMPLES, no_cache=True), spaces)
    rows = []
    try:
        # Start the server before timing, so neither order pays for its start-up.
        from pytest_reliable.calls.requests import Request
        from pytest_reliable.models.base import SamplingParams

        warm = session.runner(session.default_model(), "warm-up")
        warm.run([Request.of([{"role": "user", "content": "Hi"}], SamplingParams(max_tokens=1))])
        for prefix_order in (False, True):
            session.prefix_order = prefix_order
            session._cache = None  # a fresh in-memory cache: every call is made
            rows.append(("prefix" if prefix_order else "plan", *run(session, tests)))
    finally:
        session.close()
    print(f"example gate first run, {len(tests)} tests ({', '.join(t for t, _ in tests)})")
    print(f"{'order':8} {'time s':>8} {'tokens sent':>12} {'tokens evaluated (est.)':>24}")
    for order, seconds, sent, evaluated in rows:
        print(f"{order:8} {seconds:8.1f} {sent:12d} {evaluated:24d}")
    plan, prefix = rows
    print(f"prefix/plan: time {prefix[1] / plan[1]:.2f}x, tokens evaluated "
          f"{prefix[3] / max(plan[3], 1):.2f}x")


if __name__ == "__main__":
    main()
