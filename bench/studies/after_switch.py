"""`python -m bench.studies.after_switch --out FILE`: how many calls after a change of width are
slower than the width's steady calls, for the default target as the page compiles it, on this CPU.

Calibration leaves the first calls of each run of a width untimed (spec.models.calibration's
_SWITCH_CALLS): OpenVINO prepares a call of a new shape on its first call. Every untimed call is
time a first start waits for, and most on a CPU whose calls are dear, so how many need leaving out
is measured here: for each width, the first few calls after one of another width, each as a median
over rounds going up the widths and down, against the median of the later calls. Run it under
bench.tools.cpu_class to see another class's kernels.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from bench.tools import Parser

WIDTHS = (1, 2, 3, 4, 5, 6, 7, 9, 13, 17, 33)  # calibration's
_CONTEXT, _CALLS, _ROUNDS = 40, 5, 6
_STEADY_FROM = 2  # calls from this one on are the width's steady calls


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.after_switch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True,
                        help="write {cpu, ms: {width: [each call]}, of_steady: {width: [each call / steady]}} here as JSON")
    args = parser.parse_args(argv)

    from spec.models.calibration import cpu_name
    from spec.models.registry import load_model
    from spec.serving.presets import pair_keys

    target = load_model(pair_keys(None, None)[0])
    seconds = calls_after_switch(target.model)
    record = {"cpu": cpu_name(), "model": target.ref, "compiled_with": target.tuning.steps if target.tuning else None,
              "ms": {str(width): [round(s * 1e3, 1) for s in calls] for width, calls in seconds.items()},
              "of_steady": {str(width): of_steady(calls) for width, calls in seconds.items()},
              "command": "python -m bench.studies.after_switch " + " ".join(sys.argv[1:] if argv is None else argv)}
    args.out.write_text(json.dumps(record, indent=1))
    for width, ratios in record["of_steady"].items():
        print(f"width {width:>2}: " + "  ".join(f"{ratio:.2f}" for ratio in ratios))
    return 0


def calls_after_switch(model, widths: tuple[int, ...] = WIDTHS) -> dict[int, list[float]]:
    """Width -> the median seconds of its 1st, 2nd, ... call after one of another width."""
    cache = model.new_cache()
    timed: dict[int, list[list[float]]] = {width: [[] for _ in range(_CALLS)] for width in widths}
    try:
        cache.forward(list(range(1, _CONTEXT + 1)), keep=1)
        for _ in range(_ROUNDS):
            for width in widths + widths[-2:0:-1]:  # up and down, never a width after itself
                tokens = [(7 * i + 3) % 1000 + 1 for i in range(width)]
                for call in range(_CALLS):
                    started = time.perf_counter()
                    cache.forward(tokens)
                    timed[width][call].append(time.perf_counter() - started)
                    cache.trim(_CONTEXT)
    finally:
        cache.release()
    return {width: [statistics.median(values) for values in calls] for width, calls in timed.items()}


def of_steady(calls: list[float]) -> list[float]:
    """Each call's seconds over the median of the steady ones (from _STEADY_FROM on)."""
    steady = statistics.median(calls[_STEADY_FROM:])
    return [round(seconds / steady, 3) for seconds in calls]


if __name__ == "__main__":
    sys.exit(main())
