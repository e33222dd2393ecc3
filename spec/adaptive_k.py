"""Dynamic K, aware of cost: how many tokens to draft next, or none when drafting does not pay.

K follows transformers' heuristic (+2 after a round that kept every draft, -1 otherwise). On top,
the measured acceptance rate alpha and costs predict the speed-up of a round (Leviathan et al. 2023):
    expected tokens per round   E(K) = (1 - alpha^(K+1)) / (1 - alpha)
    cost of a round             K * t_draft + t_verify(K),  t_verify(K) = t_step * (1 + gamma * K)
    predicted speed-up          E(K) * t_step / cost
When no K predicts a gain, the loop takes plain target steps for a while (doubling the pause each
time a probe round fails again), so a poor or expensive draft costs little.
"""
from __future__ import annotations

from dataclasses import dataclass

_SMOOTHING = 0.3  # weight of the newest observation in the moving averages
_MIN_GAIN = 1.0  # speculate only when the predicted speed-up exceeds this
_FIRST_PAUSE, _MAX_PAUSE = 4, 64  # plain steps before probing again (doubling)


@dataclass
class CostModel:
    alpha: float = 0.8  # per-token acceptance probability (optimistic until measured)
    t_step: float | None = None  # seconds of a 1-token target call
    t_draft: float = 0.0  # seconds to draft one token
    gamma: float = 0.05  # extra verify cost per drafted token, relative to t_step

    def predicted_speedup(self, k: int) -> float:
        if self.t_step is None or k == 0:
            return 1.0
        alpha = min(self.alpha, 0.999)
        expected_tokens = (1 - alpha ** (k + 1)) / (1 - alpha)
        cost = k * self.t_draft + self.t_step * (1 + self.gamma * k)
        return expected_tokens * self.t_step / cost


class DynamicK:
    """Chooses K for each round from what the previous rounds measured."""

    def __init__(self, k: int, max_k: int, dynamic: bool = True):
        self.k = k
        self.max_k = max_k
        self.dynamic = dynamic
        self.costs = CostModel()
        self._plain_left = 1 if dynamic else 0  # one plain step first: it measures t_step
        self._pause = _FIRST_PAUSE
        self._successes = 0.0  # exponentially weighted accepted tokens
        self._trials = 0.0  # ... and accept/reject decisions

    def next_k(self) -> int:
        """Tokens to draft next; 0 means take a plain target step."""
        if self._plain_left > 0:
            self._plain_left -= 1
            return 0
        return self.k

    def observe_plain(self, seconds: float) -> None:
        self.costs.t_step = _average(self.costs.t_step, seconds)

    def observe_round(self, k: int, accepted: int, draft_seconds: float, verify_seconds: float) -> None:
        """Learn from a round that drafted k tokens and kept `accepted` of them."""
        if not self.dynamic or k == 0:
            return
        costs = self.costs
        # A rejection is one failed trial; a fully kept round has k successes and no failure.
        decay = 1 - _SMOOTHING
        self._successes = decay * self._successes + accepted
        self._trials = decay * self._trials + accepted + (0 if accepted == k else 1)
        costs.alpha = self._successes / self._trials
        costs.t_draft = _average(costs.t_draft or None, draft_seconds / k)
        if costs.t_step:
            costs.gamma = _average(costs.gamma, max(0.0, (verify_seconds / costs.t_step - 1) / k))
        self.k = min(self.k + 2, self.max_k) if accepted == k else max(1, self.k - 1)
        if max(costs.predicted_speedup(j) for j in range(1, self.max_k + 1)) > _MIN_GAIN:
            self._pause = _FIRST_PAUSE
            return
        self._plain_left = self._pause
        self._pause = min(2 * self._pause, _MAX_PAUSE)


def _average(old: float | None, new: float) -> float:
    return new if old is None else (1 - _SMOOTHING) * old + _SMOOTHING * new
