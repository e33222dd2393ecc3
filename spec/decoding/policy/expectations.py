"""What a round of drafts is expected to yield: Leviathan et al.'s formulas, and how often drafts
are kept, for a draft model's pair (PairMemory) and for prompt lookup per kind of match."""
from __future__ import annotations

from dataclasses import dataclass, field

from spec.decoding.policy.decay import decayed_average
from spec.decoding.policy.pause import Pause

_PRIOR_ACCEPTED, _PRIOR_REJECTED = 1.0, 1.0  # α starts at 0.5, and one round moves it
_FADED = 0.25  # a pause fades the acceptance counts down to this weight (a quarter of a round), no further
_LONG_DECAY = 0.98  # the pair's long record: about fifty rounds
_PRIOR_YIELD = 12.0  # tokens of prior, kept as expected (about four rounds): one unlucky round moves the yield little
# The yield's floor: its rounds are weighed at no less than this share of what its acceptance
# promises, since it moves only in rounds the model drafts, and a slump on one prompt must not price
# out for good a model whose rounds pay by far elsewhere.
LEAST_YIELD = 0.75
# A hybrid's draft model that sits out keeps the call cost it was last timed at: one slow moment on a
# busy machine can keep it out of every race that follows. So after the pair's generations without
# it, the next first times a bare call (after 2, 4, 8, ... such generations: rarely, where it rightly
# sits out), and a kept cost over _STALE_FACTOR times that is dropped, so the model is timed afresh,
# as at a first start. A call while drafting costs more than a bare one (sampling over its head, and
# re-encoding across tokenizers), but well under _STALE_FACTOR of it (docs/design-notes.md).
_REFRESH_AFTER = 2
_STALE_FACTOR = 2.0


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
    long_accepted: float = _PRIOR_ACCEPTED  # the same over the pair's long record, which pauses do not fade
    long_rejected: float = _PRIOR_REJECTED
    call_seconds: float | None = None  # seconds of one draft-model call, re-encoding included (c: ÷ a plain step's)
    extra_calls: float = 0.0  # e: calls a round makes beyond the tokens it drafts
    catch_up_seconds: float | None = None  # a catch-up after rounds it did not draft, averaged (what the hybrid prices)
    last_catch_up_seconds: float | None = None  # the latest catch-up, the prompt's included (how long dynamic K pauses)
    read_seconds: float | None = None  # seconds the draft model takes per token of a prompt it first reads (the hybrid prices it)
    promised_tokens: float = _PRIOR_YIELD  # over the pair's long record, tokens its rounds were planned to keep ...
    kept_tokens: float = _PRIOR_YIELD  # ... and tokens they kept (the hybrid's yield)
    pause: Pause = field(default_factory=Pause)  # dynamic K's plain steps before the next probe
    idle_generations: int = 0  # the hybrid's generations in a row without a round of the model (not kept: a start counts afresh)

    @property
    def alpha(self) -> float:
        return self.accepted / (self.accepted + self.rejected)

    @property
    def long_alpha(self) -> float:
        return self.long_accepted / (self.long_accepted + self.long_rejected)

    def fade(self, decay: float) -> None:
        """A plain step passed without drafting: what earlier rounds showed counts a little less."""
        if self.accepted + self.rejected > _FADED:
            self.accepted, self.rejected = decay * self.accepted, decay * self.rejected

    def observe_acceptance(self, drafted: int, accepted: int, decay: float) -> None:
        """Learn from a round whose target kept `accepted` of `drafted` drafts."""
        accepted = min(accepted, drafted)
        self.accepted = decay * self.accepted + accepted
        self.rejected = decay * self.rejected + (accepted < drafted)
        self.long_accepted = _LONG_DECAY * self.long_accepted + accepted
        self.long_rejected = _LONG_DECAY * self.long_rejected + (accepted < drafted)

    @property
    def yielded(self) -> float:
        """What the model's rounds kept for each token they were planned to keep, over the long record."""
        return max(LEAST_YIELD, self.kept_tokens / self.promised_tokens)

    def observe_yield(self, promised: float, kept: int) -> None:
        """A round planned to keep `promised` tokens (drafts and the target's own) kept `kept`."""
        self.promised_tokens = _LONG_DECAY * self.promised_tokens + promised
        self.kept_tokens = _LONG_DECAY * self.kept_tokens + kept

    def round_seconds(self, n: int) -> float:
        """Seconds a draft model takes to draft n tokens (call_seconds must be measured)."""
        return (n + self.extra_calls) * self.call_seconds

    def refresh_due(self) -> bool:
        """Whether this generation should first time a bare call of the model (`refresh`): after
        _REFRESH_AFTER, then twice as many, generations in a row without its rounds."""
        n = self.idle_generations
        return n >= _REFRESH_AFTER and n & (n - 1) == 0

    def refresh(self, call_seconds: float) -> None:
        """A bare one-token call of the model takes `call_seconds` now: a kept cost far above it is
        stale, and dropped (the schedule then times the model with its next round)."""
        if self.call_seconds is not None and self.call_seconds > _STALE_FACTOR * call_seconds:
            self.call_seconds = None

    def observe_drafting(self, drafted: int, calls: int, seconds: float) -> None:
        """Learn from a round whose drafter made `drafted` tokens in `calls` model calls taking `seconds`,
        the catch-up excluded. 0 calls: the drafter did not say, and a call is priced per token."""
        if drafted and calls:
            self.extra_calls = decayed_average(self.extra_calls, max(0, calls - drafted))
        self.call_seconds = decayed_average(self.call_seconds, seconds / (calls or drafted))


@dataclass
class LookupYields:
    """What prompt lookup's long copies, its rounds of each K wider than the K asked for, kept for
    each token they were planned to keep, over the target's long record (its generations share it,
    as they share what its calls cost).

    A round is priced by its match's acceptance per draft, learned in this generation, and the K
    that looks best is often the widest right after a long copy was kept whole; the copy then breaks
    at the next edit. Chosen where they look best, wide rounds keep less than they promised, the
    widest least, where narrow ones keep about what they promised (docs/design-notes.md). Where a
    wide call costs many steps (AVX2 kernels), one broken copy loses more than a whole one gains, so
    each wide K is weighed at what its rounds kept, never above what they promised: a copy kept
    whole already raised this generation's acceptance.
    """

    promised: dict[int, float] = field(default_factory=dict)  # K -> tokens its rounds were planned to keep (decayed) ...
    kept: dict[int, float] = field(default_factory=dict)  # ... and tokens they kept

    def factor(self, k: int) -> float:
        """What rounds of K kept for each token they promised, at most 1 (12 tokens of prior at 1)."""
        return min(1.0, self.kept.get(k, _PRIOR_YIELD) / self.promised.get(k, _PRIOR_YIELD))

    def observe(self, k: int, promised: float, kept: int) -> None:
        """A round of K lookup drafts planned to keep `promised` tokens (drafts and the target's own) kept `kept`."""
        self.promised[k] = _LONG_DECAY * self.promised.get(k, _PRIOR_YIELD) + promised
        self.kept[k] = _LONG_DECAY * self.kept.get(k, _PRIOR_YIELD) + kept


# Prompt lookup's acceptance per draft, before a generation has shown its own: by how far back the
# lookup's match reaches (a long match is a copy under way), for the source just past an edited token
# (RESUMED), and for guesses without any match (the last token repeated), which are seldom right.
# Taken from the default target's own answers: the share of rounds whose first draft it kept, per
# kind of match (bench/studies/calls.py --replay; docs/design-notes.md says on which answers): how often a
# kind of match is kept depends on the model that answers.
RESUMED = -1
_MATCH_BUCKETS = (1, 2, 3, 4, 8, 16, 32)  # a match of length L counts in the largest bucket <= L
_PRIOR_LOOKUP_ALPHA = {0: 0.1, 1: 0.24, 2: 0.40, 3: 0.58, 4: 0.69, 8: 0.90, 16: 0.98, 32: 0.98, RESUMED: 0.07}
_PRIOR_WEIGHT = 2.0  # the prior counts as this many rounds
# Lookup's counts forget more slowly than the costs: a kind of match is seen only now and then, and
# one unlucky round must not make it look worthless.
_LOOKUP_DECAY = 0.9


def match_key(length: int, resumed: bool = False) -> int:
    """The acceptance bucket of a lookup match: RESUMED, 0 (none), or the largest bucket <= its length."""
    if resumed:
        return RESUMED
    return max((b for b in _MATCH_BUCKETS if b <= length), default=0)


class LookupAcceptance:
    """How often prompt lookup's drafts are kept, per kind of match (match_key).

    A long match in code being edited is usually copied on for many tokens, no match at all
    almost never: one average over all rounds would collapse where the answer first writes something
    new, and then miss the long copy that follows. Counts decay over this generation's rounds.
    """

    def __init__(self):
        self.kept = {key: _PRIOR_WEIGHT * a for key, a in _PRIOR_LOOKUP_ALPHA.items()}
        self.rejected = {key: _PRIOR_WEIGHT * (1 - a) for key, a in _PRIOR_LOOKUP_ALPHA.items()}

    def alpha(self, key: int) -> float:
        return self.kept[key] / (self.kept[key] + self.rejected[key])

    def expected_tokens(self, k: int, key: int, available: int) -> float:
        """Tokens a round of k lookup drafts yields: the first `available` come from the match, the rest are guesses."""
        total, survive = 1.0, 1.0
        for i in range(k):
            survive *= self.alpha(key if i < available else 0)
            total += survive
        return total

    def observe(self, k: int, key: int, available: int, accepted: int) -> None:
        """Learn from a round of k lookup drafts whose first `available` came from a match of this key."""
        from_match = min(available, k)
        self.count(key, min(accepted, from_match), accepted < from_match)
        if accepted >= from_match and k > from_match:  # the guesses after the match were tried too
            self.count(0, accepted - from_match, accepted < k)

    def count(self, key: int, kept: int, rejected: bool) -> None:
        self.kept[key] = _LOOKUP_DECAY * self.kept[key] + kept
        self.rejected[key] = _LOOKUP_DECAY * self.rejected[key] + rejected

