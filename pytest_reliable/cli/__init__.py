"""``python -m pytest_reliable COMMAND``: every command in one place (`__main__` delegates here).

In order: `cache` (``cache merge|export|import``: answers between stores, without a run), `main`
(the entry point and ``html``, ``merge``, ``history``: reports rebuilt and combined from their
JSON, with no model call; ``cache`` is dispatched to `cli.cache`).
"""
