"""Dynamic K for prompt lookup: each round, the K whose verify call yields most tokens per second."""
from __future__ import annotations

from typing import Sequence

from spec.config import PROMPT_LOOKUP
from spec.decoding.drafters import PromptLookupDrafter
from spec.decoding.policy.costs import CallCosts, TimedSchedule
from spec.decoding.policy.expectations import LookupAcceptance, LookupYields, match_key
from spec.decoding.policy.schedule import Round, RoundResult

# Match length from which lookup's copy is counted on before costs are timed: the hybrid tries lookup
# before the draft model, and lookup verifies it before a plain step has been timed.
SURE_COPY = 2
# The Ks lookup weighs each round, doubling up to a width of 33 for long copies, and K=3: on AVX2
# kernels a call's cost jumps from width 4 to 5, so there a call of 4 can cost less than one of 3
# and one of 5 far more. More widths in between only add near-ties, which a copy breaking early
# turns into losses (docs/cpu-classes.md).
LOOKUP_CHOICES = (1, 2, 3, 4, 8, 16, 32)


def lookup_state(lookup: PromptLookupDrafter, context: Sequence[int]) -> tuple[int, int]:
    """(acceptance key of the match the lookup would copy from now, tokens available after it); (0, 0) without one."""
    match = lookup.match(context)
    return (match_key(match.length, match.resumed), match.available) if match else (0, 0)


class LookupK(TimedSchedule):
    """Dynamic K for prompt lookup, which costs nothing to draft: each round, the K whose verify call
    yields most tokens per second, decided from the lookup itself.

    What a round will keep depends on whether the context's suffix occurred before, and how far
    back that match reaches (LookupAcceptance), and for a long copy's K (wider than the K asked for)
    on what rounds of that K kept of their promise in the target's earlier rounds (LookupYields).
    Costs are measured per verify width, plus the extra a call pays right after one of another width
    (OpenVINO re-prepares the model), so K widens only when a long copy pays for it (up to 32 drafts,
    a width of 33: LOOKUP_CHOICES) and a round without a match takes a plain step only when that is
    cheaper than verifying guesses.
    """

    def __init__(
        self, k: int, max_ngram_size: int = 3, choices: tuple[int, ...] | None = None, lookup: PromptLookupDrafter | None = None,
        costs: CallCosts | None = None, yields: LookupYields | None = None,
    ):
        super().__init__(costs)
        self.k = k  # the K asked for: where the schedule starts
        self.yields = yields if yields is not None else LookupYields()  # the target's, shared with its other generations
        self.choices = choices or tuple(sorted({*LOOKUP_CHOICES, k}))
        self.lookup = lookup if lookup is not None else PromptLookupDrafter(max_ngram_size)  # asked what it would copy
        self.acceptance = LookupAcceptance()
        self._plan = Round(k, k, PROMPT_LOOKUP)
        self._match: tuple[int, int] = (0, 0)  # (acceptance key, tokens available) the round was planned on
        self._lookup_promises: dict[int, float] = {}  # K -> tokens each lookup round last weighed would keep, before the yield

    def cost(self, width: int) -> float:
        """Seconds a call of this width takes now, counting the switch when the width changes."""
        return self.costs.cost(width, self._last_width)

    def rates(self, key: int, available: int) -> dict[Round, float]:
        """Expected tokens per second of each round it could take now (k = 0: a plain step)."""
        self._lookup_promises = {k: self.acceptance.expected_tokens(k, key, available) for k in self.choices}
        rates = {Round(k, k, PROMPT_LOOKUP): tokens * self._yield(k) / self.cost(k + 1) for k, tokens in self._lookup_promises.items()}
        rates[Round(0, 0)] = 1.0 / self.cost(1)
        return rates

    def _yield(self, k: int) -> float:
        """What rounds of K keep of their promise: measured for the Ks wider than the K asked for, the
        long copies' (LookupYields). The narrower ones keep about what they promise (0.95-1.11 served
        under emulated AVX2) and tie with each other: weighed at their own yields, one unlucky K was
        never tried again (replayed on HumanEval, K=2 stayed at 0.81 and K=1 took its rounds)."""
        return self.yields.factor(k) if k > self.k else 1.0

    def next_round(self, context: Sequence[int]) -> Round:
        key, available = self._match = lookup_state(self.lookup, context)
        self._lookup_promises = {}
        if self._last_width is None and not self.costs.seconds:
            self._plan = Round(self.k, self.k, PROMPT_LOOKUP)  # nothing measured yet: the K asked for
        elif not self.costs.timed(1) and key < SURE_COPY:
            # A plain step is what every round is weighed against: time it (two in a row) before
            # weighing rounds of guesses, as DynamicK does, once for the target's generations here.
            # Priced from a verify call through another CPU's curve, or at a calibration's moment, it
            # can look far dearer than it is, and lookup would never take one.
            self._plan = Round(0, 0)
        else:
            rates = self.rates(key, available)
            self._plan = max(rates, key=rates.get)
        return self._plan

    def verify_k(self, drafted: int) -> int:
        """The planned K: lookup's rounds were priced on the tokens its match has to copy."""
        return self._plan.k

    def observe_round(self, result: RoundResult) -> None:
        """Learn from the round just planned: what lookup's kind of match kept, what its K kept of the
        round's promise, and the verify call's cost."""
        key, available = self._match
        self.acceptance.observe(self._plan.k, key, min(available, result.drafted), result.accepted)
        promised = self._lookup_promises.get(self._plan.k) if self._plan.source == PROMPT_LOOKUP and self._plan.k > self.k else None
        if promised is not None:  # a long copy's round, weighed on its merits (not the first, before anything was timed)
            self.yields.observe(self._plan.k, promised, result.accepted + 1)
        self._observe_call(self._plan.k + 1, result.verify_seconds)

