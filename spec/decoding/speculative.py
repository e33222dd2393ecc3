"""Speculative sampling: draft, verify in one target call, accept a prefix, roll back, adapt.

`p` is the target's distribution, `q` the draft's. The target keeps its own KV cache; so does a
draft model (inside its drafter). Output follows p exactly: token for token the same as greedy
autoregressive decoding when greedy, and the same distribution when sampling.

A verify call checks the round's K drafts at width K+1 (the pending token and the drafts), K chosen
each round by a schedule (spec.decoding.policy) from what the target's calls of each width cost: a
drafter that makes fewer tokens than the round's K (a draft model that dynamic K holds back, prompt
lookup without a long enough match) has the rest filled with free guesses (`pad_draft`), where
changing the width would cost more than verifying them.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from spec.decoding.acceptance import speculative_accept
from spec.decoding.autoregressive import decode_one_token
from spec.config import PROMPT_LOOKUP
from spec.decoding.drafters import Drafter, pad_draft
from spec.decoding.generation import ACCEPTED, BONUS, CORRECTION, LOOKUP, TARGET, Generation, Step
from spec.decoding.policy import CallCosts, PairMemory, RoundResult, Schedule, schedule_for
from spec.decoding.sampling import Sampler

if TYPE_CHECKING:
    from spec.models.runtime import StatefulLM


def speculative(
    target_cache: "StatefulLM",
    drafter: Drafter,
    sampler: Sampler,
    generation: Generation,
    k: int,
    dynamic_k: bool = True,
    memory: PairMemory | None = None,
    cancel: threading.Event | None = None,
    lookup_ngram: int = 3,
    costs: CallCosts | None = None,
) -> Iterator[Step]:
    """Yields a Step per target call until the generation stops.

    target_cache: the target's KV cache; the drafter keeps its own, if it has one.
    k: K, the drafts each verify call checks. dynamic_k: adapt each round: for a draft model, how
    many of the K it makes (plain steps when drafting does not pay, see DynamicK); for prompt lookup,
    K itself, from the match it finds (see LookupK). memory: what dynamic K measured for this pair in
    earlier generations (None: start afresh). lookup_ngram: the longest n-gram lookups match on.
    costs: what the target's calls of each width cost in its earlier generations (None: start afresh).
    """
    schedule: Schedule = schedule_for(drafter, k, dynamic_k, memory, lookup_ngram, costs)
    stats = generation.stats
    stats.drafted_by = drafter.name
    generation.resume()
    target_cache.reset()
    token, _ = decode_one_token(target_cache, generation.prompt_ids, sampler)  # prefill: the first token is the target's
    schedule.observe_prefill()
    context = [*generation.prompt_ids, token]  # the target's cache holds all but the last token
    stats.target_calls += 1
    step = generation.emit([token], [TARGET])
    yield step

    while not step.finished:
        generation.resume()
        if cancel is not None and cancel.is_set():
            yield generation.cancel()
            return
        plan = schedule.next_round(context)
        k = plan.k
        stats.target_calls += 1
        if k == 0 or generation.remaining == 1:  # drafting does not pay right now (or one token is left): a plain step
            started = time.perf_counter()
            token, _ = decode_one_token(target_cache, [context[-1]], sampler)
            seconds = time.perf_counter() - started
            stats.target_seconds += seconds
            stats.plain_steps += 1
            schedule.observe_plain(seconds)
            context.append(token)
            step = generation.emit([token], [TARGET])
            yield step
            continue

        # 1. Draft, then fill the width with free guesses.
        # Never draft past max_new_tokens (those tokens could not be kept); guesses keep the width.
        proposal = drafter.propose(context, min(plan.draft_length, generation.remaining - 1), plan.source)
        drafts = pad_draft(context, proposal.tokens, k, lookup_ngram)
        q = _with_guesses(proposal.q, drafts)
        stats.draft_seconds += proposal.seconds
        stats.draft_catch_up_seconds += proposal.catch_up_seconds
        stats.draft_tokens += len(proposal.tokens)

        # 2. Verify: one target call scores the pending token and every draft, plus the bonus position.
        started = time.perf_counter()
        p = sampler.distribution(target_cache.forward([context[-1], *drafts.tolist()]))

        # 3. Accept a prefix (and draw the correction or bonus token from p).
        accepted, next_token = speculative_accept(p, q, drafts, sampler.rng)
        verify_seconds = time.perf_counter() - started
        stats.target_seconds += verify_seconds
        stats.verify_seconds += verify_seconds

        # 4. Roll back both caches to the accepted length.
        target_cache.trim(target_cache.length - (k - accepted))
        new_tokens = [*drafts[:accepted].tolist(), next_token]
        context += new_tokens
        drafter.roll_back(context)

        # 5. Adapt: learn from what this round measured.
        schedule.observe_round(RoundResult(
            len(proposal.tokens), accepted, proposal.seconds - proposal.catch_up_seconds, verify_seconds,
            proposal.catch_up_seconds, proposal.calls,
        ))
        stats.drafted += k
        stats.accepted += accepted
        kept = [ACCEPTED if i < len(proposal.tokens) and proposal.source != PROMPT_LOOKUP else LOOKUP for i in range(accepted)]
        stats.accepted_lookup += kept.count(LOOKUP)
        stats.record_round(accepted)
        step = generation.emit(new_tokens, kept + [BONUS if accepted == k else CORRECTION])
        yield step


def _with_guesses(q: np.ndarray | None, drafts: np.ndarray) -> np.ndarray | None:
    """q for a padded draft: the drafter's rows, then one-hot rows for the guesses (each was certain)."""
    if q is None or len(q) == len(drafts):
        return q
    guesses = np.zeros((len(drafts) - len(q), q.shape[1]), dtype=q.dtype)
    guesses[np.arange(len(guesses)), drafts[len(q) :]] = 1.0
    return np.concatenate([q, guesses])
