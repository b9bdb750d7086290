"""Marker argument validation: every bad argument names the argument, the value and what is allowed."""

from __future__ import annotations

import pytest

from pytest_reliable.markerspec import MarkerArgumentError, parse_checklist, parse_reliable


def exists(space: object) -> bool:
    return space == "mcq"


def perturbation_exists(kind: str, name: str) -> bool:
    return name in {"typos", "punctuation", "negation"}


def test_defaults_follow_the_spec() -> None:
    spec = parse_reliable({}, space_exists=exists)
    assert (spec.eps, spec.delta, spec.n, spec.mode, spec.confidence, spec.k, spec.min_cells) == (
        0.01, 0.1, None, "ilr", 0.95, 1, 20,
    )


@pytest.mark.parametrize(
    ("kwargs", "argument", "allowed"),
    [
        ({"epz": 0.1}, "epz", "allowed arguments"),
        ({"eps": 0.0}, "eps", "strictly between 0 and 1"),
        ({"eps": 1.5}, "eps", "strictly between 0 and 1"),
        ({"delta": 1}, "delta", "strictly between 0 and 1"),
        ({"confidence": 0}, "confidence", "strictly between 0 and 1"),
        ({"n": 0}, "n", "integer >= 1"),
        ({"k": 0}, "k", "integer >= 1"),
        ({"n": 2.5}, "n", "integer >= 1"),
        ({"min_score": 1.2}, "min_score", "[0, 1]"),
        ({"max_spread": -0.1}, "max_spread", "[0, 1]"),
        ({"min_worst": "high"}, "min_worst", "number"),
        ({"mode": "random"}, "mode", "'ilr' or 'fixed'"),
        ({"space": "nope"}, "space", "reliable.yaml"),
        ({"temperature": -1}, "temperature", ">= 0"),
    ],
)
def test_bad_reliable_arguments(kwargs: dict, argument: str, allowed: str) -> None:
    with pytest.raises(MarkerArgumentError) as info:
        parse_reliable(kwargs, space_exists=exists)
    assert info.value.argument == argument
    message = str(info.value)
    assert argument in message and allowed in message and repr(kwargs[argument]) in message


@pytest.mark.parametrize(
    ("kind", "kwargs", "argument"),
    [
        ("invariance", {"perturb": ["tpyos"]}, "perturb"),
        ("invariance", {"perturb": []}, "perturb"),
        ("invariance", {"perturb": ["typos"], "max_flip_rate": 2}, "max_flip_rate"),
        ("invariance", {"perturb": ["typos"], "max_fail_rate": 0.1}, "max_fail_rate"),
        ("directional", {"perturb": "negation"}, "expect"),
        ("directional", {"perturb": "negation", "expect": "flip", "confidence": 1}, "confidence"),
        ("mft", {}, "min_pass"),
        ("mft", {"min_pass": 0.5, "space": "other"}, "space"),
    ],
)
def test_bad_checklist_arguments(kind: str, kwargs: dict, argument: str) -> None:
    with pytest.raises(MarkerArgumentError) as info:
        parse_checklist(kind, (), kwargs, space_exists=exists,
                        perturbation_exists=perturbation_exists)
    assert info.value.argument == argument
    assert f"@pytest.mark.{kind}" in str(info.value)


def test_checklist_defaults_and_single_perturbation() -> None:
    spec = parse_checklist("invariance", (), {"perturb": "typos"}, space_exists=exists,
                           perturbation_exists=perturbation_exists)
    assert spec.perturb == ("typos",)
    assert spec.thresholds == {"max_flip_rate": 0.0}
    callable_spec = parse_checklist(
        "directional", (), {"perturb": [lambda ex: [ex]], "expect": "flip"},
        space_exists=exists, perturbation_exists=perturbation_exists,
    )
    assert callable(callable_spec.perturb[0])
    assert callable_spec.thresholds == {"max_fail_rate": 0.0}
