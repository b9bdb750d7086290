"""The batch transport (`pytest_reliable.calls.batch`) under a runner, against the scripted
server's batch API: nothing paid is lost (issue 32, items 1-4). A line of the output that cannot be
read fails its request and no other; a body without an answer is the same error on both paths; a
batch that never finishes ends at the deadline with its id kept; a batch whose id was never learnt
is found by its tag instead of being paid for twice."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import pytest_reliable.calls.claiming as claiming_module
from pytest_reliable.calls.batch import SENDING, TAG_NAME, TAG_SENT, BatchTransport, batch_name
from pytest_reliable.calls.cache import ResponseCache
from pytest_reliable.calls.requests import ProgressEvent, Request, number_samples
from pytest_reliable.calls.runner import Runner
from pytest_reliable.models.base import ModelCallError, SamplingParams
from pytest_reliable.models.openai_compat import OpenAICompatibleModel, response_from_body
from pytest_reliable.store import Store
from pytest_reliable.testing import ScriptedServer

P0 = SamplingParams(temperature=0.0, max_tokens=8)


def reqs(n: int) -> list[Request]:
    return number_samples(
        [([{"role": "user", "content": f"q {i}"}], P0) for i in range(n)], "t::batch")


@contextmanager
def batching(tmp_path: Path, **server: Any) -> Iterator[tuple[ScriptedServer, Any, Store]]:
    """A scripted server with its batch API, the adapter on it, a store in ``tmp_path``."""
    with ScriptedServer(**server) as scripted:
        model = OpenAICompatibleModel("scripted", scripted.base_url, api_key="sk-scripted")
        store = ResponseCache.open(tmp_path / "cache.sqlite")
        try:
            yield scripted, model, store
        finally:
            store.close()


def batch_runner(model: Any, store: Store | None, *, wait_timeout: float = 60.0,
                 on_progress: Callable[[ProgressEvent], None] | None = None) -> Runner:
    transport = BatchTransport(model, store, wait_timeout=wait_timeout, poll_first_s=0.01,
                               poll_max_s=0.05)
    return Runner(model, store, timeout=5.0, transport=transport, on_progress=on_progress)


def first_name(model: Any, runner: Runner, requests: list[Request]) -> str:
    """The store's name of the first batch of ``requests``."""
    return batch_name([runner.key(r) for r in requests], model.identity, 0)


# -- item 1: a line that cannot be read is its request's failure; every good line is kept --------
def _broken(how: str) -> Callable[[dict[str, Any]], str]:
    def rewrite(row: dict[str, Any]) -> str:
        body = row["response"]["body"]
        if how == "not JSON":
            return json.dumps(row)[:-7]  # cut short: its custom_id is still readable
        if how == "not an object":
            return json.dumps([row])
        if how == "status not a number":
            row["response"]["status_code"] = "OK"
        elif how == "no choices":
            del body["choices"]
        elif how == "empty choices":
            body["choices"] = []
        elif how == "choice not an object":
            body["choices"] = ["A"]
        elif how == "no content":
            body["choices"][0]["message"]["content"] = None
        return json.dumps(row)

    return rewrite


BAD_LINES = {
    "not JSON": "line 1 of its output is not valid JSON",
    "not an object": "line 1 of its output is not a JSON object",
    "status not a number": "line 1 of its output has no numeric status_code (got 'OK')",
    "no choices": "malformed response: the response has no choices (None)",
    "empty choices": "malformed response: the response has no choices ([])",
    "choice not an object": "malformed response: its first choice is 'A', not an object",
    "no content": "malformed response: its message has no text content (None, finish_reason "
                  "'stop')",
}


@pytest.mark.parametrize("how", list(BAD_LINES))
def test_a_line_that_cannot_be_read_fails_its_request_and_every_good_line_is_kept(
    tmp_path: Path, how: str,
) -> None:
    rewrite = _broken(how)
    bad: dict[str, str] = {}

    def first_line_broken(row: dict[str, Any]) -> str | None:
        """The first request's line, every time it is answered."""
        if bad.setdefault("key", row["custom_id"]) == row["custom_id"]:
            return rewrite(row)
        return None

    with batching(tmp_path, batch_output=first_line_broken) as (server, model, store):
        requests = reqs(4)
        runner = batch_runner(model, store)
        results = runner.run(requests)
        assert [r.status for r in results] == ["error", "ok", "ok", "ok"]
        # sent once more in a follow-up batch, then an error for that cell only
        assert (len(server.batches), server.batch_lines) == (2, 4 + 1)
        assert BAD_LINES[how] in (results[0].error or ""), results[0].error
        assert "batch batch-2" in (results[0].error or "")
        assert store.count() == 3  # the good lines are stored
        assert store.pending_batch(first_name(model, runner, requests)) is None
        # the next run pays for the bad line only (the batch it came in is not resumed)
        bad["key"] = "none any more"
        again = batch_runner(model, store).run(requests)
        assert [r.status for r in again] == ["ok"] * 4
        assert [r.cached for r in again] == [False, True, True, True]
        assert (len(server.batches), server.batch_lines) == (3, 4 + 1 + 1)


def test_a_line_that_names_no_request_fails_nothing_else(tmp_path: Path) -> None:
    """Garbage between the lines, and a line for another request: every request of the batch
    is answered from its own line."""
    def garbage_around(row: dict[str, Any]) -> str:
        other = {**row, "custom_id": "someone else's"}
        return "\n".join(["not json at all", "42", json.dumps(other), json.dumps(row)])

    with batching(tmp_path, batch_output=garbage_around) as (server, model, store):
        results = batch_runner(model, store).run(reqs(3))
    assert [r.status for r in results] == ["ok"] * 3
    assert (len(server.batches), server.batch_lines) == (1, 3)


def test_a_line_failed_once_is_answered_by_the_follow_up_batch(tmp_path: Path) -> None:
    broken: set[str] = set()

    def once(row: dict[str, Any]) -> str | None:
        if broken:
            return None
        broken.add(row["custom_id"])
        return "{"

    with batching(tmp_path, batch_output=once) as (server, model, store):
        results = batch_runner(model, store).run(reqs(4))
    assert [r.status for r in results] == ["ok"] * 4
    assert (len(server.batches), server.batch_lines) == (2, 4 + 1)


# -- item 2: one reading of a response body, for both paths -------------------------------------
CHAT = {"choices": [{"message": {"role": "assistant", "content": "B"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1}}


@pytest.mark.parametrize(("body", "problem"), [
    (None, "the response is NoneType, not a JSON object"),
    ([CHAT], "the response is list, not a JSON object"),
    ({}, "the response has no choices (None)"),
    ({"choices": []}, "the response has no choices ([])"),
    ({"choices": {"0": {}}}, "the response has no choices ({'0': {}})"),
    ({"choices": [None]}, "its first choice is None, not an object"),
    ({"choices": [{"text": "B"}]}, "its first choice has no message (None)"),
    ({"choices": [{"message": {"content": None}, "finish_reason": "length"}]},
     "its message has no text content (None, finish_reason 'length')"),
    ({"choices": [{"message": {"content": 3}}]}, "its message has no text content (3,"),
])
def test_a_body_without_an_answer_is_a_retryable_error_never_an_empty_answer(
    body: Any, problem: str,
) -> None:
    with pytest.raises(ModelCallError, match="malformed response") as raised:
        response_from_body(body, chat=True)
    assert problem in str(raised.value)
    assert raised.value.retryable


def test_a_body_is_read_as_the_api_sent_it() -> None:
    answer = response_from_body(CHAT, chat=True)
    assert (answer.text, answer.prompt_tokens, answer.completion_tokens) == ("B", 7, 1)
    assert answer.extra == {}
    refused = {"choices": [{"message": {"content": None, "refusal": "I can't help with that"}}]}
    assert response_from_body(refused, chat=True).text == "I can't help with that"
    odd_usage = {**CHAT, "usage": {"prompt_tokens": "7", "completion_tokens": -1,
                                   "prompt_tokens_details": {"cached_tokens": 5}}}
    kept = response_from_body(odd_usage, chat=True, batch=True)
    assert (kept.text, kept.prompt_tokens, kept.completion_tokens) == ("B", None, None)
    assert kept.extra == {"batch": True, "cached_prompt_tokens": 5}
    text = {"choices": [{"text": "C", "logprobs": {"tokens": ["C"], "token_logprobs": [-0.5],
                                                   "top_logprobs": [{"C": -0.5}]}}]}
    completion = response_from_body(text, chat=False)
    assert completion.text == "C"
    assert completion.logprobs == [{"token": "C", "logprob": -0.5, "top": {"C": -0.5}}]
    with pytest.raises(ModelCallError, match="its first choice has no text"):
        response_from_body({"choices": [{"message": {"content": "C"}}]}, chat=False)


def test_a_200_without_choices_is_the_same_error_on_the_direct_path_and_in_a_batch(
    tmp_path: Path,
) -> None:
    """Before, the batch path stored an empty answer (graded wrong, replayed for ever) where the
    direct path failed the call."""
    expected = "malformed response: the response has no choices ([])"
    with ScriptedServer(faults=["no_choices"] * 10) as server:
        model = OpenAICompatibleModel("scripted", server.base_url, api_key="sk-scripted")
        [direct] = Runner(model, None, max_retries=2, backoff_base=0.01,
                          backoff_max=0.02).run(reqs(1))
    assert direct.status == "error" and direct.attempts == 3  # retried, as a glitch
    assert direct.error == f"{expected} (gave up after 3 attempts)"
    with batching(tmp_path, batch_output=_broken("empty choices")) as (server, model, store):
        [batched] = batch_runner(model, store).run(reqs(1))
        assert store.count() == 0
    assert batched.status == "error" and (batched.error or "").endswith(expected)


# -- item 3: waiting has a deadline, and says what it waits for ---------------------------------
def test_a_batch_that_never_finishes_ends_at_the_deadline_and_a_rerun_collects_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[ProgressEvent] = []
    with batching(tmp_path, batch_delay=3600) as (server, model, store):
        requests = reqs(4)
        runner = batch_runner(model, store, wait_timeout=0.5, on_progress=events.append)
        start = time.monotonic()
        with caplog.at_level(logging.INFO, logger="pytest_reliable"):
            results = runner.run(requests)
        assert time.monotonic() - start < 10
        assert [r.status for r in results] == ["error"] * 4
        error = results[0].error or ""
        assert error.startswith("batch batch-1 did not finish within --reliable-wait-timeout "
                                "0.5 s: it is in_progress, 0/4 answered, 0 failed."), error
        assert "its id is kept in the store, so a rerun collects them without paying again" \
            in error
        # said while it waited: on the progress line and in the log
        assert any("waiting for batch batch-1 (in_progress): 0/4 answered" in (e.note or "")
                   for e in events)
        assert "waiting for batch batch-1 (in_progress)" in caplog.text
        assert "did not finish within --reliable-wait-timeout" in caplog.text
        # not sent again, not cancelled: the id stays for the rerun
        assert len(server.batches) == 1
        assert store.pending_batch(first_name(model, runner, requests)) == "batch-1"
        server.batch_delay = 0.0
        again = batch_runner(model, store).run(requests)
        assert [r.status for r in again] == ["ok"] * 4 and not any(r.cached for r in again)
        assert (len(server.batches), server.batch_lines) == (1, 4)
        assert store.pending_batch(first_name(model, runner, requests)) is None


def test_without_a_store_the_deadline_says_a_rerun_sends_again(tmp_path: Path) -> None:
    with ScriptedServer(batch_delay=3600) as server:
        model = OpenAICompatibleModel("scripted", server.base_url, api_key="sk-scripted")
        [result] = batch_runner(model, None, wait_timeout=0.2).run(reqs(1))
    assert "keeps its id nowhere (no persistent store): a rerun sends it again" in (
        result.error or "")


def test_waiting_for_another_processs_batch_ends_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process holds the claims of every request (its batch in flight) and never
    answers: the wait ends at --reliable-wait-timeout, each request an error saying so."""
    monkeypatch.setattr(claiming_module, "claim_batch_keys", lambda store, keys: ([], {}))
    events: list[ProgressEvent] = []
    with batching(tmp_path) as (server, model, store):
        runner = batch_runner(model, store, wait_timeout=0.3, on_progress=events.append)
        results = asyncio.run(asyncio.wait_for(runner.arun(reqs(3)), 30))
        assert not server.batches
    assert [r.status for r in results] == ["error"] * 3
    assert "did not answer it within --reliable-wait-timeout 0.3 s" in (results[0].error or "")
    assert any("waiting for 3 answers another process or host is paying for" in (e.note or "")
               for e in events)


# -- item 4: a batch whose id was never learnt is found by its tag ------------------------------
@pytest.mark.parametrize("fault", ["drop", "500"])
def test_a_batch_whose_creation_answer_was_lost_is_found_by_its_tag(
    tmp_path: Path, fault: str,
) -> None:
    with batching(tmp_path, batch_create_faults=[fault]) as (server, model, store):
        requests = reqs(4)
        runner = batch_runner(model, store)
        results = runner.run(requests)
        assert [r.status for r in results] == ["ok"] * 4
        assert server.fault_counts[f"batch create {fault}"] == 1
        assert (len(server.batches), server.batch_lines) == (1, 4)  # not sent twice
        assert server.paths["LIST batches"] >= 1
        metadata = server.batches["batch-1"]["metadata"]
        assert metadata[TAG_NAME] == first_name(model, runner, requests)
        assert len(metadata[TAG_SENT]) == 32


def _sent_before(server: ScriptedServer, store: Store, name: str, requests: dict[str, Request],
                 model: OpenAICompatibleModel, tag: str) -> None:
    """What a run killed between creating a batch and learning its id leaves: the store's
    sending mark, and the batch at the provider carrying its tag."""
    lines = [model.batch_line(key, r.message_dicts(), r.params) for key, r in requests.items()]
    server.files["file-0"] = "".join(json.dumps(line) + "\n" for line in lines).encode()
    server.create_batch({"input_file_id": "file-0", "endpoint": "/v1/chat/completions",
                         "metadata": {TAG_NAME: name, TAG_SENT: tag}})
    store.keep_batch(name, f"{SENDING}{tag}:{time.time():.0f}")


def test_a_rerun_finds_the_batch_a_killed_run_created_and_collects_it(tmp_path: Path) -> None:
    with batching(tmp_path) as (server, model, store):
        requests = reqs(4)
        runner = batch_runner(model, store)
        name = first_name(model, runner, requests)
        _sent_before(server, store, name, {runner.key(r): r for r in requests}, model, "t" * 32)
        for other in range(3):  # later batches of others, listed first
            server.create_batch({"input_file_id": "file-0", "metadata": {TAG_SENT: f"{other}"}})
        results = runner.run(requests)
        assert [r.status for r in results] == ["ok"] * 4
        assert len(server.batches) == 4 and server.paths["/v1/files"] == 0
        assert runner.transport is not None and runner.transport.batches_resumed == 1
        assert store.pending_batch(name) is None


def test_a_sending_mark_without_its_batch_sends_it(tmp_path: Path) -> None:
    """The earlier run was stopped before its batch existed: nothing is owed, it is sent."""
    with batching(tmp_path) as (server, model, store):
        requests = reqs(2)
        runner = batch_runner(model, store)
        name = first_name(model, runner, requests)
        store.keep_batch(name, f"{SENDING}{'x' * 32}:{time.time():.0f}")
        results = runner.run(requests)
        assert [r.status for r in results] == ["ok"] * 2
        assert (len(server.batches), server.paths["LIST batches"]) == (1, 1)


def test_a_resumed_batch_the_provider_does_not_know_is_sent_anew(tmp_path: Path) -> None:
    with batching(tmp_path) as (server, model, store):
        requests = reqs(2)
        runner = batch_runner(model, store)
        store.keep_batch(first_name(model, runner, requests), "batch-that-never-was")
        results = runner.run(requests)
        assert [r.status for r in results] == ["ok"] * 2
        assert len(server.batches) == 1


def test_a_lost_creation_that_cannot_be_looked_for_is_not_sent_again(tmp_path: Path) -> None:
    """The answer to the creation is lost and the batches cannot be listed: whether the batch
    exists is unknown, so its requests fail (not sent twice); the rerun finds it by its tag."""
    listing = {"fails": True}

    def no_listing(route: str) -> str | None:
        return "503" if route == "list" and listing["fails"] else None

    with batching(tmp_path, batch_create_faults=["drop"],
                  batch_api_faults=no_listing) as (server, model, store):
        requests = reqs(3)
        results = batch_runner(model, store).run(requests)
        assert [r.status for r in results] == ["error"] * 3
        assert "the batch may have been created" in (results[0].error or "")
        assert "a rerun looks for it again and collects it" in (results[0].error or "")
        assert len(server.batches) == 1
        listing["fails"] = False
        again = batch_runner(model, store).run(requests)
        assert [r.status for r in again] == ["ok"] * 3
        assert (len(server.batches), server.batch_lines) == (1, 3)


def test_passing_failures_of_the_batch_api_are_tried_again(tmp_path: Path) -> None:
    """A 503, a 429 or a dropped connection while uploading, looking at the batch or reading
    its output: looked at again, and the batch is paid for once."""
    failing = {"upload": ["drop"], "retrieve": ["503", "drop", "429"], "content": ["500", "drop"]}

    def once_each(route: str) -> str | None:
        return failing[route].pop(0) if failing.get(route) else None

    with batching(tmp_path, batch_api_faults=once_each) as (server, model, store):
        results = batch_runner(model, store).run(reqs(4))
        assert [r.status for r in results] == ["ok"] * 4
        assert (len(server.batches), server.batch_lines) == (1, 4)
        assert sum(server.fault_counts.values()) == 6


def test_a_batch_that_cannot_be_looked_at_keeps_its_id(tmp_path: Path) -> None:
    """Not a passing failure (here 401 while it is polled): the requests fail, and the id stays
    for the rerun, which collects the batch."""
    failing = {"retrieve": ["401"]}

    def once(route: str) -> str | None:
        return failing[route].pop(0) if failing.get(route) else None

    with batching(tmp_path, batch_api_faults=once) as (server, model, store):
        requests = reqs(2)
        runner = batch_runner(model, store)
        results = runner.run(requests)
        assert [r.status for r in results] == ["error"] * 2
        assert (results[0].error or "").startswith("batch batch-1 could not be looked at")
        assert store.pending_batch(first_name(model, runner, requests)) == "batch-1"
        again = batch_runner(model, store).run(requests)
        assert [r.status for r in again] == ["ok"] * 2
        assert (len(server.batches), server.batch_lines) == (1, 2)


def test_another_host_finds_the_batch_a_killed_host_created_through_postgresql(
    postgres_url: str,
) -> None:
    """SPEC 10 with 13: host A is stopped while its batch's creation is answered (the batch
    exists, A never learns its id); host B, sharing the PostgreSQL store, finds the batch by the
    tag A's sending mark holds in the store, and collects it: one batch, paid once."""
    from pytest_reliable.calls.loop import call_loop
    from pytest_reliable.store.postgres import PostgresStore
    from pytest_reliable.testing import Fault

    requests = reqs(4)
    with ScriptedServer(batch_create_faults=[Fault("slow", delay=3600)]) as server:
        model = OpenAICompatibleModel("scripted", server.base_url, api_key="sk-scripted")
        host_a = PostgresStore(postgres_url)
        try:
            running = asyncio.run_coroutine_threadsafe(
                batch_runner(model, host_a).arun(requests), call_loop())
            deadline = time.monotonic() + 30
            while not server.batches and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)
            running.cancel()  # host A stops while its creation is being answered
        finally:
            host_a.close()
        host_b = PostgresStore(postgres_url)
        try:
            results = batch_runner(model, host_b).run(requests)
            assert [r.status for r in results] == ["ok"] * 4
            assert (len(server.batches), server.batch_lines) == (1, 4)
            assert server.paths["LIST batches"] == 1
        finally:
            host_b.close()


# -- the progress line of a wait ----------------------------------------------------------------
class _Reporter:
    def __init__(self, isatty: bool) -> None:
        self.isatty = isatty
        self.lines: list[str] = []
        self.currentfspath: Any = None

    def ensure_newline(self) -> None:
        pass

    def write_line(self, line: str) -> None:
        self.lines.append(line)

    def rewrite(self, line: str, erase: bool = False) -> None:
        self.lines.append(line)


def _progress_line(isatty: bool) -> tuple[Any, _Reporter]:
    from types import SimpleNamespace

    from pytest_reliable.plugin.progress import ProgressLine

    reporter = _Reporter(isatty)
    plugins = {"terminalreporter": reporter}
    config = SimpleNamespace(
        option=SimpleNamespace(verbose=0),
        pluginmanager=SimpleNamespace(get_plugin=plugins.get),
        get_terminal_writer=lambda: SimpleNamespace(fullwidth=60))
    return ProgressLine(config, interval=0.0, log_interval=10.0), reporter  # type: ignore[arg-type]


NOTE = ("waiting for batch batch_6790f2a4c8 (in_progress): 12/36 answered, 0 failed; waited "
        "2 min 05 s of 30 min 00 s (--reliable-wait-timeout)")


def test_a_log_says_what_a_wait_waits_for_at_once_then_every_minute() -> None:
    line, reporter = _progress_line(isatty=False)
    line("reliable first round (batch)", ProgressEvent(12, 36, 0, 12, 0, NOTE))
    line("reliable first round (batch)", ProgressEvent(13, 36, 0, 13, 0, NOTE))  # too soon
    line("reliable first round (batch)", ProgressEvent(36, 36, 0, 36, 0, NOTE))  # it ended
    # the whole line, however narrow the terminal: what is waited for is at its end
    assert reporter.lines == [f"reliable reliable first round (batch): {NOTE}"] * 2


def test_a_terminal_rewrites_the_wait_in_one_line() -> None:
    line, reporter = _progress_line(isatty=True)
    line("reliable first round (batch)", ProgressEvent(12, 36, 0, 12, 0, NOTE))
    assert reporter.lines == [f"reliable reliable first round (batch): {NOTE}"[:59]]


def test_a_run_stopped_during_the_follow_up_batch_keeps_the_first_batchs_answers(
    tmp_path: Path,
) -> None:
    """The first batch's answers are stored as soon as it is collected, not after its follow-up
    batch: a run stopped meanwhile kept none of them (the first batch forgotten, so the rerun
    paid for them again). The rerun collects the follow-up batch it left."""
    from pytest_reliable.calls.loop import call_loop

    bad: dict[str, str] = {}
    holder: dict[str, ScriptedServer] = {}

    def first_line_broken_then_stuck(row: dict[str, Any]) -> str | None:
        holder["server"].batch_delay = 3600  # the follow-up batch will not finish
        if bad.setdefault("key", row["custom_id"]) == row["custom_id"]:
            return "{"
        return None

    with batching(tmp_path, batch_output=first_line_broken_then_stuck) as (server, model, store):
        holder["server"] = server
        requests = reqs(4)
        running = asyncio.run_coroutine_threadsafe(batch_runner(model, store).arun(requests),
                                                   call_loop())
        deadline = time.monotonic() + 30
        while len(server.batches) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        running.cancel()  # stopped while it waits for the follow-up batch
        assert store.count() == 3
        server.batch_delay = 0.0
        bad["key"] = "answered well from now on"
        again = batch_runner(model, store).run(requests)
        assert [r.status for r in again] == ["ok"] * 4
        assert [r.cached for r in again] == [False, True, True, True]
        assert (len(server.batches), server.batch_lines) == (2, 4 + 1)  # nothing paid twice


def test_a_batchs_answers_are_stored_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """All or none: a run killed while it stored them one by one left some stored, and the
    rerun, asking for the rest only (another set of requests, so another batch name), did not
    find the batch and paid for the rest again (the fault load found 15 keys paid twice)."""
    with batching(tmp_path) as (_server, model, store):
        writes: list[int] = []
        puts: list[str] = []
        write_rows, put = store.write_rows, store.put
        monkeypatch.setattr(store, "write_rows", lambda rows: writes.append(len(rows))
                            or write_rows(rows))
        monkeypatch.setattr(store, "put", lambda key, *a, **kw: puts.append(key)
                            or put(key, *a, **kw))
        results = batch_runner(model, store).run(reqs(5))
        assert [r.status for r in results] == ["ok"] * 5
        assert (writes, puts) == ([5], [])
        assert store.count() == 5
