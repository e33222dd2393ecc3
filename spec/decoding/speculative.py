"""Speculative sampling: draft, verify in one target call, accept a prefix, roll back, adapt.

`p` is the target's distribution, `q` the draft's. The target keeps its own KV cache; so does a
draft model (inside its drafter). Output follows p exactly: token for token the same as greedy
autoregressive decoding when greedy, and the same distribution when sampling.

A verify call checks the round's K drafts at width K+1 (the pending token and the drafts), K chosen
each round by the drafter's schedule (spec.decoding.policy): fixed, or from what the target's calls
of each width cost. A drafter that makes fewer tokens than the round's K (a draft model that
dynamic K holds back, prompt lookup without a long enough match) has the rest filled with free
guesses (`pad_draft`), where changing the width would cost more than verifying them; a draft model
that stopped early, after a token it doubts, is checked at a narrower width where that costs less
(`Schedule.verify_k`).
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from spec.decoding.acceptance import speculative_accept
from spec.decoding.autoregressive import decode_one_token, target_step
from spec.decoding.drafters import Drafter, pad_draft
from spec.decoding.generation import BONUS, CORRECTION, LOOKUP, TARGET, Generation, Step
from spec.decoding.policy import RoundResult, Schedule
from spec.decoding.sampling import Sampler

if TYPE_CHECKING:
    from spec.models.runtime import StatefulLM


def speculative(
    target_cache: "StatefulLM",
    drafter: Drafter,
    schedule: Schedule,
    sampler: Sampler,
    generation: Generation,
    cancel: threading.Event | None = None,
    lookup_ngram: int = 3,
) -> Iterator[Step]:
    """Yields a Step per target call until the generation stops.

    target_cache: the target's KV cache; the drafter keeps its own, if it has one. schedule: plans
    each round (K, how many of them the drafter makes) and learns from it (spec.decoding.policy).
    cancel: set it to stop after the current step. lookup_ngram: the longest n-gram guesses match on.
    """
    generation.stats.drafted_by = drafter.name
    generation.resume()
    target_cache.reset()
    token, _ = decode_one_token(target_cache, generation.prompt_ids, sampler)  # prefill: the first token is the target's
    schedule.observe_other_call()  # the prompt's: unknown, so the first round is planned as nothing was called yet
    generation.stats.target_calls += 1
    context = [*generation.prompt_ids, token]  # the target's cache holds all but the last token
    step = generation.emit([token], [TARGET])
    yield step
    while not step.finished:
        generation.resume()
        if cancel is not None and cancel.is_set():
            yield generation.cancel()
            return
        other = target_cache.others_width  # another generation on this compiled model (the race's other lane) called it since
        if other is not None:
            schedule.observe_other_call(other)
        k, draft_length, source = schedule.next_round(context)  # 0. Plan: the width, the drafts, their source
        if k == 0 or generation.remaining == 1:  # drafting does not pay right now (or one token is left)
            step = _plain_step(target_cache, context, sampler, schedule, generation)
            yield step
            continue
        # 1. Draft, never past max_new_tokens (those tokens could not be kept); free guesses fill the width.
        proposal = drafter.propose(context, min(draft_length, generation.remaining - 1), source)
        k = schedule.verify_k(len(proposal.tokens))  # a draft that stopped early may be checked narrower
        drafts = pad_draft(context, proposal.tokens, k, lookup_ngram)
        q = _with_guesses(proposal.q, drafts)
        # 2. Verify: one target call scores the pending token and every draft, plus the bonus position.
        started = time.perf_counter()
        p = sampler.distribution(target_cache.forward([context[-1], *drafts.tolist()]))
        # 3. Accept a prefix (and draw the correction or bonus token from p).
        accepted, next_token = speculative_accept(p, q, drafts, sampler.rng)
        verify_seconds = time.perf_counter() - started
        # 4. Roll back both caches to the accepted length.
        target_cache.trim(target_cache.length - (k - accepted))
        new_tokens = [*drafts[:accepted].tolist(), next_token]
        context += new_tokens
        drafter.roll_back(context)
        # 5. Adapt: the schedule learns from what this round measured.
        drafted, catch_up = len(proposal.tokens), proposal.catch_up_seconds
        schedule.observe_round(RoundResult(drafted, accepted, proposal.seconds - catch_up, verify_seconds, catch_up, proposal.calls))
        kinds = [proposal.kind if i < drafted else LOOKUP for i in range(accepted)]  # a kept guess is a lookup
        generation.stats.record_round(k, accepted, kinds.count(LOOKUP), drafted, proposal.seconds, catch_up, verify_seconds)
        step = generation.emit(new_tokens, [*kinds, BONUS if accepted == k else CORRECTION])
        yield step


def _plain_step(target_cache: "StatefulLM", context: list[int], sampler: Sampler, schedule: Schedule, generation: Generation) -> Step:
    """One target call for one token, where drafting does not pay: the schedule learns what it cost."""
    token, seconds = target_step(target_cache, context[-1], sampler, generation.stats)
    schedule.observe_plain(seconds)
    context.append(token)
    return generation.emit([token], [TARGET])


def _with_guesses(q: np.ndarray | None, drafts: np.ndarray) -> np.ndarray | None:
    """q for a padded draft: the drafter's rows, then one-hot rows for the guesses (each was certain)."""
    if q is None or len(q) == len(drafts):
        return q
    guesses = np.zeros((len(drafts) - len(q), q.shape[1]), dtype=q.dtype)
    guesses[np.arange(len(guesses)), drafts[len(q) :]] = 1.0
    return np.concatenate([q, guesses])
