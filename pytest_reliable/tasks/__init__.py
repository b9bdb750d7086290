"""Graders: answers -> grades (a judge is a grader that asks a model).

In order: `extraction` (how an answer is read: the option it picks, normalized text),
`judge_votes` (how a judge's reply becomes a vote), `judge` (`Judge`: LLM-as-judge, its votes
are calls of the same runner), `builtin` (`MultipleChoice`, `Classification`, `Generation`),
`grading` (which `Grader` grades a task's answers: its judge, or its own `Task.grade`). The
`Task` and `Grader` protocols they satisfy are `pytest_reliable.plan.task` and
`pytest_reliable.plan.grading`; what a judged test reports about its judge is
`pytest_reliable.verdict.judged`.
"""
