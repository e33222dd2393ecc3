"""Races on a shared server: one computation per distinct race, however many watch it.

A visitor asks for a race (`submit`) and gets a recording to watch (spec.serving.playback):
- **replay**: the same race finished here before; shown from its recording, labelled as a replay;
- **joined**: the same race is running or waiting; the visitor watches it from its start;
- **live**: a new race, which waits its turn in line (visitors' races before preheating);
- **busy**: the line is full (`Busy`), said calmly.
A visitor (a browser session) holds at most one place in the line: asking for another race while
one waits replaces it there (it leaves the line, or, watched by others too, stays for them).
The same race means the same pair, prompt and settings (seed included); sampling without a seed is
never shared. Races run in worker threads, one per slot, that only compute and record: no viewer's
work happens on them. Preheating races the page's examples before anyone asks, and yields to a
visitor's race: a preheat nobody watches is stopped and queued again behind it.
"""
from __future__ import annotations

import logging
import os
import statistics
import threading
import time
from collections import deque
from pathlib import Path

from spec.decoding import kept_pairs
from spec.decoding.engine import LearnedState
from spec.errors import Cancelled, ModelError
from spec.models.conversion_cache import models_dir
from spec.models.registry import ModelRegistry
from spec.serving.limits import Limits, PromptTooLong, check_prompt
from spec.serving.loading import load_pair
from spec.serving.phases import RacePhase, Viewing
from spec.serving.race import run_race
from spec.serving.recording import RaceRequest, Recording, cpu_name
from spec.serving.store import RecordingStore
from spec.serving.verdict import CANCELLED, REPLACED, Verdict

log = logging.getLogger(__name__)


def for_visitors(message: str) -> str:
    """`message` with the server's folders (its models folder, its user's home) named, not shown:
    an operator's model that fails says where on the server, which is no visitor's business."""
    try:
        models = str(models_dir())
    except OSError:  # a folder that cannot be made: its failure is what the message says
        models = ""
    for folder, name in ((models, "the server's models folder"), (os.path.expanduser("~"), "~")):
        if folder not in ("", "/", "~"):  # no home, or a home of "/" that would take every slash with it
            message = message.replace(folder, name)
    return message


_IDLE_LOOK = 1.0  # seconds between an idle worker's looks for curves to time


class Busy(Exception):
    """The line is full; `running` and `waiting` say how full."""

    def __init__(self, running: int, waiting: int):
        super().__init__(f"{running} races running and {waiting} waiting")
        self.running, self.waiting = running, waiting


class Scheduler:
    """The line of races on one server, the threads that run them, and the finished ones."""

    def __init__(
        self, registry: ModelRegistry, limits: Limits = Limits(), slots: int = 1, max_waiting: int = 16,
        store: RecordingStore | None = None, learned_in: Path | None = None, start: bool = True,
    ):
        if slots < 1 or max_waiting < 0:
            raise ValueError(f"a scheduler needs at least one slot and a non-negative line, got {slots}, {max_waiting}")
        self.registry, self.limits, self.max_waiting = registry, limits, max_waiting
        self.store = store if store is not None else RecordingStore()
        # What races learned about each target (its calls' costs, its pairs), for its next races;
        # each pair's record also kept in the folder `learned_in` after every race, for the next start (None: not kept).
        self.learned = LearnedState(learned_in / kept_pairs.FILE if learned_in is not None else None)
        self._waiting: list[tuple[Recording, RaceRequest]] = []  # in order: visitors' races, then preheats
        self._running: dict[Recording, float] = {}  # recording -> time.monotonic() it started
        self._durations: deque[float] = deque(maxlen=20)  # seconds the last races took, start to end
        self._timing = False  # a worker is timing the curves a first start left for later
        self._held: dict[str, tuple[Recording, list[threading.Event | None]]] = {}  # session -> the race it waits for, its watches' cancels
        self._lock = threading.Condition()
        self._workers = [threading.Thread(target=self._work, name=f"race-{i}", daemon=True) for i in range(slots)]
        if start:
            self.start()

    def start(self) -> None:
        """Start computing races (a test may queue some first)."""
        for worker in self._workers:
            if not worker.is_alive():
                worker.start()

    # --- Asking for a race -------------------------------------------------------------------

    def submit(self, request: RaceRequest, fresh: bool = False, session: str | None = None,
               cancel: threading.Event | None = None) -> tuple[Recording, Viewing]:
        """The recording to watch for `request`, and how (LIVE, JOINED or REPLAY); `fresh` skips
        the replay (a visitor asked for a live race). `session` (a browser session) holds one place
        in line: a race it still waits for is replaced by this one, and that watch's `cancel` set
        (its viewer sees it stopped). Raises Busy when the line is full, and PromptTooLong at once
        when the target is loaded and the prompt does not fit."""
        request.config.validate()
        if request.target in self.registry.loaded():
            check_prompt(request.prompt, self.registry.get(request.target), request.config, self.limits)
        key = request.key
        with self._lock:
            place = self._replace(session, key)
            if key is not None:
                if not fresh and (recording := self.store.get(key)) is not None:  # at once, even while it is raced again
                    recording.viewers += 1
                    return recording, Viewing.REPLAY
                for recording in [*self._running, *(r for r, _ in self._waiting)]:
                    if recording.key == key and not recording.cancel.is_set():
                        recording.viewers += 1
                        self._promote(recording)
                        self._hold(session, recording, cancel)
                        return recording, Viewing.JOINED
            watched = sum(1 for r, _ in self._waiting if not r.preheat or r.viewers)
            if watched >= self.max_waiting:
                raise Busy(len(self._running), watched)
            recording = Recording(key, request, viewers=1)
            self._waiting.insert(min(place, watched) if place is not None else watched, (recording, request))
            self._hold(session, recording, cancel)
            self._yield_preheats()
            self._changed()
            return recording, Viewing.LIVE

    def _replace(self, session: str | None, key: tuple | None) -> int | None:  # with the lock held
        """Take `session`'s waiting race out of its hands, unless it asks for that same race again;
        returns the place in line it gives up (None if none): a race only it watched leaves the
        line, stopped as REPLACED, and its watches end."""
        held = self._held.get(session) if session is not None else None
        if held is None:
            return None
        recording, cancels = held
        place = next((i for i, (r, _) in enumerate(self._waiting) if r is recording), None)
        if place is not None and key is not None and recording.key == key:
            return None  # the same race again: it joins it, taking no other place
        del self._held[session]
        if place is None:  # running or ended by now: it keeps no place in line
            return None
        if recording.viewers <= len(cancels) and not recording.preheat:
            del self._waiting[place]
            recording.cancel.set()
            recording.stop(Verdict(None, False, None, None, REPLACED))
        else:
            place += 1  # it stays for its other viewers: the new race comes right behind it, not before
            # A watch with no cancel event to end is counted out here; the others leave as they end.
            recording.viewers = max(0, recording.viewers - sum(1 for cancel in cancels if cancel is None))
        for cancel in cancels:
            if cancel is not None:
                cancel.set()  # its watch ends (and, leaving, gives back its view of the race)
        return place

    def _hold(self, session: str | None, recording: Recording, cancel: threading.Event | None) -> None:  # with the lock held
        if session is None or recording in self._running:
            return
        held = self._held.get(session)
        if held is not None and held[0] is recording:
            held[1].append(cancel)  # the same race watched again from this session
        else:
            self._held[session] = (recording, [cancel])

    def _promote(self, recording: Recording) -> None:  # with the lock held
        """A waiting preheat someone now watches moves up among the visitors' races."""
        index = next((i for i, (r, _) in enumerate(self._waiting) if r is recording), None)
        if index is None or not recording.preheat:
            return
        entry = self._waiting.pop(index)
        self._waiting.insert(sum(1 for r, _ in self._waiting if not r.preheat or r.viewers), entry)
        self._changed()

    def preheat(self, requests: list[RaceRequest]) -> int:
        """Queue races nobody asked for yet (the page's examples) behind every visitor's, in the
        order given (the page's: the order visitors click them); returns how many were queued.
        Those running, waiting or kept from a race on this CPU are skipped; one kept from another
        CPU (a restart on other hardware) is replayed meanwhile and raced again here."""
        queued = 0
        here = cpu_name()
        with self._lock:
            for request in requests:
                key = request.key
                if key is None or ((kept := self.store.peek(key)) is not None and kept.machine == here):
                    continue
                if any(r.key == key for r in [*self._running, *(r for r, _ in self._waiting)]):
                    continue
                self._waiting.append((Recording(key, request, preheat=True), request))
                queued += 1
            self._changed()
        return queued

    def leave(self, recording: Recording) -> None:
        """A viewer stopped watching. A visitor's race nobody watches any more is stopped (or
        leaves the line); a preheat runs on, to be replayed."""
        with self._lock:
            recording.viewers = max(0, recording.viewers - 1)
            if recording.viewers or recording.preheat or recording.ended:
                return
            recording.cancel.set()
            for i, (waiting, _) in enumerate(self._waiting):
                if waiting is recording:
                    del self._waiting[i]
                    recording.stop(Verdict(None, False, None, None, CANCELLED))
                    break
            self._changed()

    # --- Where a race stands ----------------------------------------------------------------

    def place(self, recording: Recording) -> tuple[int, float | None]:
        """(races before it, estimated seconds until it starts, or None before any race was
        measured); (0, 0.0) once it runs."""
        with self._lock:
            if recording in self._running or recording.ended:
                return 0, 0.0
            index = next((i for i, (r, _) in enumerate(self._waiting) if r is recording), len(self._waiting))
            ahead = len(self._running) + index
            if not self._durations:
                return ahead, None
            typical = statistics.median(self._durations)
            now = time.monotonic()
            slots = len(self._workers)
            running_left = sorted(max(typical - (now - began), 1.0) for began in self._running.values())
            # Slots free up as running races end; then each race ahead takes a typical race's time.
            left = running_left[0] if len(running_left) >= slots else 0.0
            return ahead, left + typical * index / slots

    def counts(self) -> tuple[int, int]:
        """(races running, visitors' races waiting)."""
        with self._lock:
            return len(self._running), sum(1 for r, _ in self._waiting if not r.preheat or r.viewers)

    # --- The workers ------------------------------------------------------------------------

    def _changed(self) -> None:  # with the lock held: wake the workers and every waiting viewer
        self._lock.notify_all()
        for recording, _ in self._waiting:
            recording.touch()

    def _yield_preheats(self) -> None:  # with the lock held
        """A visitor's race is waiting: a running preheat nobody watches stops, to run again later."""
        for recording in self._running:
            if recording.preheat and not recording.viewers:
                recording.cancel.set()

    def _wanted(self) -> bool:
        """Whether a race runs or a visitor's waits: the cores are not free for timing."""
        with self._lock:
            return bool(self._running) or any(not r.preheat or r.viewers for r, _ in self._waiting)

    def _timing_due(self) -> bool:  # with the lock held
        return not self._timing and not self._wanted() and bool(self.registry.untimed())

    def _next(self) -> tuple[Recording, RaceRequest] | None:
        """The next race to run, or None when a model's curve is due to be timed first."""
        with self._lock:
            while not (self._waiting or self._timing_due()):
                self._lock.wait(_IDLE_LOOK)  # a model loaded meanwhile may have left its curve to time
            if self._timing_due():
                self._timing = True  # one worker times; the others wait for races
                return None
            recording, request = self._waiting.pop(0)
            self._running[recording] = time.monotonic()
            for session in [s for s, (held, _) in self._held.items() if held is recording]:
                del self._held[session]  # running, it holds no place in line
            self._changed()
            return recording, request

    def _work(self) -> None:
        while True:
            job = self._next()
            if job is None:
                self._time_curves()
                continue
            recording, request = job
            try:
                self._run(recording, request)
            except Exception as error:  # a worker must outlive any one race
                log.exception("race failed (%s)", type(error).__name__)
                recording.fail("Something went wrong on the server; it has been logged. Please try again.")
            finally:
                self._finish(recording, request)
                self._keep_learned()

    def _keep_learned(self) -> None:
        """Keep what the race learned for the next start; where it cannot be written, say so once and keep nothing more."""
        try:
            self.learned.keep()
        except OSError as error:
            log.warning("Could not keep what races learned in %s (%s): the next start learns afresh", self.learned.kept_in, error)
            self.learned.kept_in = None

    def _time_curves(self) -> None:
        """Time what a first start left for later (ModelRegistry's curves_later: the other compile
        settings, the whole curves), before any preheat and while no visitor waits: a visitor's race stops the timing, which starts over
        once the line is free again. One that fails keeps its few widths, said in the log."""
        said: list[str] = []

        def progress(message: str, fraction: float | None) -> None:
            if message not in said[-1:]:  # a phase's ticks repeat its title: one line each
                said.append(message)
                log.info("%s", message)

        try:
            for model in self.registry.untimed():
                try:
                    model.time_curves(self._wanted, progress)
                except Cancelled:
                    return
                except (RuntimeError, OSError) as error:
                    log.warning("Could not time %s's calls: %s; it keeps tuning's few widths", model.ref, error)
        finally:
            with self._lock:
                self._timing = False
                self._changed()

    def _run(self, recording: Recording, request: RaceRequest) -> None:
        cancel = recording.cancel
        try:
            pair = load_pair(self.registry, request.target, request.draft, cancel, recording.record)
            if pair is None:  # stopped while it loaded
                recording.stop(Verdict(None, False, None, None, CANCELLED))
                return
            target, draft = pair
            check_prompt(request.prompt, target, request.config, self.limits)
            for update in run_race(request.prompt, target, draft, request.drafter, request.config, cancel, self.limits.max_race_seconds,
                                   learned=self.learned):
                recording.record(update)
        except Cancelled:  # a visitor's model stopped loading: nobody watches this race any more
            recording.stop(Verdict(None, False, None, None, CANCELLED))
        except ModelError as error:
            log.warning("A race on %s could not start: %s", request.target.ref, error)  # the whole sentence, for the operator
            recording.fail(for_visitors(str(error)))
        except (PromptTooLong, ValueError) as error:
            recording.fail(str(error))
        except MemoryError:
            recording.fail("The server ran out of memory: try a smaller model pair or fewer new tokens, or come back later.")
        except RuntimeError as error:
            if "bad_alloc" not in str(error).lower() and "allocate" not in str(error).lower():
                raise
            recording.fail("The server ran out of memory: try a smaller model pair or fewer new tokens, or come back later.")

    def _finish(self, recording: Recording, request: RaceRequest) -> None:
        with self._lock:
            began = self._running.pop(recording)
            if recording.phase == RacePhase.DONE:
                self._durations.append(time.monotonic() - began)
                if recording.key is not None:
                    self.store.put(recording)
            elif recording.preheat and recording.cancel.is_set():
                # It yielded to a visitor: queue it again, behind every visitor's race.
                self._waiting.append((Recording(recording.key, request, preheat=True), request))
            self._changed()
