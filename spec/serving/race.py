"""The race: autoregressive decoding against speculative sampling on one prompt, step by step.

Both methods run in this process, taking turns: whichever has used less compute time goes next
and keeps going until it is TURN_SECONDS ahead, so they never compete for the CPU and both advance
at their true relative pace. Each method's clock runs only while it computes (see
spec.decoding.generation), so the consumer's rendering and the other method's turn are not charged
to it. Its pair is loaded and warmed up first (spec.serving.loading), its prompt checked against
the server's limits (spec.serving.limits); the two lanes stop together when the race's time runs out.

`run_race` yields a RaceUpdate per step and the verdict at the end (spec.serving.verdict).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

from spec.config import AUTOREGRESSIVE, SPECULATIVE, GenerationConfig
from spec.decoding.engine import LearnedState, stream
from spec.models.registry import LoadedModel
from spec.serving.lanes import Lane
from spec.serving.phases import RacePhase
from spec.serving.verdict import OUT_OF_TIME, Verdict, verdict

# How far ahead in compute time a lane runs before the other takes over: switching after every
# step makes each step dearer, and the recording shows both lanes moving together all the same
# (spec.serving.recording).
TURN_SECONDS = 0.5


@dataclass
class RaceUpdate:
    """Where a race stands after a step (or, LOADING, while its pair loads)."""

    phase: RacePhase  # LOADING, RACING, DONE or STOPPED
    autoregressive: Lane | None = None
    speculative: Lane | None = None
    loading: dict[str, str] = field(default_factory=dict)  # role ("Target", "Draft") -> latest progress message
    verdict: Verdict | None = None  # set when the race is DONE or STOPPED


def run_race(
    prompt: str,
    target: LoadedModel,
    draft: LoadedModel | None,
    drafter: str,
    config: GenerationConfig,
    cancel: threading.Event,
    max_seconds: float | None = None,
    turn: float | None = None,
    learned: LearnedState | None = None,
) -> Iterator[RaceUpdate]:
    """The race proper: the method that has used less compute time takes the next steps, until it
    is `turn` seconds ahead, and so on until both finish, `cancel` is set, or `max_seconds` of
    wall-clock time have passed. `turn` defaults to TURN_SECONDS, read at call time. `learned`:
    what earlier races learned about the target, which the speculative lane starts from and adds to
    (None: it learns afresh)."""
    turn = TURN_SECONDS if turn is None else turn
    ar = Lane(AUTOREGRESSIVE, stream(prompt, target, config, cancel=cancel))
    sp = Lane(SPECULATIVE, stream(prompt, target, config, draft=draft, drafter=drafter, cancel=cancel, learned=learned))
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    out_of_time = False
    # Speculative goes first: any cold-start cost the first call still pays then counts against
    # the method being shown off, not the baseline.
    lane, other = sp, ar
    try:
        while not (ar.finished and sp.finished):
            if deadline is not None and time.monotonic() > deadline:
                out_of_time = True
                break
            if lane.finished or (not other.finished and lane.seconds > other.seconds + turn):
                lane, other = other, lane
            lane.advance()
            if not (ar.finished and sp.finished):
                yield RaceUpdate(RacePhase.RACING, ar, sp)
        result = verdict(ar, sp, config, OUT_OF_TIME if out_of_time else None)
        yield RaceUpdate(RacePhase.STOPPED if result.stopped else RacePhase.DONE, ar, sp, verdict=result)
    finally:
        # Closing frees each generation's KV cache now, also when the visitor left or pressed Stop (a lane
        # that never took a step gives its cache back as it is dropped: spec.decoding.engine._releasing).
        ar.steps.close()
        sp.steps.close()
