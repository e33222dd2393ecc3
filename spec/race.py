"""The race: autoregressive decoding against speculative sampling on one prompt, step by step.

Both methods run in this process, by alternating steps: whichever has used less compute time goes
next, so they never compete for the CPU and both advance at their true relative pace. Each
method's clock runs only while it computes (see spec.generation), so the consumer's rendering and
the other method's turn are not charged to it. Models load (and warm up) before any clock starts.

`race` yields a RaceUpdate per step (and while models load); the Space renders them.
"""
from __future__ import annotations

import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Iterator

from spec.config import AUTOREGRESSIVE, SPECULATIVE, GenerationConfig, ModelKey
from spec.engine import generate
from spec.generation import Step
from spec.metrics import Stats
from spec.registry import LoadedModel, ModelRegistry

LOADING, RACING, DONE, STOPPED = "loading", "racing", "done", "stopped"  # RaceUpdate.phase


@dataclass
class Lane:
    """One method's side of the race: everything it has produced so far."""

    mode: str  # AUTOREGRESSIVE or SPECULATIVE
    steps: Iterator[Step] = field(repr=False)
    pieces: list[tuple[str, str]] = field(default_factory=list)  # (text, provenance) in order
    token_ids: list[int] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    trace: list[tuple[float, int]] = field(default_factory=list)  # (compute seconds, new tokens) after each step
    finished: bool = False

    @property
    def seconds(self) -> float:
        return self.stats.seconds

    def advance(self) -> None:
        """Run this method's next step."""
        try:
            step = next(self.steps)
        except StopIteration:
            self.finished = True
            return
        self.stats = step.stats
        self.token_ids += step.token_ids
        self.pieces += step.pieces
        self.trace.append((step.stats.seconds, step.stats.new_tokens))
        self.finished = step.finished


@dataclass(frozen=True)
class Verdict:
    """Who won, by how much, and whether the texts agree."""

    speedup: float | None  # speculative tokens/s ÷ autoregressive tokens/s; None without tokens
    identical: bool | None  # greedy only: the same tokens; None when sampling (texts may rightly differ)
    first_difference: int | None  # index of the first differing token, when not identical
    stopped: bool  # cancelled before the end


@dataclass
class RaceUpdate:
    phase: str  # LOADING, RACING, DONE or STOPPED
    autoregressive: Lane | None = None
    speculative: Lane | None = None
    loading: dict[str, str] = field(default_factory=dict)  # role ("Target", "Draft") -> latest progress message
    loading_seconds: float = 0.0
    verdict: Verdict | None = None  # set when the race is DONE or STOPPED


def race(
    prompt: str,
    target_key: ModelKey,
    draft_key: ModelKey | None,
    drafter: str,
    config: GenerationConfig,
    registry: ModelRegistry,
    cancel: threading.Event,
) -> Iterator[RaceUpdate]:
    """Load the pair (yielding progress), then race the two methods (yielding a RaceUpdate per step)."""
    models = yield from load_pair(registry, target_key, draft_key, cancel)
    if models is None:
        yield RaceUpdate(STOPPED, verdict=Verdict(None, None, None, True))
        return
    target, draft = models
    yield from run_race(prompt, target, draft, drafter, config, cancel)


def run_race(
    prompt: str,
    target: LoadedModel,
    draft: LoadedModel | None,
    drafter: str,
    config: GenerationConfig,
    cancel: threading.Event,
) -> Iterator[RaceUpdate]:
    """The race proper: the method that has used less compute time takes the next step."""
    ar = Lane(AUTOREGRESSIVE, generate(prompt, target, config, AUTOREGRESSIVE, cancel=cancel))
    sp = Lane(SPECULATIVE, generate(prompt, target, config, SPECULATIVE, drafter, draft, cancel))
    try:
        while not (ar.finished and sp.finished):
            # On a tie (the very first step) speculative goes first: any cold-start cost the first
            # call still pays then counts against the method being shown off, not the baseline.
            lane = min((lane for lane in (sp, ar) if not lane.finished), key=lambda lane: lane.seconds)
            lane.advance()
            if not (ar.finished and sp.finished):
                yield RaceUpdate(RACING, ar, sp)
        result = verdict(ar, sp, config)
        yield RaceUpdate(STOPPED if result.stopped else DONE, ar, sp, verdict=result)
    finally:
        # Closing frees each generation's KV cache now, also when the visitor left or pressed Stop.
        ar.steps.close()
        sp.steps.close()


def verdict(ar: Lane, sp: Lane, config: GenerationConfig) -> Verdict:
    """Compare two finished lanes."""
    stopped = "cancelled" in (ar.stats.stop_reason, sp.stats.stop_reason)
    ar_speed, sp_speed = ar.stats.tokens_per_second, sp.stats.tokens_per_second
    speedup = sp_speed / ar_speed if ar_speed > 0 and sp_speed > 0 else None
    if not config.greedy:
        return Verdict(speedup, None, None, stopped)
    if ar.token_ids == sp.token_ids:
        return Verdict(speedup, True, None, stopped)
    pairs = zip(ar.token_ids, sp.token_ids)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ar.token_ids), len(sp.token_ids)))
    return Verdict(speedup, False, first, stopped)


_warmed: weakref.WeakSet = weakref.WeakSet()  # compiled models whose first inference has run


def warm_up(model: LoadedModel) -> LoadedModel:
    """Run a throwaway inference once per compiled model.

    A model's first call pays one-off set-up costs (tens of ms); the race must not charge them
    to whichever method happens to go first.
    """
    if model.model not in _warmed:
        cache = model.model.new_cache()
        cache.forward(list(range(8)))  # a prompt-sized call, then a one-token decode call
        cache.forward([0])
        cache.release()  # the first race gets this warm infer request
        _warmed.add(model.model)
    return model


def load_pair(
    registry: ModelRegistry, target_key: ModelKey, draft_key: ModelKey | None, cancel: threading.Event
) -> Iterator[RaceUpdate]:
    """Get the pair from the shared registry, warmed up; yields LOADING updates while it loads.

    Returns (target, draft or None), or None when stopped while loading (the load goes on in the
    background, so the next race starts sooner).
    """
    wanted = [("Target", target_key)] + ([("Draft", draft_key)] if draft_key else [])
    if {key for _, key in wanted} <= set(registry.loaded()):
        models = [warm_up(registry.get(key)) for _, key in wanted]
        return models[0], (models[1] if draft_key else None)

    updates: queue.Queue = queue.Queue()
    result: dict = {}

    def work() -> None:
        try:
            models = []
            for role, key in wanted:
                def progress(message: str, fraction: float | None, role=role) -> None:
                    percent = f" {fraction:.0%}" if fraction is not None else ""
                    updates.put((role, f"{message}{percent}"))

                updates.put((role, f"{key.ref}: starting"))
                models.append(warm_up(registry.get(key, progress)))
                updates.put((role, f"{key.ref}: ready"))
            result["models"] = models
        except BaseException as error:  # handed to the caller's thread, which raises it
            result["error"] = error
        finally:
            updates.put(None)

    threading.Thread(target=work, name="load-models", daemon=True).start()
    started, status = time.monotonic(), {}
    while True:
        try:
            update = updates.get(timeout=0.5)
        except queue.Empty:
            update = ...
        if update is None:
            break
        if update is not ...:
            status[update[0]] = update[1]
        if cancel.is_set():
            return None
        yield RaceUpdate(LOADING, loading=dict(status), loading_seconds=time.monotonic() - started)
    if "error" in result:
        raise result["error"]
    models = result["models"]
    return models[0], (models[1] if draft_key else None)
