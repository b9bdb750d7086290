"""One run's state and the work a test asks for, without pytest.

`ReliableSession` owns what lives for a whole run: the settings, the declared spaces, the response
cache, the budget, the embedded model server (started on first use, stopped by `close`) and the n*
store. `run_reliable` and `run_checklist` are what the ``reliable`` fixture calls; the plugin only
translates between pytest and these.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_reliable.calls.budget import Budget
from pytest_reliable.calls.loop import stop_call_loop
from pytest_reliable.calls.pricing import (
    FREE,
    Price,
    PriceTable,
    PricingError,
    Spend,
    calls_an_api,
    is_embedded,
    unpriced,
)
from pytest_reliable.calls.pricing import model_names as pricing_names
from pytest_reliable.calls.requests import AnsweredAhead, ProgressEvent
from pytest_reliable.calls.runner import Runner
from pytest_reliable.checklist.report import ChecklistReport
from pytest_reliable.contract.markers import (
    RELIABLE_THRESHOLDS,
    ChecklistSpec,
    ReliableSpec,
    check_max_std_instances,
)
from pytest_reliable.contract.settings import Settings
from pytest_reliable.contract.vocabulary import Policy
from pytest_reliable.errors import ReliableConfigError
from pytest_reliable.evaluate.adaptive import row_keys
from pytest_reliable.evaluate.circular import check_circular, run_circular
from pytest_reliable.evaluate.evaluation import (
    Calls,
    EvaluationSettings,
    Evaluator,
    Judging,
    ScoreMatrix,
    greedy_cells,
    run_cells,
)
from pytest_reliable.evaluate.schedules import (
    Adaptive,
    AutoN,
    FixedN,
    GateRun,
    RunStrategy,
    StopEarly,
    Thompson,
)
from pytest_reliable.models.base import AsyncModel, ModelUsageError, ModelWarning
from pytest_reliable.models.callables import as_async_model, run_scoped
from pytest_reliable.models.identity import ProjectModules
from pytest_reliable.models.named import NamedModel
from pytest_reliable.plan.data import Dataset, Records
from pytest_reliable.plan.sampling import derive_seed
from pytest_reliable.plan.task import Task
from pytest_reliable.space import Space
from pytest_reliable.store import Store, StoreConfig, open_store
from pytest_reliable.store.nstar import NStarEntries, NStarKey, NStarStore
from pytest_reliable.tasks.grading import judge_of
from pytest_reliable.tasks.judge import Judge, JudgeUsageError
from pytest_reliable.verdict.baseline import (
    BaselineChoice,
    BaselineComparison,
    BaselineScores,
    StoredBaseline,
    choose_baseline,
    compare,
)
from pytest_reliable.verdict.claims import range_peek
from pytest_reliable.verdict.gate import (
    MAX_REGRESSION,
    ThresholdCheck,
    reliable_thresholds,
)
from pytest_reliable.verdict.ranges import RangeSummary
from pytest_reliable.verdict.results import ReliableReport
from pytest_reliable.verdict.sides import SideResults, from_matrix, judge_noise, pairwise
from pytest_reliable.verdict.summary import Summary, check_scores, gate_mean_bound, summarize

if TYPE_CHECKING:
    from pytest_reliable.calls.batch import BatchTransport

log = logging.getLogger("pytest_reliable.session")

DEFAULT_N = 10
REMOTE_CONCURRENCY = 8
LOCAL_MODEL = "local"


ProgressCallback = Callable[[str, ProgressEvent], None]


@dataclass(frozen=True)
class _Compared:
    result: BaselineComparison
    problems: list[str]


@dataclass(frozen=True)
class ReliableTest:
    """One reliable test's inputs, resolved: what each step of `run_reliable` reads."""

    nodeid: str
    spec: ReliableSpec
    dataset: Dataset
    task: Task
    space: Space
    model: AsyncModel
    seed: int
    """The test's own seed: `derive_seed` of the session seed and the nodeid."""
    decide: Policy
    """The policy its thresholds are decided under: the marker's, else the project's."""

    def evaluation(self) -> EvaluationSettings:
        """The evaluation the marker asks for, without its size (the run strategy's choice)."""
        spec = self.spec
        return EvaluationSettings(n=0, mode=spec.mode, seed=self.seed, k=spec.k,
                                  temperature=spec.temperature, max_tokens=spec.max_tokens,
                                  nodeid=self.nodeid)


@dataclass
class ReliableSession:
    settings: Settings
    spaces: dict[str, Space] = field(default_factory=dict)
    on_progress: ProgressCallback | None = None
    _cache: Store | None = field(default=None, init=False)
    _budget: Budget | None = field(default=None, init=False)
    _local_server: Any = field(default=None, init=False)
    _models: dict[str, AsyncModel] = field(default_factory=dict, init=False)
    _stored_baseline: StoredBaseline | None = field(default=None, init=False)
    _prices: PriceTable | None = field(default=None, init=False)
    _answered_ahead: AnsweredAhead | None = field(default=None, init=False)
    _project: ProjectModules | None = field(default=None, init=False)
    _run_store: Store | None = field(default=None, init=False)
    _said_run_scoped: set[str] = field(default_factory=set, init=False)
    _progress: dict[str, list[ProgressEvent | None]] = field(default_factory=dict, init=False)
    """Per test, the last progress event of each of its runners (`combined_progress`)."""

    # -- resources -------------------------------------------------------------------------
    def store_config(self) -> StoreConfig:
        return StoreConfig.of(self.settings)

    @property
    def cache(self) -> Store:
        """The run's store: answers, budget ledger, n* entries and claims (opened on first use)."""
        if self._cache is None:
            self._cache = open_store(self.store_config())
        return self._cache

    def has_stored_answers(self) -> bool:
        """Whether the run's store exists to be read: open already, shared, or a local file
        that is there (``--reliable-plan`` reads it, and never creates one)."""
        if self._cache is not None or self.settings.store_url is not None:
            return True
        return not self.settings.no_cache and self.settings.cache_path is not None \
            and self.settings.cache_path.exists()

    def use_store(self, store: Store) -> None:
        """Serve from a store already opened (the start-up check connected to it)."""
        self._cache = store

    @property
    def nstar_store(self) -> NStarEntries:
        """The n* entries, without opening the local answers file when it is not open yet."""
        if self._cache is None and self.settings.store_url is None:
            assert self.settings.store_dir is not None
            return NStarStore(self.settings.store_dir)
        return self.cache.nstar

    @property
    def budget(self) -> Budget | None:
        """One budget for the whole run: the store's ledger of the run id (locally
        ``budget.sqlite`` next to the cache file, also with ``--reliable-no-cache``), which every
        pytest-xdist worker, and with a shared store every host, of the run shares."""
        settings = self.settings
        if self._budget is None and (settings.budget_calls or settings.budget_tokens
                                     or settings.budget_usd):
            self._budget = Budget(
                max_calls=settings.budget_calls, max_tokens=settings.budget_tokens,
                max_usd=settings.budget_usd, ledger=self.cache.ledger(settings.run_id),
            )
        return self._budget

    # -- money (SPEC section 13; the work is in pricing.py) ---------------------------------
    @property
    def price_table(self) -> PriceTable | None:
        if self._prices is None and self.settings.pricing_path is not None:
            self._prices = PriceTable.load(self.settings.pricing_path)
        return self._prices

    def price_of(self, model: AsyncModel) -> Price:
        """What ``model``'s calls cost: the embedded model nothing, others their entry in the
        price table. Without an entry: under a USD budget an error before its first call;
        otherwise a user's callable costs nothing (SPEC section 13) and a model called over an
        API costs what nobody knows (`pricing.unpriced`: its spend is reported as unknown)."""
        if is_embedded(model):
            return FREE
        table = self.price_table
        price = table.price_for(pricing_names(model)) if table is not None else None
        if price is not None:
            return price
        if self.settings.budget_usd is not None:
            raise PricingError(unpriced_message(self.settings, model.identity))
        return unpriced(model.identity) if calls_an_api(model) else FREE

    def check_prices(self, models: Sequence[AsyncModel | None]) -> None:
        """Under a USD budget, every one of ``models`` (the models one test will call) has a
        price, or `PricingError` names each one that has none, before any of them is called."""
        if self.settings.budget_usd is None:
            return
        missing: dict[str, None] = {}
        for model in models:
            if model is None:
                continue
            try:
                self.price_of(model)
            except PricingError:
                missing[model.identity] = None
        if missing:
            raise PricingError(unpriced_message(self.settings, *missing))

    def reliable_models(self, test: ReliableTest, user_baseline: Any) -> list[AsyncModel]:
        """Every model `run_reliable` calls for ``test``: the model under test, the pilot's
        reference model (``--reliable-n auto``), the judge's, and a baseline model (live, not a
        stored report; a pairwise judge's too). A comparison that cannot be made is the test's
        own usage error, raised by `run_reliable`, not here."""
        from pytest_reliable.verdict.baseline import BaselineUsageError

        models = [test.model]
        if test.spec.n is None and self.settings.n == "auto" and self.settings.reference_model:
            models.append(self.model_named(self.settings.reference_model))
        judge, judge_model = judge_of(test.task), self.judge_model(test.task)
        if judge_model is not None:
            models.append(judge_model)
        try:
            pairing = self.baseline_for(test, user_baseline,
                                        pairwise=judge is not None and judge.pairwise)
        except BaselineUsageError:
            pairing = None
        if pairing is not None and pairing.kind != "report":
            models.append(self.baseline_model(pairing))
        return models

    def checklist_models(self, task: Task, user_model: Any) -> list[AsyncModel]:
        """Every model `run_checklist` calls: the model under test and a judge's."""
        return [self.resolve_model(user_model),
                *[m for m in (self.judge_model(task),) if m is not None]]

    def close(self) -> None:
        models = list(self._models.values())
        self._models.clear()
        # The models' clients close on the loop their calls ran on, then the loop ends: no call
        # (an abandoned one included) outlives the run.
        stop_call_loop([model.aclose() for model in models])
        if self._budget is not None and self._budget.ledger is not None:
            self._budget.ledger.close()
        if self._local_server is not None:
            self._local_server.stop()
            self._local_server = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._run_store is not None:
            self._run_store.close()
            self._run_store = None

    # -- models ----------------------------------------------------------------------------
    def model_named(self, name: str | None, base_url: str | None = None,
                    api_key_env: str | None = None) -> AsyncModel:
        """``None``/"local" = the embedded model; any other name = the OpenAI-compatible adapter
        (at ``base_url``, default ``--reliable-base-url``; key from ``api_key_env``, default
        ``--reliable-api-key-env``)."""
        url = base_url or self.settings.base_url
        key = name or LOCAL_MODEL
        if key != LOCAL_MODEL and url != self.settings.base_url:
            key = f"{key} at {url}"
        if key != LOCAL_MODEL and api_key_env not in (None, self.settings.api_key_env):
            key = f"{key} with ${api_key_env}"
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
                    name or LOCAL_MODEL, url, api_key_env=api_key_env or self.settings.api_key_env
                )
        return self._models[key]

    def default_model(self) -> AsyncModel:
        """The model under test when no ``reliable_model`` fixture gives one."""
        return self.model_named(self.settings.model)

    def resolve_model(self, user_model: Any) -> AsyncModel:
        if user_model is None:
            return self.default_model()
        if isinstance(user_model, NamedModel):  # openai_model(...), local_model()
            return self.model_named(user_model.name, user_model.base_url, user_model.api_key_env)
        return as_async_model(user_model, project=self.project)

    @property
    def project(self) -> ProjectModules:
        """The project's modules under the rootdir: an unnamed callable's identity covers those
        it imports (`models.identity`); walked once per module per run."""
        if self._project is None:
            self._project = ProjectModules(self.settings.rootdir)
        return self._project

    def store_for(self, model: AsyncModel, nodeid: str) -> Store:
        """Where ``model``'s answers are kept: the run's store, or, for a model whose identity
        cannot be established (`models.callables.run_scoped`), this run's memory only (it is
        said once per model). Such a model under ``--reliable-record none`` is a usage error:
        none of its answers can be in the store."""
        why = run_scoped(model)
        if why is None:
            return self.cache
        if self.settings.record == "none":
            raise ModelUsageError(
                f"model {model.identity}: {why}, so its answers are never stored and "
                "--reliable-record none has nothing to replay: give it an identity, "
                "text_model(fn, id='...', version='...') (or chat_model), or drop "
                "--reliable-record none")
        if model.identity not in self._said_run_scoped:
            self._said_run_scoped.add(model.identity)
            warning = ModelWarning(
                f"pytest-reliable: model {model.identity}: {why}: its answers are reused "
                "within this run only, never stored; give it text_model(fn, id=..., "
                "version=...) to cache them")
            # Said at the test that first used it, as the runner's warnings are.
            where = nodeid.split("::")[0] or "pytest-reliable"
            warnings.warn_explicit(warning, ModelWarning, where, 0,
                                   module="pytest_reliable.run.session")
        if self._run_store is None:
            from pytest_reliable.store import LocalStore

            self._run_store = LocalStore(None, "all" if self.settings.record == "all" else "new")
        return self._run_store

    def runner(self, model: AsyncModel, nodeid: str) -> Runner:
        """Concurrency: ``--reliable-concurrency``, else the model's own ``max_concurrency``,
        else `REMOTE_CONCURRENCY`. A one-slot model gets its calls in shared-prefix order."""
        declared = getattr(model, "max_concurrency", None)
        concurrency = self.settings.concurrency or declared or REMOTE_CONCURRENCY

        runs = self._progress.setdefault(nodeid, [])
        runs.append(None)
        run = len(runs) - 1

        def progress(event: ProgressEvent) -> None:
            if self.on_progress is not None:
                runs[run] = event
                self.on_progress(nodeid, combined_progress(runs))

        return Runner(
            model,
            self.store_for(model, nodeid),
            concurrency=concurrency,
            timeout=self.settings.timeout,
            max_retries=self.settings.max_retries,
            budget=self.budget,
            on_progress=progress,
            context=nodeid,
            prefix_order=declared == 1,
            price=self.price_of(model),
            transport=self.batch_transport(model),
            ahead=self._answered_ahead,
        )

    def batch_transport(self, model: AsyncModel) -> BatchTransport | None:
        """``--reliable-batch``: the batch API of the OpenAI-compatible adapter (other models,
        a user's callable, are called directly)."""
        from pytest_reliable.models.openai_compat import OpenAICompatibleModel

        if not self.settings.batch or not isinstance(model, OpenAICompatibleModel) \
                or is_embedded(model):
            return None
        from pytest_reliable.calls.batch import BatchTransport

        if self._answered_ahead is None:  # the run's first round's, shared by every runner
            self._answered_ahead = AnsweredAhead()
        return BatchTransport(model, self.cache, wait_timeout=self.settings.wait_timeout)

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
        """Choose the test's run strategy, run it, summarize, compare with the baseline, gate,
        report."""
        self._progress.pop(nodeid, None)
        test = self.reliable_test(nodeid, data, task, spec, user_model)
        strategy = self.strategy_for(test)
        check_max_std_instances(spec, len(test.dataset), strategy.first_round().n, test.decide)
        if spec.circular:
            check_circular(test.dataset, task)
        judge, judge_model = judge_of(task), self.judge_model(task)
        pairing = self.baseline_for(test, user_baseline,
                                    pairwise=judge is not None and judge.pairwise)
        against = self.pairwise_baseline(test, judge, pairing)
        # Before the first call: a judge's or a baseline's model is called only after the
        # model under test's answers, and must not find out then that it has no price.
        self.check_prices(self.reliable_models(test, user_baseline))

        def judging() -> Judging:
            assert judge_model is not None
            return Judging(self.runner(judge_model, nodeid),
                           None if against is None else self.runner(against, nodeid))

        evaluator = Evaluator(test.dataset, task, test.space, test.evaluation(), test.model,
                              lambda on: self.runner(on, nodeid),
                              None if judge_model is None else judging)
        if pairing is not None or against is not None:
            strategy = self.strategy_for(test, compared=True)
        ran = strategy.run(evaluator)
        check_scores(ran.matrix, task, test.dataset)
        # The side evaluations a threshold reads, run before the summary that takes them.
        of_matrix = from_matrix(ran.matrix)
        circular = None
        paid_apart: list[Spend] = []  # calls made outside the evaluator: paid all the same
        if spec.circular:
            shifts = self.runner(test.model, nodeid)
            circular = run_circular(test.dataset, task, test.space, spec.max_tokens, nodeid,
                                    shifts)
            paid_apart.append(shifts.stats.spend)
        summary = summarize(
            ran.matrix, test.space, mode=spec.mode, eps=spec.eps, delta=spec.delta,
            min_cells=spec.min_cells, confidence=spec.confidence,
            group_by=spec.grouping(), order_group_by=spec.order_group_by, n_star=ran.n_star,
            n_star_curve=ran.n_star_curve, mean_rows=ran.uniform_rows, looked=ran.looked,
            sides=of_matrix if circular is None else [*of_matrix, circular],
        )
        # A pairwise judge's matrix is the comparison itself (win values), not the candidate's.
        comparison = None if pairing is None or against is not None else (
            self.compare_with_baseline(
                test, pairing, ran.matrix, lambda on: evaluator.run(ran.matrix.n_resamplings, on),
                summary.formats,
            ))
        thresholds = _gate(test, summary, comparison)
        shown = SideResults(
            circular=circular,
            # An unreadable judge is the judge's failure, not the model's: the test errors.
            judge=None if judge is None or judge_model is None
            else judge_noise(judge, judge_model.identity, ran.matrix),
            pairwise=None if against is None or judge is None
            else pairwise(judge, ran.matrix, summary, against.identity),
        )
        return _reliable_report(test, ran, summary, thresholds, comparison,
                                evaluator.prompt_tokens(),
                                Spend.total([evaluator.spend(), *paid_apart]), shown,
                                self.baseline_notes(test, pairing))

    def pairwise_baseline(self, test: ReliableTest, judge: Judge | None,
                          pairing: BaselineChoice | None) -> AsyncModel | None:
        """The baseline model a pairwise judge compares the candidate with (None without a
        pairwise judge); a pairwise judge without a baseline model, or ``min_win_rate`` without
        a pairwise judge, is a usage error."""
        spec = test.spec
        if judge is None or not judge.pairwise:
            if spec.min_win_rate is not None:
                raise JudgeUsageError(
                    f"min_win_rate={spec.min_win_rate!r} needs a pairwise judge: grade with "
                    "Generation(grader=Judge(..., pairwise=True)) and give a baseline model")
            return None
        if pairing is None or pairing.kind == "report":
            raise JudgeUsageError(
                "a pairwise Judge compares the candidate's answers with a baseline model's: "
                "give baseline='NAME' (or 'local') or a reliable_baseline fixture (a stored "
                "baseline report holds no answers)")
        if spec.max_regression is not None:
            raise JudgeUsageError(
                "max_regression compares two models' own scores; a pairwise Judge gives one "
                "win rate: use min_win_rate= with a pairwise judge")
        return self.baseline_model(pairing)

    def baseline_model(self, choice: BaselineChoice) -> AsyncModel:
        if choice.kind == "fixture":
            return self.resolve_model(choice.obj)
        assert choice.name is not None
        return self.model_named(choice.name, self.settings.baseline_base_url)

    def judge_model(self, task: Task) -> AsyncModel | None:
        """The model of the task's judge (its ``id`` as identity when given), checked; None
        when the task grades without a judge."""
        judge = judge_of(task)
        if judge is None:
            return None
        judge.check()
        model = self.resolve_model(judge.model)
        if judge.id is not None:
            model = as_async_model(model, id=judge.id)
        return model

    def reliable_test(
        self, nodeid: str, data: Records, task: Task, spec: ReliableSpec, user_model: Any = None
    ) -> ReliableTest:
        """The test's inputs, checked (the dataset against the task) and resolved (its space,
        model, seed and policy) before any call."""
        dataset = self.dataset(data)
        task.validate(dataset)
        if (judge := judge_of(task)) is not None:
            judge.check()
        return ReliableTest(
            nodeid=nodeid, spec=spec, dataset=dataset, task=task, space=self.space(spec.space),
            model=self.resolve_model(user_model), seed=derive_seed(self.settings.seed, nodeid),
            decide=spec.decide or self.settings.decide,
        )

    def strategy_for(self, test: ReliableTest, *, compared: bool = False) -> RunStrategy:
        """n* under ``--reliable-n auto`` (when the marker gives no ``n``), else n resamplings,
        in batches that may stop early when the marker or ``--reliable-stop-early`` asks, or in
        rounds spent on open groups under ``search="adaptive"`` (``compared``: a baseline
        answers the same resamplings, which adaptive search does not choose for it, so it runs
        them all in plan order)."""
        spec, settings = test.spec, self.settings
        search = spec.search_under(settings.search)
        stop_early = spec.stops_early_under(settings.stop_early)
        if spec.n is None and settings.n == "auto":
            reference = (
                self.model_named(settings.reference_model) if settings.reference_model
                else test.model
            )
            key = NStarKey(
                nodeid=test.nodeid, space_hash=test.space.hash, dataset_hash=test.dataset.hash,
                reference_model=reference.identity, mode=spec.mode, eps=spec.eps,
                delta=spec.delta, seed=settings.seed, pilot_n=settings.pilot_n,
                n_star_method=settings.n_method, n_max=settings.n_max,
            )
            return AutoN(key, self.cache.nstar, reference,
                         stop_reason="not under --reliable-n auto: n* sizes the run"
                         if stop_early or search == "adaptive" else None)
        n = int(spec.n or (settings.n if isinstance(settings.n, int) else DEFAULT_N))
        if search == "thompson":
            return Thompson(n, seed=test.seed)
        if not stop_early and search != "adaptive":
            return FixedN(n)
        thresholds: dict[str, tuple[str, float]] = {
            name: (direction, float(getattr(spec, name)))
            for name, direction in RELIABLE_THRESHOLDS.items() if getattr(spec, name) is not None}
        # What a stop calls settled must be what the gate will decide (`stopping.gate_agrees`).
        gate_bound = functools.partial(gate_mean_bound, space=test.space, mode=spec.mode)
        if search == "adaptive":
            if compared:
                thresholds[MAX_REGRESSION] = ("max", float(spec.max_regression or 0.0))
            grouping = spec.grouping()
            return Adaptive(
                n, thresholds, decide=test.decide, confidence=spec.confidence,
                peek=range_peek(test.space, mode=spec.mode, grouping=grouping,
                                min_cells=spec.min_cells, order_group_by=spec.order_group_by),
                keys_of=functools.partial(row_keys, test.space, grouping), grouping=grouping,
                gate_bound=gate_bound,
            )
        return StopEarly(n, thresholds, decide=test.decide, confidence=spec.confidence,
                         gate_bound=gate_bound)

    # -- release candidate vs baseline (SPEC section 9; the work is in baseline.py) ----------
    @property
    def stored_baseline(self) -> StoredBaseline | None:
        if self._stored_baseline is None and self.settings.baseline_report is not None:
            self._stored_baseline = StoredBaseline.load(self.settings.baseline_report)
        return self._stored_baseline

    def baseline_for(self, test: ReliableTest, user_baseline: Any,
                     pairwise: bool = False) -> BaselineChoice | None:
        """What the test compares against (None: it does not compare); a stored report is
        checked here, before any call."""
        spec = test.spec
        if not pairwise and spec.baseline is None and spec.max_regression is None and \
                spec.min_win_rate is None:
            return None
        if self.settings.save_baseline is not None and not pairwise:
            return None  # this run is the baseline of later runs: nothing to compare with
        choice = choose_baseline(spec.baseline, user_baseline, self.settings.baseline_model,
                                 self.stored_baseline, test.nodeid)
        if choice.kind == "report":
            assert self.stored_baseline is not None
            n = spec.n or (self.settings.n if isinstance(self.settings.n, int) else None)
            if n is None and self.settings.n != "auto":
                n = DEFAULT_N
            self.stored_baseline.check(
                test.nodeid, seed=self.settings.seed, space_hash=test.space.hash,
                dataset_hash=test.dataset.hash, mode=spec.mode, n=n,
                n_instances=len(test.dataset), k=spec.k,
            )
        return choice

    def baseline_notes(self, test: ReliableTest, choice: BaselineChoice | None) -> list[str]:
        """What the entry says about the baseline it did not use: ``--reliable-baseline-report``
        given, but the ``reliable_baseline`` fixture or ``--reliable-baseline-model`` came first
        (SPEC 9's order), so the stored report was not read for this test."""
        saved, spec = self.settings.save_baseline, test.spec
        if choice is None and saved is not None and (spec.baseline is not None
                                                     or spec.max_regression is not None):
            return [(f"not compared with a baseline (max_regression not checked): "
                     f"--reliable-save-baseline {saved} records this run as the baseline of "
                     "later runs (--reliable-baseline-report)")]
        report = self.settings.baseline_report
        if choice is None or report is None or spec.baseline is not None:
            return []
        if choice.kind == "report":
            return []
        first = ("the reliable_baseline fixture" if choice.kind == "fixture"
                 else f"--reliable-baseline-model {choice.name}")
        return [baseline_shadowed(first, report)]

    def compare_with_baseline(
        self, test: ReliableTest, choice: BaselineChoice, matrix: ScoreMatrix,
        run_plan: Callable[[AsyncModel], ScoreMatrix], ranges: RangeSummary,
    ) -> _Compared:
        """The baseline on the candidate's plan (``run_plan``: same cells, cache and runner),
        or the stored report's scores, compared with the candidate ``matrix`` over the groups of
        its format range ``ranges`` (the test's grouping)."""
        if choice.kind == "report":
            assert self.stored_baseline is not None
            self.stored_baseline.check(  # n is known now, also under --reliable-n auto
                test.nodeid, seed=self.settings.seed, space_hash=test.space.hash,
                dataset_hash=test.dataset.hash, mode=test.spec.mode, n=matrix.n_resamplings,
            )
            scores = self.stored_baseline.scores(test.nodeid)
        else:
            if choice.kind == "fixture":
                on = self.resolve_model(choice.obj)
            else:
                assert choice.name is not None
                on = self.model_named(choice.name, self.settings.baseline_base_url)
            scores = BaselineScores.from_matrix(on.identity, run_plan(on))
        result = compare(matrix, scores, ranges, mode=test.spec.mode,
                         confidence=test.spec.confidence, seed=test.seed, records=test.dataset)
        return _Compared(result, scores.problems)

    # -- CheckList tests -------------------------------------------------------------------
    def run_checklist(
        self, nodeid: str, data: Records, task: Task, spec: ChecklistSpec, user_model: Any = None
    ) -> ChecklistReport:
        """A CheckList test: each batch of examples goes through evaluation's render-run-grade
        pipeline (the space's canonical variant, temperature 0), the checklist package compares
        the predictions, gate.py decides the thresholds."""
        from pytest_reliable import checklist

        self._progress.pop(nodeid, None)
        dataset = self.dataset(data)
        task.validate(dataset)
        self.check_prices(self.checklist_models(task, user_model))
        model = self.resolve_model(user_model)
        runner = self.runner(model, nodeid)
        judge_model = self.judge_model(task)
        judge_runner = None if judge_model is None else self.runner(judge_model, nodeid)
        space = self.space(spec.space) if spec.space is not None else Space.plain()
        calls = Calls()

        def predict(examples: Sequence[dict[str, Any]]) -> list[checklist.Prediction]:
            cells = greedy_cells(examples, task, space, spec.max_tokens)
            graded, ran = run_cells(cells, examples, task, runner,
                                    None if judge_runner is None else Judging(judge_runner))
            calls.add(ran)
            return [checklist.Prediction(c.prediction, c.parsed, c.text or "") for c in graded]

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
            spend=Spend.total([runner.stats.spend]
                              + ([] if judge_runner is None else [judge_runner.stats.spend])),
            run_scoped=run_scoped(model),
        )


def combined_progress(runs: Sequence[ProgressEvent | None]) -> ProgressEvent:
    """One test's progress over every runner it used so far, in order: a pilot and its
    extension to n*, a pilot on a reference model and the gate, a baseline, a judge. Each run's
    calls are known only when it starts (n* only after the pilot), so the total grows; it never
    leaves out calls already made (a runner's batch wait and its calls are one run)."""
    seen = [event for event in runs if event is not None]
    return ProgressEvent(*(sum(getattr(event, name) for event in seen)
                           for name in ("done", "total", "cached", "made", "failed")))


def _gate(
    test: ReliableTest, summary: Summary, comparison: _Compared | None
) -> list[ThresholdCheck]:
    """The test's thresholds decided under its policy; max_regression is decided with the
    others (one Holm family) and its check is also the comparison's."""
    thresholds = reliable_thresholds(
        test.spec, summary, test.decide,
        baseline=comparison.result.difference if comparison else None,
    )
    if comparison is not None:
        comparison.result.check = next((c for c in thresholds if c.name == MAX_REGRESSION), None)
    return thresholds


def _reliable_report(
    test: ReliableTest, ran: GateRun, summary: Summary, thresholds: list[ThresholdCheck],
    comparison: _Compared | None, prompt_tokens: dict[str, int], spend: Spend,
    sides: SideResults, run_notes: list[str],
) -> ReliableReport:
    spec, matrix = test.spec, ran.matrix
    n_star_source = ran.n_star_source if summary.n_star is not None else None
    temperature = (
        spec.temperature if spec.temperature is not None
        else test.space.canonical_variant().temperature
    )
    return ReliableReport(
        nodeid=test.nodeid,
        model=test.model.identity,
        space=test.space,
        mode=spec.mode,
        eps=spec.eps,
        delta=spec.delta,
        summary=summary,
        matrix=matrix,
        thresholds=thresholds,
        decide=test.decide,
        n_star_source=n_star_source,
        pilot_n=ran.pilot_n,
        temperature=float(temperature),
        calls_made=ran.calls_made,
        calls_cached=ran.calls_cached,
        problems=sides.problems(
            list(matrix.problems)
            + [f"baseline: {p}" for p in (comparison.problems if comparison else [])]),
        dataset_hash=test.dataset.hash,
        baseline=comparison.result if comparison else None,
        prompt_tokens=prompt_tokens,
        n_star_method=ran.n_star_method if n_star_source else None,
        n_star_paper=ran.n_star.n_star_paper if ran.n_star else None,
        stopped_early=ran.stopped_early,
        stop_reason=ran.stop_reason,
        search=ran.search,
        exploration=ran.exploration,
        spend=spend,
        run_scoped=run_scoped(test.model),
        sampling_arguments=getattr(test.model, "sampling_arguments", None),
        dataset=test.dataset,
        sides=sides,
        run_notes=run_notes,
    )


BASELINE_ORDER = ("the marker's baseline=, then the reliable_baseline fixture, then "
                  "--reliable-baseline-model, then --reliable-baseline-report")
"""Which baseline a comparing test uses (SPEC section 9), in words."""


def baseline_shadowed(first: str, report: Any) -> str:
    """The note (and the collection warning) when ``first`` wins over a stored baseline report
    that was given too: the explicit flag loses, as SPEC 9's order says; the user must know."""
    fix = ("make the fixture return None when --reliable-baseline-report is given"
           if "fixture" in first else "drop --reliable-baseline-model")
    return (f"compared with {first}, not with --reliable-baseline-report {report}: the baseline "
            f"is {BASELINE_ORDER}; to compare with the stored report, {fix}")


def unpriced_message(settings: Settings, *identities: str) -> str:
    """Models the run would call under a USD budget have no price (nothing was spent on them)."""
    names = ", ".join(identities)
    which = f"model {names} has" if len(identities) == 1 else f"models {names} have"
    return (f"--reliable-budget {settings.budget_usd:g}usd: {which} no price in "
            f"{settings.pricing_path}: add "
            f"{'it' if len(identities) == 1 else 'them'} under models: (its name or a glob, "
            "with input and output USD per million tokens), or drop the usd part of the budget")
