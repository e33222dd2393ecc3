"""Drafters propose the next K tokens cheaply; the target then verifies them in one call.

Two drafters behind one small interface (as transformers' CandidateGenerator):
- DraftModelDrafter: a small model with its own KV cache, decoding K tokens autoregressively.
- PromptLookupDrafter: copies what followed the latest earlier occurrence of the last n-gram
  (Saxena 2023); no second model, strong on input-grounded prompts.
"""
from __future__ import annotations

import time
from typing import NamedTuple, Protocol, Sequence

import numpy as np

from spec.autoregressive import decode_one_token
from spec.runtime import StatefulLM
from spec.sampling import Sampler


class Proposal(NamedTuple):
    tokens: np.ndarray  # (k,) drafted token ids, k may be smaller than asked (even 0)
    q: np.ndarray | None  # (k, vocab) draft distributions, or None: each token was certain (q one-hot)
    seconds: float  # time spent drafting, catching up included
    catch_up_seconds: float = 0.0  # of which feeding the draft what it missed (the prompt, or a pause)


class Drafter(Protocol):
    name: str

    def propose(self, context: Sequence[int], k: int) -> Proposal:
        """Up to k tokens to follow `context` (prompt + all accepted tokens)."""

    def roll_back(self, context: Sequence[int]) -> None:
        """Forget whatever does not extend `context` (the drafts the target rejected)."""


class DraftModelDrafter:
    """A small draft model, sampled with the same transforms as the target so q matches p's form."""

    name = "draft-model"

    def __init__(self, cache: StatefulLM, sampler: Sampler):
        self.cache = cache
        self.sampler = sampler
        self._cached: list[int] = []  # the tokens the draft's KV cache holds, in order

    def propose(self, context: Sequence[int], k: int) -> Proposal:
        started = time.perf_counter()
        self.roll_back(context)
        pending = list(context[len(self._cached) :])
        catch_up = 0.0
        if len(pending) > 2:  # after the prompt or a pause: feed what the draft missed in one call
            self.cache.forward(pending[:-1], keep=1)
            self._cached += pending[:-1]
            pending = pending[-1:]
            catch_up = time.perf_counter() - started
        tokens, dists = [], []
        for i in range(k):
            token, q = decode_one_token(self.cache, pending, self.sampler)
            self._cached += pending
            tokens.append(token)
            dists.append(q)
            pending = [token]
        # The last drafted token is not fed: the next round feeds it only if the target keeps it.
        q = None if self.sampler.greedy else np.stack(dists)
        return Proposal(np.asarray(tokens, dtype=np.int64), q, time.perf_counter() - started, catch_up)

    def roll_back(self, context: Sequence[int]) -> None:
        keep = _common_prefix_length(self._cached, context)
        if keep == len(context) and keep > 0:
            keep -= 1  # always re-feed the last token: its logits are what the next draft step needs
        if keep < len(self._cached):
            self.cache.trim(keep)
            del self._cached[keep:]

    def reset(self) -> None:
        self.cache.reset()
        self._cached = []


class PromptLookupDrafter:
    """Proposes the tokens that followed the most recent earlier match of the context's last n-gram."""

    name = "prompt-lookup"

    def __init__(self, max_ngram_size: int = 3, min_ngram_size: int = 1):
        self.max_ngram_size = max_ngram_size
        self.min_ngram_size = min_ngram_size

    def propose(self, context: Sequence[int], k: int) -> Proposal:
        started = time.perf_counter()
        tokens = prompt_lookup(np.asarray(context, dtype=np.int64), k, self.max_ngram_size, self.min_ngram_size)
        return Proposal(tokens, None, time.perf_counter() - started)

    def roll_back(self, context: Sequence[int]) -> None:
        pass  # stateless: it reads the context afresh every round


def prompt_lookup(context: np.ndarray, k: int, max_ngram_size: int = 3, min_ngram_size: int = 1) -> np.ndarray:
    """Up to k tokens that followed the latest earlier occurrence of the longest matching suffix n-gram."""
    for n in range(min(max_ngram_size, len(context) - 1), min_ngram_size - 1, -1):
        windows = np.lib.stride_tricks.sliding_window_view(context[:-1], n)
        matches = np.flatnonzero((windows == context[-n:]).all(axis=1))
        for start in matches[::-1]:
            follow = context[start + n : start + n + k]
            if len(follow):
                return follow.copy()
    return np.empty(0, dtype=np.int64)


def _common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
