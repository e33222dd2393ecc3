"""Drafters propose the next K tokens cheaply; the target then verifies them in one call.

Drafters behind one small interface, `Drafter` (as transformers' CandidateGenerator); each is
offered to the engine, the page and the benchmark by a plug-in (spec.decoding.plugins):
- DraftModelDrafter: a small model with its own KV cache, decoding up to K tokens autoregressively
  (the round ends early after a token it doubts).
- PromptLookupDrafter: copies what followed an earlier occurrence of the context's last n-gram
  (Saxena 2023), the one whose match reaches furthest back, as an editor copies unchanged code;
  no second model, strong on input-grounded prompts. Where the context has no match of 3 tokens, it
  also searches the target's answers to other prompts (spec.decoding.history).
- HybridDrafter: each round, one of the two (spec.decoding.policy.HybridK decides which).
A draft model with another tokenizer drafts through text: spec.decoding.cross_tokenizer.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple, Protocol, Sequence

import numpy as np

from spec.config import PROMPT_LOOKUP
from spec.decoding.generation import ACCEPTED, LOOKUP
from spec.decoding.history import SEPARATOR
from spec.decoding.sampling import Sampler

if TYPE_CHECKING:
    from spec.models.runtime import StatefulLM


class Proposal(NamedTuple):
    tokens: np.ndarray  # (n,) drafted token ids, n may be smaller than asked (even 0)
    q: np.ndarray | None  # (n, vocab) draft distributions, or None: each token was certain (q one-hot)
    seconds: float  # time spent drafting, catching up included
    catch_up_seconds: float = 0.0  # of which feeding the draft what it missed (the prompt, or a pause)
    kind: str = ACCEPTED  # their provenance once kept, as the page colours it (spec.decoding.generation)
    calls: int = 0  # the draft model's forward calls, the catch-up excluded: a round's cost is per call


class Drafter(Protocol):
    """Proposes tokens for one generation and forgets those the target rejects. A class that names
    Drafter as its base inherits the defaults below."""

    name: str  # what drafts, in words (the CLI's JSON and the page say it)
    kind: str = ACCEPTED  # provenance of its tokens the target keeps: ACCEPTED (a model's) or LOOKUP (copied)
    target_vocab: int | None = None  # the target samples from its first this-many tokens, those q covers; None: all

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        """Up to n tokens to follow `context` (prompt + all accepted tokens); `source` is for a
        drafter that has several (HybridDrafter)."""

    def roll_back(self, context: Sequence[int]) -> None:
        """Forget whatever does not extend `context` (the drafts the target rejected)."""

    def release(self) -> None:
        """The generation is over: give back what it holds (a draft model's KV cache)."""


# A draft model stops its round after a token it gave less than this probability (as transformers'
# assistant_confidence_threshold, default 0.4): the target seldom keeps the tokens after a doubtful
# one, and each costs a draft call, dearer on a CPU whose draft token costs half a step. 0 drafts
# every token the schedule asked for. 0.5 by measurement (docs/design-notes.md).
STOP_BELOW = 0.5

# Tokens a draft model reads with its first draft step of a round rather than in a catch-up call of
# its own: the last draft and the target's token, after a round that kept every draft.
READ_WITH_FIRST_STEP = 2


class DraftModelDrafter(Drafter):
    """A small draft model, sampled with the same transforms as the target so q matches p's form."""

    name = "draft model"

    def __init__(self, cache: "StatefulLM", sampler: Sampler):
        self.cache = cache
        self.sampler = sampler
        self._cached: list[int] = []  # the tokens the draft's KV cache holds, in order
        self.target_vocab = sampler.vocab_size  # q covers the ids both models share

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        started = time.perf_counter()
        self.roll_back(context)
        pending = list(context[len(self._cached) :])
        catch_up = 0.0
        if len(pending) > READ_WITH_FIRST_STEP:
            # The prompt, or what the target wrote while the draft sat out: read in one call, timed
            # apart, as no ordinary round pays for it.
            self.cache.forward(pending[:-1], keep=1)
            self._cached += pending[:-1]
            catch_up = time.perf_counter() - started
            pending = pending[-1:]
        # After a round that kept every draft, the last draft and the target's token are both new to
        # the draft: the first step reads them together rather than in a call of its own.
        tokens, dists = [], []
        for _ in range(n):
            logits = self.cache.forward(pending, keep=1)[-1]
            token, q = self.sampler.next_token(logits)
            self._cached += pending
            tokens.append(token)
            dists.append(q)
            pending = [token]
            if self.sampler.probability(logits, token, q) < STOP_BELOW:
                break  # the draft doubts this token: those after it would seldom be kept, and each costs a call
        # The last drafted token is not fed: the next round feeds it only if the target keeps it.
        q = None if self.sampler.greedy else np.stack(dists)
        return Proposal(np.asarray(tokens, dtype=np.int64), q, time.perf_counter() - started, catch_up, calls=len(tokens))

    def roll_back(self, context: Sequence[int]) -> None:
        keep = _common_prefix_length(self._cached, context)
        if keep == len(context) and keep > 0:
            keep -= 1  # always re-feed the last token: its logits are what the next draft step needs
        if keep < len(self._cached):
            self.cache.trim(keep)
            del self._cached[keep:]

    def release(self) -> None:
        self.cache.release()


# One-token calls a fresh timing of a draft model makes (time_bare_call): the quickest counts, since
# a shared host's moments differ.
_TIMED_CALLS = 3


def time_bare_call(cache: "StatefulLM") -> float:
    """Seconds a one-token call of a draft model takes now, timed through its empty `cache` and
    emptied after (for PairMemory.refresh): the model alone, without a round's sampling."""
    if cache.length:
        raise ValueError(f"time_bare_call needs an empty KV cache, got one of {cache.length} tokens")
    calls = []
    for token in range(1, _TIMED_CALLS + 1):
        started = time.perf_counter()
        cache.forward([token], keep=1)
        calls.append(time.perf_counter() - started)
    cache.reset()
    return min(calls)


class PromptLookupDrafter(Drafter):
    """Copies like an editor: what followed the earlier occurrence that matches the context furthest
    back, and right after an edit cut a copy short, the source just past the edited token.

    Stateless but for that one thing: where its last copy came from, so that a replaced token (a
    renamed variable, a fixed operator) does not end the copy of the unchanged code around it.
    `history`: other answers of the target (AnswerHistory.corpus), searched where the context's own
    match is shorter than _HISTORY_MATCH tokens.
    """

    name = "prompt lookup"
    kind = LOOKUP
    free = True

    def __init__(self, max_ngram_size: int = 3, min_ngram_size: int = 1, history: np.ndarray | None = None):
        self.max_ngram_size = max_ngram_size
        self.min_ngram_size = min_ngram_size
        self.history = history if history is not None else np.empty(0, dtype=np.int64)
        self._copy: tuple[int, int, int] | None = None  # (context length, source start, tokens) of the last copy
        self._matched: tuple[np.ndarray, Match | None] | None = None  # the last context searched, and its match

    def match(self, context: Sequence[int]) -> Match | None:
        """Where the next draft would copy from: the best match (find_match), or a longer one in the
        history; without any, and right after the target replaced a token of the last copy, the
        source token after the replaced one."""
        context = np.asarray(context, dtype=np.int64)
        if self._matched is not None and np.array_equal(self._matched[0], context):
            return self._matched[1]  # the schedule asked first, then the round drafts: search once
        found = find_match(context, self.max_ngram_size, self.min_ngram_size)
        if len(self.history) and (found is None or found.length < _HISTORY_MATCH):
            earlier = find_in_history(context, self.history)
            if earlier is not None and (found is None or earlier.length > found.length):
                found = earlier
        # A match, even of one token, is evidence from the text; going on past an edit is a guess.
        match = found if found is not None else self._past_edit(context)
        self._matched = (context, match)
        return match

    def _past_edit(self, context: np.ndarray) -> Match | None:
        if self._copy is None:
            return None
        length, start, drafted = self._copy
        grown = len(context) - length  # the kept drafts and the target's own token
        replaced = start + grown - 1  # the source token the target's own token stands for
        if not 1 <= grown <= drafted + 1 or replaced >= length or context[length + grown - 1] == context[replaced]:
            return None  # not the round right after that copy, or the target's token goes on copying
        if not np.array_equal(context[length : length + grown - 1], context[start:replaced]):
            return None  # the tokens since are not that copy's drafts (plain steps came in between)
        resume = replaced + 1  # one source token replaced by one: go on from the token after it
        if resume >= len(context):
            return None
        return Match(0, resume, len(context) - resume, resumed=True)

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        started = time.perf_counter()
        match = self.match(context)
        if match is None or n <= 0:
            self._copy = self._matched = None
            return Proposal(np.empty(0, dtype=np.int64), None, time.perf_counter() - started, kind=LOOKUP)
        copied_from = self.history if match.in_history else context
        tokens = np.asarray(copied_from[match.start : match.start + min(n, match.available)], dtype=np.int64)
        self._copy = None if match.in_history else (len(context), match.start, len(tokens))
        self._matched = None  # what it matches next depends on this copy
        return Proposal(tokens, None, time.perf_counter() - started, kind=LOOKUP)

    def forget(self) -> None:
        """Another drafter drafted meanwhile: the last copy is no guide to the next one."""
        self._copy = self._matched = None

    def roll_back(self, context: Sequence[int]) -> None:
        pass  # it reads the context afresh every round

    def release(self) -> None:
        pass


class HybridDrafter(Drafter):
    """A draft model and prompt lookup; each round the schedule says which one drafts (its
    proposals carry the kind of the one that made them)."""

    def __init__(self, model: Drafter, lookup: PromptLookupDrafter):
        self.model, self.lookup = model, lookup
        self.name = f"hybrid: {model.name} or prompt lookup"
        self.target_vocab = model.target_vocab

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        if source == PROMPT_LOOKUP:
            return self.lookup.propose(context, n)
        self.lookup.forget()
        return self.model.propose(context, n)

    def roll_back(self, context: Sequence[int]) -> None:
        self.model.roll_back(context)

    def release(self) -> None:
        self.model.release()


class Match(NamedTuple):
    length: int  # how far back the context's suffix matches there (longer: a copy under way); 0 past an edit
    start: int  # where what followed that earlier occurrence begins
    available: int  # how many tokens follow it, up to the end of the context
    resumed: bool = False  # not a match: the source just past a token an edit replaced
    in_history: bool = False  # start and available are in the history's answers, not the context


_LONGEST = 64  # matches reaching this far back count as equally long (and bound the search)


def find_match(context: np.ndarray, max_ngram_size: int = 3, min_ngram_size: int = 1) -> Match | None:
    """The earlier occurrence of the context's last n-gram (the longest n up to max_ngram_size that
    occurs) whose match reaches furthest back; among equally long ones, the continuation most of
    them agree on, then the most recent.

    A match that reaches far back is a copy under way (the unchanged code of an edit), and it is
    found again every round from where the last accepted tokens left it, whatever occurrences of
    the short n-gram lie in between (SuffixDecoding, EfficientEdit)."""
    n = len(context)
    for size in range(min(max_ngram_size, n - 1), min_ngram_size - 1, -1):
        windows = np.lib.stride_tricks.sliding_window_view(context[:-1], size)
        ends = np.flatnonzero((windows == context[-size:]).all(axis=1)) + size  # where each continuation starts
        if len(ends) == 0:
            continue
        lengths = _match_lengths(context, ends, size)
        tied = ends[lengths == lengths.max()]
        if len(tied) > 1:  # occurrences may disagree on what comes next: the most frequent continuation wins
            nexts = context[tied]
            values, counts = np.unique(nexts, return_counts=True)
            winners = values[counts == counts.max()]
            tied = tied[np.isin(nexts, winners)]
        start = int(tied[-1])  # the most recent
        return Match(int(lengths.max()), start, n - start)
    return None


_HISTORY_MATCH = 3  # the history is searched where the context's own match is shorter, for matches this long


def find_in_history(context: np.ndarray, history: np.ndarray) -> Match | None:
    """The best match of the context's suffix (at least _HISTORY_MATCH tokens, as find_match ranks
    them) in other answers; `available` runs to the end of that answer."""
    tail = context[-_LONGEST:]  # a match reaches no further back
    joined = np.concatenate([history, [SEPARATOR], tail])
    match = find_match(joined, _HISTORY_MATCH, _HISTORY_MATCH)
    if match is None or match.start >= len(history):
        return None
    end = match.start + int(np.argmax(history[match.start :] == SEPARATOR))  # every answer ends in one
    if end == match.start:
        return None  # the match ends its answer: nothing follows it
    return Match(match.length, match.start, end - match.start, in_history=True)


def _match_lengths(context: np.ndarray, ends: np.ndarray, size: int) -> np.ndarray:
    """For occurrences of the last `size` tokens ending before `ends`, how far back each matches the context's suffix."""
    n = len(context)
    lengths = np.full(len(ends), size)
    alive = np.ones(len(ends), dtype=bool)
    for length in range(size, min(_LONGEST, n - 1)):
        before = ends - length - 1  # the next token back, at the occurrence
        alive &= before >= 0
        alive[alive] = context[before[alive]] == context[n - length - 1]
        if not alive.any():
            break
        lengths[alive] += 1
    return lengths


def prompt_lookup(context: np.ndarray, n: int, max_ngram_size: int = 3, min_ngram_size: int = 1) -> np.ndarray:
    """Up to n tokens that followed the best earlier match of the context's suffix (see find_match)."""
    match = find_match(context, max_ngram_size, min_ngram_size)
    if match is None:
        return np.empty(0, dtype=np.int64)
    return context[match.start : match.start + n].copy()


def pad_draft(context: Sequence[int], draft: np.ndarray, k: int, max_ngram_size: int = 3) -> np.ndarray:
    """`draft` extended to k tokens with free guesses: prompt lookup over the context and the draft,
    then the last token repeated.

    OpenVINO's CPU plugin re-prepares every layer when a model's input width changes; at a width it
    has just seen, verifying K+1 tokens can cost little more than one where a step is memory-bound.
    There a verify call keeps its width, and the slots a drafter leaves empty hold guesses that cost
    nothing and are sometimes right. They are drafts like any other (deterministic ones, q one-hot),
    so the acceptance rule keeps the output exact.
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
