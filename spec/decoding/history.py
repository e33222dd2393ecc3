"""The target's earlier answers, which prompt lookup searches where its own context has no match
(SuffixDecoding: earlier outputs as well as the prompt).

Answers to like prompts share their phrasing ("Here's the completed function", "```python",
"This function iterates over the list"), which the prompt itself seldom holds. They are searched
only where the context's own match is short: searched always, their long generic matches would win
over the answer's own (docs/design-notes.md).

An answer is never a draft source for its own prompt: a repeated prompt would copy its earlier
answer whole, the speed-up of a cache, not of speculation. Drafts only ever speed the target up:
what it writes is its own, whatever they hold.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np

SEPARATOR = -1  # between answers in the corpus: no token id, so no match runs across two answers
MAX_TOKENS = 32_768  # the answers kept, newest first (a search reads them all: well under a millisecond)


class AnswerHistory:
    """The latest answer to each prompt, up to MAX_TOKENS in all; shared by generations on one target."""

    def __init__(self, max_tokens: int = MAX_TOKENS):
        self.max_tokens = max_tokens
        self._answers: OrderedDict[tuple[int, ...], tuple[int, ...]] = OrderedDict()  # prompt ids -> answer ids
        self._tokens = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def add(self, prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> None:
        """Remember the answer to a prompt (replacing an earlier one to it), forgetting the oldest beyond the budget."""
        key, answer = tuple(prompt_ids), tuple(int(t) for t in answer_ids)
        if not answer:
            return
        with self._lock:
            old = self._answers.pop(key, None)
            self._tokens -= len(old) if old else 0
            self._answers[key] = answer
            self._tokens += len(answer)
            while self._tokens > self.max_tokens and len(self._answers) > 1:
                _, dropped = self._answers.popitem(last=False)
                self._tokens -= len(dropped)

    def corpus(self, prompt_ids: Sequence[int]) -> np.ndarray:
        """Every remembered answer but the one to this prompt, oldest first, each followed by SEPARATOR."""
        key = tuple(prompt_ids)
        with self._lock:
            answers = [answer for prompt, answer in self._answers.items() if prompt != key]
        if not answers:
            return np.empty(0, dtype=np.int64)
        return np.concatenate([np.asarray([*answer, SEPARATOR], dtype=np.int64) for answer in answers])
