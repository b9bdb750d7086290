"""Score matrix -> numbers, evidence and a verdict; what a reliable test reports.

In order: `summary` (the numbers a report shows and the evidence a gate decides on), `gate`
(thresholds -> `ThresholdCheck`s, under the marker's policy), `baseline` (the candidate against
a baseline, paired), `judged` (what a judged test reports about its judge), `results`
(`ReliableReport`, what ``reliable.evaluate`` returns, and its JSON entry through
`pytest_reliable.schema`).
"""
