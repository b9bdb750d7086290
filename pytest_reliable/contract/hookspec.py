"""Extension points of pytest-reliable, added with ``pytest_addhooks``.

Implement them in a ``conftest.py`` or a plugin, as any pytest hook::

    def pytest_reliable_report_entry(entry):
        entry["team"] = "search"          # one more field in this test's JSON entry

    def pytest_reliable_table_columns(columns):
        columns.append(("n*", lambda entry: str(entry.get("n_star"))))

Under pytest-xdist, ``pytest_reliable_report_entry`` runs where the test ran (a worker) and
``pytest_reliable_table_columns`` on the controller, which prints the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

# pytest's own hookspec marker (what ``pytest.hookspec`` is), without importing pytest here.
hookspec = pluggy.HookspecMarker("pytest")

Column = tuple[str, Callable[[dict[str, Any]], str]]
"""A summary-table column: its header and the cell text of one JSON entry."""


@hookspec
def pytest_reliable_report_entry(entry: dict[str, Any]) -> None:
    """Called with each test's JSON report entry (SPEC section 8) before it is written anywhere:
    add or change fields in place. Values must be JSON-serialisable."""


@hookspec
def pytest_reliable_table_columns(columns: list[Column]) -> None:
    """Called once with the `reliable` summary table's columns (header, cell function), in
    order: append, insert or remove columns in place. Columns beyond the essential ones are
    dropped first when the terminal is narrow."""


@hookspec(firstresult=True)
def pytest_reliable_generate_commit_info(config: Any) -> str | None:
    """The commit a kept report names (``--reliable-history``, its ``git_commit``). Return it
    where CI already knows it (``os.environ["GITHUB_SHA"]``) to spare the plugin its default,
    ``git rev-parse HEAD`` in the rootdir; the first answer that is not None wins, and None
    everywhere keeps the field null."""
