"""CheckList tests for the embedded model's sentiment behaviour (at least three INV per capability).

INV: meaning-preserving edits must not change the predicted label. DIR: negating the review must
flip it. MFT: the plain labelled reviews must mostly be right. The thresholds are what this 135M
model really does: it passes the INV and MFT tests and fails the negation test.

Eight reviews are too few to show any of these rates on evidence in the model's favour (the
default policy): with no flip in 8 pairs the one-sided 95% upper bound is still 0.253. Nor may
they read point estimates at a limit one answer away: on another machine (other CPU kernels in
llama.cpp) a single answer may differ, and 2 flips of 8 against a limit of 0.3 would become 3.
So these tests fail only on evidence (``decide="fail-on-evidence"``): the INV tests fail when the
flips show the rate above its limit (at least 5 of 8 for 0.3), the MFT when the passes show the
rate below 0.3 (none of 8), the DIR test (a strict xfail) because 8 of 8 negations fail to flip
the label, far beyond 0.25 (it fails on evidence from 5 of 8 on). A release gate decides in the
model's favour only on evidence, over a few hundred examples.

They stay on the eight reviews of data/sentiment.jsonl, not the 60 of the release gate: their
thresholds were read off runs on these eight (the rates are in README), the CheckList template
(the review and a line listing the labels, no pre-registered space) was not surveyed on the 60,
and 60 reviews would cost about 360 calls of the first run's 10-minute budget. Moving them to the
60 reviews and to pass-on-evidence is a survey and a budget decision away.
"""

import pytest


@pytest.mark.invariance(perturb=["punctuation"], max_flip_rate=0.25, decide="fail-on-evidence")
def test_inv_punctuation(reliable, eight_reviews, sentiment):
    reliable.invariance(eight_reviews, sentiment)


@pytest.mark.invariance(perturb=["typos"], max_flip_rate=0.3, decide="fail-on-evidence")
def test_inv_typos(reliable, eight_reviews, sentiment):
    reliable.invariance(eight_reviews, sentiment)


@pytest.mark.invariance(perturb=["neutral_phrase", "whitespace"], max_flip_rate=0.25,
                        decide="fail-on-evidence")
def test_inv_neutral_phrase_and_whitespace(reliable, eight_reviews, sentiment):
    reliable.invariance(eight_reviews, sentiment)


@pytest.mark.mft(min_pass=0.3, decide="fail-on-evidence")
def test_mft_labelled_reviews(reliable, eight_reviews, sentiment):
    reliable.mft(eight_reviews, sentiment)


@pytest.mark.xfail(strict=True, reason="the 135M model does not understand negation")
@pytest.mark.directional(perturb=["negation"], expect="flip", max_fail_rate=0.25,
                          decide="fail-on-evidence")
def test_dir_negation_flips_the_label(reliable, eight_reviews, sentiment):
    reliable.directional(eight_reviews, sentiment)
