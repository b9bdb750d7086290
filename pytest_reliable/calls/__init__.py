"""Model calls: which answer a call is, what it costs, and running them (cache first).

In order: `cache` (cache keys and what a miss says), `pricing` (usage -> USD, the price table),
`requests` (`Request`, `CallResult`, `ProgressEvent`, `RunStats`, shared by the runner and the
batch transport), `budget` (calls, tokens and USD of the run, through the store's ledger),
`loop` (the one event loop every call runs on), `batch` (``--reliable-batch``: a provider's
batch API as a transport), `runner` (concurrency, retries, timeouts, budget and progress over
the store). Answers are kept by `pytest_reliable.store`, below.
"""
