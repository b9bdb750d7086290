"""The example release gate: SmolLM2-135M-Instruct (embedded) on 60 product reviews.

The reviews (data/reviews.jsonl, written for this project, 30 positive / 30 negative) are read
under the space `sentiment` pre-registered in reliable.yaml: 4 instructions x 2 field markers x
2 answer sentinels x 2 enumerators x 2 wrappers, options permuted (128 meaning-preserving
variants). Each test decides its thresholds on evidence (SPEC section 11), each policy both ways:

- pass-on-evidence (the default): a threshold passes only when its one-sided 95% bound clears
  the limit, so a model that breaches a limit passes at most 5% of the time;
- fail-on-evidence: a threshold fails only when the bound shows it is breached (Holm over the
  test's thresholds and groups), so a model meeting every limit fails at most 5% of the time:
  for CI checks that must not flake;
- estimate: the point estimate against the limit, no error control (test_sized_by_n_star.py
  passes on it, the release bar below fails on it).

What the gate finds: at its canonical prompt the model reads sentiment (about 0.8 right, clearly
above the 0.5 of a coin), but averaged over the 128 rewordings it is at chance, and sampled at
0.7 it reads few reviews right four times in a row. The canonical number is a property of one
prompt at temperature 0, not of the model: that is what the gate is for.

How the limits were set (before the runs, never moved to fit one): from `python -m pytest
--reliable-plan` (what each threshold can resolve at this size, quoted per test) and from a survey
of the embedded model (/work/notes/exp.md: 40 other reviews, canonical 0.93 [0.80, 0.97], formats
0.45-0.75; and these 60 reviews at n=4: canonical 0.82 [0.70, 0.89] (49 of 60), mean over the
space 0.52 +- 0.06, dimension values 0.46-0.58). Each limit keeps a margin of several answers (or
several resolutions) against that survey, for a fresh run on another machine or llama.cpp build,
whose kernels move some greedy answers, and for the more conservative small-N bounds to come. A
strict xfail (`strict=True`) is a bar the model misses by far more than the plan's resolution:
the run goes red if it ever passes one (then the evidence has changed: read the report).
"""

import pytest

# -- pass-on-evidence ------------------------------------------------------------------------


# The plan: min_lower_ci=0.55 needs 41 of 60 canonical answers right (passes with 80% probability
# only if the true canonical score is >= 0.72). The survey had 49 of 60: 8 answers of margin. A
# lower end above 0.55 says "better than a coin at this prompt, on evidence"; 0.75 (the draft's
# limit) needed 52 of 60, more than the survey showed.
@pytest.mark.reliable(space="sentiment", n=1, min_lower_ci=0.55)
def test_canonical_prompt_reads_sentiment(reliable, reviews, sentiment):
    """The canonical prompt's Wilson interval lies above chance: the model can read sentiment."""
    reliable.evaluate(reviews, sentiment)


# The same bar on a model at chance: hyperbaton (adjective order, two options) from BIG-Bench
# Hard, where the exp survey measured 0.48 [0.35, 0.61] on these 50 instances (the model answers
# by position, not by content). min_lower_ci=0.55 needs 35 of 50 right (the plan); a coin gets
# there with probability under 0.5%.
@pytest.mark.xfail(strict=True, reason="the 135M model is at chance on adjective order: the gate "
                   "refuses a canonical score whose interval reaches 0.5")
@pytest.mark.reliable(space="adjectives", n=1, min_lower_ci=0.55)
def test_adjective_order_is_refused_at_chance(reliable, adjectives, multiple_choice):
    reliable.evaluate(adjectives[:50], multiple_choice)


# At a production temperature (0.7), 4 samples per review: pass@1 beside pass@4 and pass^4 (right
# 4 times of 4). With two labels a coin has pass@4 = 0.94 and pass^4 = 0.06, so pass^4 is the
# number that separates a reader from a guesser. The bar: a product that answers each customer
# once at 0.7 needs a review read right every time, here at least half the reviews right 4 of 4
# (the plan: passes with 80% probability only if the true pass^4 >= 0.65).
# History, plainly: this test was first written to pass, with limits set before any run at 0.7
# (min_pass_at_k=0.6, min_pass_hat_k=0.15, from the greedy 49 of 60); the first fresh run measured
# pass@1 0.60, pass@4 0.97, pass^4 0.15 (lower bound 0.09) and failed it. Lowering the limit
# until it passes would be the mistake issue 20 names (0.05 would pass a coin). What the data
# show is that sampling at 0.7 undoes most of the greedy answer's reading, so the test is now the
# release bar the model misses by far (0.15 against 0.5), a strict xfail.
@pytest.mark.xfail(strict=True, reason="at temperature 0.7 few reviews are read right 4 times of "
                   "4 (pass^4 far below 0.5): the answers are not consistent enough to ship")
@pytest.mark.reliable(space="sentiment", n=1, temperature=0.7, k=4, min_pass_hat_k=0.5)
def test_sentiment_at_production_temperature(reliable, reviews, sentiment):
    report = reliable.evaluate(reviews, sentiment)
    # pass^k can only fall as k grows and pass@k only rise: a sanity check a test may add.
    assert report.pass_hat_k <= report.pass_at_1 <= report.pass_at_k


# -- fail-on-evidence ------------------------------------------------------------------------


# Fails only on evidence that some wording breaks the model outright: a value of some dimension
# scoring below 0.25 (worse than a coin: labels read backwards), or two values of one dimension
# more than 0.4 apart. What this size can show, from `--reliable-plan` (which simulates the gate):
# at n=2 over 12 dimension values it cannot fail min_worst on evidence (even a value that is
# always wrong fails 16% of simulated gates), and it fails max_spread with 80% probability only
# for a true spread >= 0.97. So this test passes because 60 reviews x 2 resamplings cannot convict
# a wording, not because the wordings were shown sound: the plan says so before any call, and a
# team that must catch a broken wording raises n (or N) first. The survey's worst value was 0.46.
@pytest.mark.reliable(space="sentiment", n=2, decide="fail-on-evidence", min_worst=0.25,
                      max_spread=0.4)
def test_no_wording_breaks_it_unless_shown(reliable, reviews, sentiment):
    reliable.evaluate(reviews, sentiment)


# The same question format by format: in fixed mode each resampling is one whole format (its
# wording and option order) on all 60 reviews, so a broken format is seen in 60 answers, not 2.
# search="adaptive" decides it by single cells (SPEC 14): each format gets looks of 10 reviews
# and more only while its exact bound still straddles the limit, so a format the model reads like
# a coin is let go after 20-50 reviews. It fails on evidence only if some format's upper bound
# falls below 0.2 (labels read backwards far more often than by chance). The plan: fails on
# evidence with 80% probability only if the true worst format's score is <= 0.05 (the uniform
# gate, one resampling per format, only at 0); the survey's worst format was 0.40. The uniform
# search asks all 8 x 60 = 480 cells for the same verdict; the report's stop_reason says how many
# this run needed (300 in the runs README quotes).
@pytest.mark.reliable(space="sentiment", mode="fixed", n=8, decide="fail-on-evidence",
                      min_worst=0.2, search="adaptive")
def test_no_format_breaks_it(reliable, reviews, sentiment):
    reliable.evaluate(reviews, sentiment)


# The release question: does the canonical score hold under rewording? min_score=0.8 is about
# what the canonical prompt scores. The plan: fails on evidence with 80% probability only if the
# true mean over the space is <= 0.68 (0.65-0.73 for any intra-instance correlation); the
# survey's was 0.52. Early stopping never stops a gate before its 6th resampling (an anytime
# bound needs that many draws), so at n=4 all 4 run: it only shows where to turn it on, and
# would save calls once n is raised. Adaptive search would not save any here either (measured:
# docs/n-star.md).
@pytest.mark.xfail(strict=True, reason="over the 128 rewordings the model is at chance: the data "
                   "show its mean below the 0.8 its canonical prompt scores")
@pytest.mark.reliable(space="sentiment", n=4, stop_early=True, decide="fail-on-evidence",
                      min_score=0.8)
def test_score_holds_under_rewording(reliable, reviews, sentiment):
    reliable.evaluate(reviews, sentiment)


# -- estimate ----------------------------------------------------------------------------------


# The point estimate against the bar a release would need: every wording right 7 times in 10.
# The plan: passes (estimate) with 80% probability only if the true worst value is >= 0.84; the
# survey's worst was 0.46.
@pytest.mark.xfail(strict=True, reason="the worst wording scores near chance, far below 0.7")
@pytest.mark.reliable(space="sentiment", n=2, decide="estimate", min_worst=0.7)
def test_release_bar(reliable, reviews, sentiment):
    reliable.evaluate(reviews, sentiment)


def test_the_reviews_are_balanced(reviews):
    """A constant answer scores 0.5: chance is what every number above is read against."""
    labels = [record["label"] for record in reviews]
    assert len(labels) == 60 and labels.count("positive") == 30
