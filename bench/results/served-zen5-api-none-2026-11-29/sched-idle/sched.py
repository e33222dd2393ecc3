# ruff: noqa: E501 -- a record of a measurement, kept as it ran
"""The Zen 4's schedstat.py (run-queue waits of the threads that compute, served against alone), with
two changes: EXP_POLICY goes to the app (sitecustomize.py beside this file reads it) and REPEATS sets
how many times the six examples are raced (abab.sh: 1)."""

from pathlib import Path

source = (Path(__file__).parents[2] / "served-parts-zen4-2026-11-28" / "schedstat.py").read_text()
for old, new in (('"EXP_NICE": os.environ.get("EXP_NICE", "10")', '"EXP_POLICY": os.environ.get("EXP_POLICY", "")'),
                 ("p.examples[:6] * 2", 'p.examples[:6] * int(os.environ.get("REPEATS", "2"))'),
                 ('Path(f"/tmp/exp/app-{port}.log")', 'Path(f"/tmp/sched-app-{port}.log")')):
    assert old in source, old
    source = source.replace(old, new)
exec(compile(source, "schedstat.py", "exec"))
