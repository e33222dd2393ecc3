"""Visitors' Stop: each browser session's cancel events, so that Stop (or a closed tab) reaches
every race that session watches. The line of races itself is the scheduler's (spec.serving.scheduler)."""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class Sessions:
    def __init__(self):
        self._events: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def track(self, session: str) -> Iterator[threading.Event]:
        """A cancel event for one race of `session`, forgotten when the race ends."""
        event = threading.Event()
        with self._lock:
            self._events.setdefault(session, set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                self._events[session].discard(event)
                if not self._events[session]:
                    del self._events[session]

    def stop(self, session: str) -> int:
        """Cancel every race of `session`; returns how many there were."""
        with self._lock:
            events = list(self._events.get(session, ()))
        for event in events:
            event.set()
        return len(events)

    def running(self) -> int:
        with self._lock:
            return sum(len(events) for events in self._events.values())
