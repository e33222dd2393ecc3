"""The engine's front door: pair a target with a drafter and stream a generation.

Used alike by the command line, the race (the Space) and the benchmark. Nothing here knows about a UI.
"""
from __future__ import annotations

import threading
from typing import Iterator

import numpy as np

from spec.decoding.autoregressive import autoregressive
from spec.config import (
    AUTOREGRESSIVE,
    DRAFT_MODEL,
    DRAFTERS,
    HYBRID,
    MODES,
    PROMPT_LOOKUP,
    SPECULATIVE,
    GenerationConfig,
)
from spec.decoding.cross_tokenizer import CrossTokenizerDrafter
from spec.decoding.drafters import Drafter, DraftModelDrafter, HybridDrafter, PromptLookupDrafter
from spec.decoding.generation import Generation, Step
from spec.decoding.history import AnswerHistory
from spec.decoding.policy import PairMemory
from spec.models.registry import LoadedModel
from spec.decoding.sampling import Sampler
from spec.decoding.speculative import speculative
from spec.decoding.target_memory import target_memory
from spec.decoding.vocab import shared_vocab_size


def encode_prompt(tokenizer, prompt: str, chat: bool = True) -> list[int]:
    """Token ids of the prompt, wrapped in the model's chat template when it has one and chat is on."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt is empty: give the model some text to continue")
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer(prompt)["input_ids"]


def make_drafter(
    kind: str, target: LoadedModel, draft: LoadedModel | None, config: GenerationConfig, rng, prompt: str = "",
    history: np.ndarray | None = None,
) -> Drafter:
    """The drafter for a speculative run: a draft model sharing the target's vocabulary drafts its
    tokens; one with another vocabulary drafts text, re-encoded for the target (`prompt` is then
    encoded for it too); the hybrid drafts with that model or with prompt lookup, round by round.
    `history`: the target's other answers, for prompt lookup to search (AnswerHistory.corpus)."""
    if kind == PROMPT_LOOKUP:
        return PromptLookupDrafter(config.prompt_lookup_max_ngram, history=history)
    if kind not in DRAFTERS:
        raise ValueError(f"drafter must be one of {DRAFTERS}, got {kind!r}")
    if draft is None:
        raise ValueError(f"the {kind} drafter needs a draft model: give one, or use prompt lookup")
    if kind == HYBRID:
        return HybridDrafter(
            make_drafter(DRAFT_MODEL, target, draft, config, rng, prompt), PromptLookupDrafter(config.prompt_lookup_max_ngram, history=history)
        )
    checked = target_memory(target).shared_vocab
    if draft.ref not in checked:
        checked[draft.ref] = shared_vocab_size(target.tokenizer, draft.tokenizer)
    shared = checked[draft.ref]
    if shared is None:
        draft_prompt = encode_prompt(draft.tokenizer, prompt, config.chat)
        target_prompt_length = len(encode_prompt(target.tokenizer, prompt, config.chat))
        return CrossTokenizerDrafter(
            draft.model.new_cache(), draft.tokenizer, target.tokenizer, draft_prompt, target_prompt_length,
            draft.eos_token_ids, draft.vocab_size, draft.token_ids,
        )
    vocab = min(target.vocab_size, draft.vocab_size, shared)
    sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, rng, draft.token_ids)
    return DraftModelDrafter(draft.model.new_cache(), sampler)


def generate(
    prompt: str,
    target: LoadedModel,
    config: GenerationConfig,
    mode: str = SPECULATIVE,
    drafter: str = DRAFT_MODEL,
    draft: LoadedModel | None = None,
    cancel: threading.Event | None = None,
    history: AnswerHistory | None = None,
) -> Iterator[Step]:
    """Stream a generation: a Step per target call, with its tokens, their provenance and running stats.

    history: the target's earlier answers. Prompt lookup (alone or in the hybrid) searches those to
    other prompts, and a generation that finishes adds its answer (whatever the mode)."""
    config.validate()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    prompt_ids = encode_prompt(target.tokenizer, prompt, config.chat)
    rng = np.random.default_rng(config.seed)
    vocab = target.vocab_size
    if mode == SPECULATIVE:
        chosen = make_drafter(drafter, target, draft, config, rng, prompt, history.corpus(prompt_ids) if history else None)
        model = chosen.model if isinstance(chosen, HybridDrafter) else chosen
        if isinstance(model, DraftModelDrafter):
            vocab = model.sampler.vocab_size
    sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, rng)
    generation = Generation(target.tokenizer, prompt_ids, config, target.eos_token_ids)
    target_cache = target.model.new_cache()
    if mode == AUTOREGRESSIVE:
        return _releasing(autoregressive(target_cache, sampler, generation, cancel), [target_cache], history, generation)
    # A draft model's cost is a property of the pair, a verify call's of the target: what dynamic K
    # learned of them carries over to the next generation. Prompt lookup's payoff depends on the
    # prompt, so it starts afresh. The hybrid learns apart from the draft model alone: it drafts
    # with the model only where lookup finds nothing, the hard places, and its acceptance there
    # would make the model alone look worse than it is.
    learned, memory, caches = target_memory(target), None, [target_cache]
    if isinstance(model, (DraftModelDrafter, CrossTokenizerDrafter)):
        memory = learned.pairs.setdefault((str(draft.resolved.path), drafter), PairMemory())
        caches.append(model.cache)
    steps = speculative(
        target_cache, chosen, sampler, generation, config.num_assistant_tokens, config.dynamic_k, memory, cancel,
        config.prompt_lookup_max_ngram, learned.call_costs,
    )
    return _releasing(steps, caches, history, generation)


def _releasing(
    steps: Iterator[Step], caches: list, history: AnswerHistory | None = None, generation: Generation | None = None,
) -> Iterator[Step]:
    """`steps`, then the KV caches go back to their models' pools: when the generation ends, is
    closed (Stop, a closed tab) or is dropped. A generation that ran to its end adds its answer to `history`."""
    try:
        yield from steps
        if history is not None and generation.stats.stop_reason != "cancelled":
            history.add(generation.prompt_ids, generation.token_ids)
    finally:
        steps.close()
        for cache in caches:
            cache.release()
