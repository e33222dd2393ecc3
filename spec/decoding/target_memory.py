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
from pathlib import Path
from typing import TYPE_CHECKING

from spec.decoding.kept_pairs import keep_pairs, pair_key, read_lookup_yields, read_pair, target_key
from spec.decoding.policy import CallCosts, LookupYields, PairMemory

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
    lookup_yields: LookupYields = field(default_factory=LookupYields)  # what prompt lookup's rounds of each K kept of their promise
    compiled_with: str = ""  # the settings speculation verified with when call_costs began (LoadedModel.settings)

    @classmethod
    def first(cls, target: LoadedModel) -> TargetMemory:
        """Nothing learned yet: its verify calls cost what loading it measured on this machine,
        else what another CPU's curve says at its precision."""
        curve = target.for_rounds()[1]
        return cls(CallCosts.calibrated(curve.seconds) if curve else CallCosts.for_precision(target.key.precision), curve,
                   compiled_with=target.settings(speculative=True))

    def recompiled(self, target: LoadedModel) -> None:
        """The target was compiled with other settings since (a first start's tuning, finished later):
        what its calls cost is learned afresh from its new curve; what was learned of its pairs stays."""
        fresh = TargetMemory.first(target)
        self.call_costs, self.calibration, self.compiled_with = fresh.call_costs, fresh.calibration, fresh.compiled_with

    def recalibrate(self, curve: CallCurve | None) -> None:
        """The target's curve was timed whole since (LoadedModel.time_curves): widths no generation
        has timed take its seconds, and widths it never timed follow its shape."""
        if curve is not None and curve is not self.calibration:
            self.call_costs.recalibrate(curve.seconds)
            self.calibration = curve


class LearnedState:
    """What generations learned about each target they ran on, for that target's next ones.

    Keyed weakly by the loaded model, so a model the registry drops takes its memory along; safe to
    share between threads that run generations at once. Given a file (`kept_in`), each pair, and
    prompt lookup on each target, starts from the record an earlier start kept there, and `keep`
    writes what was learned since.
    """

    def __init__(self, kept_in: Path | None = None) -> None:
        self._memories: weakref.WeakKeyDictionary[LoadedModel, TargetMemory] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.kept_in = kept_in  # a file keeping each pair's record for the next start (spec.decoding.kept_pairs); None: none
        self._kept: dict[str, PairMemory] = {}  # key in that file -> the pair's record, as learned here
        self._kept_yields: dict[str, LookupYields] = {}  # key in that file -> a target's lookup yields, as learned here

    def about(self, target: LoadedModel) -> TargetMemory:
        """What generations learned about `target` so far (nothing yet, the first time it is asked)."""
        with self._lock:
            memory = self._memories.get(target)
            if memory is None:
                memory = self._memories[target] = TargetMemory.first(target)
                if self.kept_in is not None:
                    key = target_key(target)
                    memory.lookup_yields = read_lookup_yields(self.kept_in, key) or memory.lookup_yields
                    self._kept_yields[key] = memory.lookup_yields
            elif memory.compiled_with != target.settings(speculative=True):
                memory.recompiled(target)
            else:
                memory.recalibrate(target.for_rounds()[1])
            return memory

    def pair(self, target: LoadedModel, draft: LoadedModel, drafter: str) -> PairMemory:
        """What speculation learned of `target` with `draft` and this drafter: in this process, else
        as an earlier start kept it (kept_in), else nothing yet."""
        memory = self.about(target)
        with self._lock:
            pair = memory.pairs.get((str(draft.resolved.path), drafter))
            if pair is None:
                key = pair_key(target, draft, drafter) if self.kept_in is not None else None
                kept = read_pair(self.kept_in, key) if key is not None else None
                pair = memory.pairs[(str(draft.resolved.path), drafter)] = kept if kept is not None else PairMemory()
                if key is not None:
                    self._kept[key] = pair
            return pair

    def keep(self) -> None:
        """Write each pair's record, and each target's lookup yields, to `kept_in` for the next start
        (nothing without one). OSError where the file cannot be written."""
        if self.kept_in is None:
            return
        with self._lock:
            pairs, yields = dict(self._kept), dict(self._kept_yields)
        if pairs or yields:
            keep_pairs(self.kept_in, pairs, yields)
