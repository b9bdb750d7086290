"""The shape of one test's entry in the JSON report (SPEC section 8), defined once.

`ReliableReport.entry` and `ChecklistReport.entry` (report/model.py) build these; the writers
(terminal, JSON, JUnit, Markdown, HTML) and pytest-xdist's controller read them. Changing a key
here changes the published JSON: acceptance tests outside the repository read it.

Values are JSON-safe (`model.json_safe`: NaN/inf become null), so statistics that a Python object
holds as a float are ``float | None`` in an entry. The ``baseline`` section (SPEC 9) stays a plain
mapping here: its shape belongs to `pytest_reliable.baseline`.
"""

from __future__ import annotations

from typing import Any, TypedDict


class GroupEntry(TypedDict):
    """One group of a range (a format, a dimension value, an order position)."""

    score: float | None
    cells: int
    low: float | None
    high: float | None
    thin: bool
    description: str


class RangeEntry(TypedDict):
    """``formats`` / ``orders``: min, median, max over the pre-registered grouping's groups."""

    min: float | None
    median: float | None
    max: float | None
    grouping: str
    per_variant: dict[str, GroupEntry]
    noise_floor: float | None


class CanonicalEntry(TypedDict):
    """The canonical pass: pass@1 with its Wilson (or clustered) interval."""

    score: float
    wilson_low: float
    wilson_high: float
    n: int
    interval_method: str


class SummaryFields(TypedDict):
    """The entry fields that come from the score matrix (`summary.Summary.fields`), as the
    Python objects hold them; what ``report.mean``, ``report.canonical[...]``, ... return."""

    n_resamplings: int
    mean: float
    std: float
    canonical: CanonicalEntry
    formats: RangeEntry
    orders: RangeEntry
    dimensions: dict[str, dict[str, float]]
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float
    k: int
    n_star: int | None
    n_star_reliable: bool | None
    achievable_eps: float | None
    unparsed: int


class _ThresholdRequired(TypedDict):
    name: str
    limit: float
    observed: float | None
    passed: bool


class ThresholdEntry(_ThresholdRequired, total=False):
    """One threshold check; ``bound``/``decide``/``method`` when it was decided on evidence."""

    bound: float | None
    decide: str
    method: str


class _CallsRequired(TypedDict):
    made: int
    cached: int


class CallsEntry(_CallsRequired, total=False):
    """Model calls made and served from the cache; token counts when the model reports them."""

    prompt_tokens_sent: int
    prompt_tokens_evaluated: int


class WorstVariantEntry(TypedDict):
    """The worst group of the format range, with one rendered prompt and the model's answer."""

    key: str
    grouping: str
    score: float | None
    low: float | None
    high: float | None
    description: str
    prompt: str
    answer: str | None


class InstanceEntry(TypedDict):
    """Per instance (SPEC 9, what a later baseline comparison pairs with)."""

    mean: float
    scores: list[float]
    canonical: list[float]


class ReliableEntry(TypedDict):
    """A ``reliable`` test. The statistics (the `SummaryFields` keys, plus ``resampling_scores``,
    ``per_instance`` and ``baseline``) are null when the verdict is ``error``."""

    nodeid: str
    kind: str
    verdict: str
    model: str
    space: str
    space_hash: str
    mode: str
    # -- SummaryFields, nullable (tests/test_typing.py checks the two lists agree) --
    n_resamplings: int | None
    mean: float | None
    std: float | None
    canonical: CanonicalEntry | None
    formats: RangeEntry | None
    orders: RangeEntry | None
    dimensions: dict[str, dict[str, float]] | None
    pass_at_1: float | None
    pass_at_k: float | None
    pass_hat_k: float | None
    k: int | None
    n_star: int | None
    n_star_reliable: bool | None
    achievable_eps: float | None
    unparsed: int | None
    # -- the test's settings and outcome --
    temperature: float
    eps: float
    delta: float
    n_star_source: str | None
    n_star_method: str | None
    n_star_paper: int | None
    pilot_n: int | None
    stopped_early: bool
    stop_reason: str | None
    calls: CallsEntry
    decide: str | None
    confidence: float
    thresholds: list[ThresholdEntry]
    worst_variant: WorstVariantEntry | None
    notes: list[str]
    message: str | None
    dataset_hash: str | None
    resampling_scores: list[float] | None
    per_instance: list[InstanceEntry] | None
    baseline: dict[str, Any] | None


class FailureEntry(TypedDict):
    """One failing CheckList case (MFT: ``perturbed`` null, ``before`` the expected label)."""

    original: str
    perturbed: str | None
    before: str
    after: str


class ChecklistEntry(TypedDict):
    """An ``invariance`` / ``directional`` / ``mft`` test."""

    kind: str
    rate: float | None
    interval: list[float | None]
    pairs: int
    unparsed: int
    failures: list[FailureEntry]
    thresholds: list[ThresholdEntry]
    decide: str
    """The policy the thresholds were decided under (SPEC section 11)."""
    nodeid: str
    verdict: str
    model: str
    space_hash: str | None
    calls: CallsEntry
    message: str | None


class _ErrorRequired(TypedDict):
    nodeid: str
    kind: str
    verdict: str
    message: str


class ErrorEntry(_ErrorRequired, total=False):
    """A test that stopped before it had a report (a `ReliableError`: bad data, a model that
    cannot be reached, ...). ``usage_error``: a misconfigured baseline comparison."""

    usage_error: bool


Entry = ReliableEntry | ChecklistEntry | ErrorEntry
"""One element of the JSON report's ``tests`` list."""
