"""The four markers: their ``pytest --markers`` text and their validation at collection.

`contract.markers` holds the argument names, defaults and checks (no pytest there); this module
reads a collected item's markers and hands their arguments over. A bad argument is a
`MarkerArgumentError`, which the hook wiring collects into one usage error naming every test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_reliable.contract.settings import Settings

if TYPE_CHECKING:
    from typing import TypeVar, overload

    from typing_extensions import Unpack

    from pytest_reliable.contract.markers import (
        ChecklistSpec,
        DirectionalArguments,
        InvarianceArguments,
        MftArguments,
        ReliableArguments,
        ReliableSpec,
    )

    _Markable = TypeVar("_Markable", bound=Callable[..., object] | type)

    # The decorators as a type checker sees them (as pytest types its own, e.g.
    # _ParametrizeMarkDecorator): ``@reliable(min_scor=0.4)``, ``decide="pass_on_evidence"`` or
    # ``n="ten"`` is a mypy error in the user's test. At run time they are pytest's own.
    class _ReliableMarkDecorator(pytest.MarkDecorator):
        @overload  # type: ignore[override,no-overload-impl]
        def __call__(self, arg: _Markable, /) -> _Markable: ...
        @overload
        def __call__(self, **arguments: Unpack[ReliableArguments]) -> pytest.MarkDecorator: ...

    class _InvarianceMarkDecorator(pytest.MarkDecorator):
        @overload  # type: ignore[override,no-overload-impl]
        def __call__(self, arg: _Markable, /) -> _Markable: ...
        @overload
        def __call__(self, **arguments: Unpack[InvarianceArguments]) -> pytest.MarkDecorator: ...

    class _DirectionalMarkDecorator(pytest.MarkDecorator):
        @overload  # type: ignore[override,no-overload-impl]
        def __call__(self, arg: _Markable, /) -> _Markable: ...
        @overload
        def __call__(self, **arguments: Unpack[DirectionalArguments]) -> pytest.MarkDecorator: ...

    class _MftMarkDecorator(pytest.MarkDecorator):
        @overload  # type: ignore[override,no-overload-impl]
        def __call__(self, arg: _Markable, /) -> _Markable: ...
        @overload
        def __call__(self, **arguments: Unpack[MftArguments]) -> pytest.MarkDecorator: ...

    reliable: _ReliableMarkDecorator
    invariance: _InvarianceMarkDecorator
    directional: _DirectionalMarkDecorator
    mft: _MftMarkDecorator
else:
    # Decorator aliases: ``from pytest_reliable import reliable`` then ``@reliable(...)``.
    reliable = pytest.mark.reliable
    invariance = pytest.mark.invariance
    directional = pytest.mark.directional
    mft = pytest.mark.mft

MARKER_PURPOSE = {
    "reliable": "evaluate the model under resampled meaning-preserving prompt variants and gate "
                "on robustness thresholds.",
    "invariance": "CheckList INV test: predictions must not change under the listed "
                  "perturbations.",
    "directional": "CheckList DIR test: predictions must change in the expected direction.",
    "mft": "CheckList minimum functionality test.",
}
CHECKLIST_KINDS = ("invariance", "directional", "mft")
MARKER_ERROR = "bad pytest-reliable marker arguments (nothing was run):\n"
"""Heading of the usage error (and of a worker's collect error) for bad marker arguments."""


def register_markers(config: pytest.Config) -> None:
    """The four markers, known to ``--strict-markers``. Their arguments, read from contract.markers
    (which imports numpy with the space package), are listed only for ``pytest --markers``,
    the one place that shows them."""
    listing = getattr(config.option, "markers", False)
    for kind, purpose in MARKER_PURPOSE.items():
        config.addinivalue_line("markers", marker_help(kind) if listing else f"{kind}: {purpose}")


def marker_help(kind: str) -> str:
    """``pytest --markers`` text, derived from contract.markers' argument sets (cannot drift)."""
    import dataclasses

    from pytest_reliable.contract.markers import (
        CHECKLIST_ARGUMENTS,
        CHECKLIST_DEFAULTS,
        CHECKLIST_THRESHOLDS,
        ChecklistSpec,
        ReliableSpec,
    )

    def default(spec: type, name: str) -> str:
        fields = {f.name: f for f in dataclasses.fields(spec)}
        if name in ("perturb",):
            return "[...]"
        if name == "expect":
            return "..."
        if name not in fields or fields[name].default is dataclasses.MISSING:
            return "..."
        return repr(fields[name].default)

    if kind == "reliable":
        arguments = [f"{f.name}={default(ReliableSpec, f.name)}"
                     for f in dataclasses.fields(ReliableSpec)]
    else:
        thresholds = [f"{name}={CHECKLIST_DEFAULTS[kind].get(name, '...')!r}".replace("'...'", "...")
                      for name in CHECKLIST_THRESHOLDS[kind]]
        first = [name for name in ("perturb", "expect") if name in CHECKLIST_ARGUMENTS[kind]]
        rest = sorted(CHECKLIST_ARGUMENTS[kind] - set(first))
        arguments = ([f"{name}={default(ChecklistSpec, name)}" for name in first] + thresholds
                     + [f"{name}={default(ChecklistSpec, name)}" for name in rest])
    return f"{kind}({', '.join(arguments)}): {MARKER_PURPOSE[kind]}"


def kind_of(item: pytest.Item) -> str | None:
    """The pytest-reliable kind of ``item`` (its marker, or "reliable" for the bare fixture)."""
    for kind in ("reliable", *CHECKLIST_KINDS):
        if item.get_closest_marker(kind) is not None:
            return kind
    return "reliable" if "reliable" in getattr(item, "fixturenames", ()) else None


def has_marker(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(kind) is not None for kind in MARKER_PURPOSE)


def perturbation_exists(kind: str, name: str) -> bool:
    from pytest_reliable.checklist import resolve_perturbation

    try:
        resolve_perturbation(name, kind=kind)
    except (ValueError, KeyError):
        return False
    return True


def parse_item_markers(
    item: pytest.Item, settings: Settings, *, space_exists: Callable[[Any], bool],
    has_baseline: bool, explain_space: Callable[[Any], str] | None = None,
) -> dict[str, ReliableSpec | ChecklistSpec]:
    """Every pytest-reliable marker of ``item``, validated (`MarkerArgumentError` otherwise).

    ``space_exists(space)`` tells a declared space (or one given as a `Space`) from a misspelt
    name (``explain_space(space)``: what an undeclared one is told); ``has_baseline``: a
    baseline comes from the options or the ``reliable_baseline`` fixture, so
    ``max_regression=`` has something to compare against."""
    from pytest_reliable.contract.markers import (
        MarkerArgumentError,
        parse_checklist,
        parse_reliable,
    )

    specs: dict[str, ReliableSpec | ChecklistSpec] = {}
    marker = item.get_closest_marker("reliable")
    if marker is not None:
        if marker.args:
            raise MarkerArgumentError("reliable", "positional arguments", marker.args,
                                      "pass arguments by name")
        specs["reliable"] = spec = parse_reliable(
            marker.kwargs, space_exists=space_exists, has_baseline=has_baseline,
            n_default=default_resamplings(settings), decide_default=settings.decide,
            explain_space=explain_space,
        )
        if spec.baseline is not None:
            check_marker_baseline(spec.baseline, settings)
    for kind in CHECKLIST_KINDS:
        marker = item.get_closest_marker(kind)
        if marker is not None:
            specs[kind] = parse_checklist(
                kind, marker.args, marker.kwargs, space_exists=space_exists,
                perturbation_exists=perturbation_exists, explain_space=explain_space,
            )
    return specs


def default_resamplings(settings: Settings) -> int | None:
    """The resamplings of a test without its own ``n``: ``--reliable-n N``, else the default;
    None under ``--reliable-n auto`` (n* is known only after the pilot)."""
    from pytest_reliable.run.session import DEFAULT_N

    if isinstance(settings.n, int):
        return settings.n
    return DEFAULT_N if settings.n is None else None


def check_marker_baseline(name: str, settings: Settings) -> None:
    from pytest_reliable.contract.markers import MarkerArgumentError
    from pytest_reliable.verdict.baseline import BaselineUsageError, check_model_name

    try:
        check_model_name(name, settings.baseline_base_url or settings.base_url,
                         settings.api_key_env)
    except BaselineUsageError as error:
        raise MarkerArgumentError("reliable", "baseline", name, str(error)) from None
