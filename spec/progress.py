"""How long work (installing, converting, downloading, compiling) reports its progress.

A ProgressFn gets a one-line message and the fraction done (None when unknown). Long phases say
roughly how long they have left: from the fraction done so far, or, for work that cannot count
its steps (an export), from how long such work took when we measured it. A message reads
"<phase> — <detail>", so a terminal can update one line per phase in place (`phase_of`).
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

ProgressFn = Callable[[str, float | None], None]  # (message, fraction 0..1 or None when unknown)

SEPARATOR = " — "


def ignore(message: str, fraction: float | None) -> None:
    """A ProgressFn for callers that do not show progress."""


def phase_of(message: str) -> str:
    """The phase a message belongs to: the text before its detail."""
    return message.split(SEPARATOR, 1)[0]


def duration(seconds: float) -> str:
    """A rough, readable duration: "40 s", "3 min", "1 h 5 min"."""
    if seconds < 100:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    if seconds < 3600:
        return f"{round(seconds / 60):.0f} min"
    return f"{seconds // 3600:.0f} h {round(seconds % 3600 / 60):.0f} min"


def took(seconds: float) -> str:
    """How long finished work took, to the second under 100 s ("1 s", "33 s"), else as duration():
    the log of a first start reads as its timeline."""
    return f"{max(1, round(seconds)):.0f} s" if seconds < 99.5 else duration(seconds)


class Phase:
    """One phase of long work: reports "<title> — <percent>, about <time> left" as it goes.

    `update(fraction)` reports progress the work can count; a ticker re-reports every
    `tick_seconds` so that a phase that cannot count (an export) still shows time passing, its time
    left estimated from `expected_seconds`.
    """

    def __init__(self, report: ProgressFn, title: str, expected_seconds: float | None = None, tick_seconds: float = 2.0):
        self.report, self.title, self.expected = report, title, expected_seconds
        self.tick_seconds = tick_seconds
        self.fraction: float | None = None
        self.detail = ""
        self.started = time.monotonic()
        self._done = threading.Event()

    def update(self, fraction: float | None = None, detail: str = "") -> None:
        self.fraction = fraction if fraction is None else min(max(fraction, 0.0), 1.0)
        self.detail = detail
        self._send()

    def message(self) -> str:
        elapsed = time.monotonic() - self.started
        parts = [self.detail] if self.detail else []
        if self.fraction is not None:
            parts.append(f"{self.fraction:.0%}")
        left = self._seconds_left(elapsed)
        if left is not None:
            parts.append(f"about {duration(left)} left")
        elif self.expected is not None:
            parts.append(f"taking longer than the {duration(self.expected)} expected")
        return self.title + (SEPARATOR + ", ".join(parts) if parts else "")

    def _seconds_left(self, elapsed: float) -> float | None:
        if self.fraction and self.fraction > 0.05 and elapsed > 3:  # enough progress to extrapolate from
            return elapsed * (1 - self.fraction) / self.fraction
        if self.expected is not None and elapsed < self.expected:
            return self.expected - elapsed
        return None

    def _send(self) -> None:
        self.report(self.message(), self.fraction)

    def _tick(self) -> None:
        while not self._done.wait(self.tick_seconds):
            self._send()

    @contextlib.contextmanager
    def running(self) -> Iterator["Phase"]:
        """Report the start, tick while the body runs, report the end."""
        self._send()
        ticker = threading.Thread(target=self._tick, name=f"progress: {self.title}", daemon=True)
        ticker.start()
        try:
            yield self
        finally:
            self._done.set()
            ticker.join()
        elapsed = time.monotonic() - self.started
        self.report(f"{self.title}{SEPARATOR}done in {took(elapsed)}", 1.0)


def phase(report: ProgressFn, title: str, expected_seconds: float | None = None, tick_seconds: float = 2.0):
    """`with phase(report, "Exporting X", 120) as p: ...` — a Phase that runs for the block."""
    return Phase(report, title, expected_seconds, tick_seconds).running()


class TerminalProgress:
    """A ProgressFn for a terminal: one line per phase, updated in place.

    On a TTY each phase's line is rewritten as it progresses and ends when the next phase begins;
    elsewhere (a log file, CI) only a phase's first and last messages are written. Where two phases
    run at once (a pair's models convert side by side), only the line on screen is rewritten; the
    other phase's ticks are left out until it ends.
    """

    RUNNING_SECONDS = 5.0  # a phase not heard from for longer has ended (a Phase ticks every 2 s)

    def __init__(self, stream, prefix: str = ""):
        self.stream, self.prefix = stream, prefix
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._phase: str | None = None
        self._last = ""
        self._heard: dict[str, float] = {}  # each phase's latest message, by when, while it runs
        self._lock = threading.Lock()

    def __call__(self, message: str, fraction: float | None) -> None:
        with self._lock:
            line, name, now = self.prefix + message, phase_of(message), time.monotonic()
            done = message.endswith(" done") or SEPARATOR + "done in" in message
            new = name != self._phase and now - self._heard.get(name, -self.RUNNING_SECONDS) >= self.RUNNING_SECONDS
            if self.tty:
                if name == self._phase or new or done:
                    if name != self._phase and self._phase is not None:
                        self.stream.write("\n")
                    self.stream.write("\r\033[K" + line)  # carriage return, clear the line, write it again
                    self._phase = name
            elif (new or done) and line != self._last:
                self.stream.write(line + "\n")
                self._phase, self._last = name, line
            if done:
                self._heard.pop(name, None)
            else:
                self._heard[name] = now
            self.stream.flush()

    def close(self) -> None:
        """End the current line (on a TTY the last phase's line is still open)."""
        with self._lock:
            if self.tty and self._phase is not None:
                self.stream.write("\n")
                self.stream.flush()
            self._phase = None
