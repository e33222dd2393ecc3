"""Before the first visitor: the server's pairs loaded (prepared on their first use, minutes) and
warmed up, then the page's examples raced, so that a workshop's first clicks are replays."""
from __future__ import annotations

import functools
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from spec.config import ModelKey
from spec.models.draft_format import draft_format
from spec.models.registry import ModelRegistry
from spec.progress import TerminalProgress
from spec.serving.loading import warm_up
from spec.serving.presets import Preset
from spec.serving.recording import RaceRequest
from spec.serving.scheduler import Scheduler

log = logging.getLogger("app")


def preparation(registry: ModelRegistry, keys: list[ModelKey]) -> tuple[str | None, bool]:
    """Where preparing `keys` for their first use stands: the latest progress message (None while
    none is being prepared), and whether all of them are loaded."""
    latest = next((p for p in (registry.progress(key) for key in keys) if p is not None), None)
    return (latest[0] if latest is not None else None), set(keys) <= set(registry.loaded())


def preload(registry: ModelRegistry, pairs: dict[str, Callable[[], list[ModelKey]]], progress: TerminalProgress) -> set[str]:
    """Load and warm up each pair (label -> its model keys, asked for when its turn comes: the
    draft's format can take a measurement to know) in order; returns the labels that loaded. A pair
    that fails is logged in one line and left for its first race to report."""
    ready = set()
    with registry.preparing():  # the server times what loading left for later once all of it is done
        for label, keys in pairs.items():
            if _load(registry, label, keys, progress):
                ready.add(label)
    return ready


def preload_presets(registry: ModelRegistry, presets: tuple[Preset, ...], device: str, progress: TerminalProgress) -> set[str]:
    """preload() for these presets' own pairs (each once, in order); returns the labels that loaded.
    The draft's format, where a first start has to time it, is timed while the first pair loads."""
    if device.upper().startswith("CPU"):  # elsewhere the draft is INT4, untimed
        threading.Thread(target=draft_format, name="draft-format", daemon=True).start()
    return preload(registry, {preset.label: functools.partial(preset.own_keys, device) for preset in dict.fromkeys(presets)}, progress)


def _load(registry: ModelRegistry, label: str, pair_keys: Callable[[], list[ModelKey]], progress: TerminalProgress) -> bool:
    """Convert, load and warm up one pair; whether it loaded."""
    try:
        keys = pair_keys()
        # Converted first, all of them: a conversion never runs beside a compiled model. Side by
        # side: one model's source is written, and a draft's tokens counted, while the other exports.
        converting = [key for key in keys if not key.hub_only]
        if converting:
            with ThreadPoolExecutor(len(converting), thread_name_prefix="convert") as pool:
                for done in [pool.submit(registry.convert, key, progress) for key in converting]:
                    done.result()
        for key in keys:  # speculation's own copy too, where tuning gave it one: compiled before Ready, not in a race
            warm_up(registry.get(key, progress)).for_rounds(progress)
        log.info("Ready: %s", label)
        return True
    except Exception as error:  # noqa: BLE001 -- the first race on this pair says what went wrong
        log.warning("Could not load %s: %s", label, str(error).splitlines()[0] if str(error) else type(error).__name__)
        return False
    finally:
        progress.close()


def preheat(scheduler: Scheduler, examples: Callable[[], list[RaceRequest]]) -> int:
    """Queue the examples' races behind any visitor's; returns how many were queued."""
    queued = scheduler.preheat(examples())
    log.info("Preheating: %d examples queued behind any visitor's race", queued)
    return queued


def serve_below_races(nice: int = 10) -> bool:
    """Lower the calling thread's CPU priority by `nice`, and so that of every thread it starts
    from now on (the web server's, each viewer's): where they compete with a race for the cores,
    the race wins. Threads started before (the scheduler's workers and the preload, and OpenVINO's
    own, which those start) keep theirs. Returns False where the system does not allow it."""
    try:
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, os.getpriority(os.PRIO_PROCESS, me) + nice)
        return True
    except (AttributeError, OSError):  # not Linux, or not permitted: serve at the same priority
        return False


# Gradio's queue looks for new work and for progress to send many times a second while it has
# none, waking its thread beside a race's computation. Polling less costs a click at most
# QUEUE_POLL_SECONDS before it starts; the page shows no gr.Progress.
QUEUE_POLL_SECONDS, PROGRESS_POLL_SECONDS = 0.05, 0.5


def poll_less(queue: object) -> bool:
    """Make Gradio's queue (Blocks._queue) look for work at the intervals above; False when this
    Gradio's queue has no such settings (it then polls as it always did)."""
    names = ("sleep_when_free", "progress_update_sleep_when_free")
    if not all(isinstance(getattr(queue, name, None), (int, float)) for name in names):
        return False
    queue.sleep_when_free, queue.progress_update_sleep_when_free = QUEUE_POLL_SECONDS, PROGRESS_POLL_SECONDS
    return True
