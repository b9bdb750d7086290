"""The n* store: keyed by everything that changes n*, atomic, safe under concurrent writers."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from pytest_reliable.nstar_store import NStarKey, NStarStore

KEY = NStarKey("t.py::test_a", "s" * 64, "d" * 64, "local:x", "ilr", 0.01, 0.1, 0, 100)


def test_round_trip_and_key_sensitivity(tmp_path: Path) -> None:
    store = NStarStore(tmp_path)
    assert store.get(KEY) is None
    store.put(KEY, n_star=12, reliable=True, achievable_eps=0.004)
    assert store.get(KEY)["n_star"] == 12
    for field, value in [("seed", 1), ("eps", 0.02), ("space_hash", "x"), ("pilot_n", 50),
                         ("reference_model", "other"), ("dataset_hash", "y"), ("mode", "fixed")]:
        assert store.get(dataclasses.replace(KEY, **{field: value})) is None, field
    assert not list(tmp_path.glob("*.tmp"))


def _write(args: tuple[str, int]) -> None:
    directory, worker = args
    store = NStarStore(Path(directory))
    for i in range(50):
        key = dataclasses.replace(KEY, nodeid=f"t.py::test_{i % 10}", seed=worker)
        store.put(key, n_star=i, reliable=True, achievable_eps=0.0)


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    with ProcessPoolExecutor(4) as pool:
        list(pool.map(_write, [(str(tmp_path), w) for w in range(4)]))
    store = NStarStore(tmp_path)
    for worker in range(4):
        for test in range(10):
            key = dataclasses.replace(KEY, nodeid=f"t.py::test_{test}", seed=worker)
            assert store.get(key) is not None
    assert len(list(tmp_path.glob("*.json"))) == 40
