"""Visitors' races: each visitor's cancel events, so Stop can reach them, and the waiting room
that lets a few races run at once, keeps the next ones in order and turns the rest away."""
from __future__ import annotations

import contextlib
import itertools
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


class RoomFull(Exception):
    """Every slot is taken and the waiting line is as long as it may be."""


class Ticket:
    """One race's place in a WaitingRoom: it waits until `admitted`, then holds a slot until it leaves."""

    def __init__(self, room: "WaitingRoom", number: int):
        self._room, self.number = room, number
        self.admitted = False

    @property
    def ahead(self) -> int:
        """Races before this one: those running and those waiting in front of it (0 once admitted)."""
        return self._room._ahead(self)

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a slot; returns whether this race may start."""
        return self._room._wait(self, timeout)


class WaitingRoom:
    """`slots` races run at once; up to `max_waiting` more wait in arrival order; more are refused.

    The page shows a waiting race how many are ahead of it, and a refused one a friendly "busy":
    a line a visitor can read, where a full server queue would only raise an error.
    """

    def __init__(self, slots: int, max_waiting: int):
        if slots < 1 or max_waiting < 0:
            raise ValueError(f"a waiting room needs at least one slot and a non-negative line, got {slots}, {max_waiting}")
        self.slots, self.max_waiting = slots, max_waiting
        self._waiting: list[Ticket] = []
        self._running: set[Ticket] = set()
        self._numbers = itertools.count()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def ticket(self) -> Iterator[Ticket]:
        """A place in line, given up when the block ends (the race ended, was stopped, or its visitor
        left). Raises RoomFull when the line is full."""
        with self._changed:
            if len(self._waiting) >= self.max_waiting and len(self._running) >= self.slots:
                raise RoomFull(f"{len(self._running)} races running and {len(self._waiting)} waiting")
            ticket = Ticket(self, next(self._numbers))
            self._waiting.append(ticket)
            self._admit()
        try:
            yield ticket
        finally:
            with self._changed:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._running.discard(ticket)
                self._admit()

    def counts(self) -> tuple[int, int]:
        """(races running, races waiting)."""
        with self._changed:
            return len(self._running), len(self._waiting)

    def _admit(self) -> None:  # called with the lock held
        while self._waiting and len(self._running) < self.slots:
            ticket = self._waiting.pop(0)
            ticket.admitted = True
            self._running.add(ticket)
        self._changed.notify_all()

    def _ahead(self, ticket: Ticket) -> int:
        with self._changed:
            if ticket.admitted:
                return 0
            return len(self._running) + self._waiting.index(ticket)

    def _wait(self, ticket: Ticket, timeout: float) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: ticket.admitted, timeout)
            return ticket.admitted
