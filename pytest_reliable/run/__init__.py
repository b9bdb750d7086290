"""One run, without pytest: its state and the work a test asks for.

In order: `session` (`ReliableSession`: settings, spaces, store, budget, the embedded model
server, n*; `run_reliable` and `run_checklist` are what the ``reliable`` fixture calls),
`first_round` (``--reliable-batch``'s first round: the run's first calls in one batch), and
``--reliable-plan``'s modules (what each test will call and what its gate can resolve, before
spending): `sizing` (a reliable test's plan, and the section that prints every plan) draws on
`plan_figures` (what each threshold can resolve), `plan_size` (the simulated design and the size
suggestion), `plan_spend` (money and a judge's calls) and `expected_calls` (the resamplings an
early stop is expected to run); `plan_checklist` is a CheckList test's plan.
They sit above `verdict/` and `checklist/` because a session runs both.
"""
