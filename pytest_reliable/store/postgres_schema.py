"""The PostgreSQL store's schema: its tables (the module docstring of `store.postgres` says what
each holds), the statements that bring an older schema up to `SCHEMA_VERSION`, and the columns
the start-up check expects.
"""

from __future__ import annotations

from pytest_reliable.files import sha256_hex

SCHEMA_VERSION = 3

NOW = "EXTRACT(EPOCH FROM clock_timestamp())"
"""The server's clock: the hosts' clocks may disagree."""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        ("CREATE TABLE IF NOT EXISTS reliable_answers ("
        " key TEXT PRIMARY KEY, text BYTEA NOT NULL, logprobs TEXT, prompt_tokens INTEGER,"
        " completion_tokens INTEGER, latency_s DOUBLE PRECISION, extra TEXT, model TEXT,"
        " meta TEXT, created DOUBLE PRECISION)"),
        ("CREATE TABLE IF NOT EXISTS reliable_budget ("
        " run TEXT PRIMARY KEY, calls BIGINT NOT NULL DEFAULT 0, tokens BIGINT NOT NULL DEFAULT 0,"
        " skipped BIGINT NOT NULL DEFAULT 0, created DOUBLE PRECISION NOT NULL)"),
        ("CREATE TABLE IF NOT EXISTS reliable_nstar ("
        " digest TEXT PRIMARY KEY, record TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)"),
    ),
    2: (  # SPEC section 13: USD budgets, and the batch a killed run resumes
        ("ALTER TABLE reliable_budget ADD COLUMN IF NOT EXISTS usd DOUBLE PRECISION NOT NULL"
        " DEFAULT 0"),
        ("CREATE TABLE IF NOT EXISTS reliable_batches ("
        " name TEXT PRIMARY KEY, batch_id TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)"),
    ),
    3: (
        # The report is JSON written with ensure_ascii (no NUL, no lone surrogate reaches TEXT).
        ("CREATE TABLE IF NOT EXISTS reliable_reports ("
        " run_id TEXT NOT NULL, part TEXT NOT NULL, created TEXT, model TEXT, git_commit TEXT,"
        " report TEXT NOT NULL, kept DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, part))"),
    ),
}
"""Statements that bring the schema from version N-1 to N, applied in order on first use."""
TABLES: dict[str, dict[str, str]] = {
    "reliable_meta": {"key": "text", "value": "text"},
    "reliable_answers": {
        "key": "text", "text": "bytea", "logprobs": "text", "prompt_tokens": "integer",
        "completion_tokens": "integer", "latency_s": "double precision", "extra": "text",
        "model": "text", "meta": "text", "created": "double precision"},
    "reliable_budget": {"run": "text", "calls": "bigint", "tokens": "bigint", "skipped": "bigint",
                        "created": "double precision", "usd": "double precision"},
    "reliable_nstar": {"digest": "text", "record": "text", "created": "double precision"},
    "reliable_batches": {"name": "text", "batch_id": "text", "created": "double precision"},
    "reliable_reports": {"run_id": "text", "part": "text", "created": "text", "model": "text",
                         "git_commit": "text", "report": "text", "kept": "double precision"},
}
"""The columns the store reads and writes, by table (what `_check_tables` checks at start-up)."""
TABLE_FIX = ("Give the store a database of its own (or a schema of its own: add "
             "?options=-csearch_path%3Dreliable to the URL after CREATE SCHEMA reliable), or move "
             "that table away")
PROBE = "pytest-reliable: start-up write probe"


def column_family(kind: str | None) -> str | None:
    """Types the store's reads and writes treat alike."""
    if kind is None:
        return None
    if kind in ("text", "character varying") or kind.startswith("character varying("):
        return "text"
    if kind in ("integer", "bigint", "smallint"):
        return "integer"
    if kind in ("double precision", "real") or kind.startswith("numeric"):
        return "number"
    return kind


SCHEMA_LOCK = int(sha256_hex("pytest-reliable schema")[:15], 16)
"""Advisory lock held while the schema is created, so hosts starting together take turns."""

COLUMNS = ("key, text, logprobs, prompt_tokens, completion_tokens, latency_s, extra, model, meta,"
           " created")
