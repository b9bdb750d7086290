"""The example release gate for the embedded SmolLM2-135M-Instruct.

Each test evaluates the model under a pre-registered space of meaning-preserving prompt variants
(reliable.yaml) on 100 real BIG-Bench Hard instances, and decides each threshold on evidence
(SPEC section 11), one test per policy:

- pass-on-evidence (the default): a threshold passes only when its one-sided 95% bound clears
  the limit, so a model that breaches a limit passes at most 5% of the time;
- fail-on-evidence: a threshold fails only when the bound shows it is breached (Holm over the
  test's thresholds and groups), so a model meeting every limit fails at most 5% of the time:
  for CI checks that must not flake;
- estimate: the point estimate against the limit, no error control.

One test samples at a production temperature (0.7) with k=4, so the report shows pass@1 beside
pass@4 and pass^4. The xfail test is a bar the 135M model really misses: that is what a gate is
for; `strict=True` makes the run fail if it ever passes it (then raise the bar).
`pytest --reliable-plan` prints what each of these tests will call and can resolve, without
calling the model.
"""

import pytest

from pytest_reliable import Dataset

BLOCKED = pytest.mark.xfail(strict=True, reason="the 135M model is not good enough: the gate blocks it")


@pytest.mark.reliable(space="adjectives", n=2, min_score=0.35)
def test_adjective_order_on_evidence(reliable, adjectives, multiple_choice):
    """Passes only if the data show the score is at least 0.35 (its lower bound clears 0.35)."""
    reliable.evaluate(adjectives, multiple_choice)


@pytest.mark.reliable(space="adjectives", n=2, decide="fail-on-evidence", max_spread=0.25,
                      min_worst=0.35)
def test_adjective_order_robust_unless_shown_otherwise(reliable, adjectives, multiple_choice):
    """Fails only if the data show a prompt dimension whose values differ by more than 0.25, or a
    value scoring below 0.35 (paired within instance, Holm over every group and pair)."""
    reliable.evaluate(adjectives, multiple_choice)


@BLOCKED
@pytest.mark.reliable(space="adjectives", n=1, decide="estimate", min_score=0.7)
def test_adjective_order_release_bar(reliable, adjectives, multiple_choice):
    """The point estimate against the bar a release would need: no error control."""
    reliable.evaluate(adjectives, multiple_choice)


@pytest.mark.reliable(space="adjectives", n=1, temperature=0.7, k=4, min_pass_at_k=0.6,
                      min_pass_hat_k=0.02)
def test_adjective_order_at_production_temperature(reliable, adjectives, multiple_choice):
    """At temperature 0.7 with 4 samples per instance: pass@1, pass@4 and pass^4 (all 4 right)."""
    report = reliable.evaluate(Dataset.from_records(list(adjectives)[:40]), multiple_choice)
    # pass^k can only fall as k grows and pass@k only rise: a sanity check a test may add.
    assert report.pass_hat_k <= report.pass_at_1 <= report.pass_at_k
