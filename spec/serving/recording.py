"""A race's recording: what happened, step by step, on the compute's own clock.

The race writes it as it computes (spec.serving.scheduler); any number of visitors watch it
(spec.serving.playback), live, joined part-way or replayed later. Writing a frame is a few list
appends: the race never waits on a viewer, and many viewers of one race cost one computation.

The lanes compute in turns (spec.serving.race.TURN_SECONDS), but a frame is timed as if they
had taken turns step by step: a step that ended at `c` seconds of its lane's compute time is shown
at c + min(c, the other lane's compute time), the moment it would have ended had neither lane ever
run ahead. So both lanes move together on the page, each at its own pace. A frame is written once
the other lane has computed as far (or finished), which keeps the frames in the order they are shown.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
import time
from dataclasses import dataclass, field

from spec.config import AUTOREGRESSIVE, SPECULATIVE, GenerationConfig, ModelKey
from spec.decoding.metrics import Stats
from spec.models.runtime import cpu_model, emulated_class
from spec.serving.lanes import Lane
from spec.serving.phases import RacePhase
from spec.serving.race import RaceUpdate
from spec.serving.verdict import Verdict


@dataclass(frozen=True)
class Frame:
    """One step of one lane, as it happened."""

    at: float  # seconds since the race began racing, the lanes' turns evened out: the pace a viewer sees it at
    lane: str  # AUTOREGRESSIVE or SPECULATIVE
    pieces: tuple[tuple[str, str], ...]  # (text, provenance) this step added
    token_ids: tuple[int, ...]
    stats: Stats  # the lane's statistics after this step (the Step's own copy)
    finished: bool

    @property
    def nbytes(self) -> int:
        """Roughly what the frame holds in memory: what the store's byte budget counts."""
        return 400 + 8 * len(self.stats.accepted_histogram) + sum(60 + len(text) for text, _ in self.pieces) + 36 * len(self.token_ids)


@dataclass(frozen=True)
class RaceRequest:
    """Everything that decides what a race computes."""

    prompt: str
    target: ModelKey
    draft: ModelKey | None
    drafter: str
    config: GenerationConfig

    @property
    def key(self) -> tuple | None:
        """Equal for requests that compute the same race; None when it cannot be shared (sampled
        without a seed: two such races rightly differ)."""
        config = self.config
        if config.greedy:  # greedy ignores the seed and the sampling filters: the same race whatever they say
            config = dataclasses.replace(config, seed=None, top_k=0, top_p=1.0)
        elif config.seed is None:
            return None
        return (self.prompt, self.target, self.draft, self.drafter, dataclasses.astuple(config))


_ids = itertools.count(1)


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """This server's CPU as the system names it ("Intel(R) Xeon(R) Platinum 8480+"): what a replay is
    labelled with; a run emulating a smaller CPU class (bench.tools.cpu_class) says so."""
    name = cpu_model()
    emulated = emulated_class()
    return f"{name} emulating {emulated}" if emulated else name


@dataclass(eq=False)
class Recording:
    """Everything a race produced, growing while it runs; read by its viewers under `changed`."""

    key: tuple | None  # what makes two requests the same race (None: never shared, e.g. sampled without a seed)
    request: RaceRequest | None = field(default=None, repr=False)  # what it computes
    preheat: bool = False  # raced before anyone asked (the page's examples); yields to visitors' races
    id: int = field(default_factory=lambda: next(_ids))
    phase: RacePhase = RacePhase.WAITING
    frames: list[Frame] = field(default_factory=list)
    loading: dict[str, str] = field(default_factory=dict)  # role -> latest progress message
    verdict: Verdict | None = None
    error: str | None = None  # FAILED: the sentence a visitor reads
    created: float = field(default_factory=time.time)  # when it was asked for
    started: float | None = None  # wall-clock time (time.time) when it began racing: "run at 14:02"
    seconds: float | None = None  # wall-clock seconds from the first step to the verdict, once it ended
    machine: str = field(default_factory=lambda: cpu_name())  # the CPU it ran on (a replay kept on disk may come from another)
    viewers: int = 0  # visitors watching it now
    cancel: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition, repr=False)
    nbytes: int = 0
    _began: float | None = field(default=None, repr=False)  # time.monotonic() at the first step
    # lane -> (steps, pieces, token ids) already taken from the race
    _counts: dict = field(default_factory=lambda: {AUTOREGRESSIVE: (0, 0, 0), SPECULATIVE: (0, 0, 0)}, repr=False)
    # lane -> its compute seconds and whether it finished, as far as the race has said; and its
    # steps not yet in frames, waiting for the other lane to compute as far
    _clock: dict = field(default_factory=lambda: {AUTOREGRESSIVE: (0.0, False), SPECULATIVE: (0.0, False)}, repr=False)
    _pending: dict = field(default_factory=lambda: {AUTOREGRESSIVE: [], SPECULATIVE: []}, repr=False)

    @property
    def ended(self) -> bool:
        return self.phase.ended

    def record(self, update: RaceUpdate) -> None:
        """Take one of the race's updates: the steps it made become frames; loading and the verdict are kept."""
        with self.changed:
            if update.phase == RacePhase.LOADING:
                self.phase, self.loading = RacePhase.LOADING, dict(update.loading)
            for lane in (update.autoregressive, update.speculative):
                if lane is not None:
                    self._take(lane)
            if update.phase == RacePhase.RACING:
                self.phase = RacePhase.RACING
            elif update.phase in (RacePhase.DONE, RacePhase.STOPPED):
                self._release(everything=True)
                self.phase, self.verdict = update.phase, update.verdict
                self.seconds = time.monotonic() - self._began if self._began is not None else 0.0
            self._release()
            self.changed.notify_all()

    def _take(self, lane: Lane) -> None:  # with the lock held
        """Keep the lane's new step, if any, until it can be shown in order."""
        self._clock[lane.mode] = (lane.stats.seconds, lane.finished)
        if len(lane.trace) <= self._counts[lane.mode][0]:
            return
        if self._began is None:
            self._began, self.started = time.monotonic(), time.time()
        _, pieces, ids = self._counts[lane.mode]
        # lane.stats is its latest Step's own copy: later steps leave it as it is.
        self._pending[lane.mode].append(Frame(0.0, lane.mode, tuple(lane.pieces[pieces:]), tuple(lane.token_ids[ids:]), lane.stats, lane.finished))
        self._counts[lane.mode] = (len(lane.trace), len(lane.pieces), len(lane.token_ids))

    def _release(self, everything: bool = False) -> None:  # with the lock held
        """Move kept steps into frames, earliest compute time first, each once the other lane has
        computed as far or finished (or, `everything`, because the race ended)."""
        while True:
            waiting = [frames[0] for frames in self._pending.values() if frames]
            if not waiting:
                return
            frame = min(waiting, key=lambda f: f.stats.seconds)
            other, other_finished = self._clock[SPECULATIVE if frame.lane == AUTOREGRESSIVE else AUTOREGRESSIVE]
            c = frame.stats.seconds
            if not (everything or other_finished or other >= c):
                return
            self._pending[frame.lane].pop(0)
            frame = dataclasses.replace(frame, at=c + min(c, other))
            self.frames.append(frame)
            self.nbytes += frame.nbytes

    def fail(self, message: str) -> None:
        with self.changed:
            self._release(everything=True)
            self.phase, self.error = RacePhase.FAILED, message
            self.changed.notify_all()

    def stop(self, verdict: Verdict) -> None:
        """End a race that never raced (cancelled while it waited or loaded)."""
        with self.changed:
            self.phase, self.verdict = RacePhase.STOPPED, verdict
            self.changed.notify_all()

    def touch(self) -> None:
        """Wake its viewers (its place in line changed)."""
        with self.changed:
            self.changed.notify_all()
