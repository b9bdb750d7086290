"""Fault load of the batch path (issue 32): faults injected, answers lost, keys paid twice.

Run from the repository root::

    python benchmarks/bench_batch_faults.py [--scenarios 60] [--requests 24] [--seed 0]

Each scenario is a fresh store and a fresh scripted server with the batch API, faults drawn at
random (seeded): output lines rewritten so they cannot be read (not JSON, not an object, a status
that is no number, a 200 without choices or without content), the answer to a batch creation
lost (connection dropped, 500), requests of the batch API failing for a moment (upload, status,
output download, listing: 503, 429, 500, dropped), expired batches, batches that do not finish
before the deadline (``wait_timeout``), and runs killed (SIGKILL) at a random moment once they
have begun talking to the server. The requests are then run again (at most
``--reruns`` times, with nothing stuck any more) until every one has its answer. Counted from the
server's side, per request:

- answers lost: a readable answer the server delivered (and billed) that is not in the store at
  the end (target 0);
- keys paid twice: a request billed again after a readable answer to it had been delivered
  (target 0; a request whose line was garbled or whose batch expired is rightly sent again);
- unanswered: requests without an answer after the reruns (0 expected: reruns have no stuck
  batch).
"""

from __future__ import annotations

import argparse
import logging
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_reliable.calls.batch import BatchTransport
from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.calls.requests import number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.openai_compat import OpenAICompatibleModel
from pytest_reliable.testing import Fault, ScriptedServer

CHILD = """
import sys
from pytest_reliable.calls.batch import BatchTransport
from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.models.openai_compat import OpenAICompatibleModel
from pytest_reliable.calls.runner import Runner
from pytest_reliable.calls.requests import number_samples

base_url, path, prefix, count, wait_timeout = sys.argv[1:]
model = OpenAICompatibleModel("scripted", base_url, api_key="sk-bench")
store = ResponseCache.open(path)
requests = number_samples([([{"role": "user", "content": f"{prefix} q {i}"}],
                            SamplingParams(max_tokens=8)) for i in range(int(count))],
                          "bench::faults")
transport = BatchTransport(model, store, wait_timeout=float(wait_timeout), poll_first_s=0.01,
                           poll_max_s=0.05)
Runner(model, store, timeout=5.0, transport=transport).run(requests)
"""
"""A run of the requests in a process of its own, to be killed."""

GARBLES = ("not JSON", "not an object", "status not a number", "no choices", "no content")


def garble(row: dict[str, Any], how: str) -> str:
    import json

    if how == "not JSON":
        return json.dumps(row)[:-7]
    if how == "not an object":
        return json.dumps([row])
    if how == "status not a number":
        row["response"]["status_code"] = "OK"
    elif how == "no choices":
        del row["response"]["body"]["choices"]
    else:
        row["response"]["body"]["choices"][0]["message"]["content"] = None
    return json.dumps(row)


class Scenario:
    """One store, one server, faults drawn from ``rng``; counts per request what was paid."""

    def __init__(self, rng: random.Random, directory: Path, requests: int) -> None:
        self.rng = rng
        self.prefix = directory.name
        self.requests = number_samples(
            [([{"role": "user", "content": f"{self.prefix} q {i}"}],
              SamplingParams(max_tokens=8)) for i in range(requests)], "bench::faults")
        self.paid: Counter[str] = Counter()
        self.readable: set[str] = set()
        """Requests with a readable answer delivered."""
        self.paid_twice: set[str] = set()
        self.garbled = 0
        self.p_garble = rng.choice([0.0, 0.05, 0.2])
        self.p_api = rng.choice([0.0, 0.1, 0.25])
        self.stuck = rng.random() < 0.2
        self.kill_after = rng.uniform(0.0, 0.5) if rng.random() < 0.4 else None
        create = [rng.choice(["drop", "500"])] if rng.random() < 0.3 else []
        self.expires = rng.random() < 0.1
        self.server = ScriptedServer(
            batch_delay=3600 if self.stuck else rng.uniform(0, 0.3),
            batch_expires=self.expires, batch_output=self.output,
            batch_create_faults=create, batch_api_faults=self.api_fault)
        self.path = directory / "cache.sqlite"

    def output(self, row: dict[str, Any]) -> str | None:
        key = row["custom_id"]
        if key in self.readable:
            self.paid_twice.add(key)
        self.paid[key] += 1
        if self.rng.random() < self.p_garble:
            self.garbled += 1
            return garble(row, self.rng.choice(GARBLES))
        self.readable.add(key)
        return None

    def api_fault(self, route: str) -> Fault | None:
        if route == "other" or self.rng.random() >= self.p_api:
            return None
        return Fault(self.rng.choice(["503", "429", "500", "drop"]))

    def run(self, model: OpenAICompatibleModel, store: Any, *,
            wait_timeout: float) -> list[Any]:
        transport = BatchTransport(model, store, wait_timeout=wait_timeout, poll_first_s=0.01,
                                   poll_max_s=0.05)
        return Runner(model, store, timeout=5.0, transport=transport).run(self.requests)

    def killed_run(self, wait_timeout: float) -> None:
        """The requests run by another process, SIGKILLed ``kill_after`` seconds after it
        begins talking to the server."""
        assert self.kill_after is not None
        seen = sum(self.server.paths.values())
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, self.server.base_url, str(self.path), self.prefix,
             str(len(self.requests)), str(wait_timeout)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while (sum(self.server.paths.values()) == seen and child.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.005)
        time.sleep(self.kill_after)
        child.kill()
        child.wait(30)


def scenario(rng: random.Random, directory: Path, requests: int,
             reruns: int) -> dict[str, Any]:
    s = Scenario(rng, directory, requests)
    with s.server as server:
        model = OpenAICompatibleModel("scripted", server.base_url, api_key="sk-bench")
        runs = 0
        results: list[Any] | None = None
        while runs <= reruns:
            wait_timeout = 0.5 if s.stuck and runs == 0 else 30.0
            if runs == 0 and s.kill_after is not None:
                s.killed_run(wait_timeout)
            else:
                store = ResponseCache.open(s.path)
                try:
                    results = s.run(model, store, wait_timeout=wait_timeout)
                finally:
                    store.close()
            runs += 1
            # the reruns find nothing stuck (an expiring batch never answers its last line)
            server.batch_delay, server.batch_expires = 0.0, False
            if results is not None and all(r.status == "ok" for r in results):
                break
        store = ResponseCache.open(s.path, "none")
        try:
            keys = [Runner(model, store).key(r) for r in s.requests]
            stored = store.get_many(keys)
        finally:
            store.close()
        faults = sum(server.fault_counts.values()) + s.garbled + int(s.stuck) + int(
            s.kill_after is not None) + int(s.expires)
    return {
        "faults": faults, "runs": runs, "batches": len(server.batches),
        "lost": len(s.readable - set(stored)), "paid_twice": len(s.paid_twice),
        "unanswered": len(set(keys) - set(stored)), "paid": sum(s.paid.values()),
        "injected": dict(server.fault_counts), "garbled": s.garbled, "stuck": s.stuck,
        "killed": s.kill_after is not None, "expired": s.expires,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=60)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--reruns", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.getLogger("pytest_reliable").setLevel(logging.ERROR)  # the expected warnings
    rng = random.Random(args.seed)
    totals: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.scenarios):
            directory = Path(tmp) / f"s{number}"
            directory.mkdir()
            out = scenario(rng, directory, args.requests, args.reruns)
            for name in ("faults", "runs", "batches", "lost", "paid_twice", "unanswered",
                         "paid", "garbled"):
                totals[name] += out[name]
            totals["stuck"] += out["stuck"]
            totals["killed"] += out["killed"]
            totals["expired"] += out["expired"]
            kinds.update(out["injected"])
            if out["lost"] or out["paid_twice"] or out["unanswered"]:
                print(f"scenario {number}: {out}", file=sys.stderr)
    requests = args.scenarios * args.requests
    print(f"{args.scenarios} scenarios x {args.requests} requests ({requests} requests, "
          f"{totals['runs']} runs, {totals['batches']} batches, {totals['paid']} lines paid) in "
          f"{time.monotonic() - start:.0f} s")
    print(f"faults injected: {totals['faults']} ({totals['garbled']} unreadable output lines, "
          f"{totals['stuck']} batches past the deadline, {totals['killed']} runs killed, "
          f"{totals['expired']} expired batches; API: "
          + ", ".join(f"{kind} x{count}" for kind, count in sorted(kinds.items())) + ")")
    print(f"answers lost: {totals['lost']}   keys paid twice: {totals['paid_twice']}   "
          f"unanswered after the reruns: {totals['unanswered']}")
    return 1 if totals["lost"] or totals["paid_twice"] or totals["unanswered"] else 0


if __name__ == "__main__":
    sys.exit(main())
