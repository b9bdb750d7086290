"""The score matrix and the run strategies that fill it (no pytest here).

In order: `evaluation` (one evaluation as data: plan x dataset -> prompts -> responses -> graded
cells -> `ScoreMatrix`), `stopping` (early stopping: when a gate has seen enough resamplings),
`nstar` (``--reliable-n auto``: a pilot, n*, the gate's matrix), `schedules` (the run strategies:
fixed n, n* auto, early stop; which resamplings a test runs before its gate decides),
`circular` (circular evaluation, a side evaluation with its own entry).

n* lives in four rooms: the statistic `pytest_reliable.stats.reliable_n`, running it
`evaluate.nstar`, keeping it `pytest_reliable.store.nstar`, scheduling it `evaluate.schedules`.
"""
