"""One-off measurements behind the engine's choices, each `python -m bench.studies.NAME` (the
results, and the commands that made them, are in docs/benchmarks.md and docs/design-notes.md).

- `calls`: what drafting did call by call under pinned costs, nothing timed (a drafting rule
  tried in seconds with `--replay`, another engine's with `--engine`);
- `ceiling`: how fast copying could decode at best on a benchmark run's own answers;
- `draft_cost`: what a draft token costs in target steps, per way of building the draft;
- `curve`: a run's cost curve, for `calls` and `ceiling` to price widths on.
"""
