"""``--reliable-plan``: every reliable test planned, no model call made.

Each test body runs up to its evaluate call, which plans instead of calling the model
(`plan_instead`) and skips the rest of the test; the plans travel on the test reports (to the
pytest-xdist controller too) and are printed as one section at the end. Tests that are not
reliable tests are skipped. `PlanHooks` is registered only when the option is on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, cast

import pytest

from pytest_reliable.plugin.markers import kind_of
from pytest_reliable.plugin.xdist import is_worker

if TYPE_CHECKING:
    from pytest_reliable.run.sizing import TestPlan

PLAN_PROPERTY = "reliable_plan"
"""The test report's user property that carries a test's plan (``TestPlan.as_dict()``)."""


def plan_instead(item: pytest.Item, make: Callable[[], TestPlan]) -> NoReturn:
    """Record the plan ``make`` returns, make no call, end the test here (skipped)."""
    from pytest_reliable.errors import ReliableError

    try:
        plan = make()
    except ReliableError as error:
        failed = error
    else:
        item.user_properties.append((PLAN_PROPERTY, plan.as_dict()))
        pytest.skip(f"planned (--reliable-plan): {plan.calls} model calls, none made")
    # Outside the except block: the message alone, not "during handling of the above".
    pytest.fail(f"{item.nodeid}: {failed}", pytrace=False)


class PlanHooks:
    """Collects the plans from the test reports and prints them."""

    def __init__(self) -> None:
        self.plans: list[dict[str, Any]] = []

    @pytest.hookimpl(trylast=True)  # after plugin.py validated the markers (a usage error first)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if kind_of(item) is None:
                item.add_marker(pytest.mark.skip(reason="--reliable-plan runs only reliable tests"))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        # user_properties hold objects; ours under PLAN_PROPERTY are TestPlan.as_dict() dicts.
        self.plans += [cast("dict[str, Any]", value)
                       for name, value in report.user_properties if name == PLAN_PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if is_worker(terminalreporter.config):
            return
        from pytest_reliable.plugin.state import state_of
        from pytest_reliable.run.sizing import PlanBudget, TestPlan, format_plans

        budget = PlanBudget.of(state_of(terminalreporter.config).settings)
        terminalreporter.write_sep("=", "reliable plan (no model call made)")
        for line in format_plans([TestPlan.from_dict(plan) for plan in self.plans], budget):
            terminalreporter.write_line(line, yellow=line.startswith("warning:"))
