"""``--reliable-batch`` for the whole run (SPEC section 13): after collection every reliable test
is planned, the first round of all of them goes as one batch, and the tests run from the store.
Driven as users run it, against the scripted server, which counts its batches and calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_reliable.testing import ScriptedServer
from tests.acceptance.helpers import RELIABLE_YAML, kill_while_the_batch_waits, run_json
from tests.acceptance.test_adaptive import SPACE as ADAPTIVE_SPACE
from tests.acceptance.test_many_machines import questions, right_option
from tests.acceptance.test_money import PRICES, remote, verdicts

BATCH_PRICING = {"models": {"scripted": {**PRICES, "batch": 0.5}}}

THREE_GATES = '''
import asyncio
import warnings

import pytest
from pytest_reliable import Dataset, MultipleChoice

SETUPS = []


@pytest.fixture(scope="module")
def module_resource():
    SETUPS.append("module")
    yield "resource"


@pytest.fixture
def data():
    SETUPS.append("function")
    return Dataset.from_records({first!r})


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.5)
def test_first(reliable, data, module_resource, record_property):
    record_property("dataset", "a")
    warnings.warn(UserWarning("said before evaluate"))
    reliable.evaluate(data, MultipleChoice())


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.5)
def test_second(reliable, module_resource):
    report = reliable.evaluate(Dataset.from_records({second!r}), MultipleChoice())
    assert report.passed


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", min_score=0.5, stop_early=False)
def test_third(reliable):
    async def body():
        await reliable.aevaluate(Dataset.from_records({third!r}), MultipleChoice())

    asyncio.run(body())


def test_plain():
    SETUPS.append("plain")
    assert 1 + 1 == 2


def test_setups_seen_by_the_last_test():
    print("SETUPS", SETUPS)
'''


def write_three(pytester: pytest.Pytester) -> Path:
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_three=THREE_GATES.format(
        first=questions(6, "a "), second=questions(6, "b "), third=questions(6, "c ")))
    path = pytester.path / "prices.yaml"
    path.write_text(json.dumps(BATCH_PRICING))
    return path


def test_one_batch_for_the_first_round_of_every_test(pytester: pytest.Pytester) -> None:
    pricing = write_three(pytester)
    with ScriptedServer(right_option, batch_delay=0.3) as server:
        result, batched = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                   "--reliable-no-cache", "-s", "--junitxml=junit.xml", "-o", "junit_family=legacy",
                                   name="batched.json")
        result.assert_outcomes(passed=5, warnings=1)
        # 3 tests x 6 questions x 2 wrappers: 36 distinct prompts, in one batch
        assert (len(server.batches), server.batch_lines) == (1, 36)
        assert server.paths["/v1/chat/completions"] == 0
        bill = server.billed_usd(**PRICES, batch=0.5)
        live, direct = run_json(pytester, *remote(server, pricing), "--reliable-no-cache",
                                name="direct.json")
        live.assert_outcomes(passed=5, warnings=1)
        assert server.paths["/v1/chat/completions"] == 36
    assert verdicts(batched) == verdicts(direct)
    # each test counts the answers the batch paid for it, as the direct run's tests do
    assert [e["calls"] for e in batched["tests"]] == [e["calls"] for e in direct["tests"]]
    assert batched["cost"]["usd"] == pytest.approx(bill, abs=1e-6)
    assert batched["cost"]["usd"] == pytest.approx(direct["cost"]["usd"] / 2, abs=1e-6)
    said = "reliable first round (batch): 36 requests of 3 tests: 0 from the store, 36 answered"
    result.stdout.fnmatch_lines([f"*{said} by the batch API*"])
    # the planning pass ran the bodies up to evaluate: the function fixture twice, the module
    # fixture once in all, the plain test once (it is not planned)
    assert "SETUPS ['module', 'function', 'function', 'plain']" in result.stdout.str()
    # what the body did before evaluate is reported once, by the test's own run
    assert result.stdout.str().count("UserWarning: said before evaluate") == 1
    assert (pytester.path / "junit.xml").read_text().count('name="dataset"') == 1


def test_a_second_run_sends_nothing(pytester: pytest.Pytester) -> None:
    pricing = write_three(pytester)
    with ScriptedServer(right_option) as server:
        first, _ = run_json(pytester, *remote(server, pricing), "--reliable-batch")
        first.assert_outcomes(passed=5)
        second, report = run_json(pytester, *remote(server, pricing), "--reliable-batch")
        second.assert_outcomes(passed=5)
        assert (len(server.batches), server.batch_lines) == (1, 36)
        assert server.paths["/v1/chat/completions"] == 0
    assert all(e["calls"]["made"] == 0 for e in report["tests"])
    second.stdout.fnmatch_lines(["*first round (batch): 36 requests of 3 tests: 36 from the store*"])


def test_a_run_killed_while_it_waits_for_the_first_round_resumes_it(
    pytester: pytest.Pytester,
) -> None:
    pricing = write_three(pytester)
    with ScriptedServer(right_option, batch_delay=3600) as server:
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                *remote(server, pricing), "--reliable-batch", "--reliable-report=report.json"]
        kill_while_the_batch_waits(pytester.path, args, server)
        assert (len(server.batches), server.batch_lines) == (1, 36)
        server.batch_delay = 0.0
        rerun = subprocess.run(args, check=False, cwd=pytester.path, capture_output=True, text=True,
                               timeout=300)
        assert rerun.returncode == 0, rerun.stdout
        # the same batch was collected: nothing sent, nothing paid again
        assert (len(server.batches), server.batch_lines) == (1, 36)
        assert server.paths["/v1/chat/completions"] == 0 and server.paths["/v1/files"] == 1
    report = json.loads((pytester.path / "report.json").read_text())
    assert [e["calls"]["made"] for e in report["tests"]] == [12, 12, 12]


STOPPING_GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice


@pytest.mark.reliable(space="wrappers", n=40, mode="fixed", min_score=0.3, stop_early=True)
def test_stops(reliable):
    reliable.evaluate(Dataset.from_records({data!r}), MultipleChoice())
'''


def _batched_then_direct(pytester: pytest.Pytester, yaml_text: str, name: str, test_file: str
                         ) -> tuple[ScriptedServer, int, dict[str, Any], dict[str, Any]]:
    """Run one passing gate with --reliable-batch, then directly, both without the cache: the
    server, its first batch's line count, and the two reports."""
    pytester.makefile(".yaml", reliable=yaml_text)
    pytester.makepyfile(**{name: test_file})
    pricing = pytester.path / "prices.yaml"
    pricing.write_text(json.dumps(BATCH_PRICING))
    with ScriptedServer(right_option) as server:
        result, batched = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                   "--reliable-no-cache", name="batched.json")
        result.assert_outcomes(passed=1)
        first_lines = server.batches["batch-1"]["request_counts"]["total"]
        live, direct = run_json(pytester, *remote(server, pricing), "--reliable-no-cache",
                                name="direct.json")
        live.assert_outcomes(passed=1)
    return server, first_lines, batched, direct


def test_early_stopping_batches_only_its_first_stage_first(pytester: pytest.Pytester) -> None:
    """The first round of a test that may stop early is its first stage: the stages it never
    runs are never paid for."""
    server, first_lines, batched, direct = _batched_then_direct(
        pytester, RELIABLE_YAML, "test_stops", STOPPING_GATE.format(data=questions(20)))
    assert verdicts(batched) == verdicts(direct)
    assert batched["tests"][0]["calls"] == direct["tests"][0]["calls"]
    # the first stage: 2 resamplings (40 / 20) of 20 questions, with the canonical pass
    assert first_lines <= 2 * 20 + 20
    assert server.paths["/v1/chat/completions"] == direct["tests"][0]["calls"]["made"]


ADAPTIVE_GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice


@pytest.mark.reliable(space="formats", n=40, mode="fixed", min_worst=0.3, search="adaptive")
def test_adaptive(reliable):
    reliable.evaluate(Dataset.from_records({data!r}), MultipleChoice())
'''


def test_an_adaptive_search_batches_only_its_first_round_first(
    pytester: pytest.Pytester,
) -> None:
    """SPEC 13 with 14: an adaptive test's first round (the plan's first rows, every group, and
    the canonical pass) goes in the batch; later rounds depend on its answers, so rounds the
    search never runs are never paid for. Batched or not, the search makes the same choices."""
    # eight formats (4 wrappers x 2 enumerators), so later rounds ask prompts the first did not
    server, first_lines, batched, direct = _batched_then_direct(
        pytester, ADAPTIVE_SPACE, "test_adaptive", ADAPTIVE_GATE.format(data=questions(20)))
    entry, alone = batched["tests"][0], direct["tests"][0]
    assert entry["search"] == "adaptive" and entry["stopped_early"] is True
    assert verdicts(batched) == verdicts(direct)
    assert entry["calls"] == alone["calls"]
    assert entry["n_resamplings"] == alone["n_resamplings"] < 40
    # the first round: 2 resamplings (40 / 20) of 20 questions and the canonical pass, not the
    # 8 formats x 20 questions the worst case (40 resamplings) would ask
    assert first_lines <= 2 * 20 + 20 < 8 * 20
    assert entry["calls"]["made"] > first_lines  # later rounds went direct, after the batch
    assert server.paths["/v1/chat/completions"] == alone["calls"]["made"]


def test_under_xdist_the_workers_share_one_batch(pytester: pytest.Pytester) -> None:
    """Each worker plans every test (it cannot know which ones it will run); the batch's claims
    let one of them send the batch and the other read its answers from the store."""
    pricing = write_three(pytester)
    with ScriptedServer(right_option, batch_delay=0.5) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                  "-n", "2")
        result.assert_outcomes(passed=5)
        assert (len(server.batches), server.batch_lines) == (1, 36)
        assert server.paths["/v1/chat/completions"] == 0
    assert [e["verdict"] for e in report["tests"]] == ["passed"] * 3


def test_two_hosts_batching_the_same_calls_pay_once(
    tmp_path: Path, postgres_server: Any, postgres_url: str,
) -> None:
    """SPEC 13 with section 10: two hosts sharing a PostgreSQL store start the same gate at once
    with --reliable-batch: one sends the batch (it holds the calls' claims), the other waits for
    it and reads the answers from the store; the server sees one batch and no other call."""
    from tests.acceptance.test_many_machines import GATE, finish, project, start_host

    with ScriptedServer(right_option, batch_delay=2.0) as server:
        hosts = [project(tmp_path, f"host{i}", GATE, count=12) for i in range(2)]
        for host in hosts:
            (host / "prices.yaml").write_text(json.dumps(BATCH_PRICING))
        running = [start_host(h, server, postgres_url, "--reliable-batch",
                              "--reliable-pricing=prices.yaml") for h in hosts]
        outcomes = [finish(host) for host in running]
        assert [code for code, _ in outcomes] == [0, 0], [out for _, out in outcomes]
        # 12 questions x 2 wrappers: 24 distinct prompts, sent once
        assert (len(server.batches), server.batch_lines) == (1, 24)
        assert server.paths["/v1/chat/completions"] == 0
        bill = server.billed_usd(**PRICES, batch=0.5)
    reports = [json.loads((h / "report.json").read_text())["tests"][0] for h in hosts]
    assert sorted(r["calls"]["made"] for r in reports) == [0, 24]
    assert sum(r["cost"]["usd"] for r in reports) == pytest.approx(bill, abs=1e-6)
    assert reports[0]["mean"] == reports[1]["mean"]


BASELINE_GATE = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice


@pytest.mark.reliable(space="wrappers", n=4, mode="fixed", max_regression=0.5, decide="estimate")
def test_compared(reliable):
    reliable.evaluate(Dataset.from_records({data!r}), MultipleChoice())
'''


def test_a_baseline_models_calls_are_in_the_first_round(pytester: pytest.Pytester) -> None:
    """n resamplings are known before any answer, so the baseline's are too: one batch per
    model in the first round, and the comparison equals the direct run's."""
    pytester.makefile(".yaml", reliable=RELIABLE_YAML)
    pytester.makepyfile(test_compared=BASELINE_GATE.format(data=questions(6)))
    pricing = pytester.path / "prices.yaml"
    pricing.write_text(json.dumps(BATCH_PRICING))
    with ScriptedServer(right_option) as server:
        args = [*remote(server, pricing), "--reliable-baseline-model=production",
                "--reliable-no-cache"]
        result, batched = run_json(pytester, *args, "--reliable-batch", name="batched.json")
        result.assert_outcomes(passed=1)
        assert (len(server.batches), server.batch_lines) == (2, 24)  # 12 prompts x 2 models
        assert {b["_lines"][0]["body"]["model"] for b in server.batches.values()} == {
            "scripted", "production"}
        assert server.paths["/v1/chat/completions"] == 0
        live, direct = run_json(pytester, *args, name="direct.json")
        live.assert_outcomes(passed=1)
    [entry], [expected] = batched["tests"], direct["tests"]
    assert entry["baseline"]["difference"] == expected["baseline"]["difference"]
    assert entry["baseline"]["calls"] == expected["baseline"]["calls"]
    assert entry["calls"] == expected["calls"]


# -- nothing paid is lost (issue 32, items 1-4) ----------------------------------------------------
def _gate(pytester: pytest.Pytester) -> Path:
    from tests.acceptance.test_money import write_gate

    return write_gate(pytester, count=6, n=4, pricing=BATCH_PRICING)


def _no_leak(result: Any) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text


@pytest.mark.parametrize(("how", "said"), [
    ("not JSON", "line 1 of its output is not valid JSON"),
    ("no choices", "malformed response: the response has no choices"),
])
def test_a_batch_line_that_cannot_be_read_fails_its_cell_not_the_run(
    pytester: pytest.Pytester, how: str, said: str,
) -> None:
    """Before, one bad line was an INTERNALERROR (exit 3) in this run and every rerun, or (a 200
    without choices) an empty answer graded wrong and replayed for ever; the batch's good
    answers were lost. Now the line's request fails (sent once more, then an error), every good
    line is stored, and the next run pays for that request only."""
    pricing = _gate(pytester)
    bad: dict[str, str] = {}

    def first_line_broken(row: dict[str, Any]) -> str | None:
        if bad.setdefault("key", row["custom_id"]) != row["custom_id"]:
            return None
        if how == "not JSON":
            return json.dumps(row)[:-7]
        del row["response"]["body"]["choices"]
        return json.dumps(row)

    with ScriptedServer(right_option, batch_output=first_line_broken) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-batch")
        _no_leak(result)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.assert_outcomes(failed=1)
        assert report["tests"][0]["verdict"] == "error"
        result.stdout.fnmatch_lines([f"*{said}*"])
        # 12 prompts, then the bad line once more
        assert (len(server.batches), server.batch_lines) == (2, 12 + 1)
        bad["key"] = "answered well from now on"
        rerun, again = run_json(pytester, *remote(server, pricing), "--reliable-batch")
        _no_leak(rerun)
        rerun.assert_outcomes(passed=1)
        assert (len(server.batches), server.batch_lines) == (3, 12 + 1 + 1)
        assert server.paths["/v1/chat/completions"] == 0
    assert again["tests"][0]["calls"]["made"] == 1


def test_a_batch_that_never_finishes_ends_at_the_wait_timeout_and_a_rerun_collects_it(
    pytester: pytest.Pytester,
) -> None:
    """Before, the run waited silently for ever. Now it says what it waits for, ends at
    --reliable-wait-timeout with an error naming the batch, and the rerun collects that batch
    (its id stayed in the store): nothing is paid twice."""
    pricing = _gate(pytester)
    with ScriptedServer(right_option, batch_delay=3600) as server:
        result, report = run_json(pytester, *remote(server, pricing), "--reliable-batch",
                                  "--reliable-wait-timeout=2")
        _no_leak(result)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.assert_outcomes(failed=1)
        # the progress line (a log: said at once, then every minute), then the round's end
        waiting = ("*reliable first round (batch): waiting for batch batch-1 (in_progress): "
                   "0/12 answered, 0 failed; waited * s of 2 s (--reliable-wait-timeout)")
        ended = ("*first round (batch): 12 requests of 1 tests: 0 from the store, 0 answered by "
                 "the batch API, 12 not answered (batch batch-1 did not finish within "
                 "--reliable-wait-timeout 2 s: it is in_progress, 0/12 answered, 0 failed.*")
        result.stdout.fnmatch_lines([waiting, ended])
        assert "a rerun collects them without paying again" in result.stdout.str()
        [entry] = report["tests"]
        assert entry["verdict"] == "error"
        assert len(server.batches) == 1
        server.batch_delay = 0.0
        rerun, again = run_json(pytester, *remote(server, pricing), "--reliable-batch")
        rerun.assert_outcomes(passed=1)
        assert (len(server.batches), server.batch_lines) == (1, 12)
        assert server.paths["/v1/files"] == 1 and server.paths["/v1/chat/completions"] == 0
    assert again["tests"][0]["calls"]["made"] == 12


def test_a_run_killed_before_it_learnt_its_batchs_id_does_not_pay_twice(
    pytester: pytest.Pytester,
) -> None:
    """Before, the id was kept only once the creation returned: a run killed in between sent the
    batch again on its rerun. Now the batch carries a tag the store knows before it exists, and
    the rerun finds it by that tag among the provider's batches."""
    from pytest_reliable.testing import Fault

    pricing = _gate(pytester)
    # the batch is made, and its creator waits for the answer until it is killed
    with ScriptedServer(right_option, batch_create_faults=[Fault("slow", delay=3600)]) as server:
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                *remote(server, pricing), "--reliable-batch", "--reliable-report=report.json"]
        kill_while_the_batch_waits(pytester.path, args, server)
        assert (len(server.batches), server.batch_lines) == (1, 12)
        rerun = subprocess.run(args, check=False, cwd=pytester.path, capture_output=True,
                               text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stdout
        assert (len(server.batches), server.batch_lines) == (1, 12)  # found, not sent again
        assert server.paths["LIST batches"] >= 1
        assert server.paths["/v1/files"] == 1 and server.paths["/v1/chat/completions"] == 0
    entry = json.loads((pytester.path / "report.json").read_text())["tests"][0]
    assert entry["verdict"] == "passed" and entry["calls"]["made"] == 12
