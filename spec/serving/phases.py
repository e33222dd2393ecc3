"""Where a race stands (`RacePhase`) and how a visitor sees it (`Viewing`): the words the scheduler,
the recording, its viewers and the page share about one race."""
from __future__ import annotations

from enum import Enum


class RacePhase(str, Enum):
    """Where a race stands: it waits its turn, loads its pair, races, then ends one of three ways."""

    WAITING = "waiting"  # in line (Scheduler.place says where)
    LOADING = "loading"  # its pair loads and warms up; no clock runs yet
    RACING = "racing"  # the lanes take turns
    DONE = "done"  # both lanes finished
    STOPPED = "stopped"  # ended early: Verdict.stopped says why
    FAILED = "failed"  # could not run: Recording.error holds the sentence a visitor reads

    @property
    def ended(self) -> bool:
        """DONE, STOPPED or FAILED: nothing more will happen to the race."""
        return self in (RacePhase.DONE, RacePhase.STOPPED, RacePhase.FAILED)

    def __str__(self) -> str:  # the word itself, as the API's JSON has it
        return self.value


class Viewing(str, Enum):
    """How a visitor sees a race: the scheduler's answer to asking for one (Scheduler.submit)."""

    LIVE = "live"  # a new race, computed once its turn comes
    JOINED = "joined"  # the same race, running or waiting already: watched from its start
    REPLAY = "replay"  # the same race, finished here before: shown from its recording

    def __str__(self) -> str:
        return self.value
