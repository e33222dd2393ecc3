"""Fixed K: the plain baseline beside dynamic K. Every round drafts K tokens and verifies them in one call."""
from __future__ import annotations

from typing import Sequence

from spec.decoding.policy.costs import CallCosts, TimedSchedule
from spec.decoding.policy.schedule import Round, RoundResult


class FixedK(TimedSchedule):
    """K drafts every round, checked at width K+1, whatever earlier rounds kept. It still times the
    target's calls into `costs`, which the target's later generations (with dynamic K) plan from."""

    def __init__(self, k: int, costs: CallCosts | None = None):
        super().__init__(costs)
        self.k = k

    def next_round(self, context: Sequence[int]) -> Round:
        return Round(self.k, self.k)

    def verify_k(self, drafted: int) -> int:
        return self.k

    def observe_round(self, result: RoundResult) -> None:
        self._observe_call(self.k + 1, result.verify_seconds)
