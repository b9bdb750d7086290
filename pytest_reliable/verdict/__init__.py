"""Score matrix -> numbers, evidence and a verdict; what a reliable test reports.

In order: `ranges` (cells grouped by a pre-registered grouping, paired within instance),
`judged` (what a judged test reports about its judge), `sides` (the side evaluations' frozen
results: maj@k, the judge's noise, a pairwise comparison; circular's is
`evaluate.circular.CircularResult`), `summary` (the numbers a report shows and the evidence a
gate decides on, taking the side results once), `gate` (thresholds -> `ThresholdCheck`s under
the marker's policy, each decided as its row of `contract.thresholds` says), `claims` (the range
claims an adaptive search peeks at), `baseline` (the candidate against a baseline, paired),
`results` (`ReliableReport`, frozen: what ``reliable.evaluate`` returns, and its JSON entry
through `pytest_reliable.schema`).
"""
