"""The hybrid: each round prompt lookup or the draft model, whichever is expected to keep more
tokens per second (spec.decoding.policy.HybridK decides)."""
from __future__ import annotations

from spec.config import HYBRID, GenerationConfig
from spec.decoding.drafters import HybridDrafter, PromptLookupDrafter, time_bare_call
from spec.decoding.plugins.draft_model import DraftModelPlugin
from spec.decoding.plugins.plugin import DraftSetup
from spec.decoding.policy import HybridK, PairMemory, Schedule
from spec.decoding.target_memory import TargetMemory


class HybridPlugin:
    name = HYBRID
    label = "Hybrid"
    words = "the hybrid drafter"
    needs_draft_model = True

    def drafter(self, setup: DraftSetup) -> HybridDrafter:
        lookup = PromptLookupDrafter(setup.config.max_matching_ngram_size, history=setup.history)
        return HybridDrafter(DraftModelPlugin().drafter(setup), lookup)

    def schedule(self, drafter: HybridDrafter, config: GenerationConfig, memory: PairMemory | None,
                 target_memory: TargetMemory | None) -> Schedule:
        costs, yields = (target_memory.call_costs, target_memory.lookup_yields) if target_memory is not None else (None, None)
        if memory is not None and memory.refresh_due():  # it sat out: is its kept cost what a call costs now?
            memory.refresh(time_bare_call(drafter.model.cache))
        return HybridK(config.num_assistant_tokens, config.dynamic_k, memory, config.max_matching_ngram_size,
                       drafter.lookup, costs, config.max_new_tokens, yields)
