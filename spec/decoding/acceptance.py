"""The speculative sampling acceptance rule (Leviathan et al. 2023, Alg. 1; Chen et al. 2023, Alg. 2).

`p` is the target's distribution, `q` the draft's. For each drafted token x_i, in order:
accept it with probability min(1, p_i(x)/q_i(x)); at the first rejection draw a replacement from
normalize(max(0, p_i - q_i)) and stop; if all K pass, draw a bonus token from p_{K+1}. The output then
follows p exactly. With greedy (one-hot) p and q the same rule accepts the prefix that matches the
target's argmax and replaces the first mismatch with it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from spec.decoding.sampling import sample


class Acceptance(NamedTuple):
    accepted: int  # how many drafted tokens were kept (a prefix)
    next_token: int  # the target's token after them: a correction, or the bonus when all were kept


def speculative_accept(
    p: np.ndarray, q: np.ndarray | None, draft_tokens: np.ndarray, rng: np.random.Generator
) -> Acceptance:
    """Accept a prefix of `draft_tokens` and draw the next token, so the output follows `p`.

    p: (K+1, vocab) target probabilities at each drafted position plus the bonus position.
    q: (K, vocab) draft probabilities, or None when the drafter is deterministic (prompt lookup),
       which is q = one-hot on each drafted token.
    """
    k = len(draft_tokens)
    if p.shape[0] != k + 1 or (q is not None and q.shape[0] != k):
        raise ValueError(f"need p with K+1 rows and q with K rows for K={k}, got p{p.shape} q{None if q is None else q.shape}")
    for i, x in enumerate(draft_tokens):
        p_x = p[i, x]
        q_x = 1.0 if q is None else q[i, x]
        if p_x >= q_x or rng.random() * q_x < p_x:
            continue
        residual = p[i].copy()
        if q is None:
            residual[x] = 0.0
        else:
            np.maximum(residual - q[i], 0.0, out=residual)
        # A zero residual means p <= q everywhere, i.e. p == q up to rounding: fall back to p.
        return Acceptance(i, sample(residual if residual.sum() > 0 else p[i], rng))
    return Acceptance(k, sample(p[k], rng))
