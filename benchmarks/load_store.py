"""A load on one PostgreSQL store, as the audit ran it: ``python benchmarks/load_store.py``.

Two pytest runs at once (two "hosts": separate directories, nothing shared but the store), each
with pytest-xdist workers, evaluate the same tests against one scripted model server that injects
HTTP faults (429 with Retry-After, 500, 503, dropped connections, malformed bodies, slow answers)
into a share of the requests. Midway the database crashes (``pg_ctl stop -m immediate``) and comes
back a few seconds later. Then both runs again, on what the store kept.

Printed: calls answered, faults injected (by kind), answers lost (keys the model answered that the
store does not hold at the end), keys paid twice (prompts the model answered more than once), and
the second phase's calls (all must come from the store).

Options: ``--questions N`` per test (default 150), ``--tests N`` per host (8), ``--workers N``
per host (2), ``--fault-rate P`` (0.23), ``--no-crash``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_reliable.testing import Fault, ScriptedServer
from pytest_reliable.testing.postgres import TemporaryPostgres

RELIABLE_YAML = """
spaces:
  wrappers:
    wrapper: ["({})", "{}."]
"""

TEST = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice


def records(test, count):
    out = []
    for i in range(count):
        choices = ["wrong one", "wrong two"]
        choices.insert(i % 3, "right answer")
        out.append({{"question": f"test {{test}} question {{i}}?", "choices": choices,
                     "answer": i % 3}})
    return out


@pytest.mark.parametrize("test", range({tests}))
@pytest.mark.reliable(space="wrappers", n=2, mode="fixed", min_score=0.5)
def test_gate(reliable, test):
    reliable.evaluate(Dataset.from_records(records(test, {questions})), MultipleChoice())
'''


class Model:
    """The scripted model's rule: the right option's label; counts answers per prompt."""

    def __init__(self) -> None:
        self.answered: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, messages: Any, params: dict[str, Any]) -> str:
        prompt = messages if isinstance(messages, str) else messages[-1]["content"]
        with self.lock:
            self.answered[prompt] += 1
        found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.MULTILINE)
        return found.group(1) if found else "no idea"


class Faults:
    """A seeded share of the requests gets a fault (slow answers stay within the timeout, so
    every answer the model gives reaches a client that waits for it)."""

    KINDS = ("429", "500", "503", "drop", "malformed", "slow")

    def __init__(self, rate: float, seed: int = 7) -> None:
        self.rate = rate
        self.random = random.Random(seed)
        self.lock = threading.Lock()

    def __call__(self, n: int, body: dict[str, Any]) -> Fault | None:
        with self.lock:
            if self.random.random() >= self.rate:
                return None
            kind = self.random.choice(self.KINDS)
        if kind == "429":
            return Fault("429", retry_after=0.3)
        if kind == "slow":
            return Fault("slow", delay=0.3)
        return Fault(kind)


def host(directory: Path, tests: int, questions: int) -> Path:
    directory.mkdir()
    (directory / "reliable.yaml").write_text(RELIABLE_YAML)
    (directory / "test_load.py").write_text(TEST.format(tests=tests, questions=questions))
    return directory


def run(directory: Path, server: ScriptedServer, url: str, workers: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-n", str(workers), f"--reliable-store={url}", "--reliable-model=scripted",
         f"--reliable-base-url={server.base_url}", "--reliable-timeout=5",
         "--reliable-max-retries=8", "--reliable-run-id=load", "--reliable-report=report.json"],
        cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def phase(hosts: list[Path], server: ScriptedServer, url: str, workers: int,
          crash: TemporaryPostgres | None, crash_at: int) -> list[tuple[int, str]]:
    running = [run(h, server, url, workers) for h in hosts]
    if crash is not None:
        while server.completed < crash_at and any(p.poll() is None for p in running):
            time.sleep(0.05)
        at = server.completed
        crash.stop_server("immediate")  # the database crashes...
        time.sleep(3.0)
        crash.start()  # ...and is back
        print(f"  the database crashed after {at:,} answers, back after 3 s (at "
              f"{server.completed:,})")
    return [(p.wait(), p.stdout.read() if p.stdout else "") for p in running]


def made_by(directory: Path) -> int:
    """The calls a host's report says it made."""
    tests = json.loads((directory / "report.json").read_text())["tests"]
    return sum(int(test["calls"]["made"]) for test in tests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--tests", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fault-rate", type=float, default=0.23)
    parser.add_argument("--no-crash", action="store_true")
    args = parser.parse_args()
    prompts = args.tests * args.questions * 2  # two wrappers: every prompt is one key
    model = Model()
    with tempfile.TemporaryDirectory() as root, TemporaryPostgres(settings=()) as pg, \
            ScriptedServer(model, faults=Faults(args.fault_rate)) as server:
        url = pg.create_database("load")
        hosts = [host(Path(root) / f"host{i}", args.tests, args.questions) for i in range(2)]
        began = time.monotonic()
        outcomes = phase(hosts, server, url, args.workers, None if args.no_crash else pg,
                         crash_at=prompts // 3)
        took = time.monotonic() - began
        answered_a = sum(model.answered.values())
        faults = dict(server.fault_counts)
        requests_a = server.requests
        stored = int(pg.execute("load", "SELECT COUNT(*) FROM reliable_answers")[0][0])
        made = [made_by(h) for h in hosts]
        again = phase(hosts, server, url, args.workers, None, 0)
        answered_b = sum(model.answered.values()) - answered_a
    twice = [p for p, n in model.answered.items() if n > 1]
    print(f"two hosts x {args.workers} workers, {args.tests} tests x {args.questions} questions "
          f"x 2 wrappers = {prompts:,} distinct calls; fault rate {args.fault_rate:.0%}; "
          f"database crash {'none' if args.no_crash else f'after {prompts // 3:,} answers'}")
    print(f"phase 1: {took:.0f} s, exit codes {[code for code, _ in outcomes]}, "
          f"{requests_a:,} requests, {answered_a:,} answered, faults injected "
          f"{sum(faults.values()):,} {faults}")
    print(f"  answers lost (answered, not in the store): {len(model.answered) - stored}")
    print(f"  keys paid twice: {len(twice)}; calls each host says it made: {made}")
    print(f"phase 2 (both hosts again): exit codes {[code for code, _ in again]}, "
          f"{answered_b} calls answered by the model (all must come from the store)")
    for code, out in outcomes + again:
        if code != 0:
            print(out[-3000:])


if __name__ == "__main__":
    main()
