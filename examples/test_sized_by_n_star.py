"""A gate sized by n* instead of a hand-picked n, as README tells CI users to run it.

`examples/pytest.ini` passes `--reliable-n auto --reliable-pilot-n 10`: a test without its own `n`
runs a pilot of 10 resamplings once, computes n* (the bootstrap method by default: how many fresh
resamplings keep the mean within eps of the mean over the whole space with probability 1 - delta),
extends the pilot's plan up to n* when the pilot is too short (the first 10 resamplings replay
from the cache), stores n* in `.reliable/n_star/` and gates on n* resamplings. Later runs read
the stored n* and run no pilot. eps=0.1 keeps n* within the pilot on the embedded model (at
eps=0.05 it asks for 28 resamplings: the pilot is extended by 18, 212 more calls).
"""

import pytest


@pytest.mark.reliable(space="sentiment", eps=0.1, delta=0.1, min_score=0.2)
def test_sentiment_sized_by_n_star(reliable, reviews, sentiment):
    report = reliable.evaluate(reviews, sentiment)
    assert report.n_star is not None
