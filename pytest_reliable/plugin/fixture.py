"""The fixtures: ``reliable`` (a `ReliableFixture` bound to one test) and the two a user
overrides in conftest.py, ``reliable_model`` and ``reliable_baseline``.

The fixture runs evaluations through the run's session; their results go on the test's item
(``RESULTS_KEY``), where the hook wiring checks the thresholds when the test body ends and puts
the entries on the test report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_reliable.contract.settings import Settings
from pytest_reliable.plugin.batch import gather_instead
from pytest_reliable.plugin.markers import default_resamplings, perturbation_exists
from pytest_reliable.plugin.prices import price_instead
from pytest_reliable.plugin.sizing import plan_instead
from pytest_reliable.plugin.state import (
    ERRORS_KEY,
    RESULTS_KEY,
    SPECS_KEY,
    ReliableState,
    state_of,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pytest_reliable.checklist.report import ChecklistReport
    from pytest_reliable.contract.markers import (
        ChecklistSpec,
        DirectionalArguments,
        InvarianceArguments,
        MftArguments,
        ReliableArguments,
        ReliableSpec,
    )
    from pytest_reliable.plan.data import Records
    from pytest_reliable.plan.task import Task
    from pytest_reliable.verdict.results import ReliableReport

    _Report = TypeVar("_Report", ReliableReport, ChecklistReport)


@pytest.fixture
def reliable_model() -> Any:
    """The model under test. Override in conftest.py to test your own model or callable.

    Return a ``Callable[[str], str]``, a callable on chat messages, an async variant, or an object
    of the model protocol. None (this default) means ``--reliable-model``/``--reliable-base-url``,
    else the embedded SmolLM2-135M-Instruct.
    """
    return None


@pytest.fixture
def reliable_baseline() -> Any:
    """The baseline (production) model for tests with ``baseline=``/``max_regression=``.

    Override in conftest.py exactly as ``reliable_model``. None (this default) means
    ``--reliable-baseline-model``, else ``--reliable-baseline-report``.
    """
    return None


@pytest.fixture(name="reliable")
def reliable_fixture(
    request: pytest.FixtureRequest, reliable_model: Any, reliable_baseline: Any
) -> ReliableFixture:
    """Runs evaluations bound to the test's marker; thresholds are checked when the test ends."""
    state = state_of(request.config)
    state.session  # noqa: B018 - made here, in the main thread, before an async test's worker
    return ReliableFixture(request.node, state, reliable_model, reliable_baseline)


def baseline_configured(item: pytest.Item, settings: Settings) -> bool:
    """A baseline outside the marker: the options, or a ``reliable_baseline`` fixture of the
    user's (one that is not this module's default)."""
    if settings.baseline_model is not None or settings.baseline_report is not None \
            or settings.save_baseline is not None:  # saving: nothing is compared (no error)
        return True
    return _user_baseline_fixture(item)


def _user_baseline_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.get("reliable_baseline", ()) if info else ()
    return any(getattr(d.func, "__module__", __name__) != __name__ for d in definitions)


class BaselineReportUnused(UserWarning):
    """``--reliable-baseline-report`` was given, but some comparing tests use the
    ``reliable_baseline`` fixture or ``--reliable-baseline-model`` instead (SPEC 9's order)."""


def warn_unused_baseline_report(items: list[pytest.Item], settings: Settings) -> None:
    """Once per run, at collection: which comparing tests will not read the stored baseline
    report, and why. SPEC 9 puts the fixture and ``--reliable-baseline-model`` before the
    report, so an explicit ``--reliable-baseline-report`` can lose to a conftest fixture; the
    order stays, and the user is told (the tests' entries carry the same note)."""
    if settings.baseline_report is None or settings.save_baseline is not None:
        return
    from pytest_reliable.run.session import baseline_shadowed

    shadowed: dict[str, list[pytest.Item]] = {}
    for item in items:
        spec = item.stash.get(SPECS_KEY, {}).get("reliable")
        if spec is None or getattr(spec, "max_regression", None) is None \
                or getattr(spec, "baseline", None) is not None:
            continue
        first = ("the reliable_baseline fixture" if _user_baseline_fixture(item)
                 else None if settings.baseline_model is None
                 else f"--reliable-baseline-model {settings.baseline_model}")
        if first is not None:
            shadowed.setdefault(first, []).append(item)
    for first, tests in shadowed.items():
        named = ", ".join(t.nodeid for t in tests[:3]) + (
            f" and {len(tests) - 3} more" if len(tests) > 3 else "")
        # Attributed to the first such test (its file and line), as pytest's own warnings are.
        are = "test ({}) is" if len(tests) == 1 else "tests ({}) are"
        tests[0].warn(BaselineReportUnused(
            f"{len(tests)} comparing {are.format(named)} "
            + baseline_shadowed(first, settings.baseline_report)))


class ReliableFixture:
    """``reliable.evaluate(dataset, task)`` and the CheckList methods, bound to one test."""

    def __init__(
        self, item: pytest.Item, state: ReliableState, model: Any, baseline: Any = None
    ) -> None:
        self._item = item
        self._state = state
        self._model = model
        self._baseline = baseline
        item.stash.setdefault(RESULTS_KEY, [])

    def _spec(self, kind: str, overrides: Mapping[str, Any]) -> ReliableSpec | ChecklistSpec:
        """The marker's arguments (validated at collection), with ``overrides`` on top."""
        from pytest_reliable.contract.markers import (
            MarkerArgumentError,
            parse_checklist,
            parse_reliable,
        )

        specs = self._item.stash.get(SPECS_KEY, {})
        if not overrides and kind in specs:
            return specs[kind]
        marker = self._item.get_closest_marker(kind)
        kwargs = {**(marker.kwargs if marker else {}), **overrides}
        exists = self._state.session.space_exists
        try:
            if kind == "reliable":
                settings = self._state.settings
                return parse_reliable(
                    kwargs, space_exists=exists,
                    has_baseline=baseline_configured(self._item, settings),
                    n_default=default_resamplings(settings), decide_default=settings.decide,
                    search_default=settings.search,
                    explain_space=self._state.explain_space,
                )
            return parse_checklist(kind, (), kwargs, space_exists=exists,
                                   perturbation_exists=perturbation_exists,
                                   explain_space=self._state.explain_space)
        except MarkerArgumentError as error:
            pytest.fail(f"{self._item.nodeid}: {error}", pytrace=False)

    def _run(self, kind: str, work: Callable[[], _Report]) -> _Report:
        from pytest_reliable.calls.pricing import PricingError
        from pytest_reliable.contract.markers import TooFewInstancesError
        from pytest_reliable.errors import ReliableError
        from pytest_reliable.evaluate.circular import CircularUsageError
        from pytest_reliable.models.base import ModelUsageError
        from pytest_reliable.schema.entries import error_entry
        from pytest_reliable.tasks.judge import JudgeUsageError
        from pytest_reliable.verdict.baseline import BaselineUsageError

        try:
            result = work()
        except ReliableError as error:
            failed = error
        else:
            self._item.stash[RESULTS_KEY].append(result)
            return result
        usage = isinstance(failed, BaselineUsageError | JudgeUsageError | CircularUsageError
                           | PricingError | ModelUsageError | TooFewInstancesError)
        entry = error_entry(self._item.nodeid, kind, str(failed), usage_error=usage)
        self._item.stash.setdefault(ERRORS_KEY, []).append(entry)
        if usage and not isinstance(failed, PricingError):
            # A misconfigured comparison: stop before other tests spend calls. A model without
            # a price under a USD budget stops only its own test, before its first call: the
            # price pass (`plugin.prices`) stopped the run before any call for every model it
            # could find, and a test that finds another one only in its body fails alone.
            self._item.session.shouldstop = f"pytest-reliable: {failed}"
        # Outside the except block: the message alone, not "during handling of the above".
        pytest.fail(f"{self._item.nodeid}: {failed}", pytrace=False)

    def evaluate(
        self, dataset: Records, task: Task, **overrides: Unpack[ReliableArguments]
    ) -> ReliableReport:
        """Run the marker's resamplings plus the canonical pass; returns the report object."""
        from pytest_reliable.contract.markers import ReliableSpec

        spec = self._spec("reliable", overrides)
        assert isinstance(spec, ReliableSpec)
        session = self._state.session
        from pytest_reliable.run.first_round import requests_of

        price_instead(self._item, lambda: session.reliable_models(
            session.reliable_test(self._item.nodeid, dataset, task, spec, self._model),
            self._baseline))
        if self._state.settings.plan:
            from pytest_reliable.run.sizing import plan_reliable

            plan_instead(self._item, lambda: plan_reliable(session, self._item.nodeid, dataset,
                                                           task, spec, self._model,
                                                           self._baseline))
        gather_instead(self._item, lambda: requests_of(session, self._item.nodeid, dataset, task,
                                                       spec, self._model, self._baseline))
        return self._run("reliable", lambda: session.run_reliable(
            self._item.nodeid, dataset, task, spec, self._model, self._baseline))

    async def aevaluate(
        self, dataset: Records, task: Task, **overrides: Unpack[ReliableArguments]
    ) -> ReliableReport:
        """`evaluate` for an async test: the model calls run on the test's own event loop (so a
        model built on it works), the rest in a worker thread, and the loop stays free."""
        return await self._on_test_loop(functools.partial(self.evaluate, **overrides),
                                        dataset, task)

    async def _on_test_loop(
        self, method: Callable[[Records, Task], _Report], dataset: Records, task: Task
    ) -> _Report:
        import asyncio

        from pytest_reliable.calls.loop import use_loop
        from pytest_reliable.models.base import to_daemon_thread

        with use_loop(asyncio.get_running_loop()):
            return await to_daemon_thread(method, dataset, task)

    def _checklist(
        self, kind: str, dataset: Records, task: Task, overrides: Mapping[str, Any]
    ) -> ChecklistReport:
        from pytest_reliable.contract.markers import ChecklistSpec

        spec = self._spec(kind, overrides)
        assert isinstance(spec, ChecklistSpec)
        session = self._state.session
        price_instead(self._item, lambda: session.checklist_models(task, self._model))
        if self._state.settings.plan:
            from pytest_reliable.run.plan_checklist import plan_checklist

            plan_instead(self._item, lambda: plan_checklist(session, self._item.nodeid, dataset,
                                                            task, spec, self._model))
        gather_instead(self._item, None)  # a CheckList test's calls are its own, later
        return self._run(kind, lambda: session.run_checklist(
            self._item.nodeid, dataset, task, spec, self._model))

    def invariance(
        self, dataset: Records, task: Task, **overrides: Unpack[InvarianceArguments]
    ) -> ChecklistReport:
        return self._checklist("invariance", dataset, task, overrides)

    def directional(
        self, dataset: Records, task: Task, **overrides: Unpack[DirectionalArguments]
    ) -> ChecklistReport:
        return self._checklist("directional", dataset, task, overrides)

    def mft(
        self, dataset: Records, task: Task, **overrides: Unpack[MftArguments]
    ) -> ChecklistReport:
        return self._checklist("mft", dataset, task, overrides)

    async def ainvariance(
        self, dataset: Records, task: Task, **overrides: Unpack[InvarianceArguments]
    ) -> ChecklistReport:
        """`invariance` for an async test, on the test's own event loop (as `aevaluate`)."""
        return await self._on_test_loop(functools.partial(self.invariance, **overrides),
                                        dataset, task)

    async def adirectional(
        self, dataset: Records, task: Task, **overrides: Unpack[DirectionalArguments]
    ) -> ChecklistReport:
        """`directional` for an async test, on the test's own event loop (as `aevaluate`)."""
        return await self._on_test_loop(functools.partial(self.directional, **overrides),
                                        dataset, task)

    async def amft(
        self, dataset: Records, task: Task, **overrides: Unpack[MftArguments]
    ) -> ChecklistReport:
        """`mft` for an async test, on the test's own event loop (as `aevaluate`)."""
        return await self._on_test_loop(functools.partial(self.mft, **overrides), dataset, task)
