"""Logits to probabilities: the transforms (temperature, top-k, top-p) applied alike to p and q.

Applying the same transforms to the target (p) and the draft (q) is what makes speculative
sampling follow the transformed target distribution exactly. Greedy decoding is the limit
temperature -> 0: a one-hot distribution on the argmax, so the acceptance rule needs no special case.
"""
from __future__ import annotations

import numpy as np


def probabilities(logits: np.ndarray, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """Row-wise distribution over the vocabulary for logits of shape (rows, vocab)."""
    logits = np.atleast_2d(logits)
    if temperature == 0.0:
        probs = np.zeros(logits.shape, dtype=np.float64)
        probs[np.arange(len(logits)), logits.argmax(axis=-1)] = 1.0
        return probs
    scaled = logits.astype(np.float64) / temperature
    if 0 < top_k < scaled.shape[-1]:
        kth = np.partition(scaled, -top_k, axis=-1)[:, -top_k, None]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    scaled -= scaled.max(axis=-1, keepdims=True)
    probs = np.exp(scaled)
    probs /= probs.sum(axis=-1, keepdims=True)
    if top_p < 1.0:
        probs = np.stack([_nucleus(row, top_p) for row in probs])
    return probs


def _nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Keep the smallest set of most likely tokens whose mass reaches top_p (ties broken by id)."""
    # Sorting the whole vocabulary per row is the slow part; the nucleus lies within the tokens
    # above any threshold whose tokens already hold top_p of the mass, so sort only those.
    threshold = probs.max() * 1e-3
    while True:
        candidates = np.flatnonzero(probs >= threshold)
        if probs[candidates].sum() >= top_p or threshold == 0.0:
            break
        threshold = threshold * 1e-3 if threshold > 1e-30 else 0.0
    order = candidates[np.argsort(-probs[candidates], kind="stable")]
    cumulative = np.cumsum(probs[order])
    keep = order[: int(np.searchsorted(cumulative, top_p)) + 1]
    out = np.zeros_like(probs)
    out[keep] = probs[keep]
    return out / out.sum()


def sample(probs: np.ndarray, rng: np.random.Generator) -> int:
    """Draw one token id from a distribution (deterministic for one-hot rows)."""
    # Over the support only: greedy, top-k and top-p rows have a handful of tokens, not a whole
    # vocabulary to sum. Zero-probability tokens could never be drawn, so the draw is unchanged.
    support = np.flatnonzero(probs)
    cumulative = np.cumsum(probs[support])
    u = rng.random() * cumulative[-1]
    return int(support[min(np.searchsorted(cumulative, u, side="right"), len(support) - 1)])


class Sampler:
    """Turns a model's logits into tokens under one GenerationConfig, restricted to the real vocabulary.

    Models may pad their embedding past the tokenizer (e.g. 151936 vs 152064): only the first
    `vocab_size` logits are used, so no id outside the shared vocabulary is ever proposed or sampled.
    A draft whose head scores only some of the vocabulary (the target's most frequent tokens) says
    which token each logit stands for in `token_ids`; its distributions still span `vocab_size`,
    zero elsewhere, so they line up with the target's.
    """

    def __init__(
        self, temperature: float, top_k: int, top_p: float, vocab_size: int, rng: np.random.Generator,
        token_ids: np.ndarray | None = None,
    ):
        if token_ids is not None and (len(token_ids) == 0 or token_ids.max() >= vocab_size):
            raise ValueError(f"token_ids must be non-empty ids below vocab_size {vocab_size}, got {len(token_ids)} ids")
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.vocab_size = vocab_size
        self.rng = rng
        self.token_ids = token_ids

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def distribution(self, logits: np.ndarray) -> np.ndarray:
        """Probabilities per row of logits, shape (rows, vocab_size)."""
        logits = np.atleast_2d(logits)
        if self.token_ids is None:
            return probabilities(logits[:, : self.vocab_size], self.temperature, self.top_k, self.top_p)
        scored = probabilities(logits[:, : len(self.token_ids)], self.temperature, self.top_k, self.top_p)
        probs = np.zeros((len(scored), self.vocab_size), dtype=scored.dtype)
        probs[:, self.token_ids] = scored
        return probs

    def probability(self, logits_row: np.ndarray, token: int, q: np.ndarray | None) -> float:
        """How likely the model found `token`, drawn by next_token from `logits_row` (q: its
        distribution, None when greedy, where the softmax at temperature 1 says)."""
        if q is not None:
            return float(q[token])
        scored = logits_row[: self.vocab_size if self.token_ids is None else len(self.token_ids)]
        # The greedy token is the most likely one. Summed in the logits' own float32, not float64:
        # this runs for every draft token, over the whole head (docs/design-notes.md).
        return 1.0 / float(np.exp(scored - scored.max()).sum(dtype=np.float64))

    def next_token(self, logits_row: np.ndarray) -> tuple[int, np.ndarray | None]:
        """The next token and the distribution it was drawn from (None when greedy: a point mass)."""
        if self.greedy:
            if self.token_ids is None:
                return int(logits_row[: self.vocab_size].argmax()), None
            return int(self.token_ids[logits_row[: len(self.token_ids)].argmax()]), None
        probs = self.distribution(logits_row)[0]
        return sample(probs, self.rng), probs
