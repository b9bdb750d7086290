"""CheckList tests for the embedded model's sentiment behaviour (at least three INV per capability).

INV: meaning-preserving edits must not change the predicted label. DIR: negating the review must
flip it. MFT: the plain labelled reviews must mostly be right. The thresholds are what this 135M
model really does: it passes the INV and MFT tests and fails the negation test.

Eight reviews are too few to show any of these rates on evidence (the default policy): with no
flip in 8 pairs the one-sided 95% upper bound is still 0.253. So these tests read the point
estimates (``decide="estimate"``, no error control); a release gate decides on evidence over a
few hundred examples. ``max_flip_rate=0.0`` (zero tolerance) is decided exactly under any policy.

They stay on the eight reviews of data/sentiment.jsonl, not the 60 of the release gate: their
thresholds were read off runs on these eight (the rates are in README), the CheckList template
(the review and a line listing the labels, no pre-registered space) was not surveyed on the 60,
and 60 reviews would cost about 360 calls of the first run's 10-minute budget. Moving them to the
60 reviews and to pass-on-evidence is a survey and a budget decision away.
"""

import pytest


@pytest.mark.invariance(perturb=["punctuation"], max_flip_rate=0.25, decide="estimate")
def test_inv_punctuation(reliable, eight_reviews, sentiment):
    reliable.invariance(eight_reviews, sentiment)


@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.3, decide="estimate")
def test_inv_typos(reliable, eight_reviews, sentiment):
    reliable.invariance(eight_reviews, sentiment)


@pytest.mark.invariance(perturb=["neutral_phrase", "whitespace"], max_flip_rate=0.25,
                        decide="estimate")
def test_inv_neutral_phrase_and_whitespace(reliable, eight_reviews, sentiment):
    reliable.invariance(eight_reviews, sentiment)


@pytest.mark.mft(min_pass=0.3, decide="estimate")
def test_mft_labelled_reviews(reliable, eight_reviews, sentiment):
    reliable.mft(eight_reviews, sentiment)


@pytest.mark.xfail(strict=True, reason="the 135M model does not understand negation")
@pytest.mark.directional(perturb=["negation"], expect="flip", max_fail_rate=0.25,
                          decide="estimate")
def test_dir_negation_flips_the_label(reliable, eight_reviews, sentiment):
    reliable.directional(eight_reviews, sentiment)
