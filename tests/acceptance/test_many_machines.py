"""Many machines, one PostgreSQL store (SPEC section 10), as users run it: several pytest processes
in separate working directories (no shared file) against one database and one model server whose
calls are counted. Each cell is paid once, the budget is one, the n* pilot runs once, a host
killed with SIGKILL loses nothing, a store lost mid-run changes no verdict, and every start-up
fault is a usage error naming host and fix without the password."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.testing import ScriptedServer
from pytest_reliable.testing.postgres import PASSWORD, TemporaryPostgres, free_port
from tests.acceptance.helpers import RELIABLE_YAML

GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", n={n}, mode="fixed", min_score=0.5)
def test_gate(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''

AUTO_GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice

DATA = Dataset.from_records({dataset!r})


@pytest.mark.reliable(space="wrappers", mode="fixed")
def test_gate(reliable):
    reliable.evaluate(DATA, MultipleChoice())
'''


def questions(count: int, prefix: str = "") -> list[dict[str, Any]]:
    """``count`` distinct questions (so ``2 x count`` distinct prompts over the two wrappers)."""
    records = []
    for i in range(count):
        choices = ["wrong one", "wrong two"]
        choices.insert(i % 3, "right answer")
        records.append({"question": f"{prefix}question {i}?", "choices": choices, "answer": i % 3})
    return records


def right_option(messages: Any, params: dict[str, Any]) -> str:
    """The scripted model: the label of the option that reads "right answer", in any format."""
    prompt = messages if isinstance(messages, str) else messages[-1]["content"]
    found = re.search(r"^\W*(\w)\W+\s*right", prompt, re.MULTILINE)
    return found.group(1) if found else "no idea"


def project(root: Path, name: str, test_file: str, *, count: int = 12, prefix: str = "",
            n: int = 4) -> Path:
    """One host's working directory: its own reliable.yaml and test file, nothing shared."""
    directory = root / name
    directory.mkdir()
    (directory / "reliable.yaml").write_text(RELIABLE_YAML)
    (directory / "test_gate.py").write_text(
        test_file.format(dataset=questions(count, prefix), n=n))
    return directory


def start_host(directory: Path, server: ScriptedServer, store: str, *args: str) -> Any:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-W", "always", f"--reliable-store={store}", "--reliable-model=scripted",
         f"--reliable-base-url={server.base_url}", "--reliable-report=report.json", *args],
        cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )


def finish(host: Any, timeout: float = 240) -> tuple[int, str]:
    out, _ = host.communicate(timeout=timeout)
    return int(host.returncode), str(out)


def entry(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / "report.json").read_text())["tests"][0])


def database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def answers_stored(server: TemporaryPostgres, url: str) -> int:
    return int(server.execute(database(url), "SELECT COUNT(*) FROM reliable_answers")[0][0])


def ledger(server: TemporaryPostgres, url: str, run_id: str) -> tuple[int, int, int]:
    rows = server.execute(database(url), "SELECT calls, tokens, skipped FROM reliable_budget "
                                         "WHERE run = %s", run_id)
    return tuple(int(v) for v in rows[0]) if rows else (0, 0, 0)  # type: ignore[return-value]


def test_hosts_sharing_a_store_pay_for_each_cell_once(
    tmp_path: Path, postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    with ScriptedServer(right_option, latency=0.03) as server:
        hosts = [project(tmp_path, f"host{i}", GATE) for i in range(3)]
        running = [start_host(h, server, postgres_url, "--reliable-run-id=ci-1",
                              "--reliable-budget=1000calls") for h in hosts]
        outcomes = [finish(host) for host in running]
        paid = server.requests
        replay = project(tmp_path, "replay", GATE)
        code, out = finish(start_host(replay, server, postgres_url, "--reliable-record=none"))
        assert code == 0, out
        assert server.requests == paid  # the replay came from the store
    for code, out in outcomes:
        assert code == 0, out
        assert "store=postgresql://***@127.0.0.1" in out and "(run id ci-1)" in out, out
        assert PASSWORD not in out
    entries = [entry(h) for h in hosts]
    cells = entries[0]["calls"]["made"] + entries[0]["calls"]["cached"]
    assert all(e["calls"]["made"] + e["calls"]["cached"] == cells for e in entries)
    # every answer paid for once, whoever paid: the model's calls, the stored answers, the calls
    # the hosts say they made and the shared ledger all agree
    stored = answers_stored(postgres_server, postgres_url)
    assert paid == stored == sum(e["calls"]["made"] for e in entries)
    assert ledger(postgres_server, postgres_url, "ci-1")[0] == paid
    assert paid == 2 * 12  # two wrappers x twelve questions: each distinct prompt once
    assert len({(e["mean"], e["verdict"], e["canonical"]["score"]) for e in entries}) == 1
    assert entry(replay)["calls"]["made"] == 0


def test_one_budget_for_every_host_of_a_run(
    tmp_path: Path, postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    with ScriptedServer(right_option, latency=0.02) as server:
        # each host asks its own questions: 20 prompts each, 60 in all, for a budget of 40
        hosts = [project(tmp_path, f"host{i}", GATE, count=10, prefix=f"host {i}: ")
                 for i in range(3)]
        running = [start_host(h, server, postgres_url, "--reliable-run-id=ci-7",
                              "--reliable-budget=40calls") for h in hosts]
        outcomes = [finish(host) for host in running]
        sent = server.requests
    assert sent == 40, [out for _, out in outcomes]
    assert ledger(postgres_server, postgres_url, "ci-7")[:1] == (40,)
    said = [out for _, out in outcomes if "--reliable-budget 40calls is spent for the whole run"
            in out]
    assert said, [out for _, out in outcomes]


def test_the_n_star_pilot_runs_once_while_the_other_hosts_wait(
    tmp_path: Path, postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    with ScriptedServer(right_option, latency=0.03) as server:
        hosts = [project(tmp_path, f"host{i}", AUTO_GATE, count=8) for i in range(3)]
        running = [start_host(h, server, postgres_url, "--reliable-n=auto",
                              "--reliable-pilot-n=8") for h in hosts]
        outcomes = [finish(host) for host in running]
        paid = server.requests
    for code, out in outcomes:
        assert code == 0, out
    sources = sorted(entry(h)["n_star_source"] for h in hosts)
    assert sources == ["pilot", "store", "store"]
    assert paid == answers_stored(postgres_server, postgres_url)
    assert postgres_server.execute(database(postgres_url),
                                   "SELECT COUNT(*) FROM reliable_nstar") == [(1,)]
    assert len({entry(h)["n_star"] for h in hosts}) == 1


class PerPrompt:
    """The scripted model's rule, counting the answers it delivered per prompt (a prompt is a
    cell's key here: temperature 0, one model)."""

    def __init__(self) -> None:
        self.delivered: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, messages: Any, params: dict[str, Any]) -> str:
        prompt = messages if isinstance(messages, str) else messages[-1]["content"]
        with self.lock:
            self.delivered[prompt] += 1
        return right_option(messages, params)

    def paid_twice(self) -> list[str]:
        with self.lock:
            return [prompt for prompt, n in self.delivered.items() if n > 1]


def stored_answers(store: str | None, directory: Path,
                   server: TemporaryPostgres | None = None) -> int:
    if store is None:
        import sqlite3

        with sqlite3.connect(directory / ".reliable" / "cache.sqlite") as db:
            count = int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        db.close()
        return count
    assert server is not None
    return answers_stored(server, store)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_host_killed_mid_run_loses_no_answer_and_blocks_nobody(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """SIGKILL mid-run, then a rerun (a new host with the shared store; the same directory with
    the local cache): every answer that came back before the kill is stored, and the rerun pays
    only for the rest: no key is paid twice but those in flight at the kill."""
    server_pg = request.getfixturevalue("postgres_server") if backend == "postgresql" else None
    store = request.getfixturevalue("postgres_url") if backend == "postgresql" else None
    rule = PerPrompt()
    with ScriptedServer(rule, latency=0.05) as server:
        killed = project(tmp_path, "killed", GATE, count=40)
        host = start_run(killed, server, store, "--reliable-concurrency=4")
        deadline = time.monotonic() + 120
        while server.completed < 25 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(host.pid, signal.SIGKILL)
        host.wait(10)
        completed, sent = server.completed, server.requests
        before = stored_answers(store, killed, server_pg)
        # every answer that came back before the kill is in the store (the 4 in flight aside)
        assert 0 < before <= completed and completed - before <= 4
        rerun = killed if store is None else project(tmp_path, "rerun", GATE, count=40)
        started = time.monotonic()
        code, out = finish(start_run(rerun, server, store))
        took = time.monotonic() - started
        rerun_paid = server.requests - sent  # (the killed host's requests in flight aside)
    assert code == 0, out
    after = stored_answers(store, rerun, server_pg)
    assert rerun_paid == after - before  # the rerun paid only for the rest
    assert entry(rerun)["calls"]["made"] == rerun_paid
    assert len(rule.paid_twice()) <= 4, rule.paid_twice()  # the calls in flight at the kill
    assert took < 120, "a killed host's claims must die with it, not block the rerun"


def start_run(directory: Path, server: ScriptedServer, store: str | None, *args: str) -> Any:
    """`start_host`, or with the local cache of ``directory`` when ``store`` is None."""
    if store is not None:
        return start_host(directory, server, store, *args)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-W", "always", "--reliable-model=scripted", f"--reliable-base-url={server.base_url}",
         "--reliable-report=report.json", *args],
        cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )


def test_a_store_lost_mid_run_keeps_every_answer_and_changes_no_verdict(
    tmp_path: Path, postgres_server: TemporaryPostgres, postgres_url: str,
) -> None:
    calls = {"n": 0}

    def flaky_store(messages: Any, params: dict[str, Any]) -> str:
        calls["n"] += 1
        if calls["n"] == 8:
            postgres_server.stop_server()  # a restart mid-run...
        if calls["n"] == 25:
            postgres_server.start()  # ...and the server is back
        return right_option(messages, params)

    reference_url = postgres_server.create_database()
    try:
        with ScriptedServer(flaky_store) as server:
            lost = project(tmp_path, "lost", GATE, count=20)
            code, out = finish(start_host(lost, server, postgres_url, "--reliable-concurrency=2"))
        with ScriptedServer(right_option) as server:
            calm = project(tmp_path, "calm", GATE, count=20)
            calm_code, _ = finish(start_host(calm, server, reference_url))
            cells = server.requests
    finally:
        postgres_server.start()  # whatever happened, the session's server runs again
    assert code == calm_code == 0, out
    assert out.count("kept in memory") == 1, out  # reported once
    assert PASSWORD not in out
    for leak in ("Traceback", "INTERNALERROR", "pytest_reliable/"):
        assert leak not in out, out
    assert (entry(lost)["mean"], entry(lost)["verdict"]) == (entry(calm)["mean"],
                                                             entry(calm)["verdict"])
    # the answers paid while the store was away were written when it came back
    assert answers_stored(postgres_server, postgres_url) == cells


# -- start-up faults: a usage error (exit code 4) naming host and fix, never the password --------
def run_start(pytester: pytest.Pytester, *args: str) -> tuple[int, str]:
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_gate=GATE.format(dataset=questions(3), n=2))
    result = pytester.runpytest("-p", "no:cacheprovider", "--reliable-model=scripted",
                                "--reliable-base-url=http://127.0.0.1:9/v1", *args)
    return int(result.ret), result.stdout.str() + result.stderr.str()


def test_start_up_faults_are_usage_errors_naming_host_and_fix(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, postgres_server: TemporaryPostgres
) -> None:
    port = free_port()
    monkeypatch.setenv("PGPASSWORD", "env-secret-9f2")
    cases = [
        (f"postgresql://reliable:{PASSWORD}@127.0.0.1:{port}/gate",
         (f"127.0.0.1:{port}", "cannot be reached", "start it")),
        (postgres_server.url("postgres", password="url-secret-77x"),
         (f"{postgres_server.host}:{postgres_server.port}", "refused the password", "PGPASSWORD")),
        (postgres_server.url("postgres", with_password=False),
         ("refused the password", "~/.pgpass")),
        (postgres_server.url("missing_db"), ("has no database 'missing_db'", "createdb")),
        ("mysql://reliable:url-secret-77x@127.0.0.1/gate", ("postgresql://HOST:PORT/DATABASE",)),
    ]
    for url, fragments in cases:
        code, text = run_start(pytester, f"--reliable-store={url}")
        assert code == pytest.ExitCode.USAGE_ERROR, text
        for fragment in fragments:
            assert fragment in text, (fragment, text)
        for secret in (PASSWORD, "url-secret-77x", "env-secret-9f2"):
            assert secret not in text, (secret, text)
        assert "Traceback" not in text and "INTERNALERROR" not in text


def test_the_store_from_the_environment_and_its_conflicts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setenv("RELIABLE_STORE", postgres_url)
    code, text = run_start(pytester, "--reliable-no-cache")
    assert code == pytest.ExitCode.USAGE_ERROR and "--reliable-no-cache with --reliable-store" in text
    code, text = run_start(pytester, "--reliable-cache=mine.sqlite")
    assert code == pytest.ExitCode.USAGE_ERROR and "give one of them" in text
    assert PASSWORD not in text


def test_without_the_extra_the_usage_error_names_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    code, text = run_start(pytester, f"--reliable-store=postgresql://u:{PASSWORD}@127.0.0.1/db")
    assert code == pytest.ExitCode.USAGE_ERROR, text
    assert 'pip install "pytest-reliable[postgres]"' in text and PASSWORD not in text


def test_a_store_written_by_a_newer_plugin_stops_the_run(
    pytester: pytest.Pytester, postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    from pytest_reliable.store.postgres import SCHEMA_VERSION, PostgresStore

    PostgresStore(postgres_url).close()
    postgres_server.execute(database(postgres_url),
                            "UPDATE reliable_meta SET value = %s WHERE key = 'schema_version'",
                            str(SCHEMA_VERSION + 1))
    code, text = run_start(pytester, f"--reliable-store={postgres_url}")
    assert code == pytest.ExitCode.USAGE_ERROR, text
    assert "newer pytest-reliable" in text and "upgrade" in text and PASSWORD not in text


def test_a_store_lost_for_good_is_reported_once_and_nothing_raw_follows_the_summary(
    tmp_path: Path, postgres_server: TemporaryPostgres, postgres_url: str,
) -> None:
    """The server goes away mid-run and does not come back: the run finishes on the answers it
    paid for, says once that they are kept in memory, and prints nothing of the driver's (the
    pool's reconnection attempts) after its summary."""
    calls = {"n": 0}

    def store_dies(messages: Any, params: dict[str, Any]) -> str:
        calls["n"] += 1
        if calls["n"] == 6:
            postgres_server.stop_server()
        return right_option(messages, params)

    try:
        with ScriptedServer(store_dies) as server:
            lost = project(tmp_path, "lost", GATE, count=10)
            code, out = finish(start_host(lost, server, postgres_url, "--reliable-concurrency=2"))
    finally:
        postgres_server.start()
    assert code == 0, out
    assert out.count("kept in memory") == 1, out
    summary_line = [i for i, line in enumerate(out.splitlines()) if " passed" in line][-1]
    after = out.splitlines()[summary_line + 1:]
    for line in after:
        assert "pytest-reliable" in line or not line.strip(), (line, out)
    for raw in ("error connecting", "psycopg", "Traceback", "discarding"):
        assert raw not in out, (raw, out)
    assert PASSWORD not in out


def test_a_frozen_host_costs_the_others_one_deadline_said_while_they_wait(
    tmp_path: Path, postgres_server: TemporaryPostgres, postgres_url: str
) -> None:
    """A host stopped (SIGSTOP) while it holds claims: another host needing the same answers
    says what it waits for and who holds it, and gives up at --reliable-wait-timeout for the
    whole run (one deadline, not one per key), its cells errors naming the frozen host; nothing
    is paid twice."""
    rule = PerPrompt()
    with ScriptedServer(rule, latency=3.0) as server:
        frozen = project(tmp_path, "frozen", GATE, count=6)
        host = start_host(frozen, server, postgres_url, "--reliable-concurrency=4")
        try:
            deadline = time.monotonic() + 120
            while server.requests < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            os.killpg(host.pid, signal.SIGSTOP)  # frozen with 4 claims held, none answered
            waiting = project(tmp_path, "waiting", GATE, count=6)
            started = time.monotonic()
            code, out = finish(start_host(waiting, server, postgres_url,
                                          "--reliable-wait-timeout=14"))
            took = time.monotonic() - started
        finally:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait(10)
    assert code == 1, out
    assert "waiting for 4 answers other processes claimed" in out, out
    assert re.search(r"host \S+ pid \d+ \(idle for \d+ s\) holds 4", out), out
    assert "--reliable-wait-timeout 14 s for the whole run" in out and "may be frozen" in out
    assert took < 60, took  # one deadline for the run: not 14 s per key, nor a claim's patience
    assert rule.paid_twice() == []
    assert "Traceback" not in out and PASSWORD not in out
