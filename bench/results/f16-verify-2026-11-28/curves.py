"""One-off (docs/cpu-classes.md): the default target's INT8 copy and its f16 copy (make_f16.py),
their curves timed in turns in one process, twice; the peak memory after compiling each. Paths as
on the machine it ran on; run with PYTHONPATH at the repository, optionally under
`python -m bench.tools.cpu_class AVX2 --`."""
import json
import resource
import sys
import time
from pathlib import Path

from spec.config import DEFAULT_PRECISION
from spec.models.calibration import cpu_name, measure_curves
from spec.models.runtime import compile_model, emulated_class

int8 = Path("/work/main/models/cache/Qwen2.5-Coder-1.5B-Instruct-int8-d6cbe3f37497/openvino_model.xml")
f16 = Path("/tmp/f16/qwen15-f16/openvino_model.xml")
settings = json.loads(sys.argv[1]) if len(sys.argv) > 1 else None
models = []
for xml in (int8, f16):
    started = time.time()
    models.append(compile_model(xml, DEFAULT_PRECISION, settings=settings))
    print(xml.parent.name, "compiled in", round(time.time() - started, 1), "s; maxrss GB",
          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, flush=True)
widths = (1, 2, 3, 4, 5, 6, 8, 9, 13, 17)
for repeat in range(2):
    curves = measure_curves(models, widths, repeats=3)
    for name, curve in zip(("int8", "f16"), curves):
        print(repeat, name, "step %.1f ms" % (curve.step * 1e3), {w: round(s, 2) for w, s in curve.in_steps().items()}, flush=True)
print(cpu_name(), "emulated:", emulated_class())
