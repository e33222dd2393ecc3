"""Plain autoregressive decoding with a KV cache: the baseline lane, and the one-token target step both loops take."""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from spec.decoding.generation import TARGET, Generation, Step
from spec.decoding.metrics import Stats
from spec.decoding.sampling import Sampler

if TYPE_CHECKING:  # only for types: decoding itself runs on any object with forward()
    from spec.models.runtime import StatefulLM


def decode_one_token(cache: "StatefulLM", token_ids: Sequence[int], sampler: Sampler) -> tuple[int, np.ndarray | None]:
    """Feed the tokens the cache has not seen yet; return the next token and its distribution."""
    logits = cache.forward(token_ids, keep=1)
    return sampler.next_token(logits[-1])


def target_step(cache: "StatefulLM", token: int, sampler: Sampler, stats: Stats) -> tuple[int, float]:
    """One plain target call after the prompt: feed `token`, draw the next; counted and timed in `stats`.
    Returns the next token and the call's seconds."""
    started = time.perf_counter()
    token, _ = decode_one_token(cache, [token], sampler)
    seconds = time.perf_counter() - started
    stats.record_plain(seconds)
    return token, seconds


def autoregressive(
    cache: "StatefulLM", sampler: Sampler, generation: Generation, cancel: threading.Event | None = None
) -> Iterator[Step]:
    """One target call per token. Yields a Step per token until the generation stops."""
    generation.resume()
    cache.reset()
    token, _ = decode_one_token(cache, generation.prompt_ids, sampler)  # prefill
    generation.stats.target_calls += 1
    while True:
        step = generation.emit([token], [TARGET])
        yield step
        generation.resume()
        if step.finished:
            return
        if cancel is not None and cancel.is_set():
            yield generation.cancel()
            return
        token, _ = target_step(cache, token, sampler, generation.stats)
