"""What this machine's calls of a compiled model cost, measured once per CPU and OpenVINO version.

Speculative decoding pays when a verify call of K+1 tokens costs about one step. How true that is
depends on the CPU: where the step is memory-bound and the CPU multiplies wide (AMX), a verify call
of width 5 costs little more than a step; on a CPU with narrower vector units it can cost two.
The engine's schedules price each width from what the target's calls cost, so they are handed a
curve measured here, on this machine, rather than one another CPU gave.

A `CallCurve` is the seconds of a call at each input width, each timed among calls of the same
width (as a schedule's rounds run), over a short context. It is kept in SPEC_MODELS_DIR under a
key naming the CPU, the cores OpenVINO may use, the OpenVINO version, the model files and the
compile properties, and reused on the next start: `curve_for` measures only what is not kept.
A server's first start races before it: its models price their calls by the few widths tuning
timed until the whole curve is timed while no race runs (LoadedModel.time_curves).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows: no lock, timings may overlap
    fcntl = None

import openvino as ov

from spec.errors import Cancelled
from spec.models.runtime import CompiledLM, cpu_model, emulated_class, own_class
from spec.progress import ProgressFn, ignore, phase

# The widths timed: a plain step, every width dynamic K and the hybrid choose from (K up to 8),
# and the wide ones prompt lookup uses for a long copy.
CALIBRATED_WIDTHS = (1, 2, 3, 4, 5, 6, 7, 9, 13, 17, 33)
_CONTEXT = 40  # tokens in the cache while timing: a short prompt, as in a race's first rounds
_REPEATS = 3  # timed calls per width in each of its two runs (medians)
# Calls at least this wide cost two steps or more, and prompt lookup's long copies alone make them:
# one timed call per run prices them. Timing is most of a first start's wait, and these widths are
# most of the curve's time (docs/design-notes.md).
_WIDE = 13
# So are calls costing at least this many steps and seconds, at any width (on AVX2 kernels from
# width 5): each lasts long enough that one call a run is timed well, and they are most of a first
# start's timing.
_DEAR, _DEAR_SECONDS = 2.0, 0.01
# Untimed calls at the start of a run: OpenVINO prepares a call of a new shape on its first call.
# On some CPUs the second call is already steady, on others a change of width slows the next two
# (bench.studies.after_switch; docs/design-notes.md), and every call left out is time a first start
# waits. So each measurement checks: its first two runs time _CHECK_CALLS calls after the untimed
# one, and where in both the first of them is _SLOW_SECOND times the others' median or more, a run
# timed once (a wide or dear call, or every call where repeats is 1) lets a second call pass
# untimed. Two checks, not one: a single steady second call can come out slow by chance on a shared
# host. A run timed thrice needs none: its median leaves one slow call out.
_SWITCH_CALLS = 1
_CHECK_CALLS, _CHECKS, _SLOW_SECOND = 3, 2, 1.1
_FILE = "calibration.json"
_lock = threading.Lock()


def cpu_name() -> str:
    """The CPU's model name and the vector extensions OpenVINO's kernels use (AMX, AVX-512, AVX2).

    oneDNN's ONEDNN_MAX_CPU_ISA caps the extensions OpenVINO uses, and bench.tools.cpu_class hides
    some from it, so a capped or emulated run is named as the class it behaves like, and the CPU it
    runs on: its measurements are never taken for the CPU's own."""
    model = cpu_model()
    isa = own_class()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if emulated_class():
        isa = f"{emulated_class()} (emulated by bench.tools.cpu_class on a CPU with {isa})"
    if cap:
        isa = f"{cap} (capped by ONEDNN_MAX_CPU_ISA on a CPU with {isa})"
    return f"{model}, {isa}"


def machine() -> dict[str, object]:
    """What makes a measurement valid only on this machine: CPU, cores OpenVINO may use, OpenVINO's version."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu_name(), "cores": cores, "openvino": ov.get_version()}


@dataclass(frozen=True)
class CallCurve:
    """Seconds of one call of a compiled model per input width, on this machine."""

    seconds: dict[int, float]  # width -> median seconds of a call among calls of that width
    machine: dict[str, object]  # where it was measured (see machine())

    @property
    def step(self) -> float:
        """Seconds of a one-token step."""
        return self.seconds[1]

    def in_steps(self) -> dict[int, float]:
        """Each width's cost in one-token steps."""
        return {width: round(seconds / self.step, 3) for width, seconds in sorted(self.seconds.items())}


def measure_curve(model: CompiledLM, widths: tuple[int, ...] = CALIBRATED_WIDTHS, repeats: int = _REPEATS,
                  context: int = _CONTEXT, stopped: Callable[[], bool] | None = None) -> CallCurve:
    """Time calls of each width on a cache holding `context` tokens, each rolled back after it.

    Each width is timed in two runs of calls, the widths gone through upwards and then downwards, so
    a slow moment on a shared machine or a cold start does not land on one width alone. A run's
    first call is not timed (its second too where this CPU's was found slow, _SLOW_SECOND): a call
    right after one of another width also pays for OpenVINO re-preparing the model, which the
    schedules count apart. Each width's seconds are the median
    of a run's timed calls (one call a run from _WIDE up, and for calls costing _DEAR steps or
    more), the quicker of its two runs: a busy moment only ever adds time. Cancelled between two
    widths once `stopped()` says so (a race wants the cores)."""
    return measure_curves([model], widths, repeats, context, stopped)[0]


def measure_curves(models: list[CompiledLM], widths: tuple[int, ...] = CALIBRATED_WIDTHS, repeats: int = _REPEATS,
                   context: int = _CONTEXT, stopped: Callable[[], bool] | None = None) -> list[CallCurve]:
    """measure_curve for several compiled models at once, taking turns at each width: every model
    meets the host's same moments, so curves timed this way compare fairly with each other."""
    if repeats < 1 or not widths or min(widths) < 1:
        raise ValueError(f"need repeats >= 1 and widths >= 1, got repeats={repeats}, widths={widths}")
    widths = tuple(sorted(set(widths)))
    runs = [{width: [] for width in widths} for _ in models]  # per model: width -> the median of each of its runs
    caches = []
    try:
        for model in models:
            caches.append(model.new_cache())
            caches[-1].forward(list(range(1, context + 1)), keep=1)
        order = widths + widths[::-1]
        steady = [[] for _ in models]  # per model: what each check found
        for turn, width in enumerate(order):
            if stopped is not None and stopped():
                raise Cancelled("timing stopped: the cores are wanted")
            tokens = [(7 * i + 3) % 1000 + 1 for i in range(width)]  # any ids: the cost does not depend on them
            for model, (cache, medians) in enumerate(zip(caches, runs)):
                timed = repeats if width < _WIDE and not _dear(medians, width) else 1
                # A run timed once lets a second call pass untimed unless a check found it steady.
                untimed = _SWITCH_CALLS if timed > 1 or any(steady[model]) else _SWITCH_CALLS + 1
                switched = turn == 0 or order[turn - 1] != width  # the widest width's second run follows its first
                checking = switched and turn < _CHECKS  # is a run's second call as quick as the ones after it?
                if checking:
                    timed, untimed = max(timed, _CHECK_CALLS), _SWITCH_CALLS
                elif not switched:
                    untimed = 0
                times = []
                for call in range(untimed + timed):
                    started = time.perf_counter()
                    cache.forward(tokens)
                    if call >= untimed:
                        times.append(time.perf_counter() - started)
                    cache.trim(context)
                if checking:
                    steady[model].append(_second_call_steady(times))
                medians[width].append(statistics.median(times))
    finally:
        for cache in caches:
            cache.release()
    return [CallCurve({width: min(values) for width, values in medians.items()}, machine()) for medians in runs]


def _second_call_steady(times: list[float]) -> bool:
    """Whether the first of `times` (a run's calls after its untimed one) is within _SLOW_SECOND of the others' median."""
    return times[0] < _SLOW_SECOND * statistics.median(times[1:])


def _dear(medians: dict[int, list[float]], width: int) -> bool:
    """Whether a call of `width` costs _DEAR steps or more, as far as this measurement has timed it:
    its own first run, else the widest narrower call timed (calls grow dearer with width)."""
    step = medians.get(1)
    known = medians[width] or [values[0] for narrower, values in sorted(medians.items()) if narrower < width and values][-1:]
    return bool(step and known) and known[0] >= max(_DEAR * step[0], _DEAR_SECONDS)


def calibration_key(xml: Path, properties: dict[str, object], extra: str = "") -> str:
    """The key a curve is kept under: this machine, the model's files and how it was compiled."""
    files = [(p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in sorted(xml.parent.glob("openvino_model.*"))]
    text = json.dumps([machine(), str(xml.parent.resolve()), files, sorted((k, str(v)) for k, v in properties.items()), extra])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def kept_curve(folder: Path, key: str) -> CallCurve | None:
    """The curve kept under `key` in `folder`, or None: also where it was timed on another machine
    than this process has now (say, on fewer cores than the key names: its seconds would misprice
    every call here), so that it is measured again."""
    entry = read_record(folder / _FILE).get(key)
    if not entry:
        return None
    try:
        curve = CallCurve({int(width): float(s) for width, s in entry["seconds"].items()}, entry["machine"])
    except (KeyError, TypeError, ValueError):
        return None  # written by another version: measure again
    return curve if curve.machine == machine() else None


def keep_curve(folder: Path, key: str, curve: CallCurve) -> None:
    """Keep `curve` under `key` in `folder` (written whole to a new file, then renamed into place)."""
    with _lock:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / _FILE
        kept = read_record(path)
        kept[key] = {**asdict(curve), "seconds": {str(w): s for w, s in curve.seconds.items()}}
        write_record(path, kept)


def write_record(path: Path, record: dict) -> None:
    """`record` as JSON at `path`, written whole to a new file, then renamed into place: a reader
    never sees half of it."""
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record, indent=1, sort_keys=True))
    temporary.replace(path)


def read_record(path: Path) -> dict:
    """The JSON object at `path`; empty where there is none or it cannot be read."""
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def curve_for(model: CompiledLM, xml: Path, folder: Path, report: ProgressFn = ignore, name: str = "the model",
              widths: tuple[int, ...] = CALIBRATED_WIDTHS, stopped: Callable[[], bool] | None = None) -> CallCurve:
    """`model`'s curve on this machine: the one kept in `folder`, else measured now (reporting to
    `report`) and kept there. Every width is timed in the same measurement: widths timed at another
    moment (tuning's) would carry the host's speed then into the curve's shape. Cancelled, keeping
    nothing, once `stopped()` says so."""
    key, here = _curve_key(model, xml, widths), machine()
    curve = kept_curve(folder, key)
    if curve is None:
        with timing_alone(folder), phase(report, f"Timing {name}'s calls of each width on this CPU (once per machine)"):
            curve = kept_curve(folder, key)  # another process may have timed it meanwhile
            if curve is None:
                curve = measure_curve(model, widths, stopped=stopped)
        if curve.machine == here:  # not kept where the timing ran on other cores than the key names
            keep_curve(folder, key, curve)
    return curve


def kept_curve_for(model: CompiledLM, xml: Path, folder: Path, widths: tuple[int, ...] = CALIBRATED_WIDTHS) -> CallCurve | None:
    """`model`'s curve kept in `folder` by curve_for, or None where it was never timed."""
    return kept_curve(folder, _curve_key(model, xml, widths))


def _curve_key(model: CompiledLM, xml: Path, widths: tuple[int, ...]) -> str:
    return calibration_key(xml, model.properties, ",".join(map(str, widths)))


@contextlib.contextmanager
def timing_alone(folder: Path) -> Iterator[None]:
    """Hold the models folder's timing lock: two processes timing at once (the benchmark's workers,
    the page and a command line) would each see the other's calls in their own."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "calibration.lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)
