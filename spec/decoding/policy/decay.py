"""Running estimates that forget: each new measurement moves an estimate part of the way, so it
follows the text, and the machine's load, as they change."""

from __future__ import annotations

DECAY = 0.7  # weight kept by older rounds in the running estimates


def decayed_average(old: float | None, new: float, decay: float = DECAY) -> float:
    """`new` folded into the running average `old`; None: nothing measured yet, so `new` itself."""
    return new if old is None else decay * old + (1 - decay) * new
