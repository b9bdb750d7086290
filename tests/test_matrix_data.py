"""The shipped instance x format matrix (benchmarks/data/matrix_smollm2_reviews.npz, issue 30
item 5): the shape others replay gates on, and a rebuild from its cache that makes no call."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_reliable.space.config import load_spaces
from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "benchmarks" / "data" / "matrix_smollm2_reviews.npz"


def test_the_matrix_has_the_promised_arrays() -> None:
    with np.load(MATRIX) as data:
        scores, formats, ids = data["scores"], data["formats"], data["instance_ids"]
    assert scores.dtype == np.float64 and scores.shape[0] == 60 and scores.shape[1] >= 48
    assert ((scores >= 0) & (scores <= 1)).all()
    assert list(ids) == list(range(60))
    variants = [json.loads(f) for f in formats]
    assert len(formats) == scores.shape[1] == len(set(formats))
    space = load_spaces(ROOT / "examples" / "reliable.yaml")["sentiment"]
    for variant in variants:
        for dim, values in space.format_dimensions.items():
            assert variant[dim] in values
        assert sorted(variant["order"]) == [0, 1] and variant["temperature"] == 0.0


@pytest.mark.slow
def test_a_rebuild_from_the_shipped_cache_makes_no_call_and_gives_the_same_matrix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    build = load_benchmark("build_matrix")

    def no_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("the rebuild started the model")

    monkeypatch.setattr("pytest_reliable.models.local.LocalModelServer", no_server)
    assert build.main(["--check"]) == 0
