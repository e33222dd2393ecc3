"""Dynamic K, aware of cost: how many tokens to draft next, or none when drafting does not pay.

K follows transformers' heuristic (+2 after a round that kept every draft, -1 otherwise). On top,
the loop measures what speculation really costs per token it yields (drafting, verifying and
everything around them, over recent rounds) against a plain target step. Leviathan et al.'s
formula predicts the same trade-off from the acceptance rate and the cost ratio; measuring it
also counts what the formula leaves out (the draft catching up, sampling, Python).
When speculation costs more per token than a plain step, the loop takes plain steps for a while,
doubling the pause each time a probe round fails again, so a poor or expensive draft costs little.
"""
from __future__ import annotations

_SMOOTHING = 0.3  # weight of the newest observation in the moving averages
_FIRST_PAUSE, _MAX_PAUSE = 8, 128  # plain steps before probing again (doubling)


class DynamicK:
    """Chooses K for each round from what the previous rounds measured."""

    def __init__(self, k: int, max_k: int, dynamic: bool = True):
        self.k = k
        self.max_k = max_k
        self.dynamic = dynamic
        self.t_step: float | None = None  # seconds of a plain (1-token) target step
        self._round_seconds = 0.0  # exponentially weighted seconds spent in speculative rounds ...
        self._round_tokens = 0.0  # ... and tokens they yielded
        self._plain_left = 1 if dynamic else 0  # one plain step first: it measures t_step
        self._pause = _FIRST_PAUSE

    @property
    def seconds_per_token(self) -> float | None:
        """Measured cost of a token from recent speculative rounds."""
        return self._round_seconds / self._round_tokens if self._round_tokens else None

    def next_k(self) -> int:
        """Tokens to draft next; 0 means take a plain target step."""
        if self._plain_left > 0:
            self._plain_left -= 1
            return 0
        return self.k

    def observe_plain(self, seconds: float) -> None:
        self.t_step = seconds if self.t_step is None else (1 - _SMOOTHING) * self.t_step + _SMOOTHING * seconds

    def observe_round(self, k: int, accepted: int, draft_seconds: float, verify_seconds: float) -> None:
        """Learn from a round that drafted k tokens and kept `accepted` of them."""
        if not self.dynamic or k == 0:
            return
        self.k = min(self.k + 2, self.max_k) if accepted == k else max(1, self.k - 1)
        decay = 1 - _SMOOTHING
        self._round_seconds = decay * self._round_seconds + draft_seconds + verify_seconds
        self._round_tokens = decay * self._round_tokens + accepted + 1
        if self.t_step is None or self.seconds_per_token < self.t_step:
            self._pause = _FIRST_PAUSE
            return
        self._plain_left = self._pause
        self._pause = min(2 * self._pause, _MAX_PAUSE)
        # The probe after the pause is judged on its own, not on the rounds that caused the pause.
        self._round_seconds = self._round_tokens = 0.0
