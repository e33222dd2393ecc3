"""Speculative sampling: draft K tokens, verify them in one target call, accept a prefix, roll back, adapt.

`p` is the target's distribution, `q` the draft's. The target keeps its own KV cache; so does a
draft model (inside its drafter). Output follows p exactly: token for token the same as greedy
autoregressive decoding when greedy, and the same distribution when sampling.

Every verify call has the same width, K+1: a drafter that proposes fewer than K tokens (a draft
model that dynamic K holds back, prompt lookup without a long enough match) has the rest filled
with free guesses (`pad_draft`), because changing the width costs more than verifying them.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator

import numpy as np

from spec.acceptance import speculative_accept
from spec.adaptive_k import DynamicK, PairMemory
from spec.autoregressive import decode_one_token
from spec.drafters import Drafter, pad_draft
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
    width = config.num_assistant_tokens  # K: tokens every verify call checks
    schedule = DynamicK(width, width, config.dynamic_k, memory)
    stats = generation.stats
    generation.resume()
    cache.reset()
    token, _ = decode_one_token(cache, generation.prompt_ids, sampler)  # prefill: the first token is the target's
    context = [*generation.prompt_ids, token]  # the target's cache holds all but the last token
    # A call right after one of another width also pays for OpenVINO re-preparing the model (the
    # first plain step after the prompt, the first round after a pause): it is no fair sample of
    # a step's or a round's cost, so dynamic K is not shown its time.
    last_width = len(generation.prompt_ids)
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

        # 1. Draft (or, when drafting does not pay, take a plain step).
        stats.target_calls += 1
        if k <= 0:
            started = time.perf_counter()
            token, _ = decode_one_token(cache, [context[-1]], sampler)
            seconds = time.perf_counter() - started
            stats.target_seconds += seconds
            stats.plain_steps += 1
            schedule.observe_plain(seconds if last_width == 1 else None)
            last_width = 1
            context.append(token)
            step = generation.emit([token], [TARGET])
            yield step
            continue
        proposal = drafter.propose(context, k)
        drafts = pad_draft(context, proposal.tokens, width, config.prompt_lookup_max_ngram)
        q = _with_guesses(proposal.q, drafts)
        stats.draft_seconds += proposal.seconds

        # 2. Verify: one target call scores the pending token and every draft, plus the bonus position.
        started = time.perf_counter()
        logits = cache.forward([context[-1], *drafts.tolist()])
        p = sampler.distribution(logits)

        # 3. Accept a prefix (and draw the correction or bonus token from p).
        accepted, next_token = speculative_accept(p, q, drafts, sampler.rng)
        verify_seconds = time.perf_counter() - started
        stats.target_seconds += verify_seconds

        # 4. Roll back both caches to the accepted length.
        cache.trim(cache.length - (width - accepted))
        new_tokens = [*drafts[:accepted].tolist(), next_token]
        context += new_tokens
        drafter.roll_back(context)

        # 5. Adapt K to what this round measured. A draft model is judged by the tokens it made; a free
        # drafter by the whole width, whose guesses are lookups too: a round without any match then
        # still counts, so a prompt that never repeats itself leads to plain steps.
        judged = width if drafter.free else len(proposal.tokens)
        fair = verify_seconds if last_width == width + 1 else None
        schedule.observe_round(judged, min(accepted, judged), proposal.seconds - proposal.catch_up_seconds, fair)
        last_width = width + 1
        stats.drafted += width
        stats.accepted += accepted
        stats.record_round(accepted)
        step = generation.emit(new_tokens, [ACCEPTED] * accepted + [BONUS if accepted == width else CORRECTION])
        yield step


def _with_guesses(q: np.ndarray | None, drafts: np.ndarray) -> np.ndarray | None:
    """q for a padded draft: the drafter's rows, then one-hot rows for the guesses (each was certain)."""
    if q is None or len(q) == len(drafts):
        return q
    guesses = np.zeros((len(drafts) - len(q), q.shape[1]), dtype=q.dtype)
    guesses[np.arange(len(guesses)), drafts[len(q) :]] = 1.0
    return np.concatenate([q, guesses])
