"""A lane of the race: one method's steps, taken one at a time, and all they have produced so far."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from spec.decoding.generation import Step
from spec.decoding.metrics import Stats


@dataclass
class Lane:
    """One method's side of the race: everything it has produced so far."""

    mode: str  # AUTOREGRESSIVE or SPECULATIVE
    steps: Iterator[Step] = field(repr=False)
    pieces: list[tuple[str, str]] = field(default_factory=list)  # (text, provenance) in order
    token_ids: list[int] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    trace: list[tuple[float, int]] = field(default_factory=list)  # (compute seconds, new tokens) after each step
    finished: bool = False

    @property
    def seconds(self) -> float:
        return self.stats.seconds

    def advance(self) -> None:
        """Run this method's next step."""
        try:
            step = next(self.steps)
        except StopIteration:
            self.finished = True
            return
        self.stats = step.stats
        self.token_ids += step.token_ids
        self.pieces += step.pieces
        self.trace.append((step.stats.seconds, step.stats.new_tokens))
        self.finished = step.finished
