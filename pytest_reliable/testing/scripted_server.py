"""A scripted test double of an OpenAI-compatible server, for what a real model can't do on demand.

It answers by a rule the test gives (``rule(messages_or_prompt, params) -> str``) and injects
faults when asked: 429 with Retry-After, 500, 503, 401, 403, a response slower than the client's
timeout, a dropped connection (socket closed without a response), malformed JSON. An error fault
with ``echo_key=True`` copies the request's Authorization header into its body, as careless
servers do (to test that the key never reaches a report). It runs a
`ThreadingHTTPServer` on 127.0.0.1 at a free port in a background thread, so concurrent requests
are served concurrently. It counts what it received so tests can assert on it, and the tokens
it billed (``usage`` of every answer delivered: `billed_usd` is the server's own bill).

It also serves OpenAI's batch API (``/v1/files`` and ``/v1/batches``, SPEC section 13): an uploaded
JSONL file of requests becomes a batch that completes ``batch_delay`` seconds after it was created
(looked at when polled), answers each line by the same rule, bills its tokens apart
(``billed_batch``), fails the lines ``batch_failures(line)`` picks (in the error file), and with
``batch_expires`` ends ``expired`` with only the first half of its lines answered. As OpenAI's, a
batch keeps the ``metadata`` it was created with, and ``GET /v1/batches`` lists the batches newest
first, a page of ``limit`` after the id ``after``. Faults of the batch API: ``batch_output(row)``
may rewrite a line of an output file (return its text: malformed JSON, a body without choices),
and ``batch_create_faults`` (a queue, like ``faults``) makes a batch creation fail *after* the
batch was made, as a lost answer does: ``"drop"`` closes the connection, ``"500"`` answers 500,
``"slow"`` answers after ``Fault.delay`` seconds. ``batch_api_faults(route)`` fails a request of
the batch API before it is served (``route``: "upload", "retrieve", "content" or "list"; an
error status or ``"drop"``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_reliable.models.base import Message

Rule = Callable[[list[Message] | str, dict[str, Any]], str]


@dataclass(frozen=True)
class Fault:
    """One injected fault. ``kind``: "429", "500", "503", "401", "403", "400", "slow", "drop",
    "malformed", "no_choices" (a 200 whose body has an empty ``choices``)."""

    kind: str
    retry_after: float | None = None
    delay: float = 0.0
    echo_key: bool = False


FaultSpec = Fault | str | None
FaultPicker = Callable[[int, dict[str, Any]], FaultSpec]


def echo_rule(messages: list[Message] | str, params: dict[str, Any]) -> str:
    if isinstance(messages, str):
        return messages[-40:]
    return messages[-1]["content"][-40:] if messages else ""


class ScriptedServer:
    def __init__(
        self,
        rule: Rule = echo_rule,
        *,
        faults: Sequence[FaultSpec] | FaultPicker | None = None,
        latency: float = 0.0,
        logprobs: Callable[[str], list[float]] | None = None,
        model_name: str = "scripted",
        cached_prompt_tokens: Callable[[dict[str, Any]], int] | None = None,
        batch_delay: float = 0.0,
        batch_failures: Callable[[dict[str, Any]], bool] | None = None,
        batch_expires: bool = False,
        batch_output: Callable[[dict[str, Any]], str | None] | None = None,
        batch_create_faults: Sequence[FaultSpec] = (),
        batch_api_faults: Callable[[str], FaultSpec] | None = None,
    ) -> None:
        """``cached_prompt_tokens(body)``: prompt tokens the server says it served from its prompt
        cache (``usage.prompt_tokens_details.cached_tokens``); default none."""
        self.rule = rule
        self.cached_prompt_tokens = cached_prompt_tokens
        self.billed: Counter[str] = Counter()
        """Tokens of the answers delivered: ``prompt``, ``completion``, ``cached_prompt``."""
        self.billed_batch: Counter[str] = Counter()
        """The same, of the answers delivered through batches."""
        self.batch_delay = batch_delay
        self.batch_failures = batch_failures
        self.batch_expires = batch_expires
        self.batch_output = batch_output
        """``batch_output(row)``: the text of an output file's line (None: the row as JSON)."""
        self.batch_create_faults: list[FaultSpec] = list(batch_create_faults)
        """Consumed one per batch creation: the batch is made, then its answer fails."""
        self.batch_api_faults = batch_api_faults
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_lines = 0
        """Request lines received in batches (every batch created counts its lines)."""
        self.latency = latency
        self.logprobs = logprobs
        self.model_name = model_name
        self._lock = threading.Lock()
        self._picker: FaultPicker | None = None
        self._queue: list[FaultSpec] = []
        self.set_faults(faults)
        self.requests = 0
        self.completed = 0
        self.fault_counts: Counter[str] = Counter()
        self.paths: Counter[str] = Counter()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- configuration -------------------------------------------------------------------------
    def set_faults(self, faults: Sequence[FaultSpec] | FaultPicker | None) -> None:
        """A list/queue consumed one per request (None = a normal answer), or a callable
        ``(request_number, body) -> fault | None`` deciding per request."""
        with self._lock:
            if callable(faults):
                self._picker, self._queue = faults, []
            else:
                self._picker, self._queue = None, list(faults or [])

    def _next_fault(self, n: int, body: dict[str, Any]) -> Fault | None:
        with self._lock:
            if self._picker is not None:
                f = self._picker(n, body)
            elif self._queue:
                f = self._queue.pop(0)
            else:
                f = None
        if isinstance(f, str):
            f = Fault(f, retry_after=0.01 if f in ("429", "503") else None)
        return f

    def answer(self, path: str, body: dict[str, Any], n: int) -> dict[str, Any] | None:
        """The response body to a completions or chat-completions request (None: not found)."""
        params = {k: v for k, v in body.items() if k not in ("messages", "prompt")}
        if path.endswith("/chat/completions"):
            messages = body.get("messages", [])
            text = self.rule(messages, params)
            prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
            payload: dict[str, Any] = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", self.model_name),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
            }
        elif path.endswith("/completions"):
            prompt = body.get("prompt", "")
            text = self.rule(prompt, params)
            prompt_tokens = len(str(prompt).split())
            tokens = text.split(" ") if text else []
            lps = self.logprobs(text) if self.logprobs else [-0.1] * len(tokens)
            logprobs = None
            if body.get("logprobs") is not None:
                logprobs = {
                    "tokens": tokens,
                    "token_logprobs": lps[: len(tokens)],
                    "top_logprobs": [{t: lp} for t, lp in zip(tokens, lps)],
                    "text_offset": [0] * len(tokens),
                }
            payload = {
                "id": f"cmpl-{n}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model", self.model_name),
                "choices": [
                    {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "stop"}
                ],
            }
        else:
            return None
        completion_tokens = len(text.split())
        payload["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if self.cached_prompt_tokens is not None:
            cached = min(prompt_tokens, int(self.cached_prompt_tokens(body)))
            payload["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        return payload

    def bill(self, payload: dict[str, Any], *, batch: bool = False) -> None:
        """Count an answer delivered and its tokens (``batch``: in ``billed_batch``)."""
        usage = payload.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        with self._lock:
            self.completed += 1
            counter = self.billed_batch if batch else self.billed
            counter.update(prompt=usage.get("prompt_tokens", 0),
                           completion=usage.get("completion_tokens", 0), cached_prompt=cached)

    # -- the batch API -------------------------------------------------------------------------
    def upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        """``POST /v1/files`` (multipart: ``purpose`` and ``file``)."""
        from email.parser import BytesParser
        from email.policy import default

        message = BytesParser(policy=default).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        content, purpose, filename = b"", "batch", "batch.jsonl"
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True) or b""
            if name == "file":
                content = bytes(data)
                filename = str(part.get_filename() or filename)
            elif name == "purpose":
                purpose = bytes(data).decode()
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = content
        return {"id": file_id, "object": "file", "bytes": len(content),
                "created_at": int(time.time()), "filename": filename, "purpose": purpose,
                "status": "processed"}

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """``POST /v1/batches``: the batch of an uploaded file's lines (answered when polled)."""
        content = self.files.get(str(body.get("input_file_id")))
        if content is None:
            return None
        lines = [json.loads(line) for line in content.decode().split("\n") if line.strip()]
        metadata = body.get("metadata")
        with self._lock:
            batch_id = f"batch-{len(self.batches) + 1}"
            self.batch_lines += len(lines)
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body.get("endpoint"),
                "metadata": dict(metadata) if isinstance(metadata, dict) else None,
                "input_file_id": body.get("input_file_id"),
                "completion_window": body.get("completion_window", "24h"),
                "status": "in_progress", "created_at": int(time.time()),
                "output_file_id": None, "error_file_id": None, "errors": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "_lines": lines, "_started": time.monotonic(),
            }
        return self.poll_batch(batch_id)

    def list_batches(self, limit: int = 20, after: str | None = None) -> dict[str, Any]:
        """``GET /v1/batches``: newest first, ``limit`` of them after the batch ``after``."""
        with self._lock:
            ids = list(reversed(self.batches))
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        page = [self.poll_batch(batch_id) for batch_id in ids[:max(1, min(limit, 100))]]
        data = [batch for batch in page if batch is not None]
        return {"object": "list", "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": len(ids) > len(data)}

    def poll_batch(self, batch_id: str) -> dict[str, Any] | None:
        """``GET /v1/batches/{id}``: finished once ``batch_delay`` has passed since creation."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            due = (batch["status"] == "in_progress"
                   and time.monotonic() - batch["_started"] >= self.batch_delay)
            if due:
                batch["status"] = "finalizing"  # one poller answers the lines
        if due:
            self._finish(batch)
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _finish(self, batch: dict[str, Any]) -> None:
        lines: list[dict[str, Any]] = batch["_lines"]
        answered = lines[: len(lines) // 2] if self.batch_expires else lines
        output, errors = [], []
        for number, line in enumerate(lines):
            custom_id = line.get("custom_id")
            if line not in answered or (number >= len(answered)):
                errors.append({"id": f"req-{number}", "custom_id": custom_id, "response": None,
                               "error": {"code": "batch_expired",
                                         "message": "the batch expired before this request"}})
                continue
            if self.batch_failures is not None and self.batch_failures(line):
                errors.append({"id": f"req-{number}", "custom_id": custom_id,
                               "response": {"status_code": 500, "request_id": f"r{number}",
                                            "body": {"error": {"message": "scripted failure"}}},
                               "error": None})
                continue
            payload = self.answer(str(line.get("url", "")), dict(line.get("body") or {}), number)
            if payload is None:
                errors.append({"id": f"req-{number}", "custom_id": custom_id, "response": None,
                               "error": {"code": "invalid_url", "message": "not found"}})
                continue
            self.bill(payload, batch=True)
            output.append({"id": f"req-{number}", "custom_id": custom_id,
                           "response": {"status_code": 200, "request_id": f"r{number}",
                                        "body": payload}, "error": None})
        rewrite = self.batch_output

        def text(row: dict[str, Any], output: bool) -> str:
            written = rewrite(row) if output and rewrite is not None else None
            return json.dumps(row) if written is None else written

        with self._lock:
            for name, rows in (("output_file_id", output), ("error_file_id", errors)):
                if rows:
                    file_id = f"file-{len(self.files) + 1}"
                    self.files[file_id] = "".join(
                        text(r, name == "output_file_id") + "\n" for r in rows).encode()
                    batch[name] = file_id
            batch["request_counts"] = {"total": len(lines), "completed": len(output),
                                       "failed": len(errors)}
            batch["status"] = "expired" if self.batch_expires else "completed"

    def billed_usd(self, input: float, output: float, cached_input: float | None = None,
                   batch: float | None = None) -> float:
        """The server's own bill at these USD-per-million-token prices (``batch``: of the
        batches' answers, at this multiplier)."""
        with self._lock:
            counts = self.billed if batch is None else self.billed_batch
            prompt, cached = counts["prompt"], counts["cached_prompt"]
            completion = counts["completion"]
        cached_price = input if cached_input is None else cached_input
        return (1.0 if batch is None else batch) * ((prompt - cached) * input + cached * cached_price
                             + completion * output) / 1_000_000

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedServer:
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedServer:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the listen backlog: a burst of 32+ new connections must not be reset

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet: clients hang up
        pass


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _batch_api_fault(self, route: str) -> bool:
        """Fail this batch API request if ``batch_api_faults`` says so (True: answered)."""
        pick = self.owner.batch_api_faults
        fault = pick(route) if pick is not None else None
        if fault is None:
            return False
        kind = fault.kind if isinstance(fault, Fault) else fault
        with self.owner._lock:
            self.owner.fault_counts[f"{route} {kind}"] += 1
        if kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self._send_json(int(kind), {"error": {"message": f"scripted {kind}"}})
        return True

    def do_GET(self) -> None:
        route, _, query = self.path.partition("?")
        path = route.rstrip("/")
        listing = path.endswith("/v1/batches")
        with self.owner._lock:
            what = "LIST batches" if listing else "GET " + path.split("/v1/")[-1].split("/")[0]
            self.owner.paths[what] += 1
        if self._batch_api_fault("list" if listing else "retrieve" if "/v1/batches/" in path
                                 else "content" if "/v1/files/" in path else "other"):
            return
        if listing:
            from urllib.parse import parse_qs

            asked = parse_qs(query)
            limit = int((asked.get("limit") or ["20"])[0])
            after = asked["after"][0] if asked.get("after") else None
            self._send_json(200, self.owner.list_batches(limit, after))
            return
        if "/v1/batches/" in path:
            batch = self.owner.poll_batch(path.rsplit("/", 1)[1])
            if batch is None:
                self._send_json(404, {"error": {"message": "no such batch"}})
            else:
                self._send_json(200, batch)
            return
        if "/v1/files/" in path and path.endswith("/content"):
            content = self.owner.files.get(path.split("/")[-2])
            if content is None:
                self._send_json(404, {"error": {"message": "no such file"}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)
            return
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(
                200, {"object": "list", "data": [{"id": self.owner.model_name, "object": "model"}]}
            )
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = self.path.rstrip("/")
        if path.endswith("/v1/files"):
            with owner._lock:
                owner.paths[path] += 1
            if self._batch_api_fault("upload"):
                return
            self._send_json(200, owner.upload(self.headers.get("Content-Type", ""), raw))
            return
        body = json.loads(raw or b"{}")
        if path.endswith("/v1/batches"):
            with owner._lock:
                owner.paths[path] += 1
            batch = owner.create_batch(body)
            if batch is None:
                self._send_json(400, {"error": {"message": "unknown input_file_id"}})
                return
            with owner._lock:
                fault = owner.batch_create_faults.pop(0) if owner.batch_create_faults else None
            if isinstance(fault, str):
                fault = Fault(fault)
            if fault is not None:  # the batch exists; its creator does not learn its id
                with owner._lock:
                    owner.fault_counts["batch create " + fault.kind] += 1
                if fault.kind == "drop":
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.kind == "slow":
                    time.sleep(fault.delay or 5.0)
                else:
                    self._send_json(int(fault.kind), {"error": {"message": "scripted"}})
                    return
            self._send_json(200, batch)
            return
        with owner._lock:
            owner.requests += 1
            n = owner.requests
            owner.paths[path] += 1
        fault = owner._next_fault(n, body)
        if fault is not None:
            with owner._lock:
                owner.fault_counts[fault.kind] += 1
            kind = fault.kind
            if kind in ("429", "500", "503", "401", "403", "400"):
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = f"{fault.retry_after:g}"
                message = f"scripted {kind}"
                if fault.echo_key:
                    message += f": rejected credentials {self.headers.get('Authorization')!r}"
                self._send_json(
                    int(kind), {"error": {"message": message, "type": "scripted"}}, headers
                )
                return
            if kind == "drop":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if kind == "malformed":
                self._send_json(200, b'{"id": "x", "choices": [')
                return
            if kind == "no_choices":
                self._send_json(200, {"id": "x", "object": "chat.completion", "choices": []})
                return
            if kind == "slow":
                time.sleep(fault.delay or 5.0)
                # then answer normally (the client has usually given up)
        if owner.latency:
            time.sleep(owner.latency)
        payload = owner.answer(path, body, n)
        if payload is None:
            self._send_json(404, {"error": {"message": "not found"}})
            return
        with contextlib.suppress(OSError):
            self._send_json(200, payload)
            owner.bill(payload)


@contextlib.contextmanager
def scripted_model(
    rule: Rule = echo_rule,
    *,
    faults: Sequence[FaultSpec] | FaultPicker | None = None,
    latency: float = 0.0,
    model: str = "scripted",
    api_key: str | None = "sk-scripted",
) -> Iterator[Any]:
    """An `OpenAICompatibleModel` against a fresh `ScriptedServer` (``model.server`` is it)."""
    from pytest_reliable.models.openai_compat import OpenAICompatibleModel

    with ScriptedServer(rule, faults=faults, latency=latency, model_name=model) as server:
        m = OpenAICompatibleModel(model, server.base_url, api_key=api_key)
        m.server = server  # type: ignore[attr-defined]
        yield m


__all__ = ["Fault", "ScriptedServer", "echo_rule", "scripted_model"]
