"""A target's cost curve in one-token steps, as a benchmark run timed it on its own machine.

The engine's prior curve (spec.decoding.policy.PRIOR_WIDTH_COST) is one CPU's: an AMX Xeon, where
a verify call of 5 costs 1.23 steps. On an AVX2-only CPU the same call costs about 2 steps, and a
drafting rule that pays on one curve can lose on the other, so replays and ceilings can price widths
on the curve of the machine whose answers they read.
"""
from __future__ import annotations

import re

_WIDTH = re.compile(r"target_(\d+)")


def measured_curve(report: dict) -> tuple[dict[int, float], float]:
    """(width -> one-token steps, the extra steps a call pays right after one of another width), from
    a benchmark report's "Where the time goes" timings ("costs")."""
    costs = report.get("costs") or {}
    step = costs.get("target_1")
    if not step:
        raise ValueError(f"benchmark {report.get('name', '?')!r} timed no 1-token target call (was it run with --no-costs?)")
    points = {int(m.group(1)): seconds / step for key, seconds in costs.items() if (m := _WIDTH.fullmatch(key))}
    if len(points) < 2:
        raise ValueError(f"benchmark {report.get('name', '?')!r} timed only width 1: no curve to price verify calls on")
    # Both directions of a width change were timed (1 after 5, 5 after 1): their extra, averaged.
    extras = [(costs[after] - costs[steady]) / step for after, steady in (("target_1_after_5", "target_1"), ("target_5_after_1", "target_5"))
              if after in costs and steady in costs]
    if not extras:
        raise ValueError(f"benchmark {report.get('name', '?')!r} did not time a change of width")
    return points, max(0.0, sum(extras) / len(extras))
