"""The range claims an adaptive search peeks at (SPEC section 14), bounded as the gate bounds them.

`range_peek` gives `evaluate.adaptive.run_adaptive` its `Peek`: the cells received so far are
summarized exactly as the gate's summary summarizes them (the same grouping,
paired estimator, order offsets and evidence rules: `ranges.format_side`), and each group's (``min_worst``) or pair's
(``max_spread``) one-sided bounds are read at the peek's confidence for a threshold of that
many claims. A group without evidence
(e.g. drawn by a single sampled resampling) has infinite bounds, so it stays open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pytest_reliable.evaluate.adaptive import Claim, Peek
from pytest_reliable.evaluate.evaluation import ScoreMatrix
from pytest_reliable.space import Space
from pytest_reliable.verdict.ranges import RangeSummary, _group_key, format_side


def range_claims(ranges: RangeSummary, confidence: Callable[[int], float]
                 ) -> dict[str, list[Claim]]:
    """Per range threshold, its claims' one-sided bounds on each side, at ``confidence(m)`` for
    a threshold of m claims (groups for ``min_worst``, pairs for ``max_spread``)."""
    labellings = [lab for lab in ranges.labellings if lab.effects is not None and lab.groups]
    n_groups = sum(sum(1 for g in lab.groups if g.cells) for lab in labellings)
    found_pairs = [lab.effects.pairs() for lab in labellings if lab.effects is not None]
    at_groups = confidence(n_groups)
    at_pairs = confidence(sum(p.size for p in found_pairs))
    groups: list[Claim] = []
    pairs: list[Claim] = []
    for labelling, found in zip(labellings, found_pairs):
        effects = labelling.effects
        assert effects is not None
        keys = [_group_key(labelling, g, len(ranges.labellings)) for g in labelling.groups]
        low, high = effects.lower(at_groups), effects.upper(at_groups)
        for g, key in enumerate(keys):
            if labelling.groups[g].cells:
                groups.append(Claim(frozenset({key}), _finite(low[g], -np.inf),
                                    _finite(high[g], np.inf)))
        if found.size:
            # Pairs.lower takes two-sided confidences: 2c - 1 is one-sided at c.
            p_low = found.lower(2.0 * at_pairs - 1.0)
            p_high = found.upper(at_pairs)
            for m in range(found.size):
                pairs.append(Claim(frozenset({keys[int(found.i[m])], keys[int(found.j[m])]}),
                                   _finite(p_low[m], -np.inf), _finite(p_high[m], np.inf)))
    return {"min_worst": groups, "max_spread": pairs}


def _finite(value: float, otherwise: float) -> float:
    return float(value) if np.isfinite(value) else float(otherwise)


def range_peek(space: Space, *, mode: str, grouping: str | tuple[str, ...], min_cells: int,
               order_group_by: str) -> Peek:
    """The `Peek` of a test: its cells summarized as its gate will summarize them."""

    def peek(matrix: ScoreMatrix, uniform_rows: int, confidence: Callable[[int], float]
             ) -> dict[str, Sequence[Claim]]:
        del uniform_rows  # the ranges use every cell received
        ranges, _ = format_side(matrix, space, mode=mode, grouping=grouping,
                                confidence=confidence(1), min_cells=min_cells, peek=True)
        return dict(range_claims(ranges, confidence))

    return peek


__all__ = ["range_claims", "range_peek"]
