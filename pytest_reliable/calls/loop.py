"""The run's event loop: every model call of a pytest run runs on one loop, a long-lived loop in a
daemon thread (`call_loop`) or the test's own loop inside `use_loop` (what an async test's
``aevaluate`` does); `stop_call_loop` ends it at the run's end."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any

from pytest_reliable.errors import ReliableError

log = logging.getLogger("pytest_reliable.runner")


class CallInterrupted(Exception):
    """A model call raised `KeyboardInterrupt`: the user's Ctrl-C (or a model that means it).

    Carried through the run's tasks as an ordinary exception (a `KeyboardInterrupt` escaping a
    task would stop the event loop under every other call) and raised again, as the original
    `KeyboardInterrupt`, in the thread that waits for the calls (`run_on_call_loop`): the run
    stops as pytest stops on Ctrl-C, with every answer that came back already stored. No call
    starts after it, and the calls in flight get `CANCEL_GRACE_S` to come back first
    (`Runner._drain_on_interrupt`)."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(str(interrupt) or "KeyboardInterrupt")
        self.interrupt = interrupt



# -- the run's event loop ------------------------------------------------------------------------
_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_test_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "pytest_reliable_test_loop", default=None
)


def call_loop() -> asyncio.AbstractEventLoop:
    """The process's loop for model calls, running in a daemon thread (started on first use)."""
    global _loop, _loop_thread
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            _loop_thread = threading.Thread(
                target=loop.run_forever, name="pytest-reliable-loop", daemon=True
            )
            _loop_thread.start()
            _loop = loop
        return _loop


STOP_GRACE_S = 1.0
"""How long the run's end waits for calls still running on the loop (abandoned ones, which
ignored their cancellation once) before it cancels them again and closes the loop anyway."""


def stop_call_loop(closing: Sequence[Coroutine[Any, Any, None]] = ()) -> None:
    """End the process's call loop at the run's end: wait briefly for what still runs on it,
    cancel the rest, run ``closing`` (the models' ``aclose()``) on it, then stop and close it
    (a later call starts a new loop). Without this, abandoned calls outlive the run: a
    pytest-xdist worker is interrupted at its exit with them in flight, and their HTTP clients'
    finalizers print tracebacks."""
    global _loop, _loop_thread
    if closing:
        call_loop()  # the clients close on a loop even when no call was ever made
    with _loop_lock:
        loop, thread = _loop, _loop_thread
        _loop, _loop_thread = None, None
    if loop is None or loop.is_closed():
        return

    async def wind_down() -> None:
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if rest:
            _, running = await asyncio.wait(rest, timeout=STOP_GRACE_S)
            for task in running:
                task.cancel()
        for coro in closing:
            try:
                await coro
            except Exception:
                log.debug("closing a model failed", exc_info=True)
        await loop.shutdown_asyncgens()

    try:
        asyncio.run_coroutine_threadsafe(wind_down(), loop).result(STOP_GRACE_S + 5.0)
    except Exception:  # a call that ignores its cancellation again: stop the loop regardless
        log.debug("stopping the call loop with tasks still running", exc_info=True)
    loop.call_soon_threadsafe(loop.stop)
    if thread is not None:
        thread.join(STOP_GRACE_S)
    if not loop.is_running():
        loop.close()


@contextlib.contextmanager
def use_loop(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Run the calls of this context (and of threads started with its context) on ``loop``."""
    token = _test_loop.set(loop)
    try:
        yield
    finally:
        _test_loop.reset(token)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def run_on_call_loop(coro: Any) -> Any:
    """Run ``coro`` on the run's loop and wait for it from this (non-loop) thread."""
    loop = _test_loop.get() or call_loop()
    if _running_loop() is loop:
        coro.close()
        raise ReliableError(
            "a synchronous evaluation was started on the event loop that runs the model calls: "
            "in an async test use `await reliable.aevaluate(...)`"
        )
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except CallInterrupted as interrupted:
        raise interrupted.interrupt from None
    except BaseException:
        future.cancel()  # Ctrl-C/SIGTERM: stop the calls still waiting
        raise

