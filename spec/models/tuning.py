"""Choosing how to compile a model by measurement on the machine at hand, once per machine.

Which CPU properties make a model fastest depends on the CPU: rounding activations to 8 bits in
wider groups, or computing in f32 rather than the bf16 a CPU with AMX or AVX-512 BF16 gets by
default, makes a one-token step or a wide verify call cheaper on one CPU and dearer on another.
So at the default precision each candidate below is compiled and timed, and each method gets what
is fastest for it: autoregressive decoding the fastest one-token step, speculative decoding the
settings whose verify calls yield most tokens per second. The exact mode (F32) is never tuned:
it keeps its own properties, which keep a verify call consistent with one-by-one decoding.

What was measured is kept in SPEC_MODELS_DIR (spec.models.calibration), so a later start reads it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from spec.config import DEFAULT_PRECISION
from spec.errors import Cancelled
from spec.models.calibration import CallCurve, calibration_key, keep_curve, kept_curve, measure_curve, measure_curves, timing_alone
from spec.models.memory import available_bytes
from spec.models.runtime import compile_model, compile_properties, reason
from spec.models.weigh import memory_for_copies
from spec.progress import ProgressFn, ignore, phase

# The candidates at the default precision, by name. Every one rounds activations to 8 bits on the
# fly to multiply them with the compressed weights; they differ in the group size of that rounding
# and in the precision of the rest.
CANDIDATES: dict[str, dict[str, str]] = {
    "openvino": {},  # the CPU plugin's own choices (bf16 where the CPU has it, its own group size)
    "groups of 128": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"},  # wider groups: cheaper wide calls on many CPUs
    "f32, groups of 128": {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"},
}
# What a server's first start compiles with before the others are timed: on every CPU class tuned so
# far, its verify calls were as cheap as the plugin's own or cheaper, and its step level with them.
FIRST = "groups of 128"
# Widths timed per candidate, enough to choose between them: a step and every other verify width
# up to 9, where the schedules' calls lie (w2 and w4 both: on AVX2 kernels a call of 4 can cost
# less than one of 3). Each is timed once per run of measure_curve, not thrice: timing is most of
# tuning and grows with a step's cost. The settings chosen then have their whole curve timed in one go
# (spec.models.calibration.curve_for), so the schedules never read widths timed minutes apart.
_WIDTHS = (1, 2, 4, 6, 9)
_REPEATS = 1
# A draft kept with this probability, drafted for free: how the candidates' verify calls are
# weighed against each other. The choice depends on the curve's shape, not much on this value.
_NOMINAL_ALPHA = 0.7
# Speculation gets settings of its own only when they beat the step's by this much: they cost a
# second compiled copy of the target in memory.
_WORTH_A_SECOND_COPY = 1.05
# Steps this close are a tie on a shared host (interleaved timings of the same settings differ by
# as much): the autoregressive lane then runs with the settings speculation chose, in one copy.
_SAME_STEP = 1.03


@dataclass(frozen=True)
class Tuning:
    """The candidate each method runs with, and what every candidate measured."""

    steps: str  # the fastest one-token step: autoregressive decoding's (and a draft model's)
    rounds: str  # the most tokens per second in verify rounds: speculative decoding's target
    curves: dict[str, CallCurve]  # candidate -> its calls' seconds per width, as far as choosing needed (_WIDTHS)


def rounds_rate(curve: CallCurve) -> float:
    """Tokens per second of the best verify round on this curve, for free drafts kept with _NOMINAL_ALPHA."""
    alpha = _NOMINAL_ALPHA
    return max((1 - alpha ** (w)) / (1 - alpha) / seconds for w, seconds in curve.seconds.items() if w > 1)


def _at_its_quickest(curve: CallCurve, xml: Path, device: str, token_ids: np.ndarray | None,
                     settings: dict[str, str], cache_dir: Path | None) -> CallCurve:
    """`curve` at the quicker of two moments: its step timed again, later, and every width scaled
    to it where it came out quicker. Candidates are timed one after another (each is a compiled copy
    of the model in memory), and a shared host's speed drifts by 10% in seconds: timed once each,
    a candidate timed in a slow moment can lose to a slower one timed in a quick moment, giving the
    autoregressive lane the slower settings and speculation a needless copy of its own. A curve's
    shape, timed within a few seconds, is kept."""
    try:
        step = measure_curve(compile_model(xml, DEFAULT_PRECISION, device, cache_dir, token_ids, settings), (1,),
                             repeats=_REPEATS).step
    except RuntimeError:
        return curve  # it ran the first time: keep what that measured
    if step >= curve.step:
        return curve
    return CallCurve({width: seconds * step / curve.step for width, seconds in curve.seconds.items()}, curve.machine)


def _side_by_side(candidates: list[str], xml: Path, device: str, token_ids: np.ndarray | None,
                  cache_dir: Path | None) -> dict[str, CallCurve]:
    """Each of `candidates`' curves (tuning's widths), all compiled at once and taking turns at each
    width (spec.models.calibration.measure_curves): each meets the host's same moments. Timed one
    after another instead, a candidate timed in a quick moment can beat a faster one, and a split
    is kept for good (docs/design-notes.md)."""
    models = [compile_model(xml, DEFAULT_PRECISION, device, cache_dir, token_ids, CANDIDATES[candidate]) for candidate in candidates]
    return dict(zip(candidates, measure_curves(models, _WIDTHS, repeats=_REPEATS)))


def _room_for_a_split(xml: Path) -> bool:
    """Whether the memory left holds the two copies a split runs with, and one more beside them: on
    a 4 GB machine the 1.5B's split never does, and timing it there only lengthens a preparation."""
    return available_bytes() >= memory_for_copies(_weights(xml), 2)


def _room_for_all(xml: Path, copies: int) -> bool:
    """Whether the memory left holds `copies` compiled copies of the model, and one more beside them."""
    return available_bytes() >= memory_for_copies(_weights(xml), copies)


def _weights(xml: Path) -> int:
    return sum(path.stat().st_size for path in xml.parent.glob("*.bin"))


def tune(xml: Path, folder: Path, token_ids: np.ndarray | None = None, device: str = "CPU",
         report: ProgressFn = ignore, name: str = "the model", steps_only: bool = False,
         cache_dir: Path | None = None, candidates: tuple[str, ...] | None = None,
         stopped: Callable[[], bool] | None = None, handed: dict[str, object] | None = None) -> Tuning:
    """Time each candidate (or read what was kept in `folder`) and choose one per method;
    `steps_only` for a model that only ever steps (a draft): its one-token step alone is timed.
    `cache_dir`: OpenVINO's compiled-blob cache, where the model is compiled once for all candidates
    (the CPU plugin keeps one blob per model and applies these properties as it reads it back: the
    candidates after the first, and the chosen one's compile after tuning, read it back quickly).

    Candidates that fail to compile or run here (a CPU without the instructions one needs) are
    left out, and so is one the device applies exactly as an earlier one (its twin: not timed, its
    twin's curve kept under its key); ValueError when none runs. `candidates`: only these (a
    server's first start times FIRST alone and the rest when no race runs). `stopped`: checked
    between candidates and widths, Cancelled once it says so (each candidate timed before is kept).
    `handed`: where one candidate alone is timed now, its compiled copy is put in it (candidate ->
    CompiledLM) rather than freed, so that the caller need not compile it again. Speculation gets
    settings of its own only where the memory holds both copies, checked against the host's drift."""
    widths = (1,) if steps_only else _WIDTHS
    chosen = {name: CANDIDATES[name] for name in (candidates or CANDIDATES)}
    curves: dict[str, CallCurve] = {}
    keys: dict[str, str] = {}  # candidate -> the key its curve is kept under
    timed: dict[str, str] = {}  # the key a curve timed now is kept under -> its candidate
    twins: dict[str, str] = {}  # the key of a candidate this CPU runs as another -> that other candidate
    applied: dict[object, str] = {}  # what a copy compiled now said it applies -> its candidate
    errors: list[str] = []
    for number, (candidate, settings) in enumerate(chosen.items(), 1):
        if stopped is not None and stopped():
            raise Cancelled("tuning stopped: the cores are wanted")
        key = _key(xml, device, token_ids, settings, steps_only)
        curve = kept = kept_curve(folder, key)
        twin = None
        if kept is not None:  # a copy of an earlier candidate's curve is what its twin keeps
            twin = next((other for other, earlier in curves.items() if earlier == kept), None)
        else:
            title = (f"Timing {name} compiled {len(chosen)} ways on this CPU (once per machine) — {number}: {candidate}"
                     if len(chosen) > 1 else f"Timing {name} compiled as {candidate} on this CPU (once per machine)")
            try:
                with timing_alone(folder), phase(report, title):
                    model = compile_model(xml, DEFAULT_PRECISION, device, cache_dir, token_ids, settings)
                    said = _applied(model)
                    twin = applied.get(said) if said is not None else None
                    if twin is None:
                        curve = measure_curve(model, widths, repeats=_REPEATS, stopped=stopped)
                        keep_curve(folder, key, curve)  # kept at once: a tuning stopped later need not time it again
                        if said is not None:
                            applied[said] = candidate
                    if handed is not None and len(chosen) == 1:
                        handed[candidate] = model
                    del model  # freed before the next candidate is compiled: one copy at a time
            except RuntimeError as error:
                errors.append(f"{candidate}: {reason(error)}")
                continue
        if twin is not None:  # the same settings on this CPU (f32 where it has no bf16): nothing to time
            twins[key] = twin
            continue
        if kept is None:
            timed[key] = candidate
        curves[candidate], keys[candidate] = curve, key
    if not curves:
        raise ValueError(f"OpenVINO could not compile {name} ({xml}) with any of its settings: {'; '.join(errors)}. "
                         "Its files may be damaged (convert it again), or this CPU cannot run it.")
    steps, rounds = _choose(curves, steps_only)
    if steps != rounds and not _room_for_a_split(xml):
        # Speculation could never have its copy here (LoadedModel.for_rounds): checking the split is time lost.
        rounds = steps
    if steps != rounds and timed:
        # Two copies of the model, each method its own: a choice worth checking against the host's drift.
        # Every candidate is timed again, so that what is kept chooses the same on the next start.
        side_by_side = _room_for_all(xml, len(curves))
        if side_by_side:
            try:
                with timing_alone(folder), phase(report, f"Timing {name}'s {len(curves)} settings side by side, in turns"):
                    curves.update(_side_by_side(list(curves), xml, device, token_ids, cache_dir))
                timed = {keys[candidate]: candidate for candidate in curves}  # all timed again: all kept anew
            except RuntimeError:  # they ran one at a time: time them again that way
                side_by_side = False
        if not side_by_side:  # one copy at a time: each step timed again, later, each curve scaled to its quicker one
            with timing_alone(folder), phase(report, f"Timing {name}'s step again each way, in reverse order"):
                for candidate in reversed(list(timed.values())):
                    curves[candidate] = _at_its_quickest(curves[candidate], xml, device, token_ids, CANDIDATES[candidate], cache_dir)
        steps, rounds = _choose(curves, steps_only)
    for key, candidate in timed.items():
        keep_curve(folder, key, curves[candidate])
    for key, candidate in twins.items():
        if candidate in timed.values():  # a copy of its twin's curve: the next start reads it rather than compile it
            keep_curve(folder, key, curves[candidate])
    return Tuning(steps, rounds, curves)


def is_kept(candidate: str, xml: Path, folder: Path, token_ids: np.ndarray | None = None, device: str = "CPU",
            steps_only: bool = False) -> bool:
    """Whether `candidate`'s timing is kept in `folder` (an earlier start timed it)."""
    return kept_curve(folder, _key(xml, device, token_ids, CANDIDATES[candidate], steps_only)) is not None


def _key(xml: Path, device: str, token_ids: np.ndarray | None, settings: dict[str, str], steps_only: bool) -> str:
    """The key one candidate's tuning curve is kept under."""
    properties = compile_properties(DEFAULT_PRECISION, device, token_ids, settings)
    return calibration_key(xml, properties, "tuning, steps only" if steps_only else "tuning")


def _applied(model) -> object | None:
    """What the device applies for the properties the candidates set, read back from a compiled copy
    (None: it will not say). Two candidates it applies alike run alike: on a CPU without bf16 (an
    AVX2-only one) "groups of 128" and "f32, groups of 128" both compute in f32, so the second is the
    first's twin and is not timed. The KV cache's precision, which the precision can bring along, is
    compared too."""
    return model.applied({"KV_CACHE_PRECISION", *(name for settings in CANDIDATES.values() for name in settings)})


def _choose(curves: dict[str, CallCurve], steps_only: bool) -> tuple[str, str]:
    """The candidate for one-token steps and the one for verify rounds: one for both unless one is
    clearly faster at steps and another clearly faster at rounds."""
    steps = min(curves, key=lambda candidate: curves[candidate].step)
    if steps_only:
        return steps, steps  # no verify call timed: nothing to choose for rounds
    rounds = max(curves, key=lambda candidate: rounds_rate(curves[candidate]))
    if rounds_rate(curves[rounds]) < _WORTH_A_SECOND_COPY * rounds_rate(curves[steps]):
        return steps, steps  # rounds within noise of each other: the quickest step serves both
    if curves[rounds].step <= _SAME_STEP * curves[steps].step:
        return rounds, rounds  # steps within noise of each other: the best rounds serve both
    return steps, rounds
