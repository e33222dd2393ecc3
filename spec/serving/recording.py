"""A race's recording: what happened, step by step, on the compute's own clock.

The race writes it as it computes (spec.serving.scheduler); any number of visitors watch it
(spec.serving.playback), live, joined part-way or replayed later. Writing a frame is a few list
appends: the race never waits on a viewer, and many viewers of one race cost one computation.
"""
from __future__ import annotations

import copy
import itertools
import threading
import time
from dataclasses import dataclass, field

from spec.config import AUTOREGRESSIVE, SPECULATIVE
from spec.decoding.metrics import Stats
from spec.serving.race import DONE, LOADING, RACING, STOPPED, WAITING, Lane, RaceUpdate, Verdict

FAILED = "failed"  # the race could not run (a sentence in Recording.error); with DONE and STOPPED, an end
ENDED = (DONE, STOPPED, FAILED)


@dataclass(frozen=True)
class Frame:
    """One step of one lane, as it happened."""

    at: float  # wall-clock seconds since the race began racing: the pace a viewer sees it at
    lane: str  # AUTOREGRESSIVE or SPECULATIVE
    pieces: tuple[tuple[str, str], ...]  # (text, provenance) this step added
    token_ids: tuple[int, ...]
    stats: Stats  # the lane's statistics after this step (a copy: the engine updates its own in place)
    finished: bool

    @property
    def nbytes(self) -> int:
        """Roughly what the frame holds in memory: what the store's byte budget counts."""
        return 400 + 8 * len(self.stats.accepted_histogram) + sum(60 + len(text) for text, _ in self.pieces) + 36 * len(self.token_ids)


_ids = itertools.count(1)


@dataclass(eq=False)
class Recording:
    """Everything a race produced, growing while it runs; read by its viewers under `changed`."""

    key: tuple | None  # what makes two requests the same race (None: never shared, e.g. sampled without a seed)
    request: object = field(default=None, repr=False)  # the RaceRequest it computes (spec.serving.scheduler)
    preheat: bool = False  # raced before anyone asked (the page's examples); yields to visitors' races
    id: int = field(default_factory=lambda: next(_ids))
    phase: str = WAITING  # WAITING, LOADING, RACING, then DONE, STOPPED or FAILED
    frames: list[Frame] = field(default_factory=list)
    loading: dict[str, str] = field(default_factory=dict)  # role -> latest progress message
    verdict: Verdict | None = None
    error: str | None = None  # FAILED: the sentence a visitor reads
    created: float = field(default_factory=time.time)  # when it was asked for
    started: float | None = None  # wall-clock time (time.time) when it began racing: "run at 14:02"
    seconds: float | None = None  # wall-clock seconds from the first step to the verdict, once it ended
    viewers: int = 0  # visitors watching it now
    cancel: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition, repr=False)
    nbytes: int = 0
    _began: float | None = field(default=None, repr=False)  # time.monotonic() at the first step
    # lane -> (steps, pieces, token ids) already in frames
    _counts: dict = field(default_factory=lambda: {AUTOREGRESSIVE: (0, 0, 0), SPECULATIVE: (0, 0, 0)}, repr=False)

    @property
    def ended(self) -> bool:
        return self.phase in ENDED

    def record(self, update: RaceUpdate) -> None:
        """Take one of the race's updates: the step it made becomes a frame; loading and the verdict are kept."""
        with self.changed:
            if update.phase == LOADING:
                self.phase, self.loading = LOADING, dict(update.loading)
            for lane in (update.autoregressive, update.speculative):
                if lane is not None and len(lane.trace) > self._counts[lane.mode][0]:
                    self._add_frame(lane)
            if update.phase == RACING:
                self.phase = RACING
            elif update.phase in (DONE, STOPPED):
                self.phase, self.verdict = update.phase, update.verdict
                self.seconds = time.monotonic() - self._began if self._began is not None else 0.0
            self.changed.notify_all()

    def _add_frame(self, lane: Lane) -> None:  # with the lock held
        now = time.monotonic()
        if self._began is None:
            self._began, self.started = now, time.time()
        _, pieces, ids = self._counts[lane.mode]
        stats = copy.copy(lane.stats)
        stats.accepted_histogram = list(stats.accepted_histogram)
        frame = Frame(now - self._began, lane.mode, tuple(lane.pieces[pieces:]), tuple(lane.token_ids[ids:]), stats, lane.finished)
        self._counts[lane.mode] = (len(lane.trace), len(lane.pieces), len(lane.token_ids))
        self.frames.append(frame)
        self.nbytes += frame.nbytes

    def fail(self, message: str) -> None:
        with self.changed:
            self.phase, self.error = FAILED, message
            self.changed.notify_all()

    def stop(self, verdict: Verdict) -> None:
        """End a race that never raced (cancelled while it waited or loaded)."""
        with self.changed:
            self.phase, self.verdict = STOPPED, verdict
            self.changed.notify_all()

    def touch(self) -> None:
        """Wake its viewers (its place in line changed)."""
        with self.changed:
            self.changed.notify_all()
