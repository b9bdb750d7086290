"""One run, without pytest: its state and the work a test asks for.

In order: `session` (`ReliableSession`: settings, spaces, store, budget, the embedded model
server, n*; `run_reliable` and `run_checklist` are what the ``reliable`` fixture calls),
`first_round` (``--reliable-batch``'s first round: the run's first calls in one batch), `sizing`
(``--reliable-plan``: what each test will call and what its gate can resolve, before spending).
They sit above `verdict/` and `checklist/` because a session runs both.
"""
