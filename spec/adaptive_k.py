"""Dynamic K, aware of cost: how many tokens to draft next, or none when drafting does not pay.

Every verify call checks K drafts (see spec.speculative); what adapts is the draft length n, how
many of them the drafter makes. n follows transformers' heuristic (+2 after a round that kept every
draft, -1 otherwise), capped by Leviathan et al.'s cost model: with acceptance rate α, a draft step
costing c plain target steps, and a verify call costing v plain steps (all three measured as the
generation runs), a round of n drafts yields (1 − α^(n+1)) / (1 − α) tokens for n·c + v steps.
The verify call has the same width whatever n is, so v does not grow with n, and a drafter that
costs nothing (prompt lookup) always drafts the whole width.
n never goes past the length that yields most per step; when no length beats a plain step, the loop
takes plain steps for a while, then probes again with the cheapest round (n = 1), doubling the pause
each time the probe confirms that drafting does not pay. A poor or expensive draft costs little.

What a draft model's pair learned carries over to the pair's next generation (`PairMemory`): its
cost is a property of the two models on this device, so a draft that cannot pay is not re-learned
at every prompt. Prompt lookup starts afresh each time: its payoff depends on the prompt.
"""
from __future__ import annotations

from dataclasses import dataclass

_DECAY = 0.7  # weight kept by older rounds in the running estimates
# Plain steps before probing again, doubling while probes confirm that drafting does not pay. A
# probe is dear: the draft catches up on all it missed and the target's input width changes twice
# (about 5-7 plain steps on SmolLM2), so a draft that cannot pay is probed once per 512 steps at
# most: with 128, such a pair ran at 0.93x of plain decoding, with 512 at 1.01x (same process).
_FIRST_PAUSE, _MAX_PAUSE = 8, 512
_PRIOR_ACCEPTED, _PRIOR_REJECTED = 1.0, 1.0  # α starts at 0.5, and one round moves it


def expected_tokens(alpha: float, n: int) -> float:
    """Tokens a round of n drafts yields on average: the kept drafts plus the target's own token."""
    if alpha >= 1.0:
        return n + 1.0
    return (1.0 - alpha ** (n + 1)) / (1.0 - alpha)


def predicted_speedup(alpha: float, n: int, draft_cost: float, verify_cost: float = 1.0) -> float:
    """Leviathan et al.'s speed-up over plain decoding, with the verify call's measured cost.

    draft_cost: a draft step in plain target steps (c). verify_cost: a verify call in plain target
    steps (v; Leviathan et al. take it as 1).
    """
    return expected_tokens(alpha, n) / (n * draft_cost + verify_cost)


@dataclass
class PairMemory:
    """What speculation measured for one (target, draft model) pair, shared by its generations."""

    accepted: float = _PRIOR_ACCEPTED  # decayed counts of kept drafts ...
    rejected: float = _PRIOR_REJECTED  # ... and of rejections
    draft_cost: float | None = None  # c: a draft step ÷ a plain target step
    verify_cost: float | None = None  # v: a verify call ÷ a plain step
    t_step: float | None = None  # seconds of a plain (1-token) target step
    plain_left: int = 0  # plain steps still to take before the next probe
    pause: int = _FIRST_PAUSE  # the length of the next pause

    @property
    def alpha(self) -> float:
        return self.accepted / (self.accepted + self.rejected)


class DynamicK:
    """How many tokens the drafter makes each round, from what earlier rounds (and generations) measured.

    K (`k`) is fixed for a generation: every verify call checks K drafts, at width K+1. What adapts is
    the draft length, how many of those K a draft model makes (free guesses fill the rest), down to
    none: a plain target step. DynamicK also keeps the bookkeeping its measurements need: the width
    of the previous target call, since a call right after one of another width also pays for
    OpenVINO re-preparing the model (the first plain step after the prompt, the first round after a
    pause) and is no fair sample of a step's or a round's cost.
    """

    def __init__(
        self,
        k: int,
        dynamic: bool = True,
        free: bool = False,
        memory: PairMemory | None = None,
        first_draft_length: int | None = None,
    ):
        self.k = k
        self.dynamic = dynamic
        self.free = free  # the drafter costs nothing, so it is judged on the whole width it fills
        self.memory = memory if memory is not None else PairMemory()
        self.draft_length = k if first_draft_length is None else first_draft_length  # the heuristic's current length
        self._last_width: int | None = None  # input width of the previous target call; None: unknown

    @property
    def alpha(self) -> float:
        return self.memory.alpha

    def best_draft_length(self) -> tuple[int, float]:
        """The draft length (1..K) the cost model expects to yield most per step, and that speed-up."""
        m = self.memory
        if m.draft_cost is None or m.verify_cost is None:
            return self.k, float("inf")  # nothing measured yet: let the heuristic decide
        return max(
            ((n, predicted_speedup(m.alpha, n, m.draft_cost, m.verify_cost)) for n in range(1, self.k + 1)),
            key=lambda pair: pair[1],
        )

    def next_draft_length(self) -> int:
        """Tokens to draft next; 0 means take a plain target step."""
        if not self.dynamic:
            return self.k
        m = self.memory
        if m.t_step is None:
            return 0  # a plain step first: it measures what a round must beat
        if m.plain_left > 0:
            m.plain_left -= 1
            if m.plain_left == 0:
                self.draft_length = 1  # the probe after a pause: the cheapest round that still measures α and c
            return 0
        return min(self.draft_length, self.best_draft_length()[0])

    def observe_prefill(self) -> None:
        """The prompt went through the target: the next call changes width."""
        self._last_width = None

    def observe_plain(self, seconds: float) -> None:
        """Learn a plain step's cost, when it is a fair sample."""
        fair, self._last_width = self._last_width == 1, 1
        if not fair:
            return
        m = self.memory
        m.t_step = seconds if m.t_step is None else _DECAY * m.t_step + (1 - _DECAY) * seconds

    def observe_round(self, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float) -> None:
        """Learn from a round whose drafter made `drafted` tokens (in `draft_seconds`, catching up
        excluded), of which the target kept `accepted`, verified in `verify_seconds`.

        A draft model is judged by the tokens it made; a free drafter by the whole width, whose
        guesses are lookups too: a round without any match then still counts, so a prompt that
        never repeats itself leads to plain steps.
        """
        fair, self._last_width = self._last_width == self.k + 1, self.k + 1
        judged = self.k if self.free else drafted
        accepted = min(accepted, judged)
        if not self.dynamic or judged == 0:
            return
        self.draft_length = min(self.draft_length + 2, self.k) if accepted == judged else max(1, self.draft_length - 1)
        m = self.memory
        m.accepted = _DECAY * m.accepted + accepted
        m.rejected = _DECAY * m.rejected + (accepted < judged)
        if m.t_step is None:
            return
        c = draft_seconds / judged / m.t_step
        m.draft_cost = c if m.draft_cost is None else _DECAY * m.draft_cost + (1 - _DECAY) * c
        if fair:
            v = verify_seconds / m.t_step
            m.verify_cost = v if m.verify_cost is None else _DECAY * m.verify_cost + (1 - _DECAY) * v
        if self.best_draft_length()[1] > 1.0:
            m.pause = _FIRST_PAUSE
        else:
            m.plain_left = m.pause
            m.pause = min(2 * m.pause, _MAX_PAUSE)
