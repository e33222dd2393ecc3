"""What decoding learns about a loaded target, kept for its next generations by whoever holds it.

A verify call's cost is a property of the compiled target on this device, and a draft model's cost
and acceptance are properties of the pair: what one generation measured carries over to the
target's next one, so it is not learned afresh at every prompt. The models side loads and shares
the target; this side owns what it learns about it, in a LearnedState that the caller holds beside
its models (the Space's scheduler, a benchmark worker) and passes to each generation. A generation
given none learns afresh, and what it learns goes with it.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spec.decoding.policy import CallCosts, PairMemory

if TYPE_CHECKING:
    from spec.models.calibration import CallCurve
    from spec.models.registry import LoadedModel


@dataclass
class TargetMemory:
    """What generations on one target learned, shared by its later generations."""

    call_costs: CallCosts  # what its calls cost per input width (dynamic K)
    calibration: CallCurve | None = None  # the curve loading measured, which call_costs started from
    shared_vocab: dict[str, int | None] = field(default_factory=dict)  # draft ref -> ids it shares with it (None: no common vocabulary)
    pairs: dict[tuple[str, str], PairMemory] = field(default_factory=dict)  # (draft model folder, drafter) -> what dynamic K learned of the pair

    @classmethod
    def first(cls, target: LoadedModel) -> TargetMemory:
        """Nothing learned yet: its verify calls cost what loading it measured on this machine,
        else what another CPU's curve says at its precision."""
        curve = target.for_rounds()[1]
        return cls(CallCosts.calibrated(curve.seconds) if curve else CallCosts.for_precision(target.key.precision), curve)

    def recalibrate(self, curve: CallCurve | None) -> None:
        """The target's curve was timed whole since (LoadedModel.time_curves): widths no generation
        has timed take its seconds, and widths it never timed follow its shape."""
        if curve is not None and curve is not self.calibration:
            self.call_costs.recalibrate(curve.seconds)
            self.calibration = curve


class LearnedState:
    """What generations learned about each target they ran on, for that target's next ones.

    Keyed weakly by the loaded model, so a model the registry drops takes its memory along; safe to
    share between threads that run generations at once.
    """

    def __init__(self) -> None:
        self._memories: weakref.WeakKeyDictionary[LoadedModel, TargetMemory] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def about(self, target: LoadedModel) -> TargetMemory:
        """What generations learned about `target` so far (nothing yet, the first time it is asked)."""
        with self._lock:
            memory = self._memories.get(target)
            if memory is None:
                memory = self._memories[target] = TargetMemory.first(target)
            else:
                memory.recalibrate(target.for_rounds()[1])
            return memory
