"""``--reliable-batch``'s first round (SPEC section 13): the run's first calls in one batch.

After collection the plugin runs each reliable test's body up to its evaluate call, as
``--reliable-plan`` does (`pytest_reliable.plugin.batch`). `requests_of` gives what that
evaluation calls before any answer is known, its *first round*; `FirstRound` gathers them over
the run and `FirstRound.send` has the uncached ones answered through the runner, so one batch per
model (and one follow-up batch for its failed lines), filling the store. Then the tests run as
usual and find their first round stored; what depends on answers goes through the same
transport, one batch per evaluation, in later rounds.

What a test's first round is, by its run strategy (`evaluate.schedules`, each strategy's
``first_round()``):

- ``n`` resamplings (`FixedN`): every call of the n resamplings and the canonical pass;
- stopping early (`StopEarly`): the first stage only (its resamplings and the canonical pass);
  the later stages run only when the first did not settle the verdicts;
- ``--reliable-n auto`` (`AutoN`): a stored n*'s resamplings, else the pilot's (on the reference
  model when there is one); the pilot's extension to n* comes later.

A baseline model answers the same requests when the size is known before any answer (n
resamplings, a stored n*); after early stopping or a pilot its size is known only then, so it is
a later round, as are circular shifts and a judge's calls. No pytest here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_reliable.calls.cache import cache_key
from pytest_reliable.errors import ReliableError
from pytest_reliable.evaluate.evaluation import CANONICAL, plan_cells
from pytest_reliable.tasks.grading import judge_of

if TYPE_CHECKING:
    from pytest_reliable.calls.requests import ProgressEvent, Request
    from pytest_reliable.contract.markers import ReliableSpec
    from pytest_reliable.models.base import AsyncModel
    from pytest_reliable.plan.data import Records
    from pytest_reliable.plan.task import Task
    from pytest_reliable.run.session import ReliableSession, ReliableTest

log = logging.getLogger("pytest_reliable.first_round")

NAME = "reliable first round (batch)"
"""What the progress line and the runner's messages call the first round's calls."""


def requests_of(session: ReliableSession, nodeid: str, data: Records, task: Task,
                spec: ReliableSpec, user_model: Any = None,
                user_baseline: Any = None) -> list[tuple[AsyncModel, list[Request]]]:
    """The models and requests of ``reliable.evaluate(data, task)``'s first round, in plan
    order (the same requests, so the same cache keys, as the test's own run)."""
    test = session.reliable_test(nodeid, data, task, spec, user_model)
    first = session.strategy_for(test).first_round()
    model = first.model if first.model is not None else test.model
    cells = plan_cells(test.dataset, task, test.space, replace(test.evaluation(), n=first.n))
    if first.first_stage is not None:
        cells = [c for c in cells
                 if c.resampling == CANONICAL or c.resampling < first.first_stage]
    requests = [cell.request for cell in cells]
    rounds = [(model, requests)]
    baseline = _baseline_model(session, test, user_baseline) if first.size_known else None
    if baseline is not None:  # the same requests on the baseline model (SPEC section 9)
        rounds.append((baseline, requests))
    return rounds


def _baseline_model(session: ReliableSession, test: ReliableTest,
                    user_baseline: Any) -> AsyncModel | None:
    """The model a comparing test's baseline answers on, None when it does not compare or
    compares with a stored report (no call)."""
    judge = judge_of(test.task)
    try:
        choice = session.baseline_for(test, user_baseline,
                                      pairwise=judge is not None and judge.pairwise)
        if choice is None or choice.kind == "report":
            return None
        return session.baseline_model(choice)
    except ReliableError:  # the test's own run says what is wrong with its comparison
        return None


@dataclass
class Sent:
    """What the first round did: requests gathered, answered from the store, paid, failed."""

    tests: int = 0
    requests: int = 0
    cached: int = 0
    made: int = 0
    failed: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class FirstRound:
    """The first rounds of the run's tests, by model, until `send` answers them."""

    by_model: dict[str, tuple[AsyncModel, dict[str, Request]]] = field(default_factory=dict)
    tests: int = 0

    def add(self, rounds: list[tuple[AsyncModel, list[Request]]]) -> None:
        """One test's first round (`requests_of`)."""
        self.tests += 1
        for model, requests in rounds:
            _, keyed = self.by_model.setdefault(model.identity, (model, {}))
            for request in requests:
                keyed.setdefault(cache_key(model.identity, request.messages, request.params,
                                           request.sample_index, request.scope), request)

    def send(self, session: ReliableSession,
             on_progress: Callable[[ProgressEvent], None] | None = None) -> Sent:
        """Answer every gathered request through a batch runner of its model: the stored ones
        are served, the others go as one batch per model. A model without a batch transport (a
        callable) is left to its tests. Answers paid for here are counted by the tests that use
        them (`calls.requests.AnsweredAhead`), as if each test had made the call."""
        sent = Sent(tests=self.tests)
        for model, keyed in self.by_model.values():
            try:
                runner = session.runner(model, NAME)
            except ReliableError:  # e.g. no price under a USD budget: its tests say so
                continue
            if not runner.transport.together or not keyed:  # no batch transport
                continue
            if on_progress is not None:
                runner.on_progress = on_progress
            keys, requests = list(keyed), list(keyed.values())
            results = runner.run(requests)
            sent.requests += len(requests)
            for key, result in zip(keys, results):
                if result.status != "ok":
                    sent.failed += 1
                    if result.error and result.error not in sent.problems:
                        sent.problems.append(result.error)
                    if result.status == "error":
                        runner.ahead.failed[key] = result.error or "batch: no answer"
                elif result.cached:
                    sent.cached += 1
                else:
                    sent.made += 1
                    runner.ahead.paid[key] = result
        return sent


__all__ = ["NAME", "FirstRound", "Sent", "requests_of"]
