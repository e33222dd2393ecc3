"""Preparing the models the Space offers before it starts (`python -m spec prepare`).

The Dockerfile runs it at build time (`--convert-only`), so the image holds the converted IR and a
Space races within a minute of starting: compiled blobs and timings belong to the CPU that made
them, so the Space makes its own on its first start. Otherwise each model is found or built and
compiled the way the Space loads it (spec.models.registry.load_model), so the conversion cache and
OpenVINO's compiled-blob cache both land in SPEC_MODELS_DIR.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from spec.config import ModelKey
from spec.errors import ModelError
from spec.progress import ProgressFn
from spec.serving.presets import CUSTOM, PRESETS, decided


@dataclass(frozen=True)
class Plan:
    # The models to prepare, in order; a draft whose format this CPU has to time is MEASURED, its
    # format timed (spec.serving.presets.decided) while the other models convert.
    keys: tuple[ModelKey, ...]
    skipped: tuple[str, ...]  # sentences saying which models are left out, and why


def plan(refs: list[str], offline: bool, hub_reachable: Callable[[], bool], device: str = "CPU",
         weight_format: str | None = None, precision: str | None = None) -> Plan:
    """What `prepare` does: the models `refs` names, or else every preset's models, those that need
    the Hub only when it answers (`hub_reachable` is asked once, and only then) and `offline` is False.

    A preset's model gets that preset's weight format and precision, as the Space loads it; a
    named one gets `weight_format` and `precision` (the engine's defaults when None).
    """
    if refs:
        options = {name: value for name, value in (("weight_format", weight_format), ("precision", precision)) if value}
        return Plan(tuple(dict.fromkeys(ModelKey(ref, device=device, **options) for ref in refs)), ())
    keys = {False: {}, True: {}}  # needs the Hub -> ModelKey -> None (an ordered set)
    for preset in PRESETS:
        if preset.label == CUSTOM:
            continue
        for key in preset.keys(preset.target, preset.draft, device, measure=False):
            if key is not None:
                keys[preset.needs_hub].setdefault(key)
    hub_keys = [key for key in keys[True] if key not in keys[False]]
    if not hub_keys:
        return Plan(tuple(keys[False]), ())
    from spec.models import hub  # imported late: huggingface_hub is slow to import

    names = ", ".join(key.ref for key in hub_keys)
    if offline:
        return Plan(tuple(keys[False]), (f"Skipped the Hub pairs' models ({names}): --offline prepares only the offline pairs.",))
    if not hub_reachable():
        return Plan(tuple(keys[False]), (
            f"Skipped the Hub pairs' models ({names}): {hub.hub_name()} cannot be reached from here; the Space "
            "downloads them on first use if it can reach it.",
        ))
    return Plan(tuple(keys[False]) + tuple(hub_keys), ())


def prepare(keys: tuple[ModelKey, ...], progress: ProgressFn, compile: bool = True) -> list[str]:
    """Find or build, and unless `compile` is False compile, each model; returns one sentence per
    model that failed. Compiling also leaves OpenVINO's compiled blob and this CPU's timings in the
    models folder: worth it where the models will run, not on a machine that only builds an image.
    The models convert side by side (one's source is written while another exports, exports take
    turns: spec.models.conversion_cache; a draft's format is timed meanwhile, before its own
    conversion), then compile one after the other, each timed alone."""
    from spec.models.registry import convert_model, load_model  # imported late: OpenVINO and Transformers are slow to import

    def convert(key: ModelKey) -> ModelKey:
        key = decided(key, progress)
        convert_model(key, progress)
        return key

    failures: dict[ModelKey, str] = {}
    converted: list[ModelKey] = []
    pool = ThreadPoolExecutor(max(1, len(keys)), thread_name_prefix="convert")
    try:
        for key, done in [(key, pool.submit(convert, key)) for key in keys]:
            failures.update(_failed(key, done.exception()))
            converted += [done.result()] if done.exception() is None else []
    except BaseException:  # Ctrl-C: say so now, not after the conversion under way ends
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    for key in converted if compile else ():
        try:
            load_model(key, progress).for_rounds(progress)  # speculation's own copy, where tuning gave it one
        except (ModelError, MemoryError) as error:
            failures.update(_failed(key, error))
    return list(failures.values())


def _failed(key: ModelKey, error: BaseException | None) -> dict[ModelKey, str]:
    """{key: what went wrong} for a ModelError or a MemoryError, {} for None; anything else is raised."""
    if error is None:
        return {}
    if isinstance(error, ModelError):
        return {key: str(error)}
    if isinstance(error, MemoryError):
        return {key: f"Preparing {key.ref} ran out of memory: build on a machine with more RAM, or skip "
                     "preparing at build time (the Space then prepares its models on first start)."}
    raise error
