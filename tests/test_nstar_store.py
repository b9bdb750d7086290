"""The n* store: keyed by everything that changes n*, atomic, safe under concurrent writers, and
an unusable entry is treated as absent with a warning, never a crash."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from pytest_reliable.store.nstar import NStarEntry, NStarKey, NStarStore, NStarStoreWarning

KEY = NStarKey("t.py::test_a", "s" * 64, "d" * 64, "local:x", "ilr", 0.01, 0.1, 0, 100)
ENTRY = NStarEntry(n_star=12, reliable=True, achievable_eps=0.004, n_star_paper=9)


def test_round_trip_and_key_sensitivity(tmp_path: Path) -> None:
    store = NStarStore(tmp_path)
    assert store.get(KEY) is None
    store.put(KEY, ENTRY)
    assert store.get(KEY) == ENTRY
    for field, value in [("seed", 1), ("eps", 0.02), ("space_hash", "x"), ("pilot_n", 50),
                         ("reference_model", "other"), ("dataset_hash", "y"), ("mode", "fixed"),
                         ("n_star_method", "paper"), ("n_max", 500)]:
        assert store.get(dataclasses.replace(KEY, **{field: value})) is None, field
    assert not list(tmp_path.glob("*.tmp"))


def test_defaults_are_the_bootstrap_method_and_a_cap_of_1000() -> None:
    assert (KEY.n_star_method, KEY.n_max) == ("bootstrap", 1000)


@pytest.mark.parametrize(
    "record",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"n_star": 12}),  # fields missing
        json.dumps({"n_star": "12", "reliable": True, "achievable_eps": 0.1}),
        json.dumps({"n_star": 0, "reliable": True, "achievable_eps": 0.1}),
        json.dumps({"n_star": 12, "reliable": "yes", "achievable_eps": 0.1}),
        json.dumps({"n_star": 12, "reliable": True, "achievable_eps": None}),
        json.dumps({"n_star": 12, "reliable": True, "achievable_eps": 0.1, "n_star_paper": 1.5}),
    ],
)
def test_an_entry_of_the_wrong_shape_is_absent_with_a_warning(tmp_path: Path, record: str) -> None:
    store = NStarStore(tmp_path)
    store.put(KEY, ENTRY)
    path = next(tmp_path.glob("*.json"))
    if record.startswith("{") and not record.startswith("{not"):
        record = json.dumps({"key": dataclasses.asdict(KEY), **json.loads(record)})
    path.write_text(record, encoding="utf-8")
    with pytest.warns(NStarStoreWarning, match="not a valid entry"):
        assert store.get(KEY) is None
    store.put(KEY, ENTRY)  # the next pilot rewrites it
    assert store.get(KEY) == ENTRY


def test_an_older_versions_key_is_not_ours(tmp_path: Path) -> None:
    """An entry written under the key without method and cap is another entry, silently."""
    store = NStarStore(tmp_path)
    store.put(KEY, ENTRY)
    path = next(tmp_path.glob("*.json"))
    record = json.loads(path.read_text())
    del record["key"]["n_star_method"], record["key"]["n_max"]
    path.write_text(json.dumps(record))
    assert store.get(KEY) is None


def _write(args: tuple[str, int]) -> None:
    directory, worker = args
    store = NStarStore(Path(directory))
    for i in range(50):
        key = dataclasses.replace(KEY, nodeid=f"t.py::test_{i % 10}", seed=worker)
        store.put(key, NStarEntry(n_star=i + 1, reliable=True, achievable_eps=0.0))


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    with ProcessPoolExecutor(4) as pool:
        list(pool.map(_write, [(str(tmp_path), w) for w in range(4)]))
    store = NStarStore(tmp_path)
    for worker in range(4):
        for test in range(10):
            key = dataclasses.replace(KEY, nodeid=f"t.py::test_{test}", seed=worker)
            assert store.get(key) is not None
    assert len(list(tmp_path.glob("*.json"))) == 40
