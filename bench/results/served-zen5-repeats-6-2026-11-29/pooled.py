# ruff: noqa: E402, I001
"""Issue 41's medians and bootstrap intervals over two served runs pooled as one of twelve repeats
(same machine, engine and starting state): each example's served / alone ratios, side by side per
repeat, from both runs' JSON. Run from the repository root."""
import json
import statistics
import sys
sys.path.insert(0, ".")
from bench.tools.interval import median_interval
from bench.tools.served import LANES, TARGETS, _ratios

runs = [json.load(open(path))["runs"] for path in sys.argv[1:]]
for channel, target in TARGETS.items():
    for lane in LANES:
        pooled = {label: [r for run in runs for r in _ratios(run[label][channel][lane], run[label]["alone"][lane])]
                  for label in runs[0]}
        median = statistics.median(statistics.median(values) for values in pooled.values())
        low, high = median_interval(pooled)
        verdict = "met" if median >= target else "missed"
        settled = "settled" if low >= target or high < target else "not settled"
        print(f"{channel} {lane}: {median:.3f} (90% interval {low:.3f}-{high:.3f}), target {target}: {verdict}, {settled}; "
              f"{sum(map(len, pooled.values()))} pairs")
