"""CheckList tests for the embedded model's sentiment behaviour (at least three INV per capability).

INV: meaning-preserving edits must not change the predicted label. DIR: negating the review must
flip it. MFT: the plain labelled reviews must mostly be right. The thresholds are what this 135M
model really does: it passes the INV and MFT tests and fails the negation test.

Eight reviews are too few to show any of these rates on evidence (the default policy): with no
flip in 8 pairs the one-sided 95% upper bound is still 0.253. So these tests read the point
estimates (``decide="estimate"``, no error control); a release gate decides on evidence over a
few hundred examples. ``max_flip_rate=0.0`` (zero tolerance) is decided exactly under any policy.
"""

import pytest


@pytest.mark.invariance(perturb=["punctuation"], max_flip_rate=0.25, decide="estimate")
def test_inv_punctuation(reliable, reviews, sentiment):
    reliable.invariance(reviews, sentiment)


@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.3, decide="estimate")
def test_inv_typos(reliable, reviews, sentiment):
    reliable.invariance(reviews, sentiment)


@pytest.mark.invariance(perturb=["neutral_phrase", "whitespace"], max_flip_rate=0.25,
                        decide="estimate")
def test_inv_neutral_phrase_and_whitespace(reliable, reviews, sentiment):
    reliable.invariance(reviews, sentiment)


@pytest.mark.mft(min_pass=0.3, decide="estimate")
def test_mft_labelled_reviews(reliable, reviews, sentiment):
    reliable.mft(reviews, sentiment)


@pytest.mark.xfail(strict=True, reason="the 135M model does not understand negation")
@pytest.mark.directional(perturb=["negation"], expect="flip", max_fail_rate=0.25,
                          decide="estimate")
def test_dir_negation_flips_the_label(reliable, reviews, sentiment):
    reliable.directional(reviews, sentiment)
