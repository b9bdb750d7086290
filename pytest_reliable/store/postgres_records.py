"""The PostgreSQL store's budget ledger (one row per run id, shared by every host) and n*
entries (``reliable_nstar``)."""

from __future__ import annotations

from pytest_reliable.store.base import Ledger
from pytest_reliable.store.nstar import NStarEntries, NStarKey
from pytest_reliable.store.postgres_driver import Server
from pytest_reliable.store.postgres_schema import NOW


class PostgresLedger(Ledger):
    """One row of ``reliable_budget`` per run id, shared by every host.

    Its counts commit without waiting for the server's disk (two of a paid call's three commits:
    a disk flush each would triple what the store adds to a call). A database crash may forget
    the counts of its last fraction of a second, so a run may pass its budget by the calls of
    that moment; no answer is lost (they commit durably)."""

    def __init__(self, store: Server, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._created = False

    def _ensure_row(self) -> None:
        if not self._created:
            self.store._query(f"INSERT INTO reliable_budget(run, created) VALUES(%s, {NOW})"
                              " ON CONFLICT (run) DO NOTHING", (self.run_id,), lazy=True)
            self._created = True

    def reserve(self, max_calls: int | None, max_tokens: int | None,
                max_usd: float | None = None, usd: float = 0.0) -> bool:
        self._ensure_row()
        granted = self.store._query(
            "UPDATE reliable_budget SET calls = calls + 1, usd = usd + %(usd)s WHERE run = %(run)s"
            " AND (%(calls)s::bigint IS NULL OR calls < %(calls)s)"
            " AND (%(tokens)s::bigint IS NULL OR tokens < %(tokens)s)"
            " AND (%(max_usd)s::double precision IS NULL OR usd + %(usd)s <= %(max_usd)s + 1e-12)"
            " RETURNING calls",
            {"run": self.run_id, "calls": max_calls, "tokens": max_tokens,
             "max_usd": max_usd, "usd": float(usd)}, lazy=True,
        )
        if not granted:
            self.store._query("UPDATE reliable_budget SET skipped = skipped + 1 WHERE run = %s",
                              (self.run_id,), lazy=True)
        return bool(granted)

    def add_tokens(self, n: int, usd: float = 0.0) -> None:
        self._ensure_row()
        self.store._query("UPDATE reliable_budget SET tokens = tokens + %s, usd = usd + %s"
                          " WHERE run = %s", (int(n), float(usd), self.run_id), lazy=True)

    def spent_usd(self) -> float:
        found = self.store._query("SELECT usd FROM reliable_budget WHERE run = %s",
                                  (self.run_id,))
        return float(found[0][0]) if found else 0.0

    def totals(self) -> tuple[int, int, int]:
        found = self.store._query("SELECT calls, tokens, skipped FROM reliable_budget "
                                  "WHERE run = %s", (self.run_id,))
        return (int(found[0][0]), int(found[0][1]), int(found[0][2])) if found else (0, 0, 0)

    def close(self) -> None:
        pass  # the store's pool is closed with the store


class PostgresNStar(NStarEntries):
    def __init__(self, store: Server) -> None:
        super().__init__(store.claims, store.waits)
        self.store = store

    def where(self, key: NStarKey) -> str:
        return f"{key.digest()} in {self.store.location}"

    def _load(self, key: NStarKey) -> str | None:
        if not self.store.has_schema:
            return None
        found = self.store._query("SELECT record FROM reliable_nstar WHERE digest = %s",
                                  (key.digest(),))
        return str(found[0][0]) if found else None

    def _save(self, key: NStarKey, record: str) -> None:
        self.store._query(
            f"INSERT INTO reliable_nstar(digest, record, created) VALUES(%s, %s, {NOW})"
            " ON CONFLICT (digest) DO UPDATE SET record = EXCLUDED.record,"
            " created = EXCLUDED.created", (key.digest(), record))

    def _cannot_write_fix(self) -> str:
        return f"check {self.store._where()}"
