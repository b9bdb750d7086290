"""Space -> Plan; Plan x Dataset -> Prompt: what every cell of a test will ask, before any call.

In order: `prompt` (`Prompt`, a rendered prompt), `task` (the `Task` protocol a user's task
satisfies, and `Grade`: render needs a record's text and options as much as grading does),
`grading` (the `Grader` protocol beside it: a batch of answers -> grades, and what a grader may
call),
`data` (datasets: records, content hash, locations), `sampling` (which variant and demonstrations
every (resampling, instance) cell uses, per mode), `render` (variant x example -> chat messages).
"""
