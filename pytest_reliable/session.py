"""One run's state and the work a test asks for, without pytest.

`ReliableSession` owns what lives for a whole run: the settings, the declared spaces, the response
cache, the budget, the embedded model server (started on first use, stopped by `close`) and the n*
store. `run_reliable` and `run_checklist` are what the ``reliable`` fixture calls; the plugin only
translates between pytest and these.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_reliable.baseline import (
    BaselineChoice,
    BaselineComparison,
    BaselineScores,
    StoredBaseline,
    choose_baseline,
    compare,
)
from pytest_reliable.cache import BudgetLedger, ResponseCache, check_cache_path
from pytest_reliable.data import Dataset, Records
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.evaluation import (
    Calls,
    EvaluationSettings,
    ScoreMatrix,
    StagedEvaluation,
    append_resamplings,
    evaluate,
    greedy_cells,
    run_cells,
)
from pytest_reliable.gate import MAX_REGRESSION, reliable_thresholds
from pytest_reliable.markerspec import RELIABLE_THRESHOLDS, ChecklistSpec, ReliableSpec
from pytest_reliable.models.base import AsyncModel
from pytest_reliable.nstar import NStarOutcome, run_auto
from pytest_reliable.nstar_store import NStarKey, NStarStore
from pytest_reliable.report.model import ChecklistReport, ReliableReport
from pytest_reliable.runner import (
    Budget,
    ProgressEvent,
    Runner,
    run_on_call_loop,
)
from pytest_reliable.sampling import derive_seed
from pytest_reliable.settings import Settings
from pytest_reliable.space import Space
from pytest_reliable.stopping import run_until_settled
from pytest_reliable.summary import RangeSummary, check_scores, summarize
from pytest_reliable.tasks import Task

log = logging.getLogger("pytest_reliable.session")

DEFAULT_N = 10
REMOTE_CONCURRENCY = 8
LOCAL_MODEL = "local"


ProgressCallback = Callable[[str, ProgressEvent], None]


@dataclass(frozen=True)
class _Compared:
    result: BaselineComparison
    problems: list[str]


@dataclass
class ReliableSession:
    settings: Settings
    spaces: dict[str, Space] = field(default_factory=dict)
    on_progress: ProgressCallback | None = None
    _cache: ResponseCache | None = field(default=None, init=False)
    _budget: Budget | None = field(default=None, init=False)
    _local_server: Any = field(default=None, init=False)
    _models: dict[str, AsyncModel] = field(default_factory=dict, init=False)
    _stored_baseline: StoredBaseline | None = field(default=None, init=False)

    # -- resources -------------------------------------------------------------------------
    @property
    def cache(self) -> ResponseCache:
        if self._cache is None:
            if self.settings.no_cache:
                self._cache = ResponseCache.memory()
            else:
                assert self.settings.cache_path is not None
                self._cache = ResponseCache.open(self.settings.cache_path, self.settings.record)
        return self._cache

    def check_cache(self) -> None:
        """Raise `CacheFileError` now (creating nothing) if the cache path cannot serve."""
        if not self.settings.no_cache:
            assert self.settings.cache_path is not None
            check_cache_path(self.settings.cache_path, self.settings.record)

    @property
    def budget(self) -> Budget | None:
        """One budget for the whole run: counted in ``budget.sqlite`` next to the cache file (also
        with ``--reliable-no-cache``), which every pytest-xdist worker of the run shares."""
        if self._budget is None and (self.settings.budget_calls or self.settings.budget_tokens):
            assert self.settings.cache_path is not None
            ledger = BudgetLedger(self.settings.cache_path.parent / "budget.sqlite",
                                  self.settings.run_id)
            self._budget = Budget(
                max_calls=self.settings.budget_calls, max_tokens=self.settings.budget_tokens,
                ledger=ledger,
            )
        return self._budget

    def close(self) -> None:
        models = list(self._models.values())
        self._models.clear()
        for model in models:
            try:
                run_on_call_loop(model.aclose())
            except Exception:
                log.debug("closing %s failed", model.identity, exc_info=True)
        if self._budget is not None and self._budget.ledger is not None:
            self._budget.ledger.close()
        if self._local_server is not None:
            self._local_server.stop()
            self._local_server = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    # -- models ----------------------------------------------------------------------------
    def model_named(self, name: str | None, base_url: str | None = None) -> AsyncModel:
        """``None``/"local" = the embedded model; any other name = the OpenAI-compatible adapter
        (at ``base_url``, default ``--reliable-base-url``)."""
        url = base_url or self.settings.base_url
        key = name or LOCAL_MODEL
        if key != LOCAL_MODEL and url != self.settings.base_url:
            key = f"{key} at {url}"
        if key not in self._models:
            if key == LOCAL_MODEL:
                from pytest_reliable.models.local import LocalModelServer

                if self._local_server is None:
                    self._local_server = LocalModelServer()
                # Started on the first cache miss: a fully cached run never starts it.
                self._models[key] = self._local_server.lazy_model()
            else:
                from pytest_reliable.models.openai_compat import OpenAICompatibleModel

                self._models[key] = OpenAICompatibleModel(
                    name or LOCAL_MODEL, url, api_key_env=self.settings.api_key_env
                )
        return self._models[key]

    def default_model(self) -> AsyncModel:
        """The model under test when no ``reliable_model`` fixture gives one."""
        return self.model_named(self.settings.model)

    def resolve_model(self, user_model: Any) -> AsyncModel:
        if user_model is None:
            return self.default_model()
        from pytest_reliable.models.callables import as_async_model

        return as_async_model(user_model)

    def runner(self, model: AsyncModel, nodeid: str) -> Runner:
        """Concurrency: ``--reliable-concurrency``, else the model's own ``max_concurrency``,
        else `REMOTE_CONCURRENCY`. A one-slot model gets its calls in shared-prefix order."""
        declared = getattr(model, "max_concurrency", None)
        concurrency = self.settings.concurrency or declared or REMOTE_CONCURRENCY

        def progress(event: ProgressEvent) -> None:
            if self.on_progress is not None:
                self.on_progress(nodeid, event)

        return Runner(
            model,
            self.cache,
            concurrency=concurrency,
            timeout=self.settings.timeout,
            max_retries=self.settings.max_retries,
            budget=self.budget,
            on_progress=progress,
            context=nodeid,
            prefix_order=declared == 1,
        )

    # -- spaces and data -------------------------------------------------------------------
    def space(self, space: Space | str | None) -> Space:
        if isinstance(space, Space):
            return space
        if space is None:
            return self.spaces.get("default") or Space.default()
        if space not in self.spaces:
            raise ReliableConfigError(
                f"space {space!r} is not declared; declared spaces: {sorted(self.spaces) or 'none'}"
            )
        return self.spaces[space]

    def space_exists(self, space: Any) -> bool:
        return isinstance(space, Space) or space in self.spaces

    @staticmethod
    def dataset(data: Records) -> Dataset:
        return data if isinstance(data, Dataset) else Dataset.from_records(list(data))

    # -- reliable tests --------------------------------------------------------------------
    def run_reliable(
        self, nodeid: str, data: Records, task: Task, spec: ReliableSpec, user_model: Any = None,
        user_baseline: Any = None,
    ) -> ReliableReport:
        dataset = self.dataset(data)
        task.validate(dataset)
        space = self.space(spec.space)
        model = self.resolve_model(user_model)
        seed = derive_seed(self.settings.seed, nodeid)
        pairing = self.baseline_for(nodeid, spec, user_baseline, space, dataset)
        base = EvaluationSettings(
            n=1,
            mode=spec.mode,
            seed=seed,
            k=spec.k,
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            nodeid=nodeid,
        )

        decide = spec.decide or self.settings.decide
        runners: list[Runner] = []

        def new_runner(on: AsyncModel) -> Runner:
            runners.append(self.runner(on, nodeid))
            return runners[-1]

        def run(n: int, on: AsyncModel) -> ScoreMatrix:
            settings = dataclasses.replace(base, n=n)
            return evaluate(dataset, task, space, settings, new_runner(on))

        def extend(head: ScoreMatrix, n: int) -> ScoreMatrix:
            staged = StagedEvaluation(
                dataset, task, space, dataclasses.replace(base, n=n), new_runner(model)
            )
            return append_resamplings(head, staged.run(head.n_resamplings, n, canonical=False))

        auto: NStarOutcome | None = None
        stopped_early, stop_reason = False, None
        if spec.n is None and self.settings.n == "auto":
            reference = (
                self.model_named(self.settings.reference_model)
                if self.settings.reference_model
                else model
            )
            key = NStarKey(
                nodeid=nodeid, space_hash=space.hash, dataset_hash=dataset.hash,
                reference_model=reference.identity, mode=spec.mode, eps=spec.eps,
                delta=spec.delta, seed=self.settings.seed, pilot_n=self.settings.pilot_n,
                n_star_method=self.settings.n_method, n_max=self.settings.n_max,
            )
            assert self.settings.store_dir is not None
            auto = run_auto(
                key, NStarStore(self.settings.store_dir), reference_is_model=reference is model,
                run=lambda n, on_reference: run(n, reference if on_reference else model),
                extend=extend,
            )
            matrix = auto.matrix
            if spec.stop_early or (spec.stop_early is None and self.settings.stop_early):
                stop_reason = "not under --reliable-n auto: n* sizes the run"
        else:
            n = spec.n or (self.settings.n if isinstance(self.settings.n, int) else DEFAULT_N)
            stop_early = spec.stop_early if spec.stop_early is not None else self.settings.stop_early
            if stop_early:
                stopped = run_until_settled(
                    StagedEvaluation(dataset, task, space, dataclasses.replace(base, n=int(n)),
                                     new_runner(model)),
                    {name: (direction, float(getattr(spec, name)))
                     for name, direction in RELIABLE_THRESHOLDS.items()
                     if getattr(spec, name) is not None},
                    decide=decide,
                    confidence=spec.confidence,
                )
                matrix, stop_reason = stopped.matrix, stopped.reason
                stopped_early = stopped.stopped_early
            else:
                matrix = run(int(n), model)

        check_scores(matrix, task, dataset)
        summary = summarize(
            matrix, space, mode=spec.mode, eps=spec.eps, delta=spec.delta,
            min_cells=spec.min_cells, confidence=spec.confidence,
            group_by=spec.grouping(), order_group_by=spec.order_group_by,
        )
        n_star_source: str | None = "resamplings"
        if auto is not None:
            n_star_source = auto.source
            summary.n_star, summary.n_star_reliable = auto.n_star, auto.reliable
            summary.achievable_eps = auto.achievable_eps
        if summary.n_star is None:
            n_star_source = None
        temperature = (
            spec.temperature if spec.temperature is not None
            else space.canonical_variant().temperature
        )
        comparison = None
        if pairing is not None:
            comparison = self.compare_with_baseline(
                nodeid, pairing, spec, space, dataset, matrix, seed,
                lambda on: run(matrix.n_resamplings, on), summary.formats,
            )
        # The gate decides max_regression with the test's other thresholds (one Holm family).
        thresholds = reliable_thresholds(
            spec, summary, decide, baseline=comparison.result.difference if comparison else None
        )
        if comparison is not None:
            comparison.result.check = next(
                (c for c in thresholds if c.name == MAX_REGRESSION), None
            )
        return ReliableReport(
            nodeid=nodeid,
            model=model.identity,
            space=space,
            mode=spec.mode,
            eps=spec.eps,
            delta=spec.delta,
            summary=summary,
            matrix=matrix,
            thresholds=thresholds,
            decide=decide,
            n_star_source=n_star_source,
            pilot_n=auto.pilot_n if auto else None,
            temperature=float(temperature),
            calls_made=matrix.calls_made + (auto.extra_made if auto else 0),
            calls_cached=matrix.calls_cached + (auto.extra_cached if auto else 0),
            problems=list(matrix.problems)
            + [f"baseline: {p}" for p in (comparison.problems if comparison else [])],
            dataset_hash=dataset.hash,
            baseline=comparison.result if comparison else None,
            prompt_tokens={
                "prompt_tokens_sent": sum(r.stats.prompt_tokens for r in runners),
                "prompt_tokens_evaluated": sum(r.stats.prompt_tokens_evaluated for r in runners),
            },
            n_star_method=auto.method if auto else ("paper" if n_star_source else None),
            n_star_paper=auto.n_star_paper if auto else None,
            stopped_early=stopped_early,
            stop_reason=stop_reason,
        )

    # -- release candidate vs baseline (SPEC section 9; the work is in baseline.py) ----------
    @property
    def stored_baseline(self) -> StoredBaseline | None:
        if self._stored_baseline is None and self.settings.baseline_report is not None:
            self._stored_baseline = StoredBaseline.load(self.settings.baseline_report)
        return self._stored_baseline

    def baseline_for(
        self, nodeid: str, spec: ReliableSpec, user_baseline: Any, space: Space, dataset: Dataset
    ) -> BaselineChoice | None:
        """What the test compares against (None: it does not compare); a stored report is
        checked here, before any call."""
        if spec.baseline is None and spec.max_regression is None:
            return None
        choice = choose_baseline(spec.baseline, user_baseline, self.settings.baseline_model,
                                 self.stored_baseline, nodeid)
        if choice.kind == "report":
            assert self.stored_baseline is not None
            n = spec.n or (self.settings.n if isinstance(self.settings.n, int) else None)
            if n is None and self.settings.n != "auto":
                n = DEFAULT_N
            self.stored_baseline.check(
                nodeid, seed=self.settings.seed, space_hash=space.hash,
                dataset_hash=dataset.hash, mode=spec.mode, n=n, n_instances=len(dataset),
                k=spec.k,
            )
        return choice

    def compare_with_baseline(
        self, nodeid: str, choice: BaselineChoice, spec: ReliableSpec, space: Space,
        dataset: Dataset, matrix: ScoreMatrix, seed: int,
        run_plan: Callable[[AsyncModel], ScoreMatrix], ranges: RangeSummary,
    ) -> _Compared:
        """The baseline on the candidate's plan (``run_plan``: same cells, cache and runner),
        or the stored report's scores, compared with the candidate over the groups of its
        format range ``ranges`` (the test's grouping)."""
        if choice.kind == "report":
            assert self.stored_baseline is not None
            self.stored_baseline.check(  # n is known now, also under --reliable-n auto
                nodeid, seed=self.settings.seed, space_hash=space.hash,
                dataset_hash=dataset.hash, mode=spec.mode, n=matrix.n_resamplings,
            )
            scores = self.stored_baseline.scores(nodeid)
        else:
            if choice.kind == "fixture":
                on = self.resolve_model(choice.obj)
            else:
                assert choice.name is not None
                on = self.model_named(choice.name, self.settings.baseline_base_url)
            scores = BaselineScores.from_matrix(on.identity, run_plan(on))
        result = compare(
            matrix, scores, ranges, mode=spec.mode, confidence=spec.confidence, seed=seed,
        )
        return _Compared(result, scores.problems)

    # -- CheckList tests -------------------------------------------------------------------
    def run_checklist(
        self, nodeid: str, data: Records, task: Task, spec: ChecklistSpec, user_model: Any = None
    ) -> ChecklistReport:
        """A CheckList test: each batch of examples goes through evaluation's render-run-grade
        pipeline (the space's canonical variant, temperature 0), the checklist package compares
        the predictions, gate.py decides the thresholds."""
        from pytest_reliable import checklist

        dataset = self.dataset(data)
        task.validate(dataset)
        model = self.resolve_model(user_model)
        runner = self.runner(model, nodeid)
        space = self.space(spec.space) if spec.space is not None else Space.plain()
        calls = Calls()

        def predict(examples: Sequence[dict[str, Any]]) -> list[checklist.Prediction]:
            cells = greedy_cells(examples, task, space, spec.max_tokens)
            calls.add(run_cells(cells, examples, task, runner, nodeid))
            return [checklist.Prediction(c.prediction, c.parsed, c.text or "") for c in cells]

        result = checklist.run_marked(
            spec, list(dataset), predict, task, seed=derive_seed(self.settings.seed, nodeid),
            decide=spec.decide or self.settings.decide,
        )
        return ChecklistReport(
            nodeid=nodeid,
            model=model.identity,
            space_hash=space.hash if spec.space is not None else None,
            result=result,
            calls_made=calls.made,
            calls_cached=calls.cached,
            problems=calls.problems,
        )
