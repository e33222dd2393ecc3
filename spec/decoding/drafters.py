"""Drafters propose the next K tokens cheaply; the target then verifies them in one call.

Drafters behind one small interface (as transformers' CandidateGenerator):
- DraftModelDrafter: a small model with its own KV cache, decoding K tokens autoregressively.
- PromptLookupDrafter: copies what followed the latest earlier occurrence of the last n-gram
  (Saxena 2023); no second model, strong on input-grounded prompts.
- HybridDrafter: each round, one of the two (spec.decoding.adaptive_k.HybridK decides which).
A draft model with another tokenizer drafts through text: spec.decoding.cross_tokenizer.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple, Protocol, Sequence

import numpy as np

from spec.decoding.autoregressive import decode_one_token
from spec.config import DRAFT_MODEL, PROMPT_LOOKUP
from spec.decoding.sampling import Sampler

if TYPE_CHECKING:
    from spec.decoding.runtime import StatefulLM


class Proposal(NamedTuple):
    tokens: np.ndarray  # (n,) drafted token ids, n may be smaller than asked (even 0)
    q: np.ndarray | None  # (n, vocab) draft distributions, or None: each token was certain (q one-hot)
    seconds: float  # time spent drafting, catching up included
    catch_up_seconds: float = 0.0  # of which feeding the draft what it missed (the prompt, or a pause)
    source: str = DRAFT_MODEL  # who made them: DRAFT_MODEL or PROMPT_LOOKUP (free guesses are lookups)
    calls: int = 0  # the draft model's forward calls, the catch-up excluded: a round's cost is per call


class Drafter(Protocol):
    name: str  # what drafts, in words (the CLI's JSON and the page say it)
    free: bool  # drafting costs next to nothing (no model): it answers for the whole verify width

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        """Up to n tokens to follow `context` (prompt + all accepted tokens); `source` is for a
        drafter that has several (HybridDrafter)."""

    def roll_back(self, context: Sequence[int]) -> None:
        """Forget whatever does not extend `context` (the drafts the target rejected)."""


class DraftModelDrafter:
    """A small draft model, sampled with the same transforms as the target so q matches p's form."""

    name = "draft model"
    free = False

    def __init__(self, cache: "StatefulLM", sampler: Sampler):
        self.cache = cache
        self.sampler = sampler
        self._cached: list[int] = []  # the tokens the draft's KV cache holds, in order

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        started = time.perf_counter()
        self.roll_back(context)
        pending = list(context[len(self._cached) :])
        catch_up, calls = 0.0, 0
        if len(pending) > 1:
            # Feed all but the last pending token in one call. After an ordinary round that is one
            # token, so the draft model always runs at width 1: a call of a new width costs about
            # as much as a whole step (see pad_draft). After the prompt or a pause, it is a catch-up.
            self.cache.forward(pending[:-1], keep=1)
            self._cached += pending[:-1]
            if len(pending) > 2:
                catch_up = time.perf_counter() - started
            else:
                calls += 1  # feeding the one token the target added: part of an ordinary round
            pending = pending[-1:]
        tokens, dists = [], []
        for _ in range(n):
            token, q = decode_one_token(self.cache, pending, self.sampler)
            self._cached += pending
            tokens.append(token)
            dists.append(q)
            pending = [token]
        # The last drafted token is not fed: the next round feeds it only if the target keeps it.
        q = None if self.sampler.greedy else np.stack(dists)
        return Proposal(np.asarray(tokens, dtype=np.int64), q, time.perf_counter() - started, catch_up, calls=calls + n)

    def roll_back(self, context: Sequence[int]) -> None:
        keep = _common_prefix_length(self._cached, context)
        if keep == len(context) and keep > 0:
            keep -= 1  # always re-feed the last token: its logits are what the next draft step needs
        if keep < len(self._cached):
            self.cache.trim(keep)
            del self._cached[keep:]


class PromptLookupDrafter:
    """Proposes the tokens that followed the most recent earlier match of the context's last n-gram."""

    name = "prompt lookup"
    free = True

    def __init__(self, max_ngram_size: int = 3, min_ngram_size: int = 1):
        self.max_ngram_size = max_ngram_size
        self.min_ngram_size = min_ngram_size

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        started = time.perf_counter()
        tokens = prompt_lookup(np.asarray(context, dtype=np.int64), n, self.max_ngram_size, self.min_ngram_size)
        return Proposal(tokens, None, time.perf_counter() - started, source=PROMPT_LOOKUP)

    def roll_back(self, context: Sequence[int]) -> None:
        pass  # stateless: it reads the context afresh every round


class HybridDrafter:
    """A draft model and prompt lookup; each round the schedule says which one drafts."""

    free = False

    def __init__(self, model: Drafter, lookup: PromptLookupDrafter):
        self.model, self.lookup = model, lookup
        self.name = f"hybrid: {model.name} or prompt lookup"

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        return (self.lookup if source == PROMPT_LOOKUP else self.model).propose(context, n)

    def roll_back(self, context: Sequence[int]) -> None:
        self.model.roll_back(context)


class Match(NamedTuple):
    ngram: int  # length of the context's suffix found earlier in it (longer: more likely copied on)
    start: int  # where what followed that earlier occurrence begins
    available: int  # how many tokens follow it, up to the end of the context


def find_match(context: np.ndarray, max_ngram_size: int = 3, min_ngram_size: int = 1) -> Match | None:
    """The latest earlier occurrence of the longest suffix n-gram that has something after it."""
    for size in range(min(max_ngram_size, len(context) - 1), min_ngram_size - 1, -1):
        windows = np.lib.stride_tricks.sliding_window_view(context[:-1], size)
        matches = np.flatnonzero((windows == context[-size:]).all(axis=1))
        for start in matches[::-1]:
            if start + size < len(context):
                return Match(size, int(start + size), int(len(context) - start - size))
    return None


def prompt_lookup(context: np.ndarray, n: int, max_ngram_size: int = 3, min_ngram_size: int = 1) -> np.ndarray:
    """Up to n tokens that followed the latest earlier occurrence of the longest matching suffix n-gram."""
    match = find_match(context, max_ngram_size, min_ngram_size)
    if match is None:
        return np.empty(0, dtype=np.int64)
    return context[match.start : match.start + n].copy()


def pad_draft(context: Sequence[int], draft: np.ndarray, k: int, max_ngram_size: int = 3) -> np.ndarray:
    """`draft` extended to k tokens with free guesses: prompt lookup over the context and the draft,
    then the last token repeated.

    OpenVINO's CPU plugin re-prepares every layer when a model's input width changes, which costs
    about half a one-token step on a small model; at a width it has just seen, verifying K+1 tokens
    costs little more than one. So every verify call gets the same width, and the slots a drafter
    leaves empty hold guesses that cost nothing and are sometimes right. They are drafts like any
    other (deterministic ones, q one-hot), so the acceptance rule keeps the output exact.
    """
    if len(draft) >= k:
        return draft[:k]
    tokens = np.concatenate([np.asarray(context, dtype=np.int64), draft])
    tokens = np.concatenate([tokens, prompt_lookup(tokens, k - len(draft), max_ngram_size)])
    padded = tokens[len(context) :]
    return np.concatenate([padded, np.full(k - len(padded), tokens[-1], dtype=np.int64)])


def _common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
