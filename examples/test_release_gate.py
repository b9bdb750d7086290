"""The example release gate for the embedded SmolLM2-135M-Instruct.

Each test evaluates the model under a pre-registered space of meaning-preserving prompt variants
(reliable.yaml) and fails when a robustness threshold is breached. Two tests are marked xfail:
the 135M model really breaches them, which is what a gate is for; `strict=True` makes the run
fail if it ever passes them (then raise the bar).
"""

import pytest

BLOCKED = pytest.mark.xfail(strict=True, reason="the 135M model is not robust enough: the gate blocks it")


@pytest.mark.reliable(space="sentiment", n=10, min_score=0.35)
def test_sentiment_accuracy(reliable, reviews, sentiment):
    reliable.evaluate(reviews, sentiment)


@BLOCKED
@pytest.mark.reliable(space="sentiment", n=10, mode="fixed", max_spread=0.25, min_worst=0.4)
def test_sentiment_robust_to_wording(reliable, reviews, sentiment):
    reliable.evaluate(reviews, sentiment)


@pytest.mark.reliable(space="movies", n=8, min_score=0.1, min_lower_ci=0.0)
def test_movie_recommendation(reliable, movies, multiple_choice):
    reliable.evaluate(movies, multiple_choice)


@BLOCKED
@pytest.mark.reliable(space="movies", n=8, min_lower_ci=0.4)
def test_movie_recommendation_release_bar(reliable, movies, multiple_choice):
    reliable.evaluate(movies, multiple_choice)
