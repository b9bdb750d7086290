"""Marker arguments: the allowed names, their types, defaults and validation (SPEC section 4).

No pytest here: `parse_marker` turns a marker's kwargs into a frozen spec or raises
`MarkerArgumentError`, which the plugin turns into a `pytest.UsageError` naming the test.

The user's doors are typed: `ReliableArguments` is every ``@reliable`` argument (and every
``reliable.evaluate(**overrides)`` key, which are the same), `InvarianceArguments`,
`DirectionalArguments` and `MftArguments` the CheckList markers' (and their methods'), so
``mypy --strict`` on a test that unpacks them catches ``min_scor=0.4``,
``decide="pass_on_evidence"`` or ``n="ten"`` before a run does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypedDict

# The vocabulary (policies, modes, groupings, thresholds) lives in `contract.vocabulary`;
# these names stay importable from here, as they were before it moved.
from pytest_reliable.contract.vocabulary import CHECKLIST_THRESHOLDS as CHECKLIST_THRESHOLDS
from pytest_reliable.contract.vocabulary import (
    DEFAULT_POLICY,
    FAIL_ON_EVIDENCE,
    PASS_ON_EVIDENCE,
    SEARCHES,
    Grouping,
    Mode,
    OrderGrouping,
    Policy,
    Search,
    is_policy,
)
from pytest_reliable.contract.vocabulary import GROUPINGS as GROUPINGS
from pytest_reliable.contract.vocabulary import MODES as MODES
from pytest_reliable.contract.vocabulary import ORDER_GROUPINGS as ORDER_GROUPINGS
from pytest_reliable.contract.vocabulary import POLICIES as POLICIES
from pytest_reliable.contract.vocabulary import RELIABLE_THRESHOLDS as RELIABLE_THRESHOLDS
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.space import VALUE_DIMENSIONS, Space

GROUPABLE_DIMENSIONS = VALUE_DIMENSIONS
"""Dimension names ``group_by=[...]`` may list (every space has them; undeclared = one value)."""


class MarkerArgumentError(ValueError):
    """A marker argument is unknown or out of range; the message names argument, value, allowed."""

    def __init__(self, marker: str, argument: str, value: Any, allowed: str) -> None:
        self.marker, self.argument, self.value, self.allowed = marker, argument, value, allowed
        super().__init__(
            f"@pytest.mark.{marker}: argument {argument}={value!r} is not allowed; {allowed}"
        )


@dataclass(frozen=True)
class ReliableSpec:
    """The arguments of ``@pytest.mark.reliable``; None means "not set" (defaults apply)."""

    space: Any = None
    eps: float = 0.01
    delta: float = 0.1
    n: int | None = None
    mode: Mode = "ilr"
    confidence: float = 0.95
    temperature: float | None = None
    k: int = 1
    min_cells: int = 20
    max_tokens: int = 32
    min_score: float | None = None
    min_lower_ci: float | None = None
    min_median: float | None = None
    min_worst: float | None = None
    max_spread: float | None = None
    max_std: float | None = None
    min_pass_at_k: float | None = None
    min_pass_hat_k: float | None = None
    min_maj_at_k: float | None = None
    """Majority vote of the canonical pass's k samples (SPEC section 12), ties wrong."""
    min_win_rate: float | None = None
    """A pairwise judge's win rate of the candidate over its baseline (SPEC section 12)."""
    circular: bool = False
    """Also ask every cyclic shift of each instance's options at the canonical format."""
    min_circular: float | None = None
    """The share of instances right under every cyclic shift (needs ``circular=True``)."""
    decide: Policy | None = None
    """One of POLICIES; None = the project default (``--reliable-decide``)."""
    group_by: Grouping | tuple[str, ...] | None = None
    """"formats", "dimensions" or dimension names; None = "formats" in fixed, "dimensions" in ilr."""
    order_group_by: OrderGrouping = "gold_position"

    def grouping(self) -> Grouping | tuple[str, ...]:
        """The pre-registered grouping of the format range (the mode's default when unset)."""
        if self.group_by is not None:
            return self.group_by
        return "formats" if self.mode == "fixed" else "dimensions"

    def search_under(self, default: Search | None) -> Search:
        """The test's search (SPEC 14): the marker's, else the project's ``default``
        (``--reliable-search``), else "uniform"."""
        return self.search or default or "uniform"

    def stops_early_under(self, default: bool) -> bool:
        """Whether the test stops once its verdicts are settled: the marker's ``stop_early``,
        else the project's ``default`` (``--reliable-stop-early``)."""
        return self.stop_early if self.stop_early is not None else default
    stop_early: bool | None = None
    """Stop the resamplings once every verdict is settled; None = ``--reliable-stop-early``."""
    search: Search | None = None
    """How resamplings are chosen (SPEC section 14); None = ``--reliable-search``."""
    min_quantile: tuple[float, float] | None = None
    """``(q, limit)``: the q-quantile of the format-level scores must clear ``limit``; refused
    until its bound's error rates are measured (SPEC section 14)."""
    # Release candidate vs baseline (SPEC section 9).
    baseline: str | None = None
    max_regression: float | None = None


@dataclass(frozen=True)
class ChecklistSpec:
    """The arguments of ``invariance`` / ``directional`` / ``mft`` markers."""

    kind: str
    perturb: tuple[Any, ...] = ()
    expect: Any = None
    space: Any = None
    confidence: float = 0.95
    tolerance: float | None = None
    decide: Policy | None = None
    """One of POLICIES; None = the project default (``--reliable-decide``)."""
    max_tokens: int = 32
    thresholds: dict[str, float] = field(default_factory=dict)


# -- the user's doors, typed (total=False: every argument may be left out) -------------------------
class ReliableArguments(TypedDict, total=False):
    """``@pytest.mark.reliable(...)``'s arguments, also ``reliable.evaluate(**overrides)``'s.

    A value of None means "not set" wherever the marker accepts it (an override of None clears
    the marker's value). Names and values are validated by `parse_reliable` all the same: these
    types are what a type checker can catch earlier.
    """

    space: str | Space | None
    """A space declared under ``spaces:`` in reliable.yaml, or a `Space`."""
    eps: float
    delta: float
    n: int | None
    mode: Mode
    confidence: float
    temperature: float | None
    k: int
    min_cells: int
    max_tokens: int
    min_score: float | None
    min_lower_ci: float | None
    min_median: float | None
    min_worst: float | None
    max_spread: float | None
    max_std: float | None
    min_pass_at_k: float | None
    min_pass_hat_k: float | None
    min_maj_at_k: float | None
    min_win_rate: float | None
    circular: bool
    min_circular: float | None
    decide: Policy | None
    group_by: Grouping | list[str] | tuple[str, ...] | None
    """A named grouping, or a list of the space's dimension names (see GROUPABLE_DIMENSIONS)."""
    order_group_by: OrderGrouping
    stop_early: bool | None
    search: Search | None
    """"uniform", "adaptive" or "thompson" (SPEC section 14)."""
    min_quantile: tuple[float, float] | None
    baseline: str | None
    """A model name for the OpenAI-compatible adapter, or 'local' for the embedded model."""
    max_regression: float | None


PerturbArgument: TypeAlias = str | Callable[..., Any]
"""A built-in perturbation's name, or a callable ``example -> list[example]``."""


class _ChecklistArguments(TypedDict, total=False):
    """The arguments every CheckList marker takes."""

    space: str | Space | None
    confidence: float
    decide: Policy | None
    max_tokens: int


class InvarianceArguments(_ChecklistArguments, total=False):
    """The ``invariance`` marker's arguments, also ``reliable.invariance(**overrides)``'s."""

    perturb: PerturbArgument | Sequence[PerturbArgument]
    tolerance: float | None
    max_flip_rate: float | None


class DirectionalArguments(_ChecklistArguments, total=False):
    """The ``directional`` marker's arguments, also ``reliable.directional(**overrides)``'s."""

    perturb: PerturbArgument | Sequence[PerturbArgument]
    expect: Any
    """A label, "flip", "increase", "decrease" or a callable ``(before, after) -> bool``."""
    max_fail_rate: float | None


class MftArguments(_ChecklistArguments, total=False):
    """The ``mft`` marker's arguments, also ``reliable.mft(**overrides)``'s."""

    min_pass: float


CHECKLIST_DEFAULTS: dict[str, dict[str, float]] = {
    "invariance": {"max_flip_rate": 0.0},
    "directional": {"max_fail_rate": 0.0},
    "mft": {},
}
_CHECKLIST_COMMON = {"space", "confidence", "decide", "max_tokens"}
CHECKLIST_ARGUMENTS: dict[str, set[str]] = {
    "invariance": {"perturb", "tolerance", *_CHECKLIST_COMMON},
    "directional": {"perturb", "expect", *_CHECKLIST_COMMON},
    "mft": set(_CHECKLIST_COMMON),
}
RELIABLE_ARGUMENTS = set(ReliableSpec.__dataclass_fields__)


def _number(marker: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise MarkerArgumentError(marker, name, value, "it must be a number")
    return float(value)


def _open_unit(marker: str, name: str, value: Any) -> float:
    number = _number(marker, name, value)
    if not 0.0 < number < 1.0:
        raise MarkerArgumentError(marker, name, value, "allowed: a number strictly between 0 and 1")
    return number


def _unit(marker: str, name: str, value: Any) -> float:
    number = _number(marker, name, value)
    if not 0.0 <= number <= 1.0:
        raise MarkerArgumentError(marker, name, value, "allowed: a threshold in [0, 1]")
    return number


def _positive_int(marker: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MarkerArgumentError(marker, name, value, "allowed: an integer >= 1")
    return value


def _unknown(marker: str, kwargs: Mapping[str, Any], allowed: set[str]) -> None:
    for name in kwargs:
        if name not in allowed:
            raise MarkerArgumentError(
                marker, name, kwargs[name], "allowed arguments: " + ", ".join(sorted(allowed))
            )


def parse_reliable(
    kwargs: Mapping[str, Any], *, space_exists: Callable[[Any], bool], has_baseline: bool = True,
    n_default: int | None = None, decide_default: Policy = DEFAULT_POLICY,
    explain_space: Callable[[Any], str] | None = None, search_default: Search = "uniform",
) -> ReliableSpec:
    """Validate ``@pytest.mark.reliable(**kwargs)``. ``search_default``: ``--reliable-search``. ``space_exists`` checks a space name;
    ``has_baseline``: whether a baseline is configured outside the marker (fixture, options);
    ``n_default`` / ``decide_default``: the resamplings and the policy of a marker without its own
    (None: not known before the run, as under ``--reliable-n auto``); ``explain_space``: what
    a space name that is not declared is told (default: to declare it in reliable.yaml)."""
    marker = "reliable"
    _unknown(marker, kwargs, RELIABLE_ARGUMENTS)
    values: dict[str, Any] = dict(kwargs)
    for name in ("eps", "delta", "confidence"):
        if name in values:
            values[name] = _open_unit(marker, name, values[name])
    for name in ("k", "min_cells", "max_tokens"):
        if name in values:
            values[name] = _positive_int(marker, name, values[name])
    if values.get("n") is not None:
        values["n"] = _positive_int(marker, "n", values["n"])
    if values.get("temperature") is not None:
        temperature = _number(marker, "temperature", values["temperature"])
        if temperature < 0:
            raise MarkerArgumentError(marker, "temperature", temperature, "allowed: a number >= 0")
        values["temperature"] = temperature
    if "mode" in values and values["mode"] not in MODES:
        raise MarkerArgumentError(
            marker, "mode", values["mode"], "allowed: " + " or ".join(repr(m) for m in MODES)
        )
    for name in RELIABLE_THRESHOLDS:
        if values.get(name) is not None:
            values[name] = _unit(marker, name, values[name])
    if values.get("decide") is not None:
        values["decide"] = check_policy(marker, "decide", values["decide"])
    if values.get("group_by") is not None:
        values["group_by"] = _group_by(marker, values["group_by"])
    if "order_group_by" in values and values["order_group_by"] not in ORDER_GROUPINGS:
        raise MarkerArgumentError(
            marker, "order_group_by", values["order_group_by"],
            "allowed: " + " or ".join(repr(g) for g in ORDER_GROUPINGS),
        )
    if values.get("stop_early") is not None and not isinstance(values["stop_early"], bool):
        raise MarkerArgumentError(marker, "stop_early", values["stop_early"], "allowed: True or False")
    if values.get("search") is not None and values["search"] not in SEARCHES:
        raise MarkerArgumentError(marker, "search", values["search"],
                                  "allowed: " + ", ".join(repr(s) for s in SEARCHES))
    if values.get("min_quantile") is not None:
        values["min_quantile"] = _quantile(marker, values["min_quantile"])
    _check_space(marker, values.get("space"), space_exists, explain_space)
    _check_baseline(marker, values, has_baseline)
    if "circular" in values and not isinstance(values["circular"], bool):
        raise MarkerArgumentError(marker, "circular", values["circular"], "allowed: True or False")
    if values.get("min_circular") is not None and not values.get("circular"):
        raise MarkerArgumentError(marker, "min_circular", values["min_circular"],
                                  "it needs circular=True (the cyclic shifts it is decided on)")
    spec = ReliableSpec(**values)
    check_max_std_resamplings(spec, spec.n or n_default, spec.decide or decide_default)
    check_search(spec, spec.search_under(search_default), spec.decide or decide_default)
    return spec


def _quantile(marker: str, value: Any) -> tuple[float, float]:
    allowed = "allowed: a pair (q, limit) with 0 < q < 1 and 0 <= limit <= 1"
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise MarkerArgumentError(marker, "min_quantile", value, allowed)
    try:
        q, limit = _number(marker, "min_quantile", value[0]), _number(marker, "min_quantile",
                                                                     value[1])
    except MarkerArgumentError:
        raise MarkerArgumentError(marker, "min_quantile", value, allowed) from None
    if not (0.0 < q < 1.0 and 0.0 <= limit <= 1.0):
        raise MarkerArgumentError(marker, "min_quantile", value, allowed)
    return q, limit


ADAPTIVE_REFUSED = {
    "max_std": "its error rates are not measured under adaptive search (rounds chosen by their "
               "group are not resamplings drawn from the space, whose spread max_std bounds); "
               "use search='uniform' for this test",
}
"""Thresholds ``search="adaptive"`` refuses up front, and why (SPEC section 14)."""


def check_search(spec: ReliableSpec, search: str, decide: Policy) -> None:
    """`MarkerArgumentError` for what cannot be decided with its promises kept:
    ``min_quantile`` under every policy and search (no bound of it has measured error rates
    yet: SPEC section 14), ``max_std`` under ``search="adaptive"``."""
    if spec.min_quantile is not None:
        raise MarkerArgumentError(
            "reliable", "min_quantile", spec.min_quantile,
            f"min_quantile is not supported under {decide}: its bound's error rates are not "
            "measured (SPEC section 14); use min_worst (every group) or min_median instead",
        )
    if search == "thompson" and spec.mode != "fixed":
        raise MarkerArgumentError(
            "reliable", "search", search,
            "search='thompson' pulls one format at a time, which needs mode='fixed' (an ilr "
            "resampling mixes formats); set mode='fixed', or search='uniform'/'adaptive'")
    if search == "adaptive":
        for name, why in ADAPTIVE_REFUSED.items():
            if getattr(spec, name) is not None:
                raise MarkerArgumentError("reliable", name, getattr(spec, name),
                                          f"not with search='adaptive': {why}")


MAX_STD_MIN_N: dict[Mode, int] = {"ilr": 2, "fixed": 10}
"""The fewest resamplings ``max_std`` is decided on evidence with. ilr: the bound comes from each
instance's variance over its cells, which needs two of them. fixed: the bound comes from the n
per-resampling scores alone (chi-square, degrees of freedom corrected for their kurtosis), and
below 10 a kurtosis cannot be told from noise: fail-on-evidence then failed a compliant model
15-20% of the time (one collapsing format among 24, n=5)."""


def max_std_least_instances(mode: Mode, n: int) -> int:
    """The fewest instances ``max_std`` is decided on under fail-on-evidence with ``n``
    resamplings. fixed: which instances were drawn moves the spread over resamplings itself,
    and the bound's jackknife over instances stands in for that only while the resamplings' own
    noise dominates, at n <= N: with more resamplings than instances a compliant model failed
    8-12% of the time (N=8, n=30; N=12-30, n=100; intra-instance correlation 0.8), at n <= N at
    most 3-4% (``benchmarks/bench_small_samples.py --std-grid-only``). ilr bounds it from the
    instances' own cells at any N."""
    return n if mode == "fixed" else 1


class TooFewInstancesError(ReliableConfigError):
    """A threshold cannot keep its promise on a dataset this small: a usage error (exit code 4),
    raised before any model call."""


def check_max_std_instances(spec: ReliableSpec, instances: int, n: int,
                            decide: Policy) -> None:
    """`TooFewInstancesError` when ``max_std`` is decided on fail-on-evidence over fewer
    instances than its bound needs in the test's mode (`max_std_least_instances`)."""
    if spec.max_std is None or decide != FAIL_ON_EVIDENCE:
        return
    least = max_std_least_instances(spec.mode, n)
    if instances < least:
        raise TooFewInstancesError(
            f"max_std={spec.max_std:g} under {decide} in {spec.mode} mode with n={n} "
            f"resamplings needs N >= {least} instances (this dataset has {instances}): with "
            "more resamplings than instances, which instances were drawn decides the spread "
            "over resamplings and a compliant model fails too often; use at least as many "
            "instances as resamplings, mode='ilr', or decide='pass-on-evidence'")


def check_max_std_resamplings(spec: ReliableSpec, n: int | None, decide: Policy) -> None:
    """`MarkerArgumentError` when ``max_std`` is decided on evidence with fewer resamplings than
    its bound needs (`MAX_STD_MIN_N`); ``n`` None (not known yet) passes."""
    if spec.max_std is None or n is None or decide not in (PASS_ON_EVIDENCE, FAIL_ON_EVIDENCE):
        return
    least = MAX_STD_MIN_N[spec.mode]
    if n < least:
        raise MarkerArgumentError(
            "reliable", "max_std", spec.max_std,
            f"under {decide} in {spec.mode} mode it needs n >= {least} resamplings (this test "
            f"runs {n}); set n={least} or more on the marker (or --reliable-n), or "
            "decide='estimate'",
        )


def check_policy(marker: str, name: str, value: Any) -> Policy:
    """``value`` if it is one of POLICIES, else a `MarkerArgumentError` listing them."""
    if not is_policy(value):
        raise MarkerArgumentError(
            marker, name, value, "allowed: " + ", ".join(repr(p) for p in POLICIES)
        )
    return POLICIES[POLICIES.index(value)]  # POLICIES' own str, not a str subclass passed in


def _group_by(marker: str, value: Any) -> str | tuple[str, ...]:
    allowed = (
        "allowed: 'formats', 'dimensions' or a list of dimension names ("
        + ", ".join(GROUPABLE_DIMENSIONS) + ")"
    )
    if isinstance(value, str):
        if value in GROUPINGS:
            return value
        raise MarkerArgumentError(marker, "group_by", value, allowed)
    if not isinstance(value, (list, tuple)) or not value:
        raise MarkerArgumentError(marker, "group_by", value, allowed)
    for name in value:
        if name not in GROUPABLE_DIMENSIONS:
            raise MarkerArgumentError(
                marker, "group_by", value,
                f"{name!r} is not a dimension of the space; " + allowed,
            )
    return tuple(dict.fromkeys(value))


def _check_baseline(marker: str, values: dict[str, Any], has_baseline: bool) -> None:
    """``baseline``: a model name or None; ``max_regression`` in [0, 1], only with a baseline."""
    baseline = values.get("baseline")
    if baseline is not None and (not isinstance(baseline, str) or not baseline.strip()):
        raise MarkerArgumentError(
            marker, "baseline", baseline,
            "allowed: a model name for the OpenAI-compatible adapter, 'local' for the embedded "
            "model, or None (use the reliable_baseline fixture or --reliable-baseline-*)",
        )
    if values.get("max_regression") is not None:
        values["max_regression"] = _unit(marker, "max_regression", values["max_regression"])
        if baseline is None and not has_baseline:
            raise MarkerArgumentError(
                marker, "max_regression", values["max_regression"],
                "it needs a baseline and none is configured: give baseline='NAME' (or 'local'), "
                "a reliable_baseline fixture, --reliable-baseline-model or "
                "--reliable-baseline-report",
            )
    if values.get("min_win_rate") is not None and baseline is None and not has_baseline:
        raise MarkerArgumentError(
            marker, "min_win_rate", values["min_win_rate"],
            "it needs a baseline model for a pairwise Judge and none is configured: give "
            "baseline='NAME' (or 'local'), a reliable_baseline fixture or "
            "--reliable-baseline-model",
        )


def parse_checklist(
    kind: str,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    *,
    space_exists: Callable[[Any], bool],
    perturbation_exists: Callable[[str, str], bool],
    explain_space: Callable[[Any], str] | None = None,
) -> ChecklistSpec:
    """Validate an ``invariance`` / ``directional`` / ``mft`` marker."""
    allowed = CHECKLIST_ARGUMENTS[kind] | set(CHECKLIST_THRESHOLDS[kind])
    if args:
        raise MarkerArgumentError(kind, "positional arguments", args, "pass arguments by name")
    _unknown(kind, kwargs, allowed)
    thresholds = dict(CHECKLIST_DEFAULTS[kind])
    for name in CHECKLIST_THRESHOLDS[kind]:
        if kwargs.get(name) is not None:
            thresholds[name] = _unit(kind, name, kwargs[name])
    if kind == "mft" and "min_pass" not in thresholds:
        raise MarkerArgumentError(kind, "min_pass", None, "mft needs min_pass=<a rate in [0, 1]>")
    confidence = _open_unit(kind, "confidence", kwargs.get("confidence", 0.95))
    perturb = kwargs.get("perturb", ())
    if isinstance(perturb, str) or callable(perturb):
        perturb = (perturb,)
    perturb = tuple(perturb)
    if kind != "mft" and not perturb:
        raise MarkerArgumentError(kind, "perturb", perturb, "name at least one perturbation")
    for item in perturb:
        if isinstance(item, str):
            if not perturbation_exists(kind, item):
                raise MarkerArgumentError(kind, "perturb", item, "unknown perturbation name")
        elif not callable(item):
            raise MarkerArgumentError(
                kind, "perturb", item, "a perturbation is a built-in name or a callable"
            )
    expect = kwargs.get("expect")
    if kind == "directional" and expect is None:
        raise MarkerArgumentError(
            kind, "expect", None, "give a label, 'flip', 'increase', 'decrease' or a callable"
        )
    tolerance = kwargs.get("tolerance")
    if tolerance is not None:
        tolerance = _number(kind, "tolerance", tolerance)
    max_tokens = _positive_int(kind, "max_tokens", kwargs.get("max_tokens", 32))
    decide = kwargs.get("decide")
    if decide is not None:
        decide = check_policy(kind, "decide", decide)
    _check_space(kind, kwargs.get("space"), space_exists, explain_space)
    return ChecklistSpec(
        kind=kind,
        perturb=perturb,
        expect=expect,
        space=kwargs.get("space"),
        confidence=confidence,
        tolerance=tolerance,
        decide=decide,
        max_tokens=max_tokens,
        thresholds=thresholds,
    )


def _check_space(marker: str, space: Any, space_exists: Callable[[Any], bool],
                 explain_space: Callable[[Any], str] | None = None) -> None:
    if space is not None and not space_exists(space):
        raise MarkerArgumentError(
            marker, "space", space,
            explain_space(space) if explain_space is not None
            else "name a space declared under `spaces:` in reliable.yaml",
        )
