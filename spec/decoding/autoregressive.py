"""Plain autoregressive decoding with a KV cache: the baseline, and the draft model's inner step."""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from spec.decoding.generation import TARGET, Generation, Step
from spec.decoding.sampling import Sampler

if TYPE_CHECKING:  # only for types: decoding itself runs on any object with forward()
    from spec.models.runtime import StatefulLM


def decode_one_token(cache: "StatefulLM", token_ids: Sequence[int], sampler: Sampler) -> tuple[int, np.ndarray | None]:
    """Feed the tokens the cache has not seen yet; return the next token and its distribution."""
    logits = cache.forward(token_ids, keep=1)
    return sampler.next_token(logits[-1])


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
        started = time.perf_counter()
        token, _ = decode_one_token(cache, [token], sampler)
        generation.stats.target_seconds += time.perf_counter() - started
        generation.stats.target_calls += 1
        generation.stats.plain_steps += 1
