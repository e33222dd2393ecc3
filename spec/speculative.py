"""Speculative sampling: draft K tokens, verify them in one target call, accept a prefix, roll back, adapt.

`p` is the target's distribution, `q` the draft's. The target keeps its own KV cache; so does a
draft model (inside its drafter). Output follows p exactly: token for token the same as greedy
autoregressive decoding when greedy, and the same distribution when sampling.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator

from spec.acceptance import speculative_accept
from spec.adaptive_k import DynamicK, PairMemory
from spec.autoregressive import decode_one_token
from spec.drafters import Drafter
from spec.generation import ACCEPTED, BONUS, CORRECTION, TARGET, Generation, Step
from spec.runtime import StatefulLM
from spec.sampling import Sampler


def speculative(
    cache: StatefulLM,
    drafter: Drafter,
    sampler: Sampler,
    generation: Generation,
    cancel: threading.Event | None = None,
    memory: PairMemory | None = None,
) -> Iterator[Step]:
    """Yields a Step per target call until the generation stops.

    `memory` carries what dynamic K measured for this pair in earlier generations (None: start afresh).
    """
    config = generation.config
    schedule = DynamicK(config.num_assistant_tokens, config.max_assistant_tokens, config.dynamic_k, memory)
    stats = generation.stats
    generation.resume()
    cache.reset()
    token, _ = decode_one_token(cache, generation.prompt_ids, sampler)  # prefill: the first token is the target's
    context = [*generation.prompt_ids, token]  # the target's cache holds all but the last token
    stats.target_calls += 1
    step = generation.emit([token], [TARGET])
    yield step

    while not step.finished:
        generation.resume()
        if cancel is not None and cancel.is_set():
            yield generation.cancel()
            return
        # Never draft past max_new_tokens: those tokens could not be kept.
        k = min(schedule.next_k(), generation.remaining - 1)

        # 1. Draft.
        proposal = drafter.propose(context, k) if k > 0 else None
        stats.target_calls += 1
        started = time.perf_counter()
        if proposal is None or len(proposal.tokens) == 0:
            token, _ = decode_one_token(cache, [context[-1]], sampler)
            seconds = time.perf_counter() - started
            stats.target_seconds += seconds
            stats.plain_steps += 1
            schedule.observe_plain(seconds)
            context.append(token)
            step = generation.emit([token], [TARGET])
            yield step
            continue
        drafted = len(proposal.tokens)
        stats.draft_seconds += proposal.seconds

        # 2. Verify: one target call scores the pending token and every draft, plus the bonus position.
        logits = cache.forward([context[-1], *proposal.tokens.tolist()])
        p = sampler.distribution(logits)

        # 3. Accept a prefix (and draw the correction or bonus token from p).
        accepted, next_token = speculative_accept(p, proposal.q, proposal.tokens, sampler.rng)
        verify_seconds = time.perf_counter() - started
        stats.target_seconds += verify_seconds

        # 4. Roll back both caches to the accepted length.
        cache.trim(cache.length - (drafted - accepted))
        new_tokens = [*proposal.tokens[:accepted].tolist(), next_token]
        context += new_tokens
        drafter.roll_back(context)

        # 5. Adapt K to what this round measured.
        schedule.observe_round(drafted, accepted, proposal.seconds - proposal.catch_up_seconds, verify_seconds)
        stats.drafted += drafted
        stats.accepted += accepted
        stats.record_round(accepted)
        step = generation.emit(new_tokens, [ACCEPTED] * accepted + [BONUS if accepted == drafted else CORRECTION])
        yield step
