"""Free-text answers graded by an LLM judge, and the judge tested like a model (SPEC section 12).

The embedded SmolLM2-135M-Instruct answers short questions and also judges them: a 135M model is
a noisy judge, which is the point here: the report shows its noise (``judge``: agreement between
its votes, the share of the score's variance that is judge noise, unparsed votes) inside the
gate's bounds, and the CheckList tests measure how often its grade flips when the rubric is
reworded or the answer gets a stray space.

Thresholds were set before the first run from ``pytest --reliable-plan`` with a margin (never
tuned to a run's outcome); decide="fail-on-evidence" so a noisy judge does not make CI flaky.
"""

import pytest

from pytest_reliable import Dataset, Generation, Judge, JudgeTask, local_model

RUBRIC = "The answer states the same fact as the reference answer."

QUESTIONS = Dataset.from_records([
    {"question": "What is the capital of France?", "reference": "Paris"},
    {"question": "How many legs does a spider have?", "reference": "Eight"},
    {"question": "What colour is a clear daytime sky?", "reference": "Blue"},
    {"question": "Which planet do we live on?", "reference": "Earth"},
    {"question": "What do bees make?", "reference": "Honey"},
    {"question": "How many days are in a week?", "reference": "Seven"},
    {"question": "What is frozen water called?", "reference": "Ice"},
    {"question": "Which animal says moo?", "reference": "A cow"},
])

# Answers whose right grade is known: what the judge itself is tested on.
GRADED = Dataset.from_records([
    {"question": "What is the capital of France?", "reference": "Paris",
     "answer": "The capital of France is Paris.", "label": "pass"},
    {"question": "What is the capital of France?", "reference": "Paris",
     "answer": "It is Berlin.", "label": "fail"},
    {"question": "How many legs does a spider have?", "reference": "Eight",
     "answer": "A spider has eight legs.", "label": "pass"},
    {"question": "How many legs does a spider have?", "reference": "Eight",
     "answer": "Spiders have six legs.", "label": "fail"},
    {"question": "What do bees make?", "reference": "Honey",
     "answer": "Bees make honey.", "label": "pass"},
    {"question": "What do bees make?", "reference": "Honey",
     "answer": "Bees make milk.", "label": "fail"},
    {"question": "How many days are in a week?", "reference": "Seven",
     "answer": "There are seven days in a week.", "label": "pass"},
    {"question": "How many days are in a week?", "reference": "Seven",
     "answer": "A week has ten days.", "label": "fail"},
])

# Most of the 135M judge's replies are not a PASS or FAIL (55 of 96 votes in a fresh run), which by
# default (max_unparsed=0.1) makes the test an error: the judge's failure, not the model's. Here
# the noisy judge is the point, so its unread replies count as failing votes, as the report shows;
# a real gate uses a judge that replies as asked.
JUDGE = Judge(local_model(), RUBRIC, votes=3, temperature=0.7, max_unparsed=1.0)


@pytest.mark.reliable(space="short", n=3, max_tokens=24, min_score=0.1,
                      decide="fail-on-evidence")
def test_short_answers_judged(reliable):
    report = reliable.evaluate(QUESTIONS, Generation(grader=JUDGE))
    judge = report.entry("passed")["judge"]
    assert judge is not None and judge["votes"] == 3


@pytest.mark.mft(min_pass=0.2, decide="fail-on-evidence")
def test_the_judge_grades_known_answers(reliable):
    reliable.mft(GRADED, JudgeTask(RUBRIC))


@pytest.mark.invariance(perturb=["rubric_paraphrase", "answer_whitespace"], max_flip_rate=0.8,
                        decide="fail-on-evidence")
def test_the_judge_is_stable_under_rewording(reliable):
    reliable.invariance(GRADED, JudgeTask(RUBRIC))
