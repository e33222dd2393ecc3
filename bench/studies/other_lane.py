"""`python -m bench.studies.other_lane --out FILE`: what a call of one KV cache costs right after
another cache's call on the same compiled model, for the default target as the page compiles it.

The race's two lanes call one compiled target, each through a cache of its own. A call right after
one of another width pays for OpenVINO re-preparing the model (bench.studies.after_switch). Whether
that depends on which cache made the last call decides how the speculative lane's schedule prices
and learns from its calls in a race: here cache A's call of each width is timed right after A's own
call of that width (steady), B's call of the same width, B's one-token step (the autoregressive
lane's call), and A's own one-token step; medians over rounds that go through the four in turns.
Run it under bench.tools.cpu_class to see another class's kernels.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from bench.tools import Parser

WIDTHS = (1, 3, 5)  # a step, and the verify calls a round of two and of four drafts makes
AFTER = ("its own call of that width", "the other cache's call of that width", "the other cache's step", "its own step")
_ROUNDS = 12
_CONTEXTS = (60, 80)  # tokens in A's and in B's cache: two lanes are seldom at the same length


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.other_lane", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="write {cpu, model, ms: {width: {after: median ms}}} here as JSON")
    args = parser.parse_args(argv)

    from spec.models.calibration import cpu_name
    from spec.models.registry import load_model
    from spec.serving.presets import pair_keys

    target = load_model(pair_keys(None, None)[0])
    ms = {str(width): {after: round(seconds * 1e3, 2) for after, seconds in medians.items()}
          for width, medians in calls_after(target.model).items()}
    record = {"cpu": cpu_name(), "model": target.ref, "compiled_with": target.tuning.steps if target.tuning else None,
              "ms": ms, "command": "python -m bench.studies.other_lane " + " ".join(sys.argv[1:] if argv is None else argv)}
    args.out.write_text(json.dumps(record, indent=1))
    print(record["cpu"])
    for width, medians in ms.items():
        print(f"width {width}: " + "; ".join(f"after {after} {value:.1f} ms" for after, value in medians.items()))
    return 0


def calls_after(model, widths: tuple[int, ...] = WIDTHS) -> dict[int, dict[str, float]]:
    """Width -> {what came before: the median seconds of cache A's call of that width}."""
    a, b = model.new_cache(), model.new_cache()
    try:
        for cache, context in zip((a, b), _CONTEXTS):
            cache.forward(list(range(1, context + 1)), keep=1)

        def call(cache, width: int) -> float:
            length = cache.length
            started = time.perf_counter()
            cache.forward([(7 * i + 3) % 1000 + 1 for i in range(width)], keep=1)
            seconds = time.perf_counter() - started
            cache.trim(length)
            return seconds

        timed: dict[int, dict[str, list[float]]] = {width: {after: [] for after in AFTER} for width in widths}
        for _ in range(_ROUNDS):
            for width in widths:
                for after, (cache, before) in zip(AFTER, ((a, width), (b, width), (b, 1), (a, 1))):
                    call(a, width)  # A settles at this width
                    call(cache, before)
                    timed[width][after].append(call(a, width))
    finally:
        a.release()
        b.release()
    return {width: {after: statistics.median(values) for after, values in medians.items()} for width, medians in timed.items()}


if __name__ == "__main__":
    sys.exit(main())
