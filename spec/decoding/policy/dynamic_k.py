"""Dynamic K, aware of cost: how many tokens to draft next, or none when drafting does not pay.

A verify call checks up to K drafts (see spec.decoding.speculative); what adapts is the draft length
n, how many of them the drafter makes, and the width of the call that checks them. n follows
transformers' heuristic (+2 after a round that kept every draft, -1 otherwise), capped by Leviathan et
al.'s cost model: with acceptance rate α, a draft model's call costing c plain target steps, and a
verify call costing v plain steps (all three measured as the generation runs), a round of n drafts
yields (1 − α^(n+1)) / (1 − α) tokens for (n + e)·c + v steps. e counts the calls a round makes beyond
its n drafts (measured too): feeding the draft what the target added, and across tokenizers the draft
token whose text may still grow; charging them per drafted token would make short rounds look dear and
stop a draft that pays. v is the cheapest width that holds the n drafts, as the target's calls were
timed per width (CallCosts): where a wide call costs little more than a step, rounds stay at width
K+1, since changing width makes OpenVINO re-prepare the model; where it is dear, a round of one or
two drafts is checked at their own width. A drafter that costs nothing drafts the whole width.

n never goes past the length that yields most per step; when no length beats a plain step, the loop
takes plain steps for a while (a Pause), then probes again, doubling the pause each time the probe
confirms that drafting does not pay. A poor or expensive draft costs little. What was learned before
a pause fades with every plain step (the text has moved on), and the probe drafts the fewest tokens
that, all kept, would make drafting pay again: one token is too little evidence to outweigh a bad
start. A pause needs the pair's long record to agree (its acceptance over about fifty rounds, never
faded): the recent estimate alone dips below break-even after two or three unlucky rounds of a
draft that pays on the whole. docs/design-notes.md has the measurements behind these choices.

What a draft model's pair learned carries over to the pair's next generation (`PairMemory`): its
cost is a property of the two models on this device, so a draft that cannot pay is not re-learned
at every prompt. Prompt lookup (spec.decoding.policy.lookup_k) learns its acceptance afresh each
time, since it depends on the prompt; only what its wide rounds kept (`LookupYields`) carries over.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from spec.decoding.policy.costs import CallCosts, TimedSchedule
from spec.decoding.policy.expectations import PairMemory, predicted_speedup
from spec.decoding.policy.pause import longest_pause
from spec.decoding.policy.schedule import Round, RoundResult

_ALPHA_DECAY = 0.85  # a draft model's acceptance moves more slowly: a few bad rounds must not stop it


class DynamicK(TimedSchedule):
    """How many tokens the drafter makes each round, from what earlier rounds (and generations) measured.

    K (`k`) is the most a verify call checks. What adapts is the draft length, how many tokens a
    draft model makes, down to none: a plain target step; the round is checked at the cheapest width
    that holds them (free guesses fill the rest), as the target's calls were timed (`costs`, shared by
    its generations). The fixed-K baseline is `FixedK`.
    """

    def __init__(
        self,
        k: int,
        memory: PairMemory | None = None,
        first_draft_length: int | None = None,
        costs: CallCosts | None = None,
    ):
        super().__init__(costs)
        self.k = k
        self.memory = memory if memory is not None else PairMemory()
        self.draft_length = k if first_draft_length is None else first_draft_length  # the heuristic's current length
        self._round_k = k  # drafts the round just planned checks
        self._round_n = k  # of which the drafter was asked to make

    @property
    def t_step(self) -> float | None:
        """Seconds of a plain (1-token) target step, once two in a row were timed."""
        return self.costs.steady(1) if self.costs.timed(1) else None

    @property
    def draft_cost(self) -> float | None:
        """c: a draft model's call in plain target steps, once both were timed."""
        return self._in_steps(self.memory.call_seconds)

    def _in_steps(self, seconds: float | None) -> float | None:
        t_step = self.t_step
        return None if seconds is None or t_step is None else seconds / t_step

    def verify_costs(self, switch: bool = False) -> list[tuple[int, float]]:
        """Per draft length n (at index n - 1): the K of the cheapest verify call that holds n drafts
        (n..K), and its cost in plain steps; with `switch`, a
        change from the previous call's width counted. Before a width is timed, from the prior curve."""
        last = self._last_width if switch else None
        step = self.costs.steady(1)
        cheapest, best = [], None
        for k in range(self.k, 0, -1):  # from the widest down: the cheapest of widths k+1..K+1 (ties: the wider)
            cost = self.costs.cost(k + 1, last) / step
            best = (k, cost) if best is None or cost < best[1] else best
            cheapest.append(best)
        return cheapest[::-1]

    def verify_cost(self, n: int, switch: bool = False) -> tuple[int, float]:
        """The K and cost in plain steps of the cheapest verify call for n drafts (see verify_costs)."""
        return self.verify_costs(switch)[n - 1]

    def best_draft_length(self, alpha: float | None = None, memory: PairMemory | None = None) -> tuple[int, float]:
        """The draft length (1..K) the cost model expects to yield most per step, and that speed-up,
        at the recent acceptance unless `alpha` is given."""
        m = self.memory if memory is None else memory
        c = self._in_steps(m.call_seconds)
        if c is None or not any(w > 1 for w in self.costs.seconds):
            return self.k, float("inf")  # nothing measured yet: let the heuristic decide
        alpha = m.alpha if alpha is None else alpha
        verify = self.verify_costs()
        return max(
            # A round's extra calls cost as much whatever n is: they join the verify call's fixed cost.
            ((n, predicted_speedup(alpha, n, c, verify[n - 1][1] + m.extra_calls * c)) for n in range(1, self.k + 1)),
            key=lambda pair: pair[1],
        )

    def drafting_pays(self, memory: PairMemory | None = None) -> bool:
        """Whether some draft length beats a plain step, at the recent acceptance or over the long record."""
        m = self.memory if memory is None else memory
        return self.best_draft_length(memory=m)[1] > 1.0 or self.best_draft_length(m.long_alpha, m)[1] > 1.0

    def probe_length(self) -> int:
        """The draft length of a probe after a pause: the fewest drafts that, all kept, would make
        drafting pay again; the best length when none would (the draft is too dear whatever it keeps)."""
        for n in range(1, self.k + 1):
            kept = replace(self.memory)
            kept.observe_acceptance(n, n, _ALPHA_DECAY)
            if self.drafting_pays(kept):
                return n
        return self.best_draft_length()[0]

    def next_draft_length(self) -> int:
        """Tokens to draft next; 0 means take a plain target step."""
        m = self.memory
        if self.t_step is None:
            return 0  # a plain step first: it measures what a round must beat
        if not m.pause.over:
            m.pause.tick()
            m.fade(_ALPHA_DECAY)
            if m.pause.over:
                self.draft_length = self.probe_length()
            return 0
        return min(self.draft_length, self.best_draft_length()[0])

    def next_round(self, context: Sequence[int]) -> Round:
        """The next round: the draft length, checked at the cheapest width that holds it; or a plain step."""
        n = self.next_draft_length()
        if n == 0:
            return Round(0, 0)
        self._round_k, self._round_n = self.verify_cost(n, switch=True)[0], n
        return Round(self._round_k, n)

    def verify_k(self, drafted: int) -> int:
        """The cheapest width that holds what the draft made: narrower than planned where it stopped
        early and a narrower call costs less, the switch counted (as on a CPU whose wide calls cost
        several steps)."""
        if 0 < drafted < self._round_n:
            self._round_k = min(self._round_k, self.verify_cost(drafted, switch=True)[0])
        return self._round_k

    def observe_round(self, result: RoundResult) -> None:
        """Learn from the round just planned.

        The draft model is judged by the tokens it made (the guesses that filled the width are not its own).
        """
        drafted, accepted, draft_seconds, verify_seconds, catch_up_seconds, draft_calls = result
        self._observe_call(self._round_k + 1, verify_seconds)
        accepted = min(accepted, drafted)
        if drafted == 0:
            return
        self.draft_length = min(self.draft_length + 2, self.k) if accepted == drafted else max(1, self.draft_length - 1)
        m = self.memory
        m.observe_acceptance(drafted, accepted, _ALPHA_DECAY)
        if self.t_step is None:
            return
        if catch_up_seconds:
            m.last_catch_up_seconds = catch_up_seconds
        m.observe_drafting(drafted, draft_calls, draft_seconds)
        if self.drafting_pays():
            m.pause.reset()
        else:
            m.pause.start(longest_pause(self._in_steps(m.last_catch_up_seconds)))

