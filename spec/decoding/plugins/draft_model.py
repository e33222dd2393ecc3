"""A draft model (Leviathan et al., Chen et al.): a small model proposes K tokens autoregressively.

One that shares the target's vocabulary drafts its tokens (sampled like the target, so q matches
p's form); one with another vocabulary drafts text, re-encoded for the target
(spec.decoding.cross_tokenizer).
"""
from __future__ import annotations

from spec.config import DRAFT_MODEL, GenerationConfig
from spec.decoding.cross_tokenizer import CrossTokenizerDrafter
from spec.decoding.drafters import Drafter, DraftModelDrafter
from spec.decoding.plugins.plugin import DraftSetup
from spec.decoding.policy import DynamicK, FixedK, PairMemory, Schedule
from spec.decoding.prompt import encode_prompt
from spec.decoding.sampling import Sampler
from spec.decoding.target_memory import TargetMemory
from spec.decoding.vocab import shared_vocab_size


class DraftModelPlugin:
    name = DRAFT_MODEL
    label = "Draft model"
    words = "a draft model"
    needs_draft_model = True

    def drafter(self, setup: DraftSetup) -> Drafter:
        target, draft, config = setup.target, setup.draft, setup.config
        checked = setup.target_memory.shared_vocab if setup.target_memory is not None else {}  # compared once per pair
        if draft.ref not in checked:
            checked[draft.ref] = shared_vocab_size(target.tokenizer, draft.tokenizer)
        shared = checked[draft.ref]
        if shared is None:
            draft_prompt = encode_prompt(draft.tokenizer, setup.prompt, config.chat)
            target_prompt_length = len(encode_prompt(target.tokenizer, setup.prompt, config.chat))
            return CrossTokenizerDrafter(
                draft.model.new_cache(), draft.tokenizer, target.tokenizer, draft_prompt, target_prompt_length,
                draft.eos_token_ids, draft.vocab_size, draft.token_ids,
            )
        vocab = min(target.vocab_size, draft.vocab_size, shared)
        sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, setup.rng, draft.token_ids)
        return DraftModelDrafter(draft.model.new_cache(), sampler)

    def schedule(self, drafter: Drafter, config: GenerationConfig, memory: PairMemory | None,
                 target_memory: TargetMemory | None) -> Schedule:
        """DynamicK drafts fewer tokens, or none, where drafting does not pay; fixed K drafts K every round."""
        costs = target_memory.call_costs if target_memory is not None else None
        if not config.dynamic_k:
            return FixedK(config.num_assistant_tokens, costs)
        return DynamicK(config.num_assistant_tokens, memory=memory, costs=costs)
