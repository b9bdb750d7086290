"""Graders: answers -> grades (a judge is a grader that asks a model).

In order: `extraction` (how an answer is read: the option it picks, normalized text),
`builtin` (`MultipleChoice`, `Classification`, `Generation`), `judge_votes` (how a judge's reply
becomes a vote), `judge` (`Judge`: LLM-as-judge, its votes are calls of the same runner). The
`Task` protocol they satisfy is `pytest_reliable.plan.task`; what a judged test reports about
its judge is `pytest_reliable.verdict.judged`.
"""
