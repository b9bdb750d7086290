"""The JSON report's shape, below both the engine and the viewers (`pytest_reliable.report`).

In order: `text` (how much model and dataset text a report holds), `entries` (the report's and
one test's entry, the schema version, built by `verdict.results` and read by every writer),
`load` (reading a saved report back, checked). The engine writes entries through it and the
viewers read them through it, so neither imports the other.
"""
