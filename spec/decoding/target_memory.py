"""What decoding learns about a loaded target, kept for as long as the model stays loaded.

A verify call's cost is a property of the compiled target on this device, and a draft model's cost
and acceptance are properties of the pair: what one generation measured carries over to the
target's next one, so it is not learned afresh at every prompt. The models side loads and shares
the target; this side owns what it learns about it, keyed weakly by the loaded model, so a model the
registry drops takes its memory along.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spec.decoding.policy import CallCosts, PairMemory

if TYPE_CHECKING:
    from spec.models.registry import LoadedModel


@dataclass
class TargetMemory:
    """What generations on one target learned, shared by its later generations."""

    call_costs: CallCosts  # what its calls cost per input width (dynamic K)
    shared_vocab: dict[str, int | None] = field(default_factory=dict)  # draft ref -> ids it shares with it (None: no common vocabulary)
    pairs: dict[tuple[str, str], PairMemory] = field(default_factory=dict)  # (draft model folder, drafter) -> what dynamic K learned of the pair


_memories: weakref.WeakKeyDictionary[LoadedModel, TargetMemory] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def target_memory(target: LoadedModel) -> TargetMemory:
    """What decoding learned about `target` so far (nothing yet, the first time it is asked)."""
    with _lock:
        memory = _memories.get(target)
        if memory is None:
            # What its verify calls cost on this machine, as loading it measured; else another CPU's curve.
            curve = target.for_rounds()[1]
            costs = CallCosts.calibrated(curve.seconds) if curve else CallCosts.for_precision(target.key.precision)
            memory = _memories[target] = TargetMemory(costs)
        return memory
