"""The engine's front door: pair a target with a drafter, and stream a generation (`stream`) or
return it whole (`generate`), in the shape of transformers' and openvino-genai's `generate`.

Used alike by the command line, the race (the Space) and the benchmark. Nothing here knows about a UI.
"""
from __future__ import annotations

import threading
import weakref
from typing import Iterator

import numpy as np

from spec.config import DRAFT_MODEL, HYBRID, PROMPT_LOOKUP, GenerationConfig
from spec.decoding.autoregressive import autoregressive
from spec.decoding.drafters import Drafter
from spec.decoding.generation import Generation, GenerationResult, Step
from spec.decoding.history import AnswerHistory
from spec.decoding.plugins import PLUGINS, DraftSetup, drafter_plugin
from spec.decoding.prompt import encode_prompt
from spec.decoding.sampling import Sampler
from spec.decoding.speculative import speculative
from spec.decoding.target_memory import LearnedState, TargetMemory
from spec.models.registry import LoadedModel

__all__ = ["LearnedState", "choose_drafter", "encode_prompt", "generate", "make_drafter", "stream"]


def make_drafter(
    kind: str, target: LoadedModel, draft: LoadedModel | None, config: GenerationConfig, rng: np.random.Generator,
    prompt: str = "", history: np.ndarray | None = None, target_memory: TargetMemory | None = None,
) -> Drafter:
    """The drafter the plug-in called `kind` makes for one generation (spec.decoding.plugins).
    `prompt` is the prompt's text (a draft with another tokenizer encodes it itself); `history`:
    the target's other answers, for prompt lookup to search (AnswerHistory.corpus); `target_memory`: what
    earlier generations learned about the target (LearnedState.about)."""
    plugin = drafter_plugin(kind)
    if plugin.needs_draft_model and draft is None:
        raise ValueError(f"the {kind} drafter needs a draft model: give one, or use prompt lookup")
    return plugin.drafter(DraftSetup(target, draft, config, rng, prompt, history, target_memory))


def choose_drafter(draft: LoadedModel | None, prompt_lookup: bool, drafter: str | None = None) -> str | None:
    """The drafter a call asks for, as transformers and openvino-genai read their arguments: a draft
    model drafts, prompt lookup drafts, both make the hybrid, neither decodes plainly (None). An
    explicit `drafter` (any plug-in's name) is checked against them; ValueError names what does not fit."""
    if not isinstance(prompt_lookup, bool):
        raise ValueError(f"prompt_lookup must be True or False, got {prompt_lookup!r}")
    if draft is not None and not isinstance(draft, LoadedModel):
        raise ValueError(f"draft must be a model from load_model(...), got {type(draft).__name__} {str(draft)[:80]!r}")
    if drafter is None:
        if draft is not None:
            return HYBRID if prompt_lookup else DRAFT_MODEL
        return PROMPT_LOOKUP if prompt_lookup else None
    if drafter_plugin(drafter).needs_draft_model and draft is None:
        raise ValueError(f"the {drafter} drafter needs a draft model: pass draft=load_model(...), or draft without "
                         f"one (drafter={PROMPT_LOOKUP!r})")
    if not PLUGINS[drafter].needs_draft_model and draft is not None:
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
    learned: LearnedState | None = None,
    **settings,
) -> Iterator[Step]:
    """Stream a generation: a Step per target call, with its tokens, their provenance and the
    statistics so far (each Step its own copy).

    Plain autoregressive decoding unless a drafter is asked for: `draft=` a loaded model (as
    transformers' `assistant_model=`, openvino-genai's `draft_model=`), `prompt_lookup=True`, or
    both for the hybrid, which drafts each round with whichever pays more; `drafter=` names one
    explicitly (a name in spec.decoding.plugins.PLUGINS: DRAFT_MODEL, PROMPT_LOOKUP, HYBRID). Generation settings are GenerationConfig's
    fields as keywords (`max_new_tokens=64, temperature=0.7`), on top of `config` if one is given.
    cancel: set it to stop after the current step. history: the target's earlier answers; prompt
    lookup (alone or in the hybrid) searches those to other prompts, and a generation that
    finishes adds its answer (whatever the drafter). learned: what earlier generations learned about
    their targets (a LearnedState the caller keeps beside its models); a speculative generation
    starts from it and adds to it. None: it learns afresh, and what it learns goes with it.

    Raises ValueError, naming the offending values, for a setting out of range, an unknown setting
    or drafter, an empty prompt or one that with max_new_tokens overflows the model's context, an
    argument of the wrong kind, or models that are not loaded.
    """
    if config is not None and not isinstance(config, GenerationConfig):
        raise ValueError(f"config must be a GenerationConfig, got {type(config).__name__} {str(config)[:40]!r}: "
                         "or give the settings as keywords, e.g. max_new_tokens=64")
    config = (GenerationConfig() if config is None else config).updated(**settings)
    if not isinstance(target, LoadedModel):
        hint = f": load it first, target = load_model({(target if isinstance(target, str) else None)!r})"
        raise ValueError(f"target must be a model from load_model(...), got {type(target).__name__}{hint}")
    for name, value, wanted, called in (("cancel", cancel, threading.Event, "a threading.Event (set it to stop)"),
                                        ("history", history, AnswerHistory, "an AnswerHistory"),
                                        ("learned", learned, LearnedState, "a LearnedState")):
        if value is not None and not isinstance(value, wanted):
            raise ValueError(f"{name} must be {called} or None, got {type(value).__name__}")
    kind = choose_drafter(draft, prompt_lookup, drafter)
    prompt_ids = encode_prompt(target.tokenizer, prompt, config.chat)
    context = target.context_length
    if context is not None and len(prompt_ids) + config.max_new_tokens > context:  # past it a model writes garbage
        raise ValueError(f"the prompt is {len(prompt_ids):,} tokens (its chat template included); with max_new_tokens="
                         f"{config.max_new_tokens:,} it would not fit the model's context of {context:,} tokens: "
                         "shorten the prompt or ask for fewer new tokens")
    rng = np.random.default_rng(config.seed)
    chosen = target_memory = None
    if kind is not None:
        learned = learned if learned is not None else LearnedState()
        target_memory = learned.about(target)
        chosen = make_drafter(kind, target, draft, config, rng, prompt, history.corpus(prompt_ids) if history else None,
                              target_memory)
    vocab = chosen.target_vocab if chosen is not None and chosen.target_vocab is not None else target.vocab_size
    sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, rng)
    generation = Generation(target.tokenizer, prompt_ids, config, target.eos_token_ids)
    generation.stats.compiled_with = target.settings(speculative=chosen is not None)
    if chosen is None:
        target_cache = target.model.new_cache()
        return _releasing(autoregressive(target_cache, sampler, generation, cancel), target_cache, None, history, generation)
    # A draft model's cost is a property of the pair, a verify call's of the target: what dynamic K
    # learned of them carries over to the next generation given the same `learned` (and to the next
    # start, where it keeps them in a file: spec.decoding.kept_pairs). Prompt lookup's acceptance
    # depends on the prompt, so it is learned afresh; what its wide rounds kept (LookupYields) is
    # the target's, shared by lookup and the hybrid. Each drafter's pair record is its own (the key
    # names it): the hybrid drafts with the model only where lookup finds nothing, the hard places,
    # and its acceptance there would make the model alone look worse than it is.
    plugin, pair = PLUGINS[kind], None
    if plugin.needs_draft_model:
        pair = learned.pair(target, draft, kind)
    schedule = plugin.schedule(chosen, config, pair, target_memory)
    target_cache = target.for_rounds()[0].new_cache()  # compiled as verify rounds run fastest on this machine
    steps = speculative(target_cache, chosen, schedule, sampler, generation, cancel, config.max_matching_ngram_size)
    return _releasing(steps, target_cache, chosen, history, generation)


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
    learned: LearnedState | None = None,
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
                   history=history, learned=learned, **settings)
    return GenerationResult.of(steps, choose_drafter(draft, prompt_lookup, drafter))


def _releasing(
    steps: Iterator[Step], target_cache, drafter: Drafter | None, history: AnswerHistory | None, generation: Generation,
) -> Iterator[Step]:
    """`steps`, then the KV caches (the target's, and the drafter's if it has one) go back to their
    models' pools, once: when the generation ends, is closed (Stop, a closed tab) or is dropped, even
    before its first step (a generator never started never runs its `finally`: a finalizer does,
    else the caches' warm infer requests would be lost to the pools). A generation that ran to its
    end adds its answer to `history`."""
    given_back = threading.Event()

    def release() -> None:
        if not given_back.is_set():
            given_back.set()
            target_cache.release()
            if drafter is not None:
                drafter.release()

    def run() -> Iterator[Step]:
        try:
            yield from steps
            if history is not None and generation.stats.stop_reason != "cancelled":
                history.add(generation.prompt_ids, generation.token_ids)
        finally:
            steps.close()
            release()

    running = run()
    weakref.finalize(running, release)
    return running
