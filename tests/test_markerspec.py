"""Marker argument validation: every bad argument names the argument, the value and what is allowed."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest

from pytest_reliable.contract import vocabulary
from pytest_reliable.contract.markers import (
    CHECKLIST_ARGUMENTS,
    CHECKLIST_DEFAULTS,
    CHECKLIST_THRESHOLDS,
    RELIABLE_ARGUMENTS,
    DirectionalArguments,
    InvarianceArguments,
    MarkerArgumentError,
    MftArguments,
    ReliableArguments,
    ReliableSpec,
    parse_checklist,
    parse_reliable,
)


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


# -- the typed doors and the vocabulary cannot drift from what the markers accept ------------------
CHECKLIST_DOORS: dict[str, Any] = {
    "invariance": InvarianceArguments,
    "directional": DirectionalArguments,
    "mft": MftArguments,
}
CHECKLIST_MINIMUM: dict[str, dict[str, Any]] = {
    "invariance": {"perturb": "typos"},
    "directional": {"perturb": "negation", "expect": "flip"},
    "mft": {"min_pass": 0.5},
}


def keys(door: Any) -> set[str]:
    return set(door.__required_keys__) | set(door.__optional_keys__)


def literals(hint: Any) -> list[Any]:
    """The values of every `Literal` inside a type hint (through unions and Optional)."""
    if get_origin(hint) is Literal:
        return list(get_args(hint))
    if get_origin(hint) in (typing.Union, types.UnionType):
        return [value for arg in get_args(hint) for value in literals(arg)]
    return []


def test_the_typed_doors_name_exactly_the_accepted_arguments() -> None:
    assert keys(ReliableArguments) == RELIABLE_ARGUMENTS
    assert set(CHECKLIST_DOORS) == set(CHECKLIST_ARGUMENTS) == set(CHECKLIST_THRESHOLDS)
    for kind, door in CHECKLIST_DOORS.items():
        assert keys(door) == CHECKLIST_ARGUMENTS[kind] | set(CHECKLIST_THRESHOLDS[kind]), kind
    # Every key is optional: a marker may leave any argument out (mft's min_pass is checked at
    # run time, with a message saying what to give).
    for door in (ReliableArguments, *CHECKLIST_DOORS.values()):
        assert not door.__required_keys__


RELIABLE_HINTS = get_type_hints(ReliableArguments)


@pytest.mark.parametrize("name", sorted(n for n, hint in RELIABLE_HINTS.items() if literals(hint)))
def test_every_value_a_reliable_literal_allows_is_accepted_and_others_are_not(name: str) -> None:
    values = literals(RELIABLE_HINTS[name])
    assert values, name
    # search="thompson" pulls one format at a time: it is allowed in fixed mode only.
    companions = {"search": {"mode": "fixed"}}.get(name, {})
    for value in values:
        assert getattr(parse_reliable({name: value, **companions}, space_exists=exists),
                       name) == value
    with pytest.raises(MarkerArgumentError):
        parse_reliable({name: "not-" + str(values[0])}, space_exists=exists)


@pytest.mark.parametrize("kind", sorted(CHECKLIST_DOORS))
def test_every_policy_a_checklist_door_allows_is_accepted(kind: str) -> None:
    values = literals(get_type_hints(CHECKLIST_DOORS[kind])["decide"])
    assert values == list(vocabulary.POLICIES)
    for value in values:
        spec = parse_checklist(kind, (), {**CHECKLIST_MINIMUM[kind], "decide": value},
                               space_exists=exists, perturbation_exists=perturbation_exists)
        assert spec.decide == value


def test_the_vocabulary_tables_cover_their_literal_types() -> None:
    assert tuple(vocabulary.RELIABLE_THRESHOLDS) == get_args(vocabulary.ReliableThreshold)
    assert set(vocabulary.CHECKLIST_THRESHOLDS) == set(get_args(vocabulary.ChecklistKind))
    assert set(CHECKLIST_DEFAULTS) == set(get_args(vocabulary.ChecklistKind))
    assert set(vocabulary.CHECKLIST_DIRECTIONS) == set(get_args(vocabulary.ChecklistThreshold))
    assert list(vocabulary.DIRECTIONS) == [*vocabulary.RELIABLE_THRESHOLDS, "max_regression"]
    assert set(vocabulary.DIRECTIONS.values()) == set(get_args(vocabulary.Direction))
    assert vocabulary.POLICIES[0] == vocabulary.DEFAULT_POLICY == "pass-on-evidence"


@pytest.mark.parametrize(("kwargs", "n_default", "decide_default", "refused"), [
    ({"mode": "fixed", "max_std": 0.05, "n": 5}, 10, "pass-on-evidence", True),
    ({"mode": "fixed", "max_std": 0.05}, 5, "fail-on-evidence", True),  # --reliable-n 5
    ({"mode": "fixed", "max_std": 0.05, "n": 5, "decide": "estimate"}, 10, "pass-on-evidence",
     False),
    ({"mode": "fixed", "max_std": 0.05}, None, "pass-on-evidence", False),  # auto: not known yet
    ({"mode": "fixed", "max_std": 0.05, "n": 10}, 10, "pass-on-evidence", False),
    ({"mode": "ilr", "max_std": 0.05, "n": 1}, 10, "pass-on-evidence", True),
    ({"mode": "ilr", "max_std": 0.05, "n": 2}, 10, "pass-on-evidence", False),
    ({"mode": "fixed", "min_score": 0.5, "n": 2}, 10, "pass-on-evidence", False),
])
def test_max_std_on_evidence_needs_its_minimum_resamplings(
    kwargs: dict[str, Any], n_default: int | None, decide_default: str, refused: bool
) -> None:
    def parse() -> object:
        return parse_reliable(kwargs, space_exists=lambda s: True, n_default=n_default,
                              decide_default=decide_default)

    if refused:
        with pytest.raises(MarkerArgumentError, match=r"max_std.*needs n >= \d+ resamplings.*"
                                                      r"decide='estimate'"):
            parse()
    else:
        parse()


def test_the_marker_s_search_and_stop_early_win_over_the_project_s() -> None:
    """One owner for "this test's search" and "does it stop early" (the session, the plan and
    marker validation all ask `ReliableSpec`)."""
    assert ReliableSpec().search_under("adaptive") == "adaptive"
    assert ReliableSpec(search="thompson").search_under("adaptive") == "thompson"
    assert ReliableSpec().search_under(None) == "uniform"
    assert ReliableSpec().stops_early_under(True) is True
    assert ReliableSpec(stop_early=False).stops_early_under(True) is False
