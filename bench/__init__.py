"""The benchmark: `python -m bench` (or `./run.sh bench`) times our engine beside its peers.

A tool, not part of the engine: it drives `spec` like the app and the CLI do, from worker processes.
"""
