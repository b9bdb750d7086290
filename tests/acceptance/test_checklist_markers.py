"""CheckList markers with a scripted model that misreads misspellings."""

from __future__ import annotations

import pytest

from tests.acceptance.helpers import by_test, run_json

CONFTEST = r'''
import re

import pytest

from pytest_reliable import text_model

VOCABULARY = set("""
the a an this that it is was were are be not very really quite service food staff room
movie film book phone battery screen great good lovely nice terrible awful bad slow rude
friendly fast cold warm clean dirty and but i we they loved hated liked enjoyed did do does
plot acting music view price cheap expensive so too always never ever here there of in on
with for to at again will come back my our your he she
""".split())


def misreads_typos(prompt: str) -> str:
    text = re.search(r"Review: (.*)", prompt).group(1)
    words = re.findall(r"[a-z']+", text.lower())
    negative = "not" in words or "n't" in text.lower()
    if any(w not in VOCABULARY for w in words):  # a misspelling confuses it
        negative = not negative
    return "negative" if negative else "positive"


@pytest.fixture
def reliable_model():
    return text_model(misreads_typos, id="scripted-misreads-typos")
'''

TESTS = '''
import pytest
from pytest_reliable import Classification, Dataset

TASK = Classification(labels=["positive", "negative"], template="Review: {{text}}\\nSentiment:")
DATA = Dataset.from_records([
    {{"text": "The food was great", "label": "positive"}},
    {{"text": "The staff was friendly", "label": "positive"}},
    {{"text": "The room was clean", "label": "positive"}},
    {{"text": "The movie was good", "label": "positive"}},
    {{"text": "The service was slow", "label": "positive"}},
    {{"text": "The phone was cheap", "label": "positive"}},
])


@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.1)
def test_typos(reliable):
    reliable.invariance(DATA, TASK)


@pytest.mark.invariance(perturb=["punctuation"], max_flip_rate=0.0)
def test_punctuation(reliable):
    reliable.invariance(DATA, TASK)


@pytest.mark.directional(perturb=["negation"], expect="flip", max_fail_rate=0.0)
def test_negation_flips(reliable):
    reliable.directional(DATA, TASK)


@pytest.mark.mft(min_pass=0.8)
def test_mft(reliable):
    reliable.mft(DATA, TASK)
'''


def test_checklist_verdicts(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_checklist=TESTS.format())
    result, report = run_json(pytester)
    result.assert_outcomes(passed=3, failed=1)
    tests = by_test(report)
    typos = tests["test_typos"]
    assert typos["kind"] == "invariance" and typos["verdict"] == "failed"
    # Every typo introduces a non-vocabulary word, which this model always misreads.
    assert typos["rate"] == 1.0 and typos["pairs"] >= 6
    low, high = typos["interval"]
    assert 0 < low < 1.0 and high == pytest.approx(1.0)
    assert 1 <= len(typos["failures"]) <= 3
    assert tests["test_punctuation"]["rate"] == 0.0
    assert tests["test_negation_flips"]["kind"] == "directional"
    assert tests["test_negation_flips"]["rate"] == 0.0 and tests["test_negation_flips"]["pairs"] >= 6
    assert tests["test_mft"]["rate"] == 1.0 and tests["test_mft"]["pairs"] == 6
    result.stdout.fnmatch_lines(["*flip rate*", "*reliable summary*"])
