"""Under a USD budget, every model the run will call has a price before the first call (SPEC 13).

Not every model a run calls is known when it starts. ``--reliable-model`` and the other model
options are checked at start-up (`checks.check_pricing_or_usage_error`), but a
``reliable_model`` fixture (a test module may override it for its CheckList tests), a judge's
model and a baseline fixture become known only when a test's body reaches its evaluate call. So
under ``--reliable-budget ...usd``, before the test loop, each reliable and CheckList test's body
runs up to that call, as under ``--reliable-plan`` and the planning pass of ``--reliable-batch``:
the call names the models it would call (`price_instead`) and the rest of the body does not run.
A model without a price then stops the run before any call, as a usage error (exit code 4).

Under pytest-xdist the controller collects nothing, so each worker runs the pass over every test
it collected (all of them) before its first test: each finds the same models, so no worker calls
one. A worker sends what it found as a collect error (a `pytest.UsageError` there would reach the
controller as an INTERNALERROR traceback) and runs none of its tests; the controller shows the
error once and ends the run with exit code 4 (`ReliableState.pytest_sessionfinish`).

What the pass cannot see is checked when the test gets there, before that test's first call
(`session.ReliableSession.check_prices`): a second evaluate call with another judge, a model
chosen in the body after the first call. That test then fails without calling the model; the
other tests run.

What a user may notice, as with ``--reliable-batch``: under a USD budget the part of each test
body before its evaluate call runs twice, and so do its function-scoped fixtures; the pass's
output, warnings and ``record_property`` calls are dropped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_reliable.plugin.markers import kind_of
from pytest_reliable.plugin.xdist import is_worker

if TYPE_CHECKING:
    from pytest_reliable.contract.settings import Settings
    from pytest_reliable.models.base import AsyncModel
    from pytest_reliable.run.session import ReliableSession

UNPRICED_ERROR = "--reliable-budget "
"""How the usage error (and a worker's collect error) for models without a price begins
(`session.unpriced_message`: the budget, the models, the file and the fix)."""


@dataclass
class CalledModels:
    """The models the pass found, by identity, with the tests that call each."""

    models: dict[str, tuple[AsyncModel, list[str]]] = field(default_factory=dict)

    def add(self, nodeid: str, models: Sequence[AsyncModel]) -> None:
        for model in models:
            _, callers = self.models.setdefault(model.identity, (model, []))
            if nodeid not in callers:
                callers.append(nodeid)


PRICING_KEY = pytest.StashKey[CalledModels]()
"""On an item while the price pass runs its body: where its evaluate call names its models."""


def price_instead(item: pytest.Item, models: Callable[[], Sequence[AsyncModel]]) -> None:
    """During the price pass: record the models ``models`` returns and end the body here (a
    skip nobody logs). Otherwise nothing."""
    gathered = item.stash.get(PRICING_KEY, None)
    if gathered is None:
        return
    from pytest_reliable.errors import ReliableError

    try:
        gathered.add(item.nodeid, models())
    except ReliableError:
        pass  # a bad dataset, marker or comparison: the test's own run says what is wrong
    pytest.skip("models gathered (price pass)")


def in_price_pass(item: pytest.Item) -> bool:
    return PRICING_KEY in item.stash


class RunState(Protocol):
    """What the price pass reads of the run's state (`plugin.state.ReliableState`, which imports
    this module)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def session(self) -> ReliableSession: ...


class PricePass:
    """Registered under a USD budget (not with ``--reliable-plan``, which calls nothing)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.stopped = False
        """A worker found a model without a price: it runs none of its tests."""

    # Outermost (tryfirst): before --reliable-batch's planning pass sends any batch.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        items = getattr(session, "items", None) or []
        if items and not session.config.option.collectonly and not session.testsfailed:
            message = self.unpriced(run_bodies(items))
            if message is not None:
                # Shown with the errors (on the controller, under pytest-xdist), and a usage
                # error: exit code 4, the message on stderr too.
                session.config.hook.pytest_collectreport(
                    report=pytest.CollectReport("", "failed", message, []))
                if not is_worker(session.config):
                    raise pytest.UsageError(message)
                self.stopped = True
        return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool | None:
        """A worker that found a model without a price runs nothing (its error says why)."""
        return True if self.stopped else None

    def unpriced(self, called: CalledModels) -> str | None:
        """The usage error naming every model without a price and its tests (None: all
        priced)."""
        from pytest_reliable.calls.pricing import PricingError

        session = self.state.session
        missing: dict[str, list[str]] = {}
        for identity, (model, callers) in called.models.items():
            try:
                session.price_of(model)
            except PricingError:
                missing[identity] = callers
        if not missing:
            return None
        from pytest_reliable.run.session import unpriced_message

        called_by = "\n".join(f"  {identity}: called by {', '.join(tests)}"
                               for identity, tests in missing.items())
        message = (f"{unpriced_message(self.state.settings, *missing)}; nothing was run.\n"
                   f"{called_by}")
        assert message.startswith(UNPRICED_ERROR)
        return message


def run_bodies(items: list[pytest.Item]) -> CalledModels:
    """Run each reliable and CheckList test's body up to its evaluate call, unlogged, and
    return the models those calls name. Fixtures stay set up for the next planned test, after
    the last for the loop's first test, as the batch's planning pass keeps them."""
    from _pytest.runner import runtestprotocol

    called = CalledModels()
    planned = [item for item in items if kind_of(item) is not None]
    for i, item in enumerate(planned):
        after = planned[i + 1] if i + 1 < len(planned) else next(
            (other for other in items if other is not item), None)
        item.stash[PRICING_KEY] = called
        # record_property and captured output would show twice: the test's own run says them.
        properties, sections = list(item.user_properties), list(item._report_sections)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                runtestprotocol(item, log=False, nextitem=after)
        finally:
            del item.stash[PRICING_KEY]
            item.user_properties[:] = properties
            item._report_sections[:] = sections
    return called
