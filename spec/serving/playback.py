"""Watching a recording: what one visitor sees of a race, at the race's own pace, a few times a second,
and what a replay is labelled with.

Every race is shown at its recorded pace (spec.serving.recording times the frames): a joined or
replayed one from its start, a live one as its steps arrive; a viewer who has seen everything
recorded so far waits for the next step and goes on at the race's pace from there. Views come at
most once per `interval` and carry what is new since the last one, so a page appends tokens
instead of redrawing everything. Viewers only read the recording: none of this runs on the race's thread.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from spec.config import AUTOREGRESSIVE, SPECULATIVE
from spec.serving.lanes import Lane
from spec.serving.phases import RacePhase, Viewing
from spec.serving.recording import Frame, Recording, cpu_name
from spec.serving.verdict import CANCELLED, Verdict, verdict as judge

# How often a view may be sent: fast enough to look live, rare enough that rendering it (on a
# browser that may share the race's cores) stays a small cost.
DEFAULT_INTERVAL = 0.25
HEARTBEAT = 1.0
# A race still running is shown this far behind its newest step: the lanes compute in turns, so
# steps become showable in bursts a turn apart (spec.serving.race.TURN_SECONDS), and a viewer
# right at the edge would stop and start with them.
LIVE_LAG = 0.6
# The numbers beside the text (statistics, speed-up, histogram) change slowly and cost a browser
# more to redraw than a few appended tokens: they are refreshed at most this often while racing.
DETAILS_INTERVAL = 1.0


@dataclass
class View:
    """The race as one viewer sees it now, and what changed since the viewer's previous View."""

    phase: RacePhase
    how: Viewing
    recording: Recording
    autoregressive: Lane
    speculative: Lane
    new: dict[str, list[Frame]] = field(default_factory=dict)  # lane -> frames shown for the first time
    verdict: Verdict | None = None
    error: str | None = None
    ahead: int | None = None  # WAITING: races before it
    wait_seconds: float | None = None  # WAITING: estimated from measured race lengths; None before any
    loading: dict[str, str] = field(default_factory=dict)
    watching: int = 1  # visitors watching this race now
    details: bool = True  # whether the slower-changing numbers are due again (always at the end)


def _lane(mode: str) -> Lane:
    return Lane(mode, iter(()))


def _show(lane: Lane, frame: Frame) -> None:
    lane.pieces += frame.pieces
    lane.token_ids += frame.token_ids
    lane.stats = frame.stats
    lane.trace.append((frame.stats.seconds, frame.stats.new_tokens))
    lane.finished = frame.finished


def watch(
    recording: Recording, how: Viewing, place: Callable[[Recording], tuple[int, float | None]],
    cancel: threading.Event, interval: float = DEFAULT_INTERVAL,
) -> Iterator[View]:
    """Views of `recording` until it ends (or `cancel` is set: the view then ends STOPPED).
    `place` says where a waiting race stands in line."""
    lanes = {AUTOREGRESSIVE: _lane(AUTOREGRESSIVE), SPECULATIVE: _lane(SPECULATIVE)}
    shown, began = 0, None  # frames shown; time.monotonic() at which this viewer's frame 0 was due
    caught_up = False  # whether this viewer had shown every frame of a race still running
    last_sent, last_state, last_details = 0.0, None, -DETAILS_INTERVAL
    while True:
        with recording.changed:
            frames, phase = recording.frames, recording.phase
            due = shown
            if shown < len(frames):
                if began is None or caught_up:  # start (or go on) with the next step now, then at the race's pace
                    lag = LIVE_LAG if began is None and not recording.ended else 0.0
                    began = max(began or 0.0, time.monotonic() - frames[shown].at + lag)
                elapsed = time.monotonic() - began
                while due < len(frames) and frames[due].at <= elapsed:
                    due += 1
            caught_up = due == len(frames) and not recording.ended
            ended = recording.ended and due == len(frames)
            watching = recording.viewers
            loading, verdict, error = dict(recording.loading), recording.verdict, recording.error
        new: dict[str, list[Frame]] = {AUTOREGRESSIVE: [], SPECULATIVE: []}
        for frame in frames[shown:due]:
            _show(lanes[frame.lane], frame)
            new[frame.lane].append(frame)
        shown = due
        stopping = cancel.is_set() and not ended
        if ended or stopping:
            if stopping:  # a greedy race's texts are compared as far as this viewer saw them
                request = recording.request
                shown_texts = judge(lanes[AUTOREGRESSIVE], lanes[SPECULATIVE], request.config, CANCELLED) if request else None
                verdict = Verdict(verdict.speedup if verdict else None, False, shown_texts and shown_texts.identical,
                                  shown_texts and shown_texts.first_difference, CANCELLED)
                phase = RacePhase.STOPPED
            yield View(phase, how, recording, lanes[AUTOREGRESSIVE], lanes[SPECULATIVE], new, verdict, error, watching=watching)
            return
        shown_phase = RacePhase.RACING if phase.ended else phase  # its last steps still to show
        ahead, wait = place(recording) if phase == RacePhase.WAITING else (None, None)
        state = (shown_phase, ahead, watching, tuple(loading.items()), shown)
        # A view at least every HEARTBEAT seconds, changed or not, lets the server notice a visitor who left.
        if state != last_state or time.monotonic() - last_sent >= HEARTBEAT:
            details = time.monotonic() - last_details >= DETAILS_INTERVAL or (last_state or (None,))[0] != shown_phase
            yield View(shown_phase, how, recording, lanes[AUTOREGRESSIVE], lanes[SPECULATIVE], new, None, None, ahead,
                       wait, loading, watching, details)
            last_sent, last_state = time.monotonic(), state
            last_details = last_sent if details else last_details
        # Sleep until the interval allows another view and the next step is due ...
        pause = interval - (time.monotonic() - last_sent)
        if began is not None and shown < len(frames):
            pause = max(pause, frames[shown].at - (time.monotonic() - began))
        if pause > 0:
            cancel.wait(pause)
            continue
        # ... or, with nothing new to show, until the recording changes.
        with recording.changed:
            if len(recording.frames) == shown and recording.phase == phase and recording.viewers == watching:
                recording.changed.wait(0.5)


def replay_label(view: View, now: float | None = None) -> str:
    """'replay of a race run on this server at 14:02 UTC, 5 min ago, on its Intel(R) Xeon(R) ...', or
    '' for a live race; a race kept from a server on another CPU (before a restart) says so."""
    if view.how != Viewing.REPLAY or view.recording.started is None:
        return ""
    started, machine = view.recording.started, view.recording.machine
    ago = max(0, int(((now or time.time()) - started) // 60))
    when = time.strftime("%H:%M UTC" if ago < 24 * 60 else "%H:%M UTC on %d %b %Y", time.gmtime(started))
    if ago == 0:
        since = "just now"
    elif ago < 90:
        since = f"{ago} min ago"
    elif ago < 48 * 60:
        since = f"{ago // 60} h ago"
    else:
        since = f"{ago // (24 * 60)} days ago"
    if machine == cpu_name():
        return f"replay of a race run on this server at {when}, {since}, on its {machine}"
    return f"replay of a race run on another server at {when}, {since}, on {machine} (this one: {cpu_name()})"
