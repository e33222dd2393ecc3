"""The engine's front door: load models once per process, pair them, and stream a generation.

Used alike by the command line, the Space and the benchmark. Nothing here knows about a UI.
"""
from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from spec.adaptive_k import PairMemory
from spec.autoregressive import autoregressive
from spec.config import DRAFTERS, MODES, GenerationConfig
from spec.drafters import DraftModelDrafter, Drafter, PromptLookupDrafter
from spec.generation import Generation, Step
from spec.models import ModelError, ProgressFn, ResolvedModel, models_dir, resolve_model
from spec.runtime import CompiledLM, compile_model
from spec.sampling import Sampler
from spec.speculative import speculative
from spec.vocab import shared_vocab_size


@dataclass
class LoadedModel:
    """A compiled model and its tokenizer, shared by every session; each generation opens its own cache."""

    ref: str
    resolved: ResolvedModel
    model: CompiledLM
    tokenizer: object
    eos_token_ids: set[int]
    size_bytes: int  # weights on disk: what the memory budget counts
    _pairs: dict = field(default_factory=dict, repr=False)  # draft ref -> shared vocab size
    _memories: dict = field(default_factory=dict, repr=False)  # draft model folder -> PairMemory (dynamic K)

    @functools.cached_property
    def vocab_size(self) -> int:
        """Ids this model may produce: the tokenizer's vocabulary, never the embedding's padding."""
        return min(len(self.tokenizer), self.model.vocab_size)  # len() recounts it: ~10 ms, once


class ModelRegistry:
    """Compiled models keyed by (reference, weight format, precision, device), loaded once per process.

    Two threads asking for the same key wait for one load. Beyond `budget_bytes` of weights, the least
    recently used models are dropped, but never the latest two (a pair being loaded); sessions
    already holding a dropped model keep it until they finish.
    """

    def __init__(self, budget_bytes: int | None = None):
        self.budget_bytes = budget_bytes
        self._models: OrderedDict[tuple, LoadedModel] = OrderedDict()
        self._locks: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(
        self,
        ref: str | None,
        weight_format: str = "int8",
        precision: str = "default",
        device: str = "CPU",
        progress: ProgressFn | None = None,
    ) -> LoadedModel:
        key = (ref, weight_format, precision, device)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._models:
                    return self._models[key]
            loaded = load_model(ref, weight_format, precision, device, progress)
            with self._lock:
                self._models[key] = loaded
                self._evict()
            return loaded

    def loaded(self) -> list[tuple]:
        with self._lock:
            return list(self._models)

    def _evict(self) -> None:
        # The two most recently used models are never dropped: they may be the target and draft of
        # the pair being loaded right now.
        if self.budget_bytes is None:
            return
        while sum(m.size_bytes for m in self._models.values()) > self.budget_bytes and len(self._models) > 2:
            del self._models[next(iter(self._models))]


def load_model(
    ref: str | None,
    weight_format: str = "int8",
    precision: str = "default",
    device: str = "CPU",
    progress: ProgressFn | None = None,
) -> LoadedModel:
    """Resolve (download or convert if needed), compile, and load the tokenizer of one model."""
    from transformers import AutoTokenizer  # heavy import, only needed once a model is loaded

    resolved = resolve_model(ref, weight_format, progress)
    if progress:
        progress(f"Compiling {resolved.ref} for {device}", None)
    cache_dir = models_dir() / "compiled"
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        model = compile_model(resolved.path / "openvino_model.xml", precision, device, cache_dir)
        tokenizer = AutoTokenizer.from_pretrained(resolved.path)
    except (RuntimeError, OSError, ValueError) as error:
        raise ModelError(f"Could not load {resolved.ref} from {resolved.path}: {str(error).splitlines()[0]}") from error
    size = sum(f.stat().st_size for f in resolved.path.glob("*.bin"))
    return LoadedModel(resolved.ref, resolved, model, tokenizer, _eos_token_ids(resolved, tokenizer), size)


def _eos_token_ids(resolved: ResolvedModel, tokenizer) -> set[int]:
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    generation_config = resolved.path / "generation_config.json"
    if generation_config.exists():
        eos = json.loads(generation_config.read_text()).get("eos_token_id")
        ids.update(eos if isinstance(eos, list) else [] if eos is None else [eos])
    return ids


def encode_prompt(tokenizer, prompt: str, chat: bool = True) -> list[int]:
    """Token ids of the prompt, wrapped in the model's chat template when it has one and chat is on."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt is empty: give the model some text to continue")
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer(prompt)["input_ids"]


def make_drafter(kind: str, target: LoadedModel, draft: LoadedModel | None, config: GenerationConfig, rng) -> Drafter:
    """The drafter for a speculative run; checks a draft model shares the target's vocabulary."""
    if kind == "prompt-lookup":
        return PromptLookupDrafter(config.prompt_lookup_max_ngram)
    if kind != "draft-model":
        raise ValueError(f"drafter must be one of {DRAFTERS}, got {kind!r}")
    if draft is None:
        raise ValueError("the draft-model drafter needs a draft model: give one, or use prompt lookup")
    if draft.ref not in target._pairs:
        target._pairs[draft.ref] = shared_vocab_size(target.ref, target.tokenizer, draft.ref, draft.tokenizer)
    vocab = min(target.vocab_size, draft.vocab_size, target._pairs[draft.ref])
    sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, rng)
    return DraftModelDrafter(draft.model.new_cache(), sampler)


def generate(
    prompt: str,
    target: LoadedModel,
    config: GenerationConfig,
    mode: str = "speculative",
    drafter: str = "draft-model",
    draft: LoadedModel | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Step]:
    """Stream a generation: a Step per target call, with its tokens, their provenance and running stats."""
    config.validate()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    prompt_ids = encode_prompt(target.tokenizer, prompt, config.chat)
    rng = np.random.default_rng(config.seed)
    vocab = target.vocab_size
    if mode == "speculative":
        chosen = make_drafter(drafter, target, draft, config, rng)
        if isinstance(chosen, DraftModelDrafter):
            vocab = chosen.sampler.vocab_size
    sampler = Sampler(config.temperature, config.top_k, config.top_p, vocab, rng)
    generation = Generation(target.tokenizer, prompt_ids, config, target.eos_token_ids)
    cache = target.model.new_cache()
    if mode == "autoregressive":
        return _releasing(autoregressive(cache, sampler, generation, cancel), [cache])
    # A draft model's cost is a property of the pair: what dynamic K learned carries over to the
    # pair's next generation. Prompt lookup's payoff depends on the prompt, so it starts afresh.
    memory, caches = None, [cache]
    if draft is not None and isinstance(chosen, DraftModelDrafter):
        memory = target._memories.setdefault(str(draft.resolved.path), PairMemory())
        caches.append(chosen.cache)
    return _releasing(speculative(cache, chosen, sampler, generation, cancel, memory), caches)


def _releasing(steps: Iterator[Step], caches: list) -> Iterator[Step]:
    """`steps`, then the KV caches go back to their models' pools: when the generation ends, is
    closed (Stop, a closed tab) or is dropped."""
    try:
        yield from steps
    finally:
        steps.close()
        for cache in caches:
            cache.release()
