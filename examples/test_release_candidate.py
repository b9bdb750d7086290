"""The release decision most teams face: the same model behind a new system prompt.

Production is SmolLM2-135M-Instruct behind today's system prompt; the release candidate is the
same model behind a new one (both in conftest.py). The candidate runs exactly production's plan
(same variants, instances and sample indexes), so the comparison is paired: it may ship only if
it is not worse than production by more than 5 points, on evidence.

What the gate finds on the embedded model: the new prompt scores about the same (README's run at
n=8: candidate - production = -0.02 [-0.09, 0.06]), but 16 instances cannot show that it loses
less than 5 points (the regression's upper bound was 0.086 at n=8; n=4, which keeps the first run
within 10 minutes, gives a wider bound), so pass-on-evidence blocks the release. That is the
gate doing its job: ship it only with more instances behind the claim. `strict=True` makes the
run fail if the gate ever lets it through (then the evidence has changed: look at the report).
"""

import pytest


@pytest.fixture
def reliable_model(candidate_app):
    return candidate_app


@pytest.fixture
def reliable_baseline(production_app):
    return production_app


@pytest.mark.xfail(strict=True, reason="16 instances cannot show the new prompt is within 5 points")
@pytest.mark.reliable(space="movies", n=4, max_regression=0.05)
def test_new_system_prompt_does_not_regress(reliable, movies, multiple_choice):
    report = reliable.evaluate(movies, multiple_choice)
    print(report.baseline.summary_line())
