"""The benchmark: `python -m bench` (or `./run.sh bench`) times our engine beside its peers.

A tool, not part of the engine: it drives `spec` like the app and the CLI do, from worker processes.
Its core is here: the plan (`plan`, prompt sets in `prompts/` and `humaneval`), the worker
processes (`workers`), what they measure (`records`), the run (`run`) and its report (`report/`,
derived again from a results file by `python -m bench.rewrite`). Beside it, `tools/` checks the
Space itself (served races, a workshop, a soak, the image, the screenshot) and `studies/` holds
one-off measurements behind the engine's choices.
"""
