"""``--reliable-batch``'s planning pass: the run's first round in one batch (SPEC section 13).

After collection, before the test loop, every reliable test's body runs up to its evaluate call,
as under ``--reliable-plan``: its fixtures are set up and torn down, its evaluate gives its
first round's requests (`first_round.requests_of`) instead of calling, and the rest of the body
does not run. Nothing of this pass is reported (its test reports are made but never logged).
Then the gathered requests are answered, one batch per model, with a progress line while the run
waits (which batch, its status and counts; at most ``--reliable-wait-timeout``, after which the
tests it owes answers to end in an error naming it, and a rerun collects it), and the test loop
runs as usual, each evaluate finding its first round in the store.

What a user may notice: the part of each reliable test body before its evaluate call runs twice,
and so do its function-scoped fixtures; wider fixtures are set up once for the pass, and the
pass tears down only what the first test of the loop does not use (so a session fixture is set
up once in all). The pass's output, warnings, failures and ``record_property`` calls are dropped:
the test's own run says them once. pytest-timeout does not time the pass (it times a test's
whole protocol, which the pass does not go through). Under pytest-xdist each worker plans every
collected reliable test (it cannot know which ones the scheduler will give it); the batch's
claims (`calls.claiming.claim_batch_keys`) let the first worker send the one batch and the others wait
for its answers in the store.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_reliable.plugin.markers import kind_of

if TYPE_CHECKING:
    from pytest_reliable.calls.requests import ProgressEvent, Request
    from pytest_reliable.models.base import AsyncModel
    from pytest_reliable.plugin.state import ReliableState
    from pytest_reliable.run.first_round import FirstRound  # noqa: F401 - named in a stash key

GATHERING_KEY = pytest.StashKey["FirstRound"]()
"""On an item while the planning pass runs its body: where its evaluate puts its requests."""


def gather_instead(item: pytest.Item,
                   make: Callable[[], list[tuple[AsyncModel, list[Request]]]] | None) -> None:
    """During the planning pass: record the first round ``make`` returns (None: a CheckList
    call, whose calls are left to its test) and end the body here. Otherwise nothing."""
    gathering = item.stash.get(GATHERING_KEY, None)
    if gathering is None:
        return
    if make is not None:
        gathering.add(make())
    # As --reliable-plan ends a body: a skip (never caught by a body's `except Exception`), in a
    # report nobody logs.
    pytest.skip("first round gathered (--reliable-batch)")


class FirstRoundHooks:
    """Registered with ``--reliable-batch`` (not with ``--reliable-plan``)."""

    def __init__(self, state: ReliableState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        items = getattr(session, "items", None) or []
        store = self.state.session.cache if items else None
        if (items and not session.config.option.collectonly and not session.testsfailed
                and store is not None and store.reads and not store.replay_only):
            self.first_round(session, items)
        return (yield)

    def first_round(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        from _pytest.runner import runtestprotocol  # what pytest-rerunfailures runs an item with

        from pytest_reliable.run.first_round import NAME, FirstRound

        gathering = FirstRound()
        planned = [item for item in items if kind_of(item) == "reliable"]
        for i, item in enumerate(planned):
            # What stays set up after this item: what the next planned item shares with it,
            # after the last what the loop's first test shares (never the item itself).
            after = planned[i + 1] if i + 1 < len(planned) else next(
                (other for other in items if other is not item), None)
            item.stash[GATHERING_KEY] = gathering
            properties = list(item.user_properties)  # record_property would count twice
            try:
                # Not logged: the loop below reports the test once, as it really ran; its
                # warnings too (the pass's would be said twice, outside any test).
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    runtestprotocol(item, log=False, nextitem=after)
            finally:
                del item.stash[GATHERING_KEY]
                item.user_properties[:] = properties
        if not gathering.by_model:
            return
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        on_progress = self.state.session.on_progress

        def progress(event: ProgressEvent) -> None:
            if on_progress is not None:
                on_progress(NAME, event)

        sent = gathering.send(self.state.session, progress)
        if reporter is not None and sent.requests and session.config.option.verbose >= 0:
            reporter.ensure_newline()
            text = (f"{NAME}: {sent.requests} requests of {sent.tests} tests: {sent.cached} "
                    f"from the store, {sent.made} answered by the batch API")
            if sent.failed:
                text += f", {sent.failed} not answered ({sent.problems[0]})"
            reporter.write_line(text)
