"""Prompt lookup (Saxena 2023): copy what followed an earlier occurrence of the context's last
tokens. No second model; strong where the answer repeats its prompt (edits, fixes, renames)."""
from __future__ import annotations

from spec.config import PROMPT_LOOKUP, GenerationConfig
from spec.decoding.drafters import PromptLookupDrafter
from spec.decoding.plugins.plugin import DraftSetup
from spec.decoding.policy import FixedK, LookupK, PairMemory, Schedule
from spec.decoding.target_memory import TargetMemory


class PromptLookupPlugin:
    name = PROMPT_LOOKUP
    label = "Prompt lookup"
    words = "prompt lookup"
    needs_draft_model = False

    def drafter(self, setup: DraftSetup) -> PromptLookupDrafter:
        return PromptLookupDrafter(setup.config.max_matching_ngram_size, history=setup.history)

    def schedule(self, drafter: PromptLookupDrafter, config: GenerationConfig, memory: PairMemory | None,
                 target_memory: TargetMemory | None) -> Schedule:
        """LookupK asks the lookup what it would copy and picks K from it; fixed K verifies K every round."""
        costs, yields = (target_memory.call_costs, target_memory.lookup_yields) if target_memory is not None else (None, None)
        if not config.dynamic_k:
            return FixedK(config.num_assistant_tokens, costs)
        return LookupK(config.num_assistant_tokens, config.max_matching_ngram_size, lookup=drafter, costs=costs, yields=yields)
