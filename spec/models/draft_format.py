"""The draft's weight format, INT4 or INT8, chosen by measurement on the machine that prepares it.

A draft token costs what the draft's compressed matrix multiplications cost, and which compression
multiplies faster depends on the CPU's kernels: INT4 was the quicker on an AVX-512 CPU, and on an
AVX2-only one an INT4 draft token cost far more than its share of the bytes the target reads
(docs/cpu-classes.md), the main reason speculation barely paid there. So before the draft is first
prepared, eight layers of its shapes are laid out each way (random weights as the converter lays
them out) and timed (a few seconds), and the draft is converted in the quicker format.

The choice is kept beside the models: in the prepared folder (an image's, made at build time: its
draft is the one there is) or in the models folder under this machine's name, so the pair is the
same pair from one start to the next.
"""
from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from spec.config import INT4, INT8
from spec.models.calibration import machine, read_record, write_record
from spec.models.conversion_cache import models_dir, prepared_dir
from spec.models.gguf_weights import Compressed, decompression, random_compressed
from spec.models.runtime import emulated_class
from spec.progress import ProgressFn, ignore

CANDIDATES = (INT4, INT8)
_FILE = "draft-format.json"
_REPO_ROOT = Path(__file__).resolve().parents[2]
# Qwen2.5-Coder-0.5B's shapes: hidden 896, MLP 4,864, q/k/v together 1,152 rows. Eight layers, each
# with weights of its own: 120 MB at INT8 and 60 at INT4, 360 MB for the four copies timed in turns,
# beyond a CPU's caches as the whole draft's weights are. Fewer layers can stay in a large L3 and
# time the formats as a tie where the whole draft's layers do not (docs/cpu-classes.md).
_HIDDEN, _MLP, _QKV, _LAYERS = 896, 4864, 1152, 8
_CALLS = 30
# What the record's seconds were timed on. Records without it were timed on layers whose sums
# overflowed to NaN (before 2026-11-28): this machine times its choice again, once.
_TIMED_ON = "eight layers, each after an RMS norm"
_lock = threading.Lock()
log = logging.getLogger(__name__)
_measured: dict[str, object] | None = None  # this process's measurement: the machine does not change
# The answer per (prepared folder, models folder), for this process: the page asks at every race.
_decided: dict[tuple[str, str], str] = {}


def draft_format(report: ProgressFn = ignore) -> str:
    """INT4 or INT8: the draft's format as prepared here (the prepared folder's record), else as this
    machine chose before (the models folder's), else measured now and kept. Asked again in this
    process, the same answer without reading either."""
    folders = (prepared_dir(), models_dir())
    asked = (str(folders[0]), str(folders[1]))
    if asked not in _decided:
        _decided[asked] = _decide(*folders, report)
    return _decided[asked]


def _decide(prepared: Path | None, models: Path, report: ProgressFn) -> str:
    for path, mine_only in ((prepared / _FILE if prepared is not None else None, False), (models / _models_file(), True)):
        record = read_record(path) if path is not None else {}
        if record.get("format") in CANDIDATES and (not mine_only or (record.get("machine"), record.get("timed_on")) == (machine(), _TIMED_ON)):
            return record["format"]
    record = measure(report)
    if record["seconds"]:  # timed: kept for the next start
        try:
            write_record(models / _models_file(), record)
        except OSError as error:  # a read-only folder: the choice stands for this process
            log.warning("Could not keep the draft's format in %s (%s): it is timed again at the next start", models, error)
    return str(record["format"])


def _models_file() -> str:
    """The record's name in the models folder: a run emulating another CPU class (bench.tools.cpu_class)
    keeps its own, so this CPU's choice is not timed again after it."""
    emulated = emulated_class()
    return f"draft-format-emulated-{emulated.lower()}.json" if emulated else _FILE


def measure(report: ProgressFn = ignore) -> dict[str, object]:
    """Time a call of the draft's layers laid out each way on this CPU: the quicker format, the
    seconds per format, and the machine (spec.models.calibration.machine). Timed in a child
    process: its 0.7 GB go back when it ends, where this process (the app, or a preparation held
    to 4 GB) would keep them. If the child fails, INT4 (the format the project chose before it
    measured), and nothing is kept: the next start times it again."""
    global _measured
    with _lock:
        if _measured is None:
            report("Timing the draft's layers at INT4 and at INT8 on this CPU (about 3 s, once per machine)...", None)
            seconds = _time_in_child()
            if seconds is None:
                return {"format": INT4, "seconds": {}, "machine": machine()}
            _measured = {"format": min(seconds, key=seconds.get), "seconds": seconds, "machine": machine(), "timed_on": _TIMED_ON}
        return dict(_measured)


def _time_in_child() -> dict[str, float] | None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    child = None
    try:
        child = subprocess.run([sys.executable, "-m", "spec.models.draft_format"], env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=300)
        seconds = json.loads(child.stdout.strip().splitlines()[-1])
        return {weight_format: float(seconds[weight_format]) for weight_format in CANDIDATES}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, KeyError, TypeError) as error:
        said = [line for line in (child.stderr if child is not None else "").splitlines() if line.strip()]
        log.warning("Could not time the draft's layers (%s): the default pair's draft stays INT4",
                    said[-1].strip()[:200] if said else type(error).__name__)
        return None


def _time_layers() -> dict[str, float]:
    """Per format, the median seconds of a one-token call through _LAYERS layers of the draft's
    shapes, its weights compressed as a draft converted here is (spec.models.gguf_weights), at the
    quicker of the plugin's own settings and activations in groups of 128 (spec.models.tuning's
    first two). The four compiled copies take turns, call by call: a shared host's speed drifts by
    10% within seconds, and one timed after the other could win by the moment it was timed in."""
    import openvino as ov

    held: list[np.ndarray] = []  # the constants share these arrays' memory
    x = np.ones((1, 1, _HIDDEN), dtype=np.float32)
    requests = {}
    for weight_format in CANDIDATES:
        model = _layers(weight_format, held)
        for group in ("", "128"):
            settings = {"DYNAMIC_QUANTIZATION_GROUP_SIZE": group} if group else {}
            requests[weight_format, group] = ov.Core().compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", **settings}).create_infer_request()
    for request in requests.values():
        for _ in range(5):
            request.infer([x])
    calls: dict[tuple[str, str], list[float]] = {name: [] for name in requests}
    for _ in range(_CALLS):
        for name, request in requests.items():
            started = time.perf_counter()
            request.infer([x])
            calls[name].append(time.perf_counter() - started)
    return {weight_format: min(statistics.median(timed) for (f, _), timed in calls.items() if f == weight_format)
            for weight_format in CANDIDATES}


def _layers(weight_format: str, held: list[np.ndarray]):
    """_LAYERS transformer layers' matrix multiplications (attention's projections and the gated
    MLP, each after an RMS norm) with random weights in `weight_format`'s layout: what the draft's
    step spends its time in.
    The values are random integers, not quantized floats: the kernels' speed does not depend on them,
    and the child then needs no NNCF (slow to import). Every layer holds a copy of its own weights,
    so no two layers share memory."""
    import openvino as ov
    from openvino import opset13 as ops

    rng = np.random.default_rng(0)
    shapes = ((_QKV, _HIDDEN), (_HIDDEN, _HIDDEN), (_MLP, _HIDDEN), (_HIDDEN, _MLP))
    compressed = {shape: random_compressed(*shape, weight_format, rng) for shape in shapes}

    def linear(x, rows: int, columns: int):
        weight = compressed[rows, columns]
        copy = Compressed(weight.values.copy(), weight.scales.copy(), weight.zero_points.copy(), weight.bits)
        return ops.matmul(x, decompression(copy, f"w{len(held)}", held), False, True)

    def rms_norm(h):  # as each of the draft's layers begins: without it the sums grow to infinity
        mean_square = ops.reduce_mean(ops.multiply(h, h), np.array([-1]), keep_dims=True)
        return ops.divide(h, ops.sqrt(ops.add(mean_square, np.float32(1e-6))))

    x = ops.parameter([1, -1, _HIDDEN], np.float32, name="x")
    h = x
    for _ in range(_LAYERS):
        qkv = linear(rms_norm(h), _QKV, _HIDDEN)
        h = ops.add(h, linear(ops.slice(qkv, [0], [_HIDDEN], [1], [2]), _HIDDEN, _HIDDEN))
        n = rms_norm(h)
        h = ops.add(h, linear(ops.multiply(ops.swish(linear(n, _MLP, _HIDDEN)), linear(n, _MLP, _HIDDEN)), _HIDDEN, _MLP))
    return ov.Model([h], [x], "draft-layers")


if __name__ == "__main__":  # the child measure() starts: the seconds per format, as one JSON line
    print(json.dumps(_time_layers()))
