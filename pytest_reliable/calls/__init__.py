"""Model calls: which answer a call is, what it costs, and running them (cache first).

In order: `cache` (cache keys and what a miss says), `pricing` (usage -> USD, the price table),
`requests` (`Request`, `CallResult`, `ProgressEvent`, `RunStats`, `AnsweredAhead`), `budget`
(calls, tokens and USD of the run, through the store's ledger), `money` (`Meter`: one call's
reservation, settlement and counts, priced where it is reserved and where it is paid), `loop`
(the one event loop every call runs on), `transport` (the `Transport` protocol), `direct`
(`DirectTransport`: one call per request, retries, timeouts), `batch_files` and `batch`
(``--reliable-batch``: a provider's batch API as a transport), `claiming` (each answer paid for
once across processes and hosts), `runner` (one path: store lookup, claims, then the transport).
Answers are kept by `pytest_reliable.store`, below.
"""
