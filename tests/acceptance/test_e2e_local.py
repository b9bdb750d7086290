"""End to end against the embedded SmolLM2-135M-Instruct (needs the `local` extra; runs in CI)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.acceptance.helpers import by_test, run_json

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason='needs the embedded model: pip install "pytest-reliable[local]"',
    ),
]

TESTS = '''
import pytest
from pytest_reliable import Classification, Dataset

DATA = Dataset.from_records([
    {"text": "Best phone I have owned, the battery lasts for days.", "label": "positive"},
    {"text": "It broke after a week and support never answered.", "label": "negative"},
    {"text": "Friendly staff and a spotless room with a sea view.", "label": "positive"},
    {"text": "Cold soup, stale bread and an hour of waiting.", "label": "negative"},
])
TASK = Classification(labels=["positive", "negative"])


@pytest.mark.reliable(space="tiny", n=2, min_score=0.5)
def test_sentiment(reliable):
    report = reliable.evaluate(DATA, TASK)
    assert 0.0 <= report.mean <= 1.0
'''

YAML = '''
spaces:
  tiny:
    instruction: ["What is the sentiment of the following review?", "Label the review."]
    enumerator: [upper, number]
'''


def test_gate_against_the_embedded_model(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", reliable=YAML)
    pytester.makepyfile(test_e2e=TESTS)
    result, report = run_json(pytester)
    entry = by_test(report)["test_sentiment"]
    assert entry["model"].startswith("local:SmolLM2-135M-Instruct")
    assert entry["n_resamplings"] == 2
    assert entry["calls"]["made"] + entry["calls"]["cached"] == 4 * (2 + 1)
    for field in ("mean", "std", "canonical", "formats", "orders", "dimensions", "pass_at_1",
                  "n_star", "thresholds", "space_hash"):
        assert field in entry
    [check] = entry["thresholds"]
    expected = "passed" if entry["mean"] >= 0.5 else "failed"
    assert entry["verdict"] == expected and check["passed"] == (expected == "passed")
    result.assert_outcomes(**{expected: 1})

    # A second run replays every call from the cache.
    _, replay = run_json(pytester, name="replay.json")
    again = by_test(replay)["test_sentiment"]
    assert again["calls"]["made"] == 0 and again["mean"] == entry["mean"]


JUDGED = '''
import pytest
from pytest_reliable import Dataset, Generation, Judge, local_model

DATA = Dataset.from_records([
    {"question": "What is the capital of France?", "reference": "Paris"},
    {"question": "How many legs does a spider have?", "reference": "eight"},
    {"question": "What colour is the sky on a clear day?", "reference": "blue"},
])
RUBRIC = "The answer gives the same fact as the reference answer."


@pytest.mark.reliable(n=1, decide="estimate", min_score=0.0)
def test_judged(reliable):
    reliable.evaluate(DATA, Generation(grader=Judge(local_model(), RUBRIC, votes=2)))


@pytest.mark.reliable(n=1, decide="estimate", min_score=0.0)
def test_judged_counting_unread_replies_as_failing(reliable):
    judge = Judge(local_model(), RUBRIC, votes=2, max_unparsed=1.0)
    report = reliable.evaluate(DATA, Generation(grader=judge))
    assert all(len(cell.votes) == 2 for cell in report.matrix.cells if cell.text)
'''


def test_a_judge_on_the_embedded_model_that_cannot_be_read_errors_naming_itself(
    pytester: pytest.Pytester,
) -> None:
    """SmolLM2-135M does not reply "PASS or FAIL only" (it chats: "Sounds good. You're correct
    ..."): its test errors as the judge's failure, not the model's, unless its unread replies
    are allowed to count as failing votes (max_unparsed=1.0); both tests ask the same votes."""
    pytester.makepyfile(test_e2e=JUDGED)
    result, report = run_json(pytester)
    result.assert_outcomes(passed=1, failed=1)
    entries = by_test(report)
    unread = entries["test_judged"]
    lenient = entries["test_judged_counting_unread_replies_as_failing"]
    judge = unread["judge"]
    assert judge["id"].startswith("local:SmolLM2-135M-Instruct") and judge["votes"] == 2
    assert judge["calls"]["made"] > 0 and 0 < judge["cells"] <= 6
    assert judge["unparsed_votes"] > 0.1 * 2 * judge["cells"] and judge["agreement"] is None
    assert unread["verdict"] == "error" and unread["mean"] is None
    assert f"judge {judge['id']} could not be read" in unread["message"]
    assert "came back without PASS or FAIL, more than max_unparsed=0.1; one reply: " \
        in unread["message"]
    assert lenient["verdict"] == "passed" and lenient["judge"]["calls"]["made"] == 0  # cached
    assert lenient["judge"]["unparsed_votes"] == judge["unparsed_votes"]
    assert 0.0 <= lenient["mean"] <= 1.0
    assert lenient["calls"]["made"] + lenient["calls"]["cached"] == 3 * (1 + 1)  # judge apart
