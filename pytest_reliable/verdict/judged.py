"""What a judge's test reports about the judge (SPEC section 12): `judge_entry` (its noise:
``agreement``, ``judge_variance_share``), `pairwise_entry` (a pairwise judge's win rate and
position bias) and `unread_judge` (the test's error when the judge's replies cannot be read).

The judge itself (a grader that asks a model) is `pytest_reliable.tasks.judge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_reliable.schema.text import cut_text
from pytest_reliable.tasks.judge import Judge

if TYPE_CHECKING:
    from pytest_reliable.evaluate.evaluation import CellResult
    from pytest_reliable.schema.entries import JudgeEntry, PairwiseEntry

REPLY_SHOWN_CHARS = 100
"""Characters of an unread reply an unreadable judge's error quotes (the line stays whole)."""


def judge_entry(judge: Judge, identity: str, cells: Sequence[CellResult],
                calls_made: int, calls_cached: int) -> JudgeEntry:
    """The entry's ``judge`` (SPEC section 12) over the judged cells (those whose answer came
    back and was judged):

    - ``agreement``: over the cells with at least two parsed votes, the share whose parsed votes
      all agree; null when no cell has two (one vote per answer, or replies that could not be
      read). An unparsed vote is neither agreement nor disagreement: ``unparsed_votes`` counts
      them, so a judge that cannot be read never shows agreement 1.000;
    - ``judge_variance_share``: the share of the variance of the cells' scores that lies between
      votes of one answer: the mean within-cell variance of the votes (ddof=1, a failing vote
      counts 0 as in the score) divided by ``votes`` (the noise variance of a mean of that many
      votes), over the variance of the cell scores (ddof=1), capped at 1; null with one vote per
      cell or fewer than 2 cells, and 0 when the cells' scores do not vary.
    """
    judged = [c for c in cells if c.votes]
    votes = [[v or 0.0 for v in c.votes] for c in judged]
    unparsed = sum(v is None for c in judged for v in c.votes)
    parsed = [[v for v in c.votes if v is not None] for c in judged]
    comparable = [p for p in parsed if len(p) >= 2]
    agreement = (sum(len(set(p)) == 1 for p in comparable) / len(comparable)
                 if comparable else None)
    share: float | None = None
    if judge.votes >= 2 and len(votes) >= 2:
        import numpy as np

        arr = np.asarray(votes, dtype=np.float64)
        total = float(arr.mean(axis=1).var(ddof=1))
        within = float(arr.var(axis=1, ddof=1).mean()) / judge.votes
        share = 0.0 if total <= 0 else min(1.0, within / total)
    return {
        "id": identity,
        "votes": judge.votes,
        "scale": judge.scale,
        "rubric_hash": judge.rubric_hash,
        "cells": len(votes),
        "unparsed_votes": unparsed,
        "max_unparsed": float(judge.max_unparsed),
        "agreement": agreement,
        "judge_variance_share": share,
        "calls": {"made": calls_made, "cached": calls_cached},
    }


def unread_judge(judge: Judge, identity: str, cells: Sequence[CellResult]) -> str | None:
    """The test's problem when more than ``judge.max_unparsed`` of its votes came back without
    a grade (the judge's failure: the test errors), naming the judge, the share and one such
    reply (quoted, cut); None while the judge can be read. Votes whose call did not complete are
    not counted here: they are problems of their own."""
    asked = sum(len(c.votes) for c in cells)
    unread = [reply for c in cells for reply in c.unread]
    if not asked or len(unread) <= judge.max_unparsed * asked:
        return None
    return (
        f"judge {identity} could not be read: {len(unread)} of {asked} votes "
        f"({len(unread) / asked:.0%}) came back without {judge.asked_for}, more than "
        f"max_unparsed={judge.max_unparsed:g}; one reply: "
        f"{cut_text(unread[0], REPLY_SHOWN_CHARS)!r}. Fix: a judge that replies as asked "
        f"(max_tokens={judge.max_tokens} enough?), or a higher Judge(max_unparsed=...)"
    )


def pairwise_entry(judge: Judge, cells: Sequence[CellResult], estimate: float,
                   low: float, high: float, baseline_model: str) -> PairwiseEntry:
    """The entry's ``pairwise`` (SPEC section 12) over the resampling cells of a pairwise judge's
    test: ``baseline_model`` (the model compared with), ``cells`` = ``win`` + ``tie`` + ``loss``
    (every cell scored: a cell whose candidate gave no answer to judge is a loss, as the win rate
    counts it, so (win + tie / 2) / cells is the estimate), the win rate with the clustered
    interval of the gate's mean (``estimate``, ``low``, ``high``), and ``position_bias``: the
    share of parsed votes that picked the answer shown first, minus 0.5 (votes[:votes] showed
    the candidate first)."""
    scores = [c.score for c in cells]
    firsts = parsed = 0
    for cell in cells:
        for index, vote in enumerate(cell.votes):
            if vote is None:
                continue
            parsed += 1
            candidate_first = index < judge.votes
            firsts += int((vote == 1.0) == candidate_first)
    return {
        "baseline_model": baseline_model,
        "cells": len(scores),
        "win": sum(s == 1.0 for s in scores),
        "tie": sum(s == 0.5 for s in scores),
        "loss": sum(s == 0.0 for s in scores),
        "win_rate": {"estimate": estimate, "low": low, "high": high},
        "position_bias": (firsts / parsed - 0.5) if parsed else None,
    }
