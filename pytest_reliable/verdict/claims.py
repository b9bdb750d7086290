"""The range claims an adaptive search peeks at (SPEC section 14), bounded as the gate bounds them.

`range_peek` gives `evaluate.adaptive.run_adaptive` its `Peek`: the cells received so far are
summarized exactly as the gate's summary summarizes them (the same grouping,
paired estimator, order offsets and evidence rules: `summary.format_side`), and each group's (``min_worst``) or pair's
(``max_spread``) one-sided bounds are read at the peek's confidence. A group without evidence
(e.g. drawn by a single sampled resampling) has infinite bounds, so it stays open.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_reliable.evaluate.adaptive import Claim, Peek
from pytest_reliable.evaluate.evaluation import ScoreMatrix
from pytest_reliable.space import Space
from pytest_reliable.verdict.summary import RangeSummary, _group_key, format_side


def range_claims(ranges: RangeSummary, confidence: float) -> dict[str, list[Claim]]:
    """Per range threshold, its claims' one-sided bounds at ``confidence`` on each side."""
    groups: list[Claim] = []
    pairs: list[Claim] = []
    labellings = ranges.labellings
    for labelling in labellings:
        effects = labelling.effects
        if effects is None or not labelling.groups:
            continue
        keys = [_group_key(labelling, g, len(labellings)) for g in labelling.groups]
        low, high = effects.lower(confidence), effects.upper(confidence)
        for g, key in enumerate(keys):
            if labelling.groups[g].cells:
                groups.append(Claim(frozenset({key}), _finite(low[g], -np.inf),
                                    _finite(high[g], np.inf)))
        found = effects.pairs()
        if found.size:
            # Pairs.lower takes two-sided confidences: 2c - 1 is one-sided at c.
            p_low = found.lower(2.0 * confidence - 1.0)
            p_high = found.upper(confidence)
            for m in range(found.size):
                pairs.append(Claim(frozenset({keys[int(found.i[m])], keys[int(found.j[m])]}),
                                   _finite(p_low[m], -np.inf), _finite(p_high[m], np.inf)))
    return {"min_worst": groups, "max_spread": pairs}


def _finite(value: float, otherwise: float) -> float:
    return float(value) if np.isfinite(value) else float(otherwise)


def range_peek(space: Space, *, mode: str, grouping: str | tuple[str, ...], min_cells: int,
               order_group_by: str) -> Peek:
    """The `Peek` of a test: its cells summarized as its gate will summarize them."""

    def peek(matrix: ScoreMatrix, uniform_rows: int, confidence: float
             ) -> dict[str, Sequence[Claim]]:
        del uniform_rows  # the ranges use every cell received
        ranges, _ = format_side(matrix, space, mode=mode, grouping=grouping,
                                confidence=confidence, min_cells=min_cells, peek=True)
        return dict(range_claims(ranges, confidence))

    return peek


__all__ = ["range_claims", "range_peek"]
