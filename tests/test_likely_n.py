"""The n* a ``--reliable-n auto`` pilot is likely to find (`stats.likely_n`), before any call."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_reliable.stats import min_reliable_n
from pytest_reliable.stats.likely_n import likely_n_star, simulated_pilots
from pytest_reliable.stats.power import STRUCTURES


def fresh(resamplings: int, instances: int) -> np.ndarray:
    """Every cell its own prompt (a space too large to repeat one)."""
    return np.arange(resamplings * instances).reshape(resamplings, instances)


@pytest.mark.parametrize("structure", STRUCTURES, ids=lambda s: s.label)
def test_simulated_pilots_have_the_score_and_the_spread_of_their_structure(structure) -> None:
    pilots = simulated_pilots(fresh(50, 40), 0.7, structure, reps=200, seed=1)
    assert pilots.shape == (200, 50)
    assert pilots.mean() == pytest.approx(0.7, abs=0.01)
    # A resampling's score varies by what changes between resamplings: the answers given
    # afresh, a share 1 - icc of each instance's variance (the rest is the instance's own level).
    expected_sd = np.sqrt(0.7 * 0.3 * (1 - structure.icc) / 40)
    assert np.median(pilots.std(axis=1, ddof=1)) == pytest.approx(expected_sd, rel=0.15)


def test_the_likely_n_star_is_what_the_real_method_gives_such_pilots() -> None:
    """Against pilots drawn independently (per-instance Beta accuracy, fresh Bernoulli cells):
    the structure's figure is near the median n* the real method finds on them."""
    resamplings, instances, icc, score = 40, 30, 0.2, 0.5
    rng = np.random.default_rng(7)
    found = []
    for _ in range(15):
        concentration = 1 / icc - 1
        accuracy = rng.beta(score * concentration, (1 - score) * concentration, instances)
        pilot = (rng.random((resamplings, instances)) < accuracy).mean(axis=1)
        found.append(min_reliable_n(pilot, eps=0.01, delta=0.1, method="bootstrap",
                                    n_max=1000, subsets=2000).n_star)
    likely = likely_n_star(fresh(resamplings, instances), eps=0.01, delta=0.1, n_max=1000,
                           score=score)
    beta_low = likely.per_structure[[s.label for s in STRUCTURES].index("beta 0.2")]
    assert beta_low == pytest.approx(np.median(found), rel=0.3)
    assert likely.low <= likely.n_star <= likely.high


def test_the_range_holds_what_most_real_pilots_find() -> None:
    """The range is about the pilot's own draw, too: of pilots of the least favourable
    structure (Beta instance accuracy, icc 0.2), drawn independently here, about 90% find an
    n* at most ``high`` (it spans 80% of pilots over the structures)."""
    resamplings, instances, eps = 30, 16, 0.03
    likely = likely_n_star(fresh(resamplings, instances), eps=eps, delta=0.1, n_max=1000)
    rng = np.random.default_rng(11)
    found = []
    for _ in range(40):
        accuracy = rng.beta(0.5 * 4, 0.5 * 4, instances)  # mean 0.5, icc 1 / (1 + 4) = 0.2
        pilot = (rng.random((resamplings, instances)) < accuracy).mean(axis=1)
        found.append(min_reliable_n(pilot, eps=eps, delta=0.1, method="bootstrap", n_max=1000,
                                    subsets=1000).n_star)
    assert np.mean(np.array(found) <= likely.high) >= 0.75  # 0.9 expected; 40 pilots: +-0.05
    assert likely.low < np.percentile(found, 10)  # other structures reach lower


def test_more_instances_or_repeated_prompts_need_fewer_resamplings() -> None:
    few = likely_n_star(fresh(30, 20), eps=0.01, delta=0.1, n_max=1000)
    many = likely_n_star(fresh(30, 200), eps=0.01, delta=0.1, n_max=1000)
    assert many.n_star < few.n_star / 4  # the spread shrinks as 1/sqrt(N): n* as 1/N
    # two variants per instance, one answer each: the resamplings repeat answers
    rng = np.random.default_rng(0)
    two = np.arange(20)[None, :] * 2 + rng.integers(0, 2, size=(30, 20))
    assert likely_n_star(two, eps=0.01, delta=0.1, n_max=1000).n_star < few.n_star


def test_a_model_that_always_answers_alike_needs_one_resampling() -> None:
    one_prompt = np.tile(np.arange(10), (20, 1))  # each instance shown one prompt only
    assert likely_n_star(one_prompt, eps=0.01, delta=0.1, n_max=1000).n_star == 1


def test_it_is_deterministic_and_checks_its_input() -> None:
    ids = fresh(20, 15)
    assert likely_n_star(ids, eps=0.02, delta=0.1, n_max=500) == \
        likely_n_star(ids, eps=0.02, delta=0.1, n_max=500)
    with pytest.raises(ValueError, match="resamplings >= 2"):
        likely_n_star(np.arange(5)[None, :], eps=0.01, delta=0.1, n_max=100)
