"""`python -m bench.studies.widths --out FILE`: the default target's call at every width up to 17 and
some beyond, in one-token steps, on this CPU, as the page compiles it; and what a change of width
costs. The file is what `bench.studies.calls --curve` prices widths on.

The benchmark times widths 1, 2, 3, 5 and 9, and calibration the widths the schedules choose from;
this times every width in between too, to show where a CPU's cost jumps (on AVX2 kernels a call
of 5 costs far more than one of 4). Run it under bench.tools.cpu_class
to see another class's curve from this machine.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from bench.tools import Parser

WIDTHS = tuple(range(1, 18)) + (20, 21, 24, 25, 32, 33)
_CONTEXT, _SWITCHES = 40, 5


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.widths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="write {cpu, step_ms, steps, switch} here as JSON")
    args = parser.parse_args(argv)

    from spec.models.calibration import cpu_name, measure_curve
    from spec.models.registry import load_model
    from spec.serving.presets import pair_keys

    target = load_model(pair_keys(None, None)[0])
    curve = measure_curve(target.model, WIDTHS)
    record = {"cpu": cpu_name(), "model": target.ref, "compiled_with": target.tuning.steps if target.tuning else None,
              "step_ms": round(curve.step * 1e3, 2), "steps": curve.in_steps(), "switch": round(_switch(target.model, curve.step), 3),
              "command": "python -m bench.studies.widths " + " ".join(sys.argv[1:] if argv is None else argv)}
    args.out.write_text(json.dumps(record, indent=1))
    print(json.dumps(record))
    return 0


def _switch(model, step: float) -> float:
    """Steps a call pays right after one of another width: 1 after 5 and 5 after 1, against each among its own."""
    cache = model.new_cache()
    extras = []
    try:
        cache.forward(list(range(1, _CONTEXT + 1)), keep=1)
        for _ in range(_SWITCHES):
            for width, other in ((1, 5), (5, 1)):
                timed = []
                for tokens in ([7] * other, [7] * width, [7] * width):  # the first call at `width` follows `other`
                    started = time.perf_counter()
                    cache.forward(tokens)
                    timed.append(time.perf_counter() - started)
                    cache.trim(_CONTEXT)
                extras.append(timed[1] - timed[2])
    finally:
        cache.release()
    return max(0.0, statistics.median(extras)) / step


if __name__ == "__main__":
    sys.exit(main())
