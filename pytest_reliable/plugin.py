"""The pytest plugin: options, markers, fixtures and hooks. A thin layer over the core."""

from __future__ import annotations

import pytest

MARKERS = {
    "reliable": "reliable(space=None, eps=0.01, delta=0.1, n=None, mode='ilr', confidence=0.95, "
    "min_score=, min_lower_ci=, min_median=, min_worst=, max_spread=, max_std=, temperature=, k=1, "
    "min_pass_at_k=, min_pass_hat_k=, min_cells=20): evaluate the model under resampled "
    "meaning-preserving prompt variants and gate on robustness thresholds.",
    "invariance": "invariance(perturb=[...], max_flip_rate=0.0, space=None, confidence=0.95): "
    "CheckList INV test: predictions must not change under the listed perturbations.",
    "directional": "directional(perturb=..., expect=..., max_fail_rate=0.0, space=None): "
    "CheckList DIR test: predictions must change in the expected direction.",
    "mft": "mft(min_pass=..., space=None, confidence=0.95): CheckList minimum functionality test.",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("reliable", "LLM robustness release gates (pytest-reliable)")
    group.addoption("--reliable-n", dest="reliable_n", default=None,
                    help="resamplings per test without its own n: an integer or 'auto'.")


def pytest_configure(config: pytest.Config) -> None:
    for name, help_text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help_text}")
