"""How far a median over examples could move on a noisy host: a bootstrap interval.

On a shared 2-core host one generation's speed moves by 10-20% from run to run, so a median of
served / alone over six examples can land a few points either side of a target by chance. The
interval says how far: resample the examples, and each example's repeats, with replacement, take
the median of medians each time, and keep the middle `confidence` of those medians. A target
inside the interval is neither met nor missed by that run: more repeats (or a quieter host) tell.
"""
from __future__ import annotations

import random
import statistics


def median_interval(runs: dict[str, list[float]], confidence: float = 0.9, resamples: int = 2000,
                    seed: int = 0) -> tuple[float, float]:
    """The `confidence` bootstrap interval of the median over examples of each example's median
    over its runs (`runs`: example -> its runs' values), from `resamples` resamplings; the same
    `seed` gives the same interval."""
    examples = [values for values in runs.values() if values]
    if not examples:
        raise ValueError("median_interval needs at least one example with a run")
    if not 0 < confidence < 1 or resamples < 1:
        raise ValueError(f"median_interval needs 0 < confidence < 1 and resamples >= 1, got {confidence}, {resamples}")
    rng = random.Random(seed)
    medians = sorted(
        statistics.median(statistics.median(rng.choices(values, k=len(values)))
                          for values in rng.choices(examples, k=len(examples)))
        for _ in range(resamples))
    tail = (1 - confidence) / 2
    return medians[int(tail * (resamples - 1))], medians[round((1 - tail) * (resamples - 1))]
