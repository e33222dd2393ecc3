"""One-off (docs/benchmarks.md, "a kept curve from a busy moment"): the default target's curve
timed alone, beside a busy process, and alone again, with the process's CPU time over the wall
time of both cores. Paths as on the machine it ran on; run with PYTHONPATH at the repository."""
import os
import subprocess
import sys
import time
from pathlib import Path

from spec.config import DEFAULT_PRECISION
from spec.models.calibration import measure_curve
from spec.models.runtime import compile_model
from spec.models.tuning import CANDIDATES

xml = Path("/work/main/models/cache/Qwen2.5-Coder-1.5B-Instruct-int8-d6cbe3f37497/openvino_model.xml")
model = compile_model(xml, DEFAULT_PRECISION, settings=CANDIDATES["f32, groups of 128"])
model.warm_up()
WIDTHS = (1, 2, 3, 4, 5, 6, 7, 9, 13, 17, 33)


def timed(label: str) -> None:
    t0, c0 = time.perf_counter(), os.times()
    curve = measure_curve(model, WIDTHS)
    t1, c1 = time.perf_counter(), os.times()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    shape = {w: s for w, s in curve.in_steps().items() if w in (3, 5, 9)}
    print(label, "util %.2f" % (cpu / (t1 - t0) / 2), "wall %.1f s" % (t1 - t0), "step %.1f ms" % (curve.step * 1e3), shape, flush=True)


timed("alone")
hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
timed("beside one busy process")
hog.kill()
timed("alone again")
