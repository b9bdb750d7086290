"""The shape of the JSON report (SPEC section 8) and of one test's entry in it, defined once.

`ReliableReport.entry` and `ChecklistReport.entry` (`pytest_reliable.verdict.results`) build the
entries; the writers (terminal, JSON, JUnit, Markdown, HTML) and pytest-xdist's controller read them.
Changing a key here changes the published JSON: acceptance tests outside the repository read it.

Values are JSON-safe (`json_safe`: NaN/inf become null), so statistics that a Python object holds
as a float are ``float | None`` in an entry. The ``baseline`` section (SPEC 9) stays a plain
mapping here: its shape belongs to `pytest_reliable.verdict.baseline`.

Everything the HTML page draws is stored here (the page computes no statistic): e.g. the n* curves
(``n_star_curve``), not only n*.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict, cast

SCHEMA_VERSION = 1
"""The report's ``schema_version`` (`schema.load` reads the versions it knows)."""


class GroupEntry(TypedDict):
    """One group of a range (a format, a dimension value, an order position)."""

    score: float | None
    """The group's score paired within instance (the range's ``estimator``): instance difficulty
    cancels, so groups holding different instances compare fairly."""
    observed: float | None
    """The plain mean of the group's cells (what ``dimensions`` reports for a value)."""
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
    worst_candidates: list[str] | None
    """Keys of the groups that could be the worst at the test's confidence (a confidence set
    for the worst group, lowest score first): more than one means the data cannot tell which.
    This and the fields below are null in reports written before ranges carried them."""
    unobserved: list[str] | None
    """Listed dimension values no cell was rendered with: their claims have no evidence
    (``min_worst``/``max_spread``/``min_median`` cannot pass on evidence about them)."""
    estimator: str | None
    """How the groups' ``score`` was estimated."""


class ExplorationFormat(TypedDict):
    """One format as ``search="thompson"`` explored it."""

    key: str
    description: str
    score: float | None
    """The observed mean of its cells (None: never pulled)."""
    cells: int
    pulls: int


class ExplorationEntry(TypedDict):
    """``search="thompson"``'s exploration (SPEC section 14): never a verdict."""

    label: str
    best: ExplorationFormat
    worst: ExplorationFormat
    calls: int
    """Cells the search asked for (answers, made or cached)."""
    formats: int
    per_format: dict[str, ExplorationFormat]


class CanonicalEntry(TypedDict):
    """The canonical pass: pass@1 with its Wilson (or clustered) interval."""

    score: float
    wilson_low: float
    wilson_high: float
    n: int
    interval_method: str


class UnknownCanonicalEntry(TypedDict):
    """``canonical`` of a test whose calls did not all complete (verdict ``error``): every field
    present and null (SPEC section 8), so ``canonical.score`` reads null rather than missing."""

    score: None
    wilson_low: None
    wilson_high: None
    n: None
    interval_method: None


class UnknownRangeEntry(TypedDict):
    """``formats`` / ``orders`` of a test whose calls did not all complete: null numbers, no
    groups; ``grouping`` is the test's when it is known."""

    min: None
    median: None
    max: None
    grouping: str | None
    per_variant: dict[str, GroupEntry]
    noise_floor: None


UNKNOWN_CANONICAL: UnknownCanonicalEntry = {
    "score": None, "wilson_low": None, "wilson_high": None, "n": None, "interval_method": None}


def unknown_range(grouping: str | None = None) -> UnknownRangeEntry:
    return {"min": None, "median": None, "max": None, "grouping": grouping, "per_variant": {},
            "noise_floor": None}


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
    """{dimension: {value: observed mean of the value's cells}} (SPEC 8)."""
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float
    k: int
    pass_criterion: str
    """When a sample counts as passed for pass@k / pass^k: "score == 1 (full credit)"."""
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


class JudgeCallsEntry(TypedDict):
    """The judge's calls, counted apart from the model's."""

    made: int
    cached: int


class JudgeEntry(TypedDict):
    """A judge's votes and noise (SPEC section 12), over the cells it judged."""

    id: str
    votes: int
    """Votes per cell."""
    scale: str
    rubric_hash: str
    cells: int
    """Judged cells (answers that came back, not empty)."""
    unparsed_votes: int
    """Votes that yielded no grade (the reply could not be read, or the call did not complete):
    failing votes."""
    max_unparsed: float
    """The share of the votes that may come back unread before the test errors as the judge's
    failure (`Judge(max_unparsed=...)`)."""
    agreement: float | None
    """Share of the judged cells with two or more parsed votes whose parsed votes all agree
    (null without such a cell, and when the test errored)."""
    judge_variance_share: float | None
    """Share of the cells' score variance that lies between votes of one answer (null with one
    vote or fewer than 2 cells)."""
    calls: JudgeCallsEntry


class CircularEntry(TypedDict):
    """The share of instances right under every cyclic shift of their options (SPEC 12)."""

    score: float
    low: float
    high: float
    instances: int
    calls: JudgeCallsEntry
    """The circular cells' calls (the shift by 0 is the canonical prompt: usually cached)."""


class WinRateEntry(TypedDict):
    estimate: float | None
    low: float | None
    high: float | None


class PairwiseEntry(TypedDict):
    """A pairwise judge's comparison of the candidate with its baseline (SPEC section 12); when
    the test errored, its numbers are null and ``baseline_model`` stays."""

    baseline_model: str
    """The identity of the model the candidate was compared with."""
    cells: int | None
    """The resampling cells scored: ``win`` + ``tie`` + ``loss`` (a candidate's empty answer,
    never judged, is a loss, as the win rate counts it)."""
    win: int | None
    tie: int | None
    loss: int | None
    win_rate: WinRateEntry
    """Win 1, tie 0.5, loss 0 per cell: the mean with its clustered interval."""
    position_bias: float | None
    """How often the judge picked the answer shown first, minus 0.5."""


class CostEntry(TypedDict):
    """What a test's calls cost (SPEC section 13, `pricing.Spend`): ``usd`` paid in this run,
    the tokens of the calls made, ``cached_usd_saved`` (the original cost of the answers served
    from the cache), ``estimated`` (some tokens were estimated: the model reported no usage).
    ``priced`` is false when a model called over an API has no price: its calls' cost is not
    known, so ``usd`` (for calls paid now) or ``cached_usd_saved`` (for answers served) is null,
    and ``unpriced_models`` names the models. The embedded model and a user's callable without
    a price cost nothing by definition: they count 0 and stay ``priced``."""

    usd: float | None
    prompt_tokens: int
    completion_tokens: int
    cached_usd_saved: float | None
    estimated: bool
    priced: bool
    unpriced_models: list[str]


class WorstVariantEntry(TypedDict):
    """The worst group of the format range, with one rendered prompt and the model's answer."""

    key: str
    grouping: str
    score: float | None
    low: float | None
    high: float | None
    description: str
    prompt: str
    """The rendered prompt of one cell of the group: its first answered cell with the group's
    lowest score, so a failing group shows a prompt the model got wrong."""
    answer: str | None
    answer_score: float | None
    """That cell's score (0: wrong or unread; 1: the group has no wrong answer). This and the
    fields below are null in reports written before the worst group showed a wrong answer."""
    answer_parsed: bool | None
    instance: int | None
    """The cell's instance: a 0-based index into the dataset (and ``per_instance``)."""
    record: str | None
    """Where the instance came from, as a person counts (1-based): ``data.jsonl, line 3``, or
    ``records, record 4`` for records given in code."""
    resampling: int | None
    """The cell's resampling (0-based, as ``resampling_scores``); None: the canonical pass."""
    candidates: list[str] | None
    """The groups that could be the worst at the test's confidence (the range's
    ``worst_candidates``): ``key`` is the lowest estimate, not a proven worst."""


class InstanceEntry(TypedDict):
    """Per instance (SPEC 9, what a later baseline comparison pairs with)."""

    mean: float
    scores: list[float]
    canonical: list[float]


class NStarCurveEntry(TypedDict):
    """The curves n* was read from (`stats.NStarResult`): for n = 1, 2, ... (index n - 1), the
    (1 - delta/2) percentile of how far the mean (``mean_upper``) and the population variance
    (``var_upper``) of n resamplings fall from those of all ``n_scores`` scores. n* is the first
    n where both are within eps."""

    computed_from: str
    """"pilot" (``--reliable-n auto``: the pilot whose curves gave this run's n*) or
    "resamplings" (the test's own resamplings, without auto)."""
    method: str
    """"paper" (subsets of the scores) or "bootstrap" (fresh resamples, up to the cap)."""
    n_scores: int
    """The per-resampling scores the curves were computed from (the pilot's size under auto)."""
    mean_upper: list[float]
    var_upper: list[float]


class ReliableEntry(TypedDict):
    """A ``reliable`` test. The statistics (the `SummaryFields` keys, plus ``n_star_curve``,
    ``resampling_scores``, ``per_instance`` and ``baseline``) are null when the verdict is
    ``error``."""

    nodeid: str
    kind: str
    verdict: str
    model: str
    model_cache: str
    """Where the model's answers are kept: ``store`` (as any answer), or ``run`` (reused within
    this run only: its identity could not be established, SPEC section 2)."""
    space: str
    space_hash: str
    mode: str
    # -- SummaryFields, nullable (tests/test_typing.py checks the two lists agree) --
    n_resamplings: int | None
    mean: float | None
    std: float | None
    canonical: CanonicalEntry | UnknownCanonicalEntry
    formats: RangeEntry | UnknownRangeEntry
    orders: RangeEntry | UnknownRangeEntry
    dimensions: dict[str, dict[str, float]] | None
    pass_at_1: float | None
    pass_at_k: float | None
    pass_hat_k: float | None
    k: int | None
    pass_criterion: str | None
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
    n_star_curve: NStarCurveEntry | None
    """The curves behind ``n_star``; null when n* came from the n* store (it keeps n*, not the
    pilot's curves), without n* (fewer than 2 resamplings) and when the verdict is ``error``."""
    search: str
    """"uniform", "adaptive" or "thompson" (SPEC section 14)."""
    exploration: ExplorationEntry | None
    """``search="thompson"``'s best and worst formats found; null under other searches."""
    stopped_early: bool
    stop_reason: str | None
    calls: CallsEntry
    cost: CostEntry | None
    """Null when the test errored before its calls were counted, and in reports written before
    spend was (SPEC section 13)."""
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
    judge: JudgeEntry | None
    """The judge's votes and noise when a `Judge` graded the answers (SPEC section 12)."""
    pairwise: PairwiseEntry | None
    """A pairwise judge's candidate-vs-baseline comparison (SPEC section 12)."""
    maj_at_k: float | None
    """Majority vote of the canonical pass's k samples, ties wrong (SPEC section 12)."""
    circular: CircularEntry | None
    """With ``circular=True``: the share of instances right under every cyclic shift."""
    outcome: str | None
    """pytest's outcome of the test (`PYTEST_OUTCOMES`), which decides the run's exit code: an
    expected failure (``xfailed``) does not block a release. Null outside pytest."""
    xfail_reason: str | None
    """The xfail marker's reason when the outcome is ``xfailed`` or ``xpassed``."""


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
    decide: str | None
    """The policy the thresholds were decided under (SPEC section 11); null in reports written
    before CheckList entries said it."""
    nodeid: str
    verdict: str
    model: str
    model_cache: str
    """As `ReliableEntry.model_cache`."""
    space_hash: str | None
    calls: CallsEntry
    cost: CostEntry | None
    message: str | None
    outcome: str | None
    xfail_reason: str | None


class _ErrorRequired(TypedDict):
    nodeid: str
    kind: str
    verdict: str
    message: str


class ErrorEntry(_ErrorRequired, total=False):
    """A test that stopped before it had a report (a `ReliableError`: bad data, a model that
    cannot be reached, an exception in the test body). ``usage_error``: a misconfigured baseline
    comparison. `error_entry` makes one: besides these keys it carries every other key of its
    kind's entry (`ReliableEntry` or `ChecklistEntry`), null where unknown (SPEC section 8:
    every field present)."""

    usage_error: bool
    outcome: str | None
    xfail_reason: str | None


PYTEST_OUTCOMES = ("passed", "failed", "error", "xfailed", "xpassed", "skipped")
"""An entry's ``outcome``: how pytest counted the test (``error``: it failed outside its body)."""
VERDICTS = ("passed", "failed", "error")
"""An entry's ``verdict``: the gate's (``error``: its calls did not all complete)."""
KINDS = ("reliable", "invariance", "directional", "mft")
"""An entry's ``kind``."""


def error_entry(nodeid: str, kind: str, message: str, *, usage_error: bool = False) -> ErrorEntry:
    """The entry of a test that stopped before it had a report: every field of its kind's entry,
    null (``canonical``, ``formats`` and ``orders`` as objects of nulls, ``interval`` two nulls,
    lists empty; ``calls`` nulls: the calls it made are not known here)."""
    shape = ReliableEntry if kind == "reliable" else ChecklistEntry
    fields: dict[str, Any] = dict.fromkeys(shape.__annotations__)
    fields.update({"thresholds": [], "calls": {"made": None, "cached": None}})
    if kind == "reliable":
        fields.update({"canonical": dict(UNKNOWN_CANONICAL), "formats": unknown_range(),
                       "orders": unknown_range(), "notes": []})
    else:
        fields.update({"interval": [None, None], "failures": []})
    fields.update({"nodeid": nodeid, "kind": kind, "verdict": "error", "message": message})
    if usage_error:
        fields["usage_error"] = True
    return cast(ErrorEntry, fields)


Entry = ReliableEntry | ChecklistEntry | ErrorEntry
"""One element of the JSON report's ``tests`` list."""


class _ReportRequired(TypedDict):
    schema_version: int
    tests: list[Entry]


class ReportDocument(_ReportRequired, total=False):
    """The whole JSON report (`json_report.build_report` writes every key; `load.load_report`
    checks the ones present have these types)."""

    pytest_reliable_version: str
    created: str
    seed: int
    model: str | None
    space_hash: str | None
    cost: CostEntry
    """The tests' costs added up (SPEC section 13); a merged report's: the shards' added up."""
    outcomes: dict[str, str]
    """Every test pytest ran in the session, reliable or not, with its outcome
    (`PYTEST_OUTCOMES`): pytest's last word on it (a teardown that failed makes it ``error``).
    What lets ``merge`` see a plain test that failed and check a shard against the tests it
    expects; absent in reports of earlier versions and in reports built outside pytest."""
    shards: list[dict[str, Any]]
    """A merged report's parts: one ``{"file", "created", "tests", "cost"}`` per shard."""


def json_safe(value: Any) -> Any:
    """NaN/inf -> None, tuples -> lists, numpy scalars and arrays -> Python: what JSON and execnet
    carry. numpy is recognised by its ``tolist`` (duck typing), so the writers never import it."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if not isinstance(value, (str, bytes)):
        if hasattr(value, "tolist"):  # a numpy scalar -> its Python value, an array -> lists
            return json_safe(value.tolist())
        if hasattr(value, "item"):
            value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def independent_of_run_order(entry: Any) -> Any:
    """The entry without what depends on which test, worker or shard paid for a shared answer
    first (SPEC 10): ``calls`` reduced to the cells it covered (made + cached), ``cost`` to what
    those cells cost in all (paid now + saved by the cache). Two runs of one gate agree on this."""
    calls, cost = entry.get("calls"), entry.get("cost")
    reduced = dict(entry)
    if isinstance(calls, dict):
        reduced["calls"] = {"made + cached": sum(
            value for key in ("made", "cached") if isinstance(value := calls.get(key), int))}
    if isinstance(cost, dict):
        reduced["cost"] = {"usd + cached_usd_saved": round(sum(
            value for key in ("usd", "cached_usd_saved")
            if isinstance(value := cost.get(key), int | float)), 6)}
    return reduced
