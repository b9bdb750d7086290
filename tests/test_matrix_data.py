"""The shipped instance x format matrices (benchmarks/data/matrix_smollm2_*.npz, issue 30 item 5):
the shape others replay gates on, and a rebuild from each one's cache that makes no call."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_reliable import Dataset
from pytest_reliable.space.config import load_spaces
from tests.benchmark_scripts import load_benchmark

BUILD = load_benchmark("build_matrix")


@pytest.mark.parametrize("name", sorted(BUILD.SOURCES))
def test_the_matrix_has_the_promised_arrays(name: str) -> None:
    source = BUILD.SOURCES[name]
    with np.load(source.out) as data:
        scores, formats, ids = data["scores"], data["formats"], data["instance_ids"]
    instances = len(Dataset.from_file(source.dataset))
    assert scores.dtype == np.float64 and scores.shape[0] == instances >= 60
    assert scores.shape[1] >= 48
    assert ((scores >= 0) & (scores <= 1)).all()
    assert list(ids) == list(range(instances))
    variants = [json.loads(f) for f in formats]
    assert len(formats) == scores.shape[1] == len(set(formats))
    space = load_spaces(source.spaces_file)[source.space]
    for variant in variants:
        for dim, values in space.format_dimensions.items():
            assert variant[dim] in values
        expected_order = list(range(source.n_options)) if source.n_options else None
        order = variant["order"]
        assert (sorted(order) if order is not None else None) == expected_order
        assert variant["temperature"] == 0.0


def test_the_capitals_matrix_is_a_task_the_model_is_not_at_chance_on() -> None:
    # What issue 30 item 5 asks of it: formats that matter on a task the model partly knows
    # (an open answer: chance is near 0).
    with np.load(BUILD.SOURCES["capitals"].out) as data:
        per_format = data["scores"].mean(axis=0)
    assert per_format.mean() > 0.3 and per_format.max() - per_format.min() > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILD.SOURCES))
def test_a_rebuild_from_the_shipped_cache_makes_no_call_and_gives_the_same_matrix(
    monkeypatch: pytest.MonkeyPatch, name: str,
) -> None:
    def no_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("the rebuild started the model")

    monkeypatch.setattr("pytest_reliable.models.local.LocalModelServer", no_server)
    assert BUILD.main(["--check", "--matrix", name]) == 0
