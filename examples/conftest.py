"""The example gate's data. No model fixture: the embedded SmolLM2-135M-Instruct is the default.

To gate your own model, add a `reliable_model` fixture returning a callable or run with
`--reliable-model NAME --reliable-base-url URL`.
"""

from pathlib import Path

import pytest

from pytest_reliable import Classification, Dataset, MultipleChoice

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def reviews() -> Dataset:
    return Dataset.from_file(DATA / "sentiment.jsonl")


@pytest.fixture(scope="session")
def sentiment() -> Classification:
    return Classification(labels=["positive", "negative"])


@pytest.fixture(scope="session")
def movies() -> Dataset:
    return Dataset.from_bbh(DATA / "bbh" / "movie_recommendation.json")


@pytest.fixture(scope="session")
def adjectives() -> Dataset:
    """100 real BIG-Bench Hard hyperbaton instances: which adjective order is correct (2 options)."""
    return Dataset.from_bbh(DATA / "bbh" / "hyperbaton.json")


@pytest.fixture(scope="session")
def multiple_choice() -> MultipleChoice:
    return MultipleChoice()
