"""Pauses between probes: how long a drafter that does not pay waits before it is tried again.

One mechanism for both schedules that pause a draft model: dynamic K takes plain steps instead
(a pause carried over to the pair's next generation), the hybrid drafts with prompt lookup instead.
"""
from __future__ import annotations

from dataclasses import dataclass

# Rounds before probing again, doubling while probes confirm that drafting does not pay, up to a
# pause that keeps probes within _PROBE_SHARE of the time: a probe can be dear (the draft catches up
# on all it missed, and the target's input width changes twice), but a draft that catches up cheaply
# would only miss rounds that pay during a long pause.
FIRST_PAUSE, _MIN_MAX_PAUSE, _MAX_PAUSE = 8, 32, 512
_PROBE_SHARE = 0.02


def longest_pause(probe_steps: float | None) -> int:
    """The longest pause for a draft whose probe costs `probe_steps` plain steps (None: not timed):
    long enough that probes take about _PROBE_SHARE of the time."""
    return int(_MAX_PAUSE if probe_steps is None else min(_MAX_PAUSE, max(_MIN_MAX_PAUSE, probe_steps / _PROBE_SHARE)))


@dataclass
class Pause:
    """Rounds to go without a drafter before probing it again; each pause a probe confirms is
    twice as long as the one before, up to a cap, and a round that pays makes the next one short."""

    left: int = 0  # rounds still to go before the probe; 0 or less: no pause, or it is over
    length: int = FIRST_PAUSE  # the length of the next pause

    @property
    def over(self) -> bool:
        return self.left <= 0

    def tick(self) -> None:
        """A round went by without the drafter."""
        self.left -= 1

    def start(self, longest: int) -> None:
        """Pause for `length` rounds; the next pause twice as long, up to `longest`."""
        self.left, self.length = self.length, min(2 * self.length, longest)

    def reset(self) -> None:
        """The drafter paid: the next pause is short again."""
        self.length = FIRST_PAUSE
