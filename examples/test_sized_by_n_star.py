"""A gate sized by n* instead of a hand-picked n, as README tells CI users to run it.

`examples/pytest.ini` passes `--reliable-n auto --reliable-pilot-n 3`: a test without its own `n`
runs a pilot of 3 resamplings once, computes n* (the bootstrap method by default: how many fresh
resamplings keep the mean within eps of the mean over the whole space with probability 1 - delta),
extends the pilot's plan up to n* when the pilot is too short (the pilot's resamplings replay
from the cache), stores n* in `.reliable/n_star/` and gates on n* resamplings. Later runs read
the stored n* and run no pilot. A pilot of 3 keeps the first run short; in CI use 20 or more.

The estimate policy reads point estimates, so how many resamplings make the mean trustworthy is
exactly n*'s question. The limit: no two values of one prompt dimension more than 0.4 apart (the
survey's largest was 0.12 at n=4, /work/notes/exp.md and test_release_gate.py; a point-estimated
spread over few resamplings carries noise of about the noise floor, 0.1-0.2 here).
"""

import pytest


@pytest.mark.reliable(space="sentiment", eps=0.1, delta=0.1, decide="estimate", max_spread=0.4)
def test_sentiment_sized_by_n_star(reliable, reviews, sentiment):
    report = reliable.evaluate(reviews, sentiment)
    assert report.n_star is not None
