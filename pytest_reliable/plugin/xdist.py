"""pytest-xdist glue: what the controller sends its workers, and what a worker sends back.

Under pytest-xdist the controller collects nothing and runs nothing: each worker configures the
plugin itself, collects and runs its tests, and the controller only sees their reports. So the
controller forwards what must be one value for the whole run (the seed, which ``last`` would
otherwise resolve per worker, and the run id that names one shared budget), and a worker turns
a usage error found while collecting into a short collect error (`fail_collection`) that the
controller ends the run on.
"""

from __future__ import annotations

from typing import Any

import pytest

SEED = "reliable_seed"
RUN_ID = "reliable_run_id"


class XdistHooks:
    """Registered only when pytest-xdist is loaded: sends the controller's seed (so ``last``
    means one seed) and run id (one budget) to its workers."""

    def __init__(self, seed: int, run_id: str) -> None:
        self.seed = seed
        self.run_id = run_id

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[SEED] = self.seed
        node.workerinput[RUN_ID] = self.run_id


def _workerinput(config: pytest.Config) -> dict[str, Any] | None:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return workerinput


def is_worker(config: pytest.Config) -> bool:
    return _workerinput(config) is not None


def worker_id(config: pytest.Config) -> str:
    return str((_workerinput(config) or {}).get("workerid", "worker"))


def controller_seed(config: pytest.Config) -> int | None:
    """The seed the controller sent (None: not a worker)."""
    workerinput = _workerinput(config)
    if workerinput is None or SEED not in workerinput:
        return None
    return int(workerinput[SEED])


def controller_run_id(config: pytest.Config) -> str | None:
    """The run id the controller sent (None: not a worker)."""
    run_id = (_workerinput(config) or {}).get(RUN_ID)
    return str(run_id) if run_id else None


def is_lock_writer(config: pytest.Config) -> bool:
    """The controller, or under pytest-xdist the first worker (the controller collects nothing,
    and every worker collects the same spaces)."""
    workerinput = _workerinput(config)
    return workerinput is None or workerinput.get("workerid") == "gw0"


def fail_collection(config: pytest.Config, message: str, items: list[pytest.Item]) -> None:
    """A worker's usage error found while collecting. A UsageError in a worker reaches the
    controller as an INTERNALERROR traceback; a failed collect report reaches it as a short
    error, on which the controller then ends the run with the usage-error exit code
    (`ReliableState.pytest_sessionfinish`). The worker runs nothing."""
    config.hook.pytest_collectreport(report=pytest.CollectReport("", "failed", message, []))
    items[:] = []
