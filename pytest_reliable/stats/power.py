"""Power before any call: the true value at which a threshold goes the way its policy promises with
80% probability, for a design of N instances x n resamplings (``--reliable-plan``).

`pytest_reliable.run.sizing` plans the calls and `run.plan_figures` writes each threshold's text;
the numbers are here, beside the bounds they anticipate, so a change to a gate's bound and to its
sizing is one change in one package. The method, in brief (`run.plan_figures.METHOD`, printed
with every plan):

- Means (``min_score``, ``min_win_rate``): by simulation through the gate's own bound
  (`mean_values_simulated`: Gaffke's bound on the per-instance means, Clopper-Pearson when they
  are 0/1, the resamplings' part in sampled fixed mode), under each of `STRUCTURES`, quoting the
  least favourable. The normal approximation this replaced assumed an intra-instance correlation
  of 0.5 and a normal bound, and quoted 0.80 where the gate passed 0.72.
- One 0/1 outcome per instance (pass@k, pass^k, maj@k, circular): exact (`binomial_value`): the
  count of the N outcomes is binomial whatever the instances' structure, decided on the exact
  bound.
- Ranges (``min_worst``, ``max_spread``, ``min_median``): by simulation, because no formula is
  honest about what the gate really needs (every group's bound, every pair's, Holm over all of
  them): `range_value` runs `RANGE_REPS` seeded gates of the planned design (its layout of
  groups over cells, ilr or fixed) through the gate's own estimator and bounds
  (`pytest_reliable.stats.groups`) for the hardest model at each candidate value
  (`_configuration`), and bisects for the value where the policy's outcome has 80% probability.
  Under estimate the gate compares point estimates, and so does the simulation. How an
  instance's answers hang together is unknown before any call and moves the outcome's rate at a
  given value by up to 0.25 (``benchmarks/bench_gate_errors.py`` part C), so the value is found
  under each of `STRUCTURES` (Beta-distributed instance difficulty at two intra-instance
  correlations, and a mixture of instances that answer by difficulty alone with instances that
  answer afresh), every one with one answer per prompt (an instance shown the same variant
  twice answers the same, as at temperature 0). `range_values` quotes the conservative end (the
  value the policy's outcome reaches 80% under every structure) and the spread over them. A
  threshold that does not reach 80% even at the most favourable truth, under some structure,
  cannot go that way at this size, and the plan says so.
- ``min_worst`` of a search by cells (``search="adaptive"``, `Design.cells_chunk`): through the
  search's own bounds (`_cells_outcome_rate`): each format's exact bound over its instances at
  its last look, at `stats.looks.FINAL_SHARE` of the claim's alpha. Earlier looks only add
  chances for the threshold to go the policy's way (a look settles a format the other way only
  when its bound misses the truth, at most that look's share of alpha), so the figure is on the
  safe side.
- The canonical interval (``min_lower_ci``): exact, from the binomial distribution of the
  canonical pass's N first samples through the Wilson lower bound; no assumption about rho.
- A standard deviation (``max_std``): by simulation through the gate's own bound
  (`std_values_simulated`), for a model whose resamplings differ by chance alone, under each
  of `STRUCTURES`, quoting the least favourable.
- Fail-on-evidence compares with Bonferroni over every claim of the test, Holm's worst case.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special as _special
from scipy import stats as _sps

from pytest_reliable.contract.vocabulary import DEFAULT_POLICY, Mode, Policy
from pytest_reliable.stats import groups as g
from pytest_reliable.stats._validation import FloatArray
from pytest_reliable.stats.groups import Tally
from pytest_reliable.stats.looks import FINAL_SHARE, look_points
from pytest_reliable.stats.proportions import wilson_interval

POWER = 0.8
"""The probability the resolvable values are quoted at."""


@dataclass(frozen=True)
class Design:
    """The shape of one evaluation, as far as its uncertainty is concerned."""

    instances: int
    resamplings: int
    k: int = 1
    confidence: float = 0.95
    decide: Policy = DEFAULT_POLICY
    layout: RangeLayout | None = None
    """How the cells fall into the test's groups (None: no grouping known)."""
    groups: int = 0
    pairs: int = 0
    hypotheses: int = 1
    """What Holm corrects over under fail-on-evidence (thresholds, plus groups / pairs)."""
    mode: Mode = "ilr"
    units: int = 0
    """The listed variants a cell draws from (an instance shown one twice answers the same);
    0: too many to list (no repeats)."""
    sampled: bool = False
    """Fixed mode over a space larger than its resamplings: the mean's bound has a second part,
    the resamplings' spread (`bounded.TwoSourceMean`)."""
    cells_chunk: int = 0
    """A search by cells decides ``min_worst`` (`evaluate.cell_rounds.applies`): the instances
    per look of a format's sequence (`cell_rounds.chunk_for`); 0: the uniform gate's paired
    estimator does."""


def lower_ci_needed(limit: float, design: Design) -> int | None:
    """How many of the N canonical answers must be right for the Wilson lower bound to reach
    ``limit`` (None: not even N)."""
    n = design.instances
    return next((x for x in range(n + 1)
                 if wilson_interval(x, n, design.confidence)[0] >= limit - 1e-12), None)


def lower_ci_value(needed: int, design: Design) -> float:
    """The true score at which ``needed`` of the N canonical answers are right with 80%
    probability (at most 20% under fail-on-evidence): the same rule under every policy."""
    n = design.instances
    target = 1 - POWER if design.decide == "fail-on-evidence" else POWER
    # P(X >= needed) is increasing in p: bisection for the p where it equals the target.
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if float(_sps.binom.sf(needed - 1, n, mid)) >= target:
            hi = mid
        else:
            lo = mid
    return hi


# -- max_std: the gate's own bounds, by simulation ---------------------------------------------
def _std_level(sigma: float, structure: Structure, design: Design) -> float | None:
    """The accuracy level of a model whose resamplings differ by chance alone (no format effect)
    and whose per-resampling standard deviation is ``sigma``: E[a (1 - a)] = p (1 - p) (1 - icc)
    under every structure, times (1 - 1/U) in ilr over U listed variants (an instance's cells
    repeat its answers), and sigma^2 = E[a (1 - a)] / N. None: no level reaches ``sigma``."""
    product = sigma * sigma * design.instances / _std_shrink(structure, design)
    if product > 0.25 + 1e-12:
        return None
    return (1.0 - math.sqrt(max(1.0 - 4.0 * product, 0.0))) / 2.0


def _std_shrink(structure: Structure, design: Design) -> float:
    """E[a (1 - a)] / (p (1 - p)) of `_std_level`'s model."""
    shrink = 1.0 - structure.icc
    if design.mode == "ilr" and 0 < design.units <= MEAN_UNITS_LISTED:
        shrink *= 1.0 - 1.0 / design.units
    return shrink


def _std_outcome(design: Design, scores: FloatArray, limit: float) -> npt.NDArray[np.bool_]:
    """Per simulated gate, whether ``max_std`` goes the way the policy needs evidence for,
    through the gate's bound (`summary.std_bound`): ilr, Gaffke's bound on the instances'
    variances over their cells (`bounds.CellStdBound`); fixed mode, the more conservative of the
    chi-square bound (kurtosis and the jackknife over instances) and the bounded bound of
    disjoint pairs of resamplings (`bounds.StdBound`)."""
    from pytest_reliable.stats.bounded import weighted_mean_cdfs

    reps, n, n_inst = scores.shape
    failing = design.decide == "fail-on-evidence"
    alpha = 1.0 - design.confidence
    level = alpha / max(design.hypotheses, 1) if failing else alpha
    rows = scores.mean(axis=2)
    if design.decide == "estimate":
        return np.asarray(rows.std(axis=1, ddof=1) <= limit + 1e-12)
    if design.mode == "ilr":
        most = (n // 2) * ((n + 1) // 2) / (n * (n - 1))
        right = np.rint(scores.sum(axis=1)).astype(np.int64)  # (reps, N)
        counts = np.zeros((reps, n + 1))
        np.add.at(counts, (np.repeat(np.arange(reps), n_inst), right.ravel()), 1.0)
        k = np.arange(n + 1)
        unit = np.minimum(k * (n - k) / (n * (n - 1)), most) / most
        point = min(limit * limit * n_inst / most, 1.0)
        return _bounded_decision(unit, counts, point, level, failing, weighted_mean_cdfs)
    variance = rows.var(axis=1, ddof=1) + 1.0 / (12.0 * n_inst**2)
    if n >= 4:
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rows of (nearly) equal scores
            kurtosis = _sps.kurtosis(rows, axis=1, fisher=True, bias=False)
        kurtosis = np.where(np.ptp(rows, axis=1) > 0.0, np.nan_to_num(kurtosis), 0.0)
    else:
        kurtosis = np.zeros(reps)
    df = 2.0 / (2.0 / (n - 1) + np.maximum(kurtosis, 0.0) / n)
    left_out = (n_inst * rows[:, :, None] - scores) / (n_inst - 1)
    s2 = left_out.var(axis=1, ddof=1)  # (reps, N)
    jackknife = (n_inst - 1) / n_inst * ((s2 - s2.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(jackknife > 0.0, np.maximum(1.0, 2.0 * variance**2
                                                   / (variance**2 * 2.0 / df + jackknife)), df)
    statistic = df * variance / (limit * limit)
    pairs = n // 2
    halves = (rows[:, 0:2 * pairs:2] - rows[:, 1:2 * pairs:2]) ** 2 / 2.0 / 0.5  # unit scale
    point = min(limit * limit / 0.5, 1.0)
    by_pairs = _bounded_decision(halves, np.ones_like(halves), point, level, failing,
                                 weighted_mean_cdfs)
    if failing:  # fails when both bounds show the breach (the larger p-value)
        return np.asarray((_sps.chi2.sf(statistic, df) <= level) & by_pairs)
    return np.asarray((_sps.chi2.cdf(statistic, df) <= level) & by_pairs)


def _bounded_decision(values: FloatArray, counts: FloatArray, point: float, level: float,
                      failing: bool, cdfs: Callable[..., FloatArray]) -> npt.NDArray[np.bool_]:
    """Per row of ``values`` in [0, 1] with ``counts``, whether `bounded.BoundedMean` decides
    against "mean <= point" (fail-on-evidence: its p_above <= level) or for "mean <= point"
    (pass-on-evidence: p_below <= level); rows of 0/1 values exactly (binomial)."""
    weight = counts.sum(axis=1)
    interior = np.where((values > 0.0) & (values < 1.0), counts, 0.0).sum(axis=1) > 0
    ones = np.where(values >= 1.0, counts, 0.0).sum(axis=1)
    if failing:
        p = cdfs(values, counts, 0.0, point)
        exact = _sps.binom.sf(ones - 1, weight, point)
    else:
        p = 1.0 - cdfs(values, counts, 1.0, point)
        exact = _sps.binom.cdf(ones, weight, point)
    p = np.where(interior, p, exact)
    if point >= 1.0:
        p = np.ones_like(p) if failing else np.where(ones == weight, 1.0, 0.0)
    return np.asarray(p <= level)


@functools.lru_cache(maxsize=256)
def std_values_simulated(design: Design, limit: float) -> RangeValues:
    """``max_std``: the true standard deviation over resamplings at which the policy's outcome
    has `POWER` probability, under each of `STRUCTURES` (a model whose resamplings differ by
    chance alone, `_std_level`), by bisection over simulated gates through the gate's own bound
    (`_std_outcome`); the figure is the least favourable structure's. The chi-square figure this
    replaced ignored the bound fixed mode uses (it cannot pass on evidence below about 100
    resamplings: the pairs' bound keeps room for a format none of them drew)."""
    if design.resamplings < 2:
        return RangeValues(None, None, None, (None,) * len(STRUCTURES),
                           (0.0,) * len(STRUCTURES))
    reps = max(40, min(MEAN_REPS, RANGE_CELLS // max(design.instances * design.resamplings, 1)))
    draws = _mean_draws(design, reps, RANGE_SEED + 1)
    failing = design.decide == "fail-on-evidence"
    found: list[tuple[float | None, float | None]] = []
    for structure in STRUCTURES:
        top = math.sqrt(0.25 * _std_shrink(structure, design) / design.instances)

        def rate(sigma: float, structure: Structure = structure) -> float:
            level = _std_level(sigma, structure, design)
            if level is None:
                return 0.0
            levels = np.full(len(draws.units), level)
            return float(_std_outcome(design, _scores(draws, levels, structure), limit).mean())

        if failing and top <= limit:
            found.append((None, None))  # no such model of this structure breaches the limit
            continue
        if not failing and top < limit and rate(top) >= POWER:
            found.append((None, None))  # it passes at any std such a model can have
            continue
        if failing:
            found.append(_bisect(rate, limit, top, 1))
        else:
            found.append(_bisect(rate, min(limit, top), 0.0, -1))
    return _least_favourable(found, limit)


# -- means: the gate's own bounds, by simulation -----------------------------------------------
MEAN_REPS = 400
"""Simulated gates behind every mean figure (each is a few vectorised saddlepoint sums)."""
MEAN_UNITS_LISTED = 10_000
"""Above this many listed variants a cell's variant is taken to be new (no repeated prompt)."""


def _mean_draws(design: Design, reps: int, seed: int) -> _Draws:
    """The common random numbers of a mean's simulation: every variant at one level, so only
    which cells repeat a prompt matters (ilr: variants drawn with replacement; fixed mode: passes
    over the listed variants, one per resampling)."""
    rng = np.random.default_rng(seed)
    n, n_inst = design.resamplings, design.instances
    shape = (reps, n, n_inst)
    units = design.units if 0 < design.units <= MEAN_UNITS_LISTED else 0
    if design.mode == "fixed":
        rows = np.arange(n) % units if units else np.arange(n)
        codes = np.ascontiguousarray(np.broadcast_to(rows[None, :, None], shape))
    elif units:
        codes = rng.integers(0, units, size=shape)
    else:
        codes = np.broadcast_to(np.arange(n)[None, :, None], shape).copy()  # no repeats
    instance_u, class_u = rng.random((reps, 1, n_inst)), rng.random((reps, 1, n_inst))
    cell_u = rng.random(shape)
    if units:
        cell_u = _one_answer_per_prompt(codes, cell_u)
    return _Draws([], [], [], codes, np.arange(max(units, n))[:, None], instance_u, class_u,
                  cell_u)


def _mean_outcome(design: Design, scores: FloatArray, limit: float) -> npt.NDArray[np.bool_]:
    """Per simulated gate, whether a mean threshold (``min_score``) goes the way the policy
    needs evidence for, through the gate's bound (`bounded.mean_bound`): Gaffke's bound on the
    per-instance means, exactly Clopper-Pearson when they are all 0 or 1; in sampled fixed mode
    its second part, the resamplings' t margin, at half the error rate each (`TwoSourceMean`).
    Fail-on-evidence compares with Bonferroni over the test's claims (never rejecting more than
    Holm: the figure is on the safe side). Each decision is one p-value at the limit."""
    from pytest_reliable.stats.bounded import weighted_mean_cdfs

    reps, n, n_inst = scores.shape
    failing = design.decide == "fail-on-evidence"
    alpha = 1.0 - design.confidence
    if design.decide == "estimate":
        return np.asarray(scores.mean(axis=(1, 2)) >= limit - 1e-12)
    level = alpha / max(design.hypotheses, 1) if failing else alpha
    per_instance = scores.mean(axis=1)  # (reps, N) on the grid k / n
    grid_k = np.rint(per_instance * n).astype(np.int64)
    counts = np.zeros((reps, n + 1))
    np.add.at(counts, (np.repeat(np.arange(reps), n_inst), grid_k.ravel()), 1.0)
    margin = np.zeros(reps)
    if design.sampled:  # TwoSourceMean: each part at half the error rate
        level /= 2.0
        if n < 2:
            return np.zeros(reps, dtype=bool)
        rows = scores.mean(axis=2)
        margin = (float(_sps.t.ppf(1.0 - level, n - 1)) * rows.std(axis=1, ddof=1)
                  / math.sqrt(n))
    point = limit - margin if failing else limit + margin
    grid = np.arange(n + 1) / n
    binary = counts[:, 1:n].sum(axis=1) == 0 if n > 1 else np.ones(reps, dtype=bool)
    ones = counts[:, n]
    # p-value of "mean <= point" (pass) or "mean >= point" (fail), as `BoundedMean` has them.
    if failing:
        p = 1.0 - weighted_mean_cdfs(grid, counts, 1.0, np.clip(point, 0.0, 1.0))
        p = np.where(binary, _sps.binom.cdf(ones, n_inst, np.clip(point, 0.0, 1.0)), p)
        p = np.where(point <= 0.0, 1.0, np.where(point >= 1.0, np.where(ones == n_inst, 1.0,
                                                                        0.0), p))
        return np.asarray(p <= level)
    p = weighted_mean_cdfs(grid, counts, 0.0, np.clip(point, 0.0, 1.0))
    p = np.where(binary, _sps.binom.sf(ones - 1, n_inst, np.clip(point, 0.0, 1.0)), p)
    p = np.where(point >= 1.0, 1.0, p)
    return np.asarray(p <= level)


@functools.lru_cache(maxsize=256)
def mean_values_simulated(design: Design, limit: float) -> RangeValues:
    """The true mean score at which ``min_score`` goes the policy's way with `POWER`
    probability, under each of `STRUCTURES`, by bisection over simulated gates of the planned
    design through the gate's own bound (`_mean_outcome`), on common random numbers; the figure
    is the least favourable structure's. A normal approximation with an assumed correlation
    quoted 0.80 where a prompt-insensitive model passed 0.72 (N=100, n=30, correlation 0.5):
    Gaffke's bound is wider than normal theory, and the correlation is not known."""
    reps = max(40, min(MEAN_REPS, RANGE_CELLS // max(design.instances * design.resamplings, 1)))
    draws = _mean_draws(design, reps, RANGE_SEED)
    failing = design.decide == "fail-on-evidence"
    toward = -1 if failing else 1
    best = 0.0 if failing else 1.0
    found: list[tuple[float | None, float | None]] = []
    for structure in STRUCTURES:
        def rate(x: float, structure: Structure = structure) -> float:
            levels = np.full(len(draws.units), x)
            return float(_mean_outcome(design, _scores(draws, levels, structure), limit).mean())

        found.append(_bisect(rate, limit, best, toward))
    return _least_favourable(found, limit)


def _least_favourable(found: list[tuple[float | None, float | None]],
                      limit: float) -> RangeValues:
    """Per-structure values (and rates at the most favourable truth) as `RangeValues`: the
    figure is the one farthest from the limit, on the side the figure lies."""
    values = [v for v, _ in found if v is not None]
    per = tuple(v for v, _ in found)
    at_best = tuple(b for _, b in found)
    if not values:
        return RangeValues(None, None, None, per, at_best)
    far = max(values, key=lambda v: abs(v - limit))
    return RangeValues(far, min(values), max(values), per, at_best)


def _bisect(rate: Callable[[float], float], limit: float, best: float,
            toward: int) -> tuple[float | None, float | None]:
    """The value between ``limit`` and ``best`` where ``rate`` reaches `POWER` (the conservative
    end of the last of `RANGE_STEPS` steps), and the rate at ``best`` when it had to be checked
    (None: a nearer value reached `POWER`); no value (None) when not even ``best`` reaches it."""
    lo, hi = (limit, best) if toward > 0 else (best, limit)
    at_best = None
    for step in range(RANGE_STEPS):
        mid = (lo + hi) / 2.0
        ok = rate(mid) >= POWER
        if step == 0 and not ok:
            # Halfway to the most favourable value falls short: is that value itself reachable?
            at_best = rate(best)
            if at_best < POWER:
                return None, at_best
        if (toward > 0) == ok:
            hi = mid
        else:
            lo = mid
    return (hi if toward > 0 else lo), at_best


def binomial_value(limit: float, design: Design) -> tuple[float | None, int | None]:
    """A threshold on one independent 0/1 outcome per instance (pass@k, pass^k, maj@k, circular),
    decided on the exact binomial bound (`bounded.binomial_bound`): exact, no structure. The true
    rate at which the policy's outcome has `POWER` probability, and the count of the N outcomes
    it turns on (pass-on-evidence: at least that many; fail-on-evidence: at most). None: not
    even N (or 0) of N shows it."""
    n_inst = design.instances
    alpha = 1.0 - design.confidence
    counts = np.arange(n_inst + 1)
    if design.decide == "estimate":
        needed = math.ceil(limit * n_inst - 1e-9)
        return _binomial_rate_at(needed, n_inst, POWER, upper=True), needed
    if design.decide == "fail-on-evidence":
        level = alpha / max(design.hypotheses, 1)
        fails = _sps.binom.cdf(counts, n_inst, limit) <= level  # p_below at the limit
        if not fails.any():
            return None, None
        most = int(counts[fails].max())
        return _binomial_rate_at(most, n_inst, POWER, upper=False), most
    lower = np.where(counts > 0, _sps.beta.ppf(alpha, np.maximum(counts, 1),
                                               n_inst - counts + 1), 0.0)
    shows = lower >= limit - 1e-12
    if not shows.any():
        return None, None
    needed = int(counts[shows].min())
    return _binomial_rate_at(needed, n_inst, POWER, upper=True), needed


def _binomial_rate_at(count: int, n: int, target: float, *, upper: bool) -> float:
    """The rate p at which P(X >= count) (``upper``) or P(X <= count) equals ``target``."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        prob = (float(_sps.binom.sf(count - 1, n, mid)) if upper
                else float(_sps.binom.cdf(count, n, mid)))
        if (prob >= target) == upper:
            hi = mid
        else:
            lo = mid
    return hi if upper else lo


def binomial_needs_instances(limit: float, confidence: float) -> int:
    """The fewest instances at which pass-on-evidence can show a rate >= ``limit`` at all (all N
    outcomes right: the exact lower bound (1 - confidence)^(1/N) must reach it)."""
    if limit <= 0.0:
        return 1
    if limit >= 1.0:
        return 0  # never: no finite N shows a rate of 1
    return math.ceil(math.log(1.0 - confidence) / math.log(limit) - 1e-12)


# -- ranges: what the gate really needs, by simulation ------------------------------------------
RANGE_REPS = 200
"""Simulated gates behind every range figure (the plan's Monte Carlo error: about +-3% at 80%)."""
RANGE_SEED = 20_190_000
"""Fixed: the plan is deterministic (common random numbers across the candidate values)."""
RANGE_CELLS = 2_000_000
"""Cells simulated per candidate value at most (fewer repetitions for very large designs)."""
RANGE_STEPS = 7
"""Bisection steps per structure: the value to within (best - limit) / 128 (0.003 for a
limit of 0.6), rounded toward the conservative side."""


@dataclass(frozen=True)
class RangeLayout:
    """How a test's cells fall into the groups of its pre-registered grouping.

    ``sizes``: the values of each listed dimension (``group_by="dimensions"`` or a list), or
    ``formats``: the number of formats (``group_by="formats"``; then ``sizes`` is empty). In ilr
    every cell draws its variant (each dimension's value) uniformly; in fixed mode every
    resampling draws one variant (without replacement in passes over the listed ones) for every
    instance. ``sampled``: fixed mode over a space larger than its resamplings (the gate adds
    their variant-sampling error).
    """

    mode: Mode
    sizes: tuple[int, ...] = ()
    formats: int = 0
    sampled: bool = False

    @property
    def groups(self) -> int:
        return self.formats if self.formats else sum(self.sizes)

    @property
    def pairs(self) -> int:
        if self.formats:
            return self.formats * (self.formats - 1) // 2
        return sum(k * (k - 1) // 2 for k in self.sizes)


@dataclass(frozen=True)
class Structure:
    """How one instance's answers hang together: a generating process the plan simulates.

    - ``beta``: instance i's accuracy at a variant of level l is the Beta(mean l, intra-instance
      correlation ``icc``) quantile of the instance's own uniform (comonotone across variants:
      an instance hard under one variant is hard under all); its cells are Bernoulli draws;
    - ``mixture``: a share ``icc`` of the instances answers by difficulty alone (right when its
      uniform lies below the level), the others draw each answer afresh.

    In both, every variant's mean over instances is exactly its level, the intra-instance
    correlation at one level is ``icc``, and an instance shown one variant twice gives one
    answer (one prompt, one answer, as at temperature 0)."""

    kind: str
    icc: float

    @property
    def label(self) -> str:
        return f"{self.kind} {self.icc:g}"


STRUCTURES = (Structure("beta", 0.2), Structure("beta", 0.8), Structure("mixture", 0.5))
"""The structures every range figure is simulated under (none is known before any call: the
plan quotes the conservative end). Heterogeneity from nearly even difficulty (icc 0.2) to
instances right or wrong whatever the prompt (0.8), and a two-class population (mixture). Which
one is least favourable depends on the threshold and the design (bench part C): beta 0.2 for a
spread's pairs, beta 0.8 for a median, the mixture for a worst group in ilr; beta 0.5 was never
the least favourable in the cases measured, so it is not simulated (bench part C checks it)."""
QUANTILE_GRID = 4097
"""Points of the Beta quantile table a structure's accuracies are interpolated from (the mean
accuracy is off by at most 1 / 4096)."""


@dataclass(frozen=True)
class _Draws:
    """The common random numbers of one design: labels, instances and cells."""

    tallies: list[Tally]
    """Per labelling, the bookkeeping of its (reps, n, N) group indexes."""
    row_tallies: list[Tally | None]
    """Per labelling, its tallies per resampling ((reps, n, G, N); sampled fixed mode only, for
    the jackknife over resamplings)."""
    first_rows: list[npt.NDArray[np.int64]]
    """Per labelling, (reps, n): each resampling's group (fixed mode: rows are whole groups)."""
    codes: npt.NDArray[np.int64]
    """(reps, n, N): each cell's variant (an index into the layout's units)."""
    units: npt.NDArray[np.int64]
    """(U, D): each variant's value per dimension (or its format, D = 1)."""
    instance_u: FloatArray
    """(reps, 1, N): each instance's difficulty (a uniform)."""
    class_u: FloatArray
    """(reps, 1, N): a second uniform per instance (its class in the mixture structure)."""
    cell_u: FloatArray
    """(reps, n, N): each cell's uniform, equal for the cells of one instance and variant."""


def _draws(layout: RangeLayout, instances: int, resamplings: int, reps: int, seed: int) -> _Draws:
    rng = np.random.default_rng(seed)
    sizes = (layout.formats,) if layout.formats else layout.sizes
    units = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"),
                     axis=-1).reshape(-1, len(sizes))
    shape = (reps, resamplings, instances)
    if layout.mode == "fixed":
        passes = -(-resamplings // len(units))
        rows = np.concatenate([rng.permuted(np.tile(np.arange(len(units)), (reps, 1)), axis=1)
                               for _ in range(passes)], axis=1)[:, :resamplings]
        codes = np.broadcast_to(rows[:, :, None], shape)
    else:
        codes = rng.integers(0, len(units), size=shape)
    codes = np.ascontiguousarray(codes)
    labels = [units[codes[..., 0]][..., d] for d in range(len(sizes))]
    tallies = [Tally(units[:, d][codes], k) for d, k in enumerate(sizes)]
    row_tallies = [Tally(units[:, d][codes][:, :, None, :], k) if layout.sampled else None
                   for d, k in enumerate(sizes)]
    instance_u, class_u = rng.random((reps, 1, instances)), rng.random((reps, 1, instances))
    return _Draws(tallies, row_tallies, labels, codes, units, instance_u, class_u,
                  _one_answer_per_prompt(codes, rng.random(shape)))


def _one_answer_per_prompt(codes: npt.NDArray[np.int64], cell_u: FloatArray) -> FloatArray:
    """``cell_u`` with every repeat of an instance's variant given its first cell's uniform (ilr
    draws variants with replacement; fixed mode repeats them after a pass over the space)."""
    reps, n, n_inst = codes.shape
    # One column per (replicate, instance); sorted by column, then variant, then resampling, the
    # first cell of each run of equal variants is the one whose uniform the run takes. Sorting
    # (not comparing every pair of resamplings) keeps the plan's cost near-linear in n.
    column = np.broadcast_to((np.arange(reps)[:, None, None] * n_inst
                              + np.arange(n_inst)[None, None, :]), codes.shape).ravel()
    row = np.broadcast_to(np.arange(n)[None, :, None], codes.shape).ravel()
    order = np.lexsort((row, codes.ravel(), column))
    flat = cell_u.ravel()[order]
    key_col, key_code = column[order], codes.ravel()[order]
    starts = np.ones(order.size, dtype=bool)
    starts[1:] = (key_col[1:] != key_col[:-1]) | (key_code[1:] != key_code[:-1])
    first = flat[np.flatnonzero(starts)[np.cumsum(starts) - 1]]
    out = np.empty(order.size)
    out[order] = first
    return out.reshape(codes.shape)


def _scores(draws: _Draws, levels: FloatArray, structure: Structure) -> FloatArray:
    """0/1 cells of a model whose variant u scores ``levels[u]`` on average over instances,
    under ``structure`` (see `Structure`)."""
    if structure.kind == "mixture":
        level = levels[draws.codes]
        u = np.where(draws.class_u < structure.icc, draws.instance_u, draws.cell_u)
        return (u < level).astype(np.float64)
    # Beta: each instance's accuracy at each distinct level (few: the configurations move levels
    # by +-x/2), interpolated in a quantile table (betaincinv per instance is the plan's cost).
    distinct, which = np.unique(np.round(levels, 6), return_inverse=True)
    accuracy = np.stack([np.interp(draws.instance_u[:, 0, :], _GRID,
                                   _beta_quantiles(float(level), structure.icc))
                         for level in distinct], axis=1)  # (reps, L, N)
    per_cell = np.take_along_axis(accuracy, which[draws.codes], axis=1)
    return (draws.cell_u < per_cell).astype(np.float64)


_GRID = np.linspace(0.0, 1.0, QUANTILE_GRID)


@functools.lru_cache(maxsize=4096)
def _beta_quantiles(level: float, icc: float) -> FloatArray:
    """The Beta(mean ``level``, intra-class correlation ``icc``) quantiles at `_GRID`."""
    if level <= 0.0 or level >= 1.0:
        return np.full(QUANTILE_GRID, 1.0 if level >= 1.0 else 0.0)
    concentration = 1.0 / icc - 1.0
    table = _special.betaincinv(level * concentration, (1 - level) * concentration, _GRID)
    return np.asarray(table, dtype=np.float64)


def _unit_levels(layout: RangeLayout, draws: _Draws, effects: list[FloatArray],
                 centre: float) -> FloatArray:
    """Each variant's level: ``centre`` plus the sum of its values' effects (one array of
    effects per dimension; for formats, one per format), clipped to [0, 1]."""
    level = np.full(len(draws.units), centre)
    for d, effect in enumerate(effects):
        level = level + effect[draws.units[:, d]]
    return np.asarray(np.clip(level, 0.0, 1.0), dtype=np.float64)


def _configuration(layout: RangeLayout, threshold: str, decide: Policy, limit: float,
                   x: float) -> tuple[list[FloatArray], float]:
    """The hardest model for the policy's outcome whose threshold value is ``x``.

    - pass-on-evidence ``min_worst`` / ``min_median``: every group at x (every bound must clear);
    - fail-on-evidence ``min_worst``: one group at x, the rest placed so every other group sits
      exactly at the limit (the only breach is that group); ``min_median``: every group at x;
    - pass-on-evidence ``max_spread``: every dimension at spread x (half its values x / 2 below
      the centre 0.5, half above; an odd one out at the centre);
    - fail-on-evidence ``max_spread``: one pair x apart, no other effect.
    """
    sizes = (layout.formats,) if layout.formats else layout.sizes
    zero = [np.zeros(k) for k in sizes]
    if threshold in ("min_worst", "min_median"):
        if decide == "fail-on-evidence" and threshold == "min_worst":
            k = sizes[0]
            rest = (k * limit - x) / (k - 1) if k > 1 else limit  # one group: no rest to place
            effects = [np.r_[x - limit, np.full(k - 1, rest - limit)], *zero[1:]]
            return effects, limit
        return zero, x
    if decide == "fail-on-evidence":
        k = sizes[0]
        first = np.zeros(k)
        first[0], first[1] = -x / 2, x / 2
        return [first, *zero[1:]], 0.5
    spread = []
    for k in sizes:
        half = np.zeros(k)
        half[: k // 2] = -x / 2
        half[k - k // 2:] = x / 2
        spread.append(half)
    return spread, 0.5


def range_outcome_rate(layout: RangeLayout, design: Design, threshold: str, limit: float,
                       x: float, draws: _Draws, structure: Structure = STRUCTURES[0]) -> float:
    """The share of simulated gates whose ``threshold`` goes the way ``design.decide`` needs
    evidence for (passes under pass-on-evidence, fails under fail-on-evidence), for the hardest
    model at value ``x`` (`_configuration`), through the gate's own estimator and bounds
    (`stats.groups`), under ``structure``. Fail-on-evidence uses Bonferroni over the test's
    claims (``hypotheses``), which never rejects more than Holm: the figure is on the safe side."""
    if design.cells_chunk and threshold == "min_worst" and design.decide != "estimate":
        return _cells_outcome_rate(layout, design, limit, x, draws, structure)
    effects, centre = _configuration(layout, threshold, design.decide, limit, x)
    scores = _scores(draws, _unit_levels(layout, draws, effects, centre), structure)
    failing = design.decide == "fail-on-evidence"
    alpha = 1.0 - design.confidence
    level = 1.0 - alpha / max(design.hypotheses, 1) if failing else design.confidence
    if threshold == "min_median":  # Bonferroni over the groups that can move the median
        level = 1.0 - (1.0 - level) / (layout.groups // 2 + 1)
    sizes = (layout.formats,) if layout.formats else layout.sizes
    if design.decide == "estimate":
        return _estimate_rate(draws, scores, threshold, limit)
    outcome = np.full(scores.shape[0], not failing)
    medians: list[FloatArray] = []
    # Per dimension, per simulated run: some listed value drawn by fewer than 2 resamplings.
    thin = [((rows[:, :, None] == np.arange(k)).sum(axis=1) < 2).any(axis=1)
            for rows, k in zip(draws.first_rows, sizes)]
    for d, (tally, row_tally, rows, k) in enumerate(zip(draws.tallies, draws.row_tallies,
                                                        draws.first_rows, sizes)):
        counts, sums = tally.counts, tally.sums(scores)
        found = g.fit(counts, sums)
        cov = g.covariance(found.psi, found.active)
        n = found.active[:, None]
        # As the gate: df from the effective number of instances (`groups.effective_clusters`),
        # combined by Satterthwaite's rule with the resamplings' when they were sampled
        # (`GroupEffects.df`).
        df = _effective_df(found.psi, n)
        instance_cov = cov  # the skewness of influence values is scaled by it alone
        if row_tally is not None:  # sampled resamplings (fixed mode)
            row_cov = _row_covariance(scores, counts, sums, row_tally)
            df = _satterthwaite(np.diagonal(cov, axis1=-2, axis2=-1),
                                np.diagonal(row_cov, axis1=-2, axis2=-1), df,
                                design.resamplings)
            cov = cov + row_cov
        se = np.sqrt(np.maximum(np.diagonal(cov, axis1=-2, axis2=-1), 0.0))
        cells = counts.sum(axis=-1)
        inst = (counts > 0).sum(axis=-1).astype(np.float64)
        # Groups without evidence, as the gate treats them: never rendered, or (a dimension value
        # in sampled fixed mode) drawn by a single resampling (`GroupEffects.single_draw`), or
        # averaging over another dimension with a value drawn by fewer than 2 resamplings
        # (`paired_group_effects(..., averages_over=...)`).
        unknown = cells == 0
        if layout.sampled and not layout.formats:
            unknown |= (rows[:, :, None] == np.arange(k)).sum(axis=1) < 2
            for other, other_thin in enumerate(thin):
                if other != d:
                    unknown |= other_thin[:, None]
        if threshold == "max_spread":
            a, b = np.triu_indices(k, k=1)
            diff = found.estimates[:, a] - found.estimates[:, b]
            var = cov[:, a, a] + cov[:, b, b] - 2.0 * cov[:, a, b]
            pair_se = np.sqrt(np.maximum(var, 0.0))
            skew = _pair_skew(found.psi, found.active, a, b, instance_cov[:, a, a]
                              + instance_cov[:, b, b] - 2.0 * instance_cov[:, a, b])
            pair_df = _effective_df(found.psi[:, a] - found.psi[:, b], n)
            if layout.sampled:
                pair_df = np.minimum(pair_df, np.minimum(df[:, a], df[:, b]))
            blind = unknown[:, a] | unknown[:, b]
            if failing:
                t = _sps.t.ppf(0.5 + level / 2.0, pair_df)
                breach = (np.abs(diff) - t * pair_se > limit) & ~blind
                outcome |= breach.any(axis=1)
            else:
                upper = g.spread_upper(diff, pair_se, skew, pair_df, n, level)
                outcome &= ((upper <= limit + 1e-12) & ~blind).all(axis=1)
            continue
        skew = g.skewness(found.psi, found.active)
        side = +1 if failing else -1
        with np.errstate(invalid="ignore"):
            bound = g.level_bound(found.estimates, se, skew, df, n, cells, inst, level, side)
        # No evidence: a lower bound of 0 (pass-on-evidence), an upper bound of 1 (fail-on-).
        bound = np.where(unknown, 1.0 if failing else 0.0, bound)
        if threshold == "min_median":
            medians.append(bound)
            continue
        if failing:
            outcome |= bound.min(axis=1) < limit
        else:
            outcome &= bound.min(axis=1) >= limit - 1e-12
    if threshold == "min_median":
        median = np.median(np.concatenate(medians, axis=1), axis=1)
        outcome = median < limit if failing else median >= limit - 1e-12
    return float(outcome.mean())


def _cells_outcome_rate(layout: RangeLayout, design: Design, limit: float, x: float,
                        draws: _Draws, structure: Structure) -> float:
    """``min_worst`` of a search by cells (`evaluate.cell_rounds`): the share of simulated runs
    that go the policy's way for the hardest model at ``x`` (`_configuration`: under
    fail-on-evidence one format at x and the rest at or above the limit, under pass-on-evidence
    every format at x), under ``structure``.

    Each format's sequence is one cell per instance it was given (one answer per prompt: every
    cell of a format on an instance is that answer); its 0/1 scores are bounded as
    `stats.looks.LookedGroup` bounds them at its last look: Clopper-Pearson (the binomial test
    `bounded.BoundedMean.p_below` / ``p_above`` is), at `FINAL_SHARE` of the claim's alpha
    (all of it for a sequence of one look). The claim's alpha is the gate's: ``alpha /
    hypotheses`` under fail-on-evidence (Bonferroni over the test's claims, Holm's first step:
    the search and the gate fail a format exactly there), alpha under pass-on-evidence (every
    format its own claim).

    Only the last look is read: a search also reads each format at its earlier looks, and these
    only add chances for the threshold to go the policy's way (a look settles a format the other
    way only when its bound misses the truth, which its share of alpha bounds), so the rate is
    on the safe side. The earlier looks are not simulated because which rows the first round
    and a mean's rounds run whole (and so which looks are skipped) depends on the other
    thresholds' path."""
    if not layout.formats:
        raise ValueError("a search by cells groups by formats")
    effects, centre = _configuration(layout, "min_worst", design.decide, limit, x)
    scores = _scores(draws, _unit_levels(layout, draws, effects, centre), structure)
    reps, _, n_inst = scores.shape
    groups = layout.formats
    # Per (simulated run, format, instance): whether the format has a cell there, and its score.
    flat = ((np.arange(reps)[:, None, None] * groups + draws.units[draws.codes, 0]) * n_inst
            + np.arange(n_inst)[None, None, :]).ravel()
    given = np.zeros(reps * groups * n_inst, dtype=bool)
    right = np.zeros(reps * groups * n_inst)
    given[flat] = True
    right[flat] = scores.ravel()
    length = given.reshape(reps, groups, n_inst).sum(axis=2)
    ones = np.rint(right.reshape(reps, groups, n_inst).sum(axis=2))
    shares = np.array([1.0 if len(look_points(m, design.cells_chunk)) <= 1 else FINAL_SHARE
                       for m in range(n_inst + 1)])
    failing = design.decide == "fail-on-evidence"
    alpha = (1.0 - design.confidence) / (max(design.hypotheses, 1) if failing else 1)
    allowed = alpha * shares[length]
    with np.errstate(invalid="ignore", divide="ignore"):
        if failing:  # p of "this format's score >= limit" (p_below): its upper bound < limit
            shown = _sps.binom.cdf(ones, length, min(limit, 1.0)) <= allowed
        else:  # p of "... < limit" (p_above): its lower bound >= limit
            shown = _sps.binom.sf(ones - 1, length, max(limit, 0.0)) <= allowed
    shown &= length > 0  # a format with no cell has no evidence either way
    return float((shown.any(axis=1) if failing else shown.all(axis=1)).mean())


def _estimate_rate(draws: _Draws, scores: FloatArray, threshold: str, limit: float) -> float:
    """Under estimate the gate compares the point estimate (`gate.decide_thresholds`): the
    groups' paired estimates, clipped to [0, 1], over the groups with cells."""
    tol = 1e-12
    values = []
    for tally in draws.tallies:
        found = g.fit(tally.counts, tally.sums(scores), influence=False)
        values.append(np.clip(found.estimates, 0.0, 1.0))  # NaN for a group without cells
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a labelling without any cell
        if threshold == "max_spread":
            spread = np.nanmax(np.stack([np.nanmax(v, axis=1) - np.nanmin(v, axis=1)
                                         for v in values], axis=1), axis=1)
            return float(np.mean(spread <= limit + tol))
        every = np.concatenate(values, axis=1)
        observed = (np.nanmin(every, axis=1) if threshold == "min_worst"
                    else np.nanmedian(every, axis=1))
    return float(np.mean(observed >= limit - tol))


def _satterthwaite(v_instances: FloatArray, v_rows: FloatArray, df_instances: FloatArray,
                   resamplings: int) -> FloatArray:
    """The gate's df when sampled resamplings add error (`GroupEffects.df`)."""
    v_r = np.maximum(v_rows, 0.0)
    rows = max(resamplings - 1, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (v_instances + v_r) ** 2 / (v_instances**2 / df_instances + v_r**2 / rows)
    return np.asarray(np.where(np.isfinite(df), np.clip(df, 1.0, df_instances), df_instances),
                      dtype=np.float64)


def _effective_df(psi: FloatArray, n: FloatArray) -> FloatArray:
    """The gate's degrees of freedom: effective instances less one, at least 1."""
    return np.asarray(np.clip(np.minimum(g.effective_clusters(psi), n) - 1.0, 1.0, None),
                      dtype=np.float64)


def _pair_skew(psi: FloatArray, n_active: FloatArray, a: npt.NDArray[np.intp],
               b: npt.NDArray[np.intp], var: FloatArray) -> FloatArray:
    """The skewness of each pair's difference of influence values, from moment matrices (no
    (pairs x instances) array)."""
    n = np.maximum(n_active, 1.0)[:, None]
    cube = (psi**3).sum(axis=-1)
    sq_lin = np.einsum("rki,rji->rkj", psi**2, psi)  # sum psi_k^2 psi_j
    m3 = (cube[:, a] - 3.0 * sq_lin[:, a, b] + 3.0 * sq_lin[:, b, a] - cube[:, b]) / n
    m2 = var * np.maximum(n_active - 1.0, 1.0)[:, None]  # var was sum / (N (N - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = m3 / m2**1.5
    return np.where(m2 > 1e-12, gamma, 0.0)


def _row_covariance(scores: FloatArray, counts: FloatArray, sums: FloatArray,
                    row_tally: Tally) -> FloatArray:
    """The gate's jackknife over resamplings (leave one out, refit exactly; what
    `stats.paired_group_effects(..., resamplings_sampled=True)` adds), batched over the
    simulated gates. A group whose only resampling is left out has no estimate in that
    replicate; its entries use the replicates where it has one."""
    n = scores.shape[1]
    per_row_sums = row_tally.sums(scores[:, :, None, :])  # (reps, n, G, N)
    left_out = g.fit(counts[:, None] - row_tally.counts, sums[:, None] - per_row_sums,
                     influence=False).estimates  # (reps, n, G)
    finite = np.isfinite(left_out)
    left_out = np.where(finite, left_out, 0.0)
    centre = left_out.sum(axis=1, keepdims=True) / np.maximum(finite.sum(axis=1, keepdims=True),
                                                               1)
    dev = np.where(finite, left_out - centre, 0.0)
    return np.asarray((n - 1) / n * np.einsum("rnk,rnj->rkj", dev, dev), dtype=np.float64)


@dataclass(frozen=True)
class RangeValues:
    """A simulated threshold's figures (a range's, a mean's, ``max_std``'s) under every one of
    `STRUCTURES`.

    ``value``: the conservative end, where the policy's outcome has at least `POWER` probability
    under every structure that can reach it; ``low`` / ``high``: the span of the structures'
    values; ``at_best``: per structure, the outcome's rate at the most favourable value (below
    `POWER`: that structure cannot go the policy's way at this size, its value is None; None
    when not simulated, a nearer value having reached `POWER`)."""

    value: float | None
    low: float | None
    high: float | None
    per_structure: tuple[float | None, ...]
    at_best: tuple[float | None, ...]

    @property
    def unreachable(self) -> list[Structure]:
        return [s for s, v in zip(STRUCTURES, self.per_structure) if v is None]


@functools.lru_cache(maxsize=256)
def range_values(layout: RangeLayout, design: Design, threshold: str,
                 limit: float) -> RangeValues:
    """`range_value` under every one of `STRUCTURES`, on common random numbers (remembered: the
    tests of one suite often share a design, and the simulation is the plan's whole cost)."""
    reps = max(40, min(RANGE_REPS, RANGE_CELLS // max(design.instances * design.resamplings, 1)))
    draws = _draws(layout, design.instances, design.resamplings, reps, RANGE_SEED)
    found = [range_value(layout, design, threshold, limit, structure, draws)
             for structure in STRUCTURES]
    return _least_favourable(found, limit)


def range_value(layout: RangeLayout, design: Design, threshold: str, limit: float,
                structure: Structure = STRUCTURES[0],
                draws: _Draws | None = None) -> tuple[float | None, float | None]:
    """The threshold value at which the policy's outcome has `POWER` probability for the
    hardest model (`_configuration`) under ``structure``, by bisection over simulated gates
    with common random numbers; and the outcome's rate at the most favourable value (0 or 1
    apart from the limit's side): below `POWER` there, the threshold cannot go that way at
    this size (value None). That rate is simulated only when the value halfway to it falls
    short (None otherwise: a value short of the most favourable one already reached `POWER`)."""
    if draws is None:
        reps = max(40, min(RANGE_REPS,
                           RANGE_CELLS // max(design.instances * design.resamplings, 1)))
        draws = _draws(layout, design.instances, design.resamplings, reps, RANGE_SEED)
    best, toward = _range_best(layout, design, threshold, limit)

    def rate(x: float) -> float:
        return range_outcome_rate(layout, design, threshold, limit, x, draws, structure)

    return _bisect(rate, limit, best, toward)


def _range_best(layout: RangeLayout, design: Design, threshold: str,
                limit: float) -> tuple[float, int]:
    """The most favourable value of a range threshold for the policy's outcome, and the side of
    the limit it lies on (+1 above)."""
    failing = design.decide == "fail-on-evidence"
    spread = threshold == "max_spread"
    # The value moves away from the limit toward the side the policy needs evidence for.
    toward = (-1 if spread else 1) * (-1 if failing else 1)
    best = 1.0 if toward > 0 else 0.0
    if threshold == "min_worst" and failing and layout.formats == 0 and layout.sizes:
        # The rest of the worst value's dimension must stay in [0, 1].
        k = layout.sizes[0]
        best = max(best, k * limit - (k - 1) * 1.0)
    return best, toward


# -- reachability: can a threshold go the policy's way at all (the plan's size suggestion) -----
def range_reachable(layout: RangeLayout, design: Design, threshold: str, limit: float) -> bool:
    """Whether the policy's outcome reaches `POWER` at the most favourable value under every one
    of `STRUCTURES` (the figure exists: `range_values` quotes one)."""
    reps = max(40, min(RANGE_REPS, RANGE_CELLS // max(design.instances * design.resamplings, 1)))
    draws = _draws(layout, design.instances, design.resamplings, reps, RANGE_SEED)
    best, _ = _range_best(layout, design, threshold, limit)
    return all(range_outcome_rate(layout, design, threshold, limit, best, draws, structure)
               >= POWER for structure in STRUCTURES)


def mean_reachable(design: Design, limit: float) -> bool:
    """``min_score``: whether the most favourable model (every answer right, or under
    fail-on-evidence every answer wrong) goes the policy's way with `POWER` probability; its
    cells are the same under every structure."""
    reps = 40
    draws = _mean_draws(design, reps, RANGE_SEED)
    best = 0.0 if design.decide == "fail-on-evidence" else 1.0
    scores = _scores(draws, np.full(len(draws.units), best), STRUCTURES[0])
    return float(_mean_outcome(design, scores, limit).mean()) >= POWER


def std_reachable(design: Design, limit: float) -> bool:
    """``max_std``: whether every structure that can put a model on the limit's other side goes
    the policy's way with `POWER` probability at its most favourable std
    (`std_values_simulated` quotes a figure)."""
    if design.resamplings < 2:
        return False
    if design.decide == "estimate":
        return True
    draws = _mean_draws(design, 40, RANGE_SEED + 1)
    for structure in STRUCTURES:
        top = math.sqrt(0.25 * _std_shrink(structure, design) / design.instances)
        if design.decide == "fail-on-evidence":
            if top <= limit:
                continue  # no such model breaches the limit: nothing to show
            level = 0.5
        else:
            level = 0.0  # a std of 0: every model of every structure is the same
        scores = _scores(draws, np.full(len(draws.units), level), structure)
        if float(_std_outcome(design, scores, limit).mean()) < POWER:
            return False
    return True


def mean_scores_simulated(design: Design, truth: float, structure: Structure,
                          reps: int) -> FloatArray:
    """(reps, n, N) 0/1 cells of ``reps`` simulated gates of ``design`` whose true mean score is
    ``truth`` under ``structure``, every variant at that level: the gates `mean_values_simulated`
    decides on (the same common random numbers, so the plan stays deterministic)."""
    draws = _mean_draws(design, reps, RANGE_SEED)
    return _scores(draws, np.full(len(draws.units), truth), structure)
