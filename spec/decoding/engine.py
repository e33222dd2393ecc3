"""The engine's front door: pair a target with a drafter, and stream a generation (`stream`) or
return it whole (`generate`), in the shape of transformers' and openvino-genai's `generate`.

Used alike by the command line, the race (the Space) and the benchmark. Nothing here knows about a UI.
"""
from __future__ import annotations

import threading
from typing import Iterator

import numpy as np

from spec.decoding.autoregressive import autoregressive
from spec.config import (
    DRAFT_MODEL,
    DRAFTERS,
    HYBRID,
    PROMPT_LOOKUP,
    GenerationConfig,
)
from spec.decoding.cross_tokenizer import CrossTokenizerDrafter
from spec.decoding.drafters import Drafter, DraftModelDrafter, HybridDrafter, PromptLookupDrafter
from spec.decoding.generation import Generation, GenerationResult, Step
from spec.decoding.history import AnswerHistory
from spec.decoding.policy import PairMemory
from spec.models.registry import LoadedModel
from spec.decoding.sampling import Sampler
from spec.decoding.speculative import speculative
from spec.decoding.target_memory import target_memory
from spec.decoding.vocab import shared_vocab_size


def encode_prompt(tokenizer, prompt: str, chat: bool = True) -> list[int]:
    """Token ids of the prompt, wrapped in the model's chat template when it has one and chat is on."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be a string, got {type(prompt).__name__} {str(prompt)[:80]!r}")
    if not prompt.strip():
        raise ValueError(f"prompt is empty ({prompt!r}): give the model some text to continue")
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
        return PromptLookupDrafter(config.max_matching_ngram_size, history=history)
    if kind not in DRAFTERS:
        raise ValueError(f"drafter must be one of {DRAFTERS}, got {kind!r}")
    if draft is None:
        raise ValueError(f"the {kind} drafter needs a draft model: give one, or use prompt lookup")
    if kind == HYBRID:
        return HybridDrafter(
            make_drafter(DRAFT_MODEL, target, draft, config, rng, prompt), PromptLookupDrafter(config.max_matching_ngram_size, history=history)
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


def choose_drafter(draft: LoadedModel | None, prompt_lookup: bool, drafter: str | None = None) -> str | None:
    """The drafter a call asks for, as transformers and openvino-genai read their arguments: a draft
    model drafts, prompt lookup drafts, both make the hybrid, neither decodes plainly (None). An
    explicit `drafter` is checked against them; ValueError names what does not fit."""
    if not isinstance(prompt_lookup, bool):
        raise ValueError(f"prompt_lookup must be True or False, got {prompt_lookup!r}")
    if draft is not None and not isinstance(draft, LoadedModel):
        raise ValueError(f"draft must be a model from load_model(...), got {type(draft).__name__} {str(draft)[:80]!r}")
    if drafter is None:
        if draft is not None:
            return HYBRID if prompt_lookup else DRAFT_MODEL
        return PROMPT_LOOKUP if prompt_lookup else None
    if drafter not in DRAFTERS:
        raise ValueError(f"drafter must be one of {', '.join(DRAFTERS)}, got {drafter!r}")
    if drafter in (HYBRID, DRAFT_MODEL) and draft is None:
        raise ValueError(f"the {drafter} drafter needs a draft model: pass draft=load_model(...), or prompt_lookup=True")
    if drafter == PROMPT_LOOKUP and draft is not None:
        raise ValueError(f"drafter={drafter!r} drafts without a model, but draft={draft.ref!r} was given: "
                         "leave out one of the two, or use drafter='hybrid'")
    if drafter == DRAFT_MODEL and prompt_lookup:
        raise ValueError(f"drafter={drafter!r} drafts with the model alone, but prompt_lookup=True was given: "
                         "use drafter='hybrid' for both")
    return drafter


def stream(
    prompt: str,
    target: LoadedModel,
    config: GenerationConfig | None = None,
    *,
    draft: LoadedModel | None = None,
    prompt_lookup: bool = False,
    drafter: str | None = None,
    cancel: threading.Event | None = None,
    history: AnswerHistory | None = None,
    **settings,
) -> Iterator[Step]:
    """Stream a generation: a Step per target call, with its tokens, their provenance and the
    statistics so far (each Step its own copy).

    Plain autoregressive decoding unless a drafter is asked for: `draft=` a loaded model (as
    transformers' `assistant_model=`, openvino-genai's `draft_model=`), `prompt_lookup=True`, or
    both for the hybrid, which drafts each round with whichever pays more; `drafter=` names one
    explicitly (DRAFT_MODEL, PROMPT_LOOKUP or HYBRID). Generation settings are GenerationConfig's
    fields as keywords (`max_new_tokens=64, temperature=0.7`), on top of `config` if one is given.
    cancel: set it to stop after the current step. history: the target's earlier answers; prompt
    lookup (alone or in the hybrid) searches those to other prompts, and a generation that
    finishes adds its answer (whatever the drafter).

    Raises ValueError, naming the offending values, for a setting out of range, an unknown setting
    or drafter, an empty prompt, or models that are not loaded.
    """
    config = (GenerationConfig() if config is None else config).updated(**settings)
    if not isinstance(target, LoadedModel):
        hint = f": load it first, target = load_model({target!r})" if isinstance(target, str) else ""
        raise ValueError(f"target must be a model from load_model(...), got {type(target).__name__}{hint}")
    kind = choose_drafter(draft, prompt_lookup, drafter)
    prompt_ids = encode_prompt(target.tokenizer, prompt, config.chat)
    rng = np.random.default_rng(config.seed)
    vocab = target.vocab_size
    if kind is not None:
        chosen = make_drafter(kind, target, draft, config, rng, prompt, history.corpus(prompt_ids) if history else None)
        model = chosen.model if isinstance(chosen, HybridDrafter) else chosen
        if isinstance(model, DraftModelDrafter):
            vocab = model.sampler.vocab_size
    sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, rng)
    generation = Generation(target.tokenizer, prompt_ids, config, target.eos_token_ids)
    target_cache = target.model.new_cache()
    if kind is None:
        return _releasing(autoregressive(target_cache, sampler, generation, cancel), [target_cache], history, generation)
    # A draft model's cost is a property of the pair, a verify call's of the target: what dynamic K
    # learned of them carries over to the next generation. Prompt lookup's payoff depends on the
    # prompt, so it starts afresh. The hybrid learns apart from the draft model alone: it drafts
    # with the model only where lookup finds nothing, the hard places, and its acceptance there
    # would make the model alone look worse than it is.
    learned, memory, caches = target_memory(target), None, [target_cache]
    if isinstance(model, (DraftModelDrafter, CrossTokenizerDrafter)):
        memory = learned.pairs.setdefault((str(draft.resolved.path), kind), PairMemory())
        caches.append(model.cache)
    steps = speculative(
        target_cache, chosen, sampler, generation, config.num_assistant_tokens, config.dynamic_k, memory, cancel,
        config.max_matching_ngram_size, learned.call_costs,
    )
    return _releasing(steps, caches, history, generation)


def generate(
    prompt: str,
    target: LoadedModel,
    config: GenerationConfig | None = None,
    *,
    draft: LoadedModel | None = None,
    prompt_lookup: bool = False,
    drafter: str | None = None,
    cancel: threading.Event | None = None,
    history: AnswerHistory | None = None,
    **settings,
) -> GenerationResult:
    """Generate the whole answer and return it with its statistics (`.text`, `.token_ids`, `.stats`).

    Takes what `stream` takes: plain decoding by default; `draft=` a loaded model, `prompt_lookup=True`,
    or both (the hybrid) turn speculation on; settings as keywords (`max_new_tokens=64`) or a
    GenerationConfig. ValueError names any offending value.

        target = load_model("embedded:Qwen2.5-Coder-1.5B-Instruct")
        print(generate("Rename x to n: def f(x): return x * x", target, prompt_lookup=True).text)
    """
    steps = stream(prompt, target, config, draft=draft, prompt_lookup=prompt_lookup, drafter=drafter, cancel=cancel,
                   history=history, **settings)
    return GenerationResult.of(steps, choose_drafter(draft, prompt_lookup, drafter))


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
