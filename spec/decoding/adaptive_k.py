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
timed per width (CallCosts): where a wide call costs little more than a step (2.5 times the drafts for
a quarter of a step more, the AMX Xeon's curve) rounds stay at width K+1, since changing width makes
OpenVINO re-prepare the model; where it is dear (an AVX2 CPU: a call of 5 costs 1.9 steps, of 2 1.2) a
round of one or two drafts is checked at their own width. A drafter that costs nothing drafts the
whole width.
n never goes past the length that yields most per step; when no length beats a plain step, the loop
takes plain steps for a while, then probes again, doubling the pause each time the probe confirms
that drafting does not pay. A poor or expensive draft costs little. What was learned before a pause
fades with every plain step (the text has moved on), and the probe drafts the fewest tokens that,
all kept, would make drafting pay again: a 1-token probe after a bad start was too little evidence
to outweigh it, and a draft that paid stayed paused (SmolLM2 for Qwen on HumanEval/2: 276 plain
steps of 286 calls, 0.96x, where fixed K=4 made 1.31x). A pause needs the pair's long record to
agree: its acceptance over about fifty rounds, never faded. The recent estimate alone dips below
break-even after two or three unlucky rounds of a draft that pays on the whole, and the pauses that
followed cost SmolLM2 for Qwen 44% of its calls as plain steps (HumanEval 0-15, N=330: 1.32x dynamic
against 1.38x at K=4; 0.95x against 1.43x on HumanEval/12).

What a draft model's pair learned carries over to the pair's next generation (`PairMemory`): its
cost is a property of the two models on this device, so a draft that cannot pay is not re-learned
at every prompt. Prompt lookup starts afresh each time: its payoff depends on the prompt.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from spec.config import DRAFT_MODEL, F32, PROMPT_LOOKUP
from spec.decoding.drafters import PromptLookupDrafter

_DECAY = 0.7  # weight kept by older rounds in the running estimates
_ALPHA_DECAY = 0.85  # a draft model's acceptance moves more slowly: a few bad rounds must not stop it
# Plain steps before probing again, doubling while probes confirm that drafting does not pay, up to
# a pause that keeps probes within _PROBE_SHARE of the time. A probe can be dear: the draft catches
# up on all it missed and the target's input width changes twice (about 5-7 plain steps for an INT4
# copy of SmolLM2, which needs pauses of 512: with 128 such a pair ran at 0.93x of plain decoding);
# SmolLM2 catching up for Qwen costs a fraction of a step, and long pauses would only miss rounds
# that pay.
_FIRST_PAUSE, _MIN_MAX_PAUSE, _MAX_PAUSE = 8, 32, 512
_PROBE_SHARE = 0.02
_PRIOR_ACCEPTED, _PRIOR_REJECTED = 1.0, 1.0  # α starts at 0.5, and one round moves it
_FADED = 0.25  # a pause fades the acceptance counts down to this weight (a quarter of a round), no further
_LONG_DECAY = 0.98  # the pair's long record: about fifty rounds


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


class Round(NamedTuple):
    k: int  # drafts the verify call checks (its width is k + 1); 0: a plain one-token step instead
    draft_length: int  # of which the drafter makes; free guesses fill the rest
    source: str | None = None  # for the hybrid drafter: which of its drafters makes them


@dataclass
class PairMemory:
    """What speculation measured for one (target, draft model) pair, shared by its generations."""

    accepted: float = _PRIOR_ACCEPTED  # decayed counts of kept drafts ...
    rejected: float = _PRIOR_REJECTED  # ... and of rejections
    long_accepted: float = _PRIOR_ACCEPTED  # the same over the pair's long record, which pauses do not fade
    long_rejected: float = _PRIOR_REJECTED
    draft_cost: float | None = None  # c: a draft model's call ÷ a plain target step
    call_seconds: float | None = None  # seconds of a draft model's call, re-encoding included (the hybrid's measure)
    catch_up_seconds: float | None = None  # seconds it takes to catch up after rounds it did not draft (the hybrid's)
    extra_calls: float = 0.0  # e: calls a round makes beyond the tokens it drafts
    plain_left: int = 0  # plain steps still to take before the next probe
    pause: int = _FIRST_PAUSE  # the length of the next pause
    probe_cost: float | None = None  # what catching the draft up after a pause cost, in plain steps

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

    def round_seconds(self, n: int) -> float:
        """Seconds a draft model takes to draft n tokens (call_seconds must be measured)."""
        return (n + self.extra_calls) * self.call_seconds

    def observe_calls(self, drafted: int, calls: int) -> None:
        """Learn how many calls beyond its drafts a round made (0 calls: the drafter did not say)."""
        if drafted and calls:
            self.extra_calls = _DECAY * self.extra_calls + (1 - _DECAY) * max(0, calls - drafted)


class DynamicK:
    """How many tokens the drafter makes each round, from what earlier rounds (and generations) measured.

    K (`k`) is the most a verify call checks. What adapts is the draft length, how many tokens a
    draft model makes, down to none: a plain target step; the round is checked at the cheapest width
    that holds them (free guesses fill the rest), as the target's calls were timed (`costs`, shared by
    its generations). DynamicK also keeps the bookkeeping its measurements need: the width of the
    previous target call, since a call right after one of another width also pays for OpenVINO
    re-preparing the model (the first plain step after the prompt, the first round after a pause)
    and is no fair sample of a step's or a round's cost. Fixed K (`dynamic` False) checks K drafts
    every round.
    """

    def __init__(
        self,
        k: int,
        dynamic: bool = True,
        free: bool = False,
        memory: PairMemory | None = None,
        first_draft_length: int | None = None,
        costs: CallCosts | None = None,
    ):
        self.k = k
        self.dynamic = dynamic
        self.free = free  # the drafter costs nothing, so it is judged on the whole width it fills
        self.memory = memory if memory is not None else PairMemory()
        self.costs = costs if costs is not None else CallCosts()  # the target's, shared with its other generations
        self.draft_length = k if first_draft_length is None else first_draft_length  # the heuristic's current length
        self._last_width: int | None = None  # input width of the previous target call; None: unknown
        self._round_k = k  # drafts the round just planned checks

    @property
    def alpha(self) -> float:
        return self.memory.alpha

    @property
    def t_step(self) -> float | None:
        """Seconds of a plain (1-token) target step, once two in a row were timed."""
        return self.costs.seconds.get(1)

    def verify_costs(self, switch: bool = False) -> list[tuple[int, float]]:
        """Per draft length n (at index n - 1): the K of the cheapest verify call that holds n drafts
        (n..K; the free drafter's and fixed K's: K), and its cost in plain steps; with `switch`, a
        change from the previous call's width counted. Before a width is timed, from the prior curve."""
        last = self._last_width if switch else None
        step = self.costs.steady(1)
        if not self.dynamic or self.free:
            return [(self.k, self.costs.cost(self.k + 1, last) / step)] * self.k
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
        if m.draft_cost is None or not any(w > 1 for w in self.costs.seconds):
            return self.k, float("inf")  # nothing measured yet: let the heuristic decide
        alpha = m.alpha if alpha is None else alpha
        verify = self.verify_costs()
        return max(
            # A round's extra calls cost as much whatever n is: they join the verify call's fixed cost.
            ((n, predicted_speedup(alpha, n, m.draft_cost, verify[n - 1][1] + m.extra_calls * m.draft_cost))
             for n in range(1, self.k + 1)),
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
        if not self.dynamic:
            return self.k
        m = self.memory
        if self.t_step is None:
            return 0  # a plain step first: it measures what a round must beat
        if m.plain_left > 0:
            m.plain_left -= 1
            m.fade(_ALPHA_DECAY)
            if m.plain_left == 0:
                self.draft_length = self.probe_length()
            return 0
        return min(self.draft_length, self.best_draft_length()[0])

    def next_round(self, context) -> Round:
        """The next round: the draft length, checked at the cheapest width that holds it; or a plain step."""
        n = self.next_draft_length()
        if n == 0:
            return Round(0, 0)
        self._round_k = self.verify_cost(n, switch=True)[0]
        return Round(self._round_k, n)

    def observe_prefill(self) -> None:
        """The prompt went through the target: the next call changes width."""
        self._last_width = None

    def observe_plain(self, seconds: float) -> None:
        """Learn a plain step's cost, when it is a fair sample (see CallCosts.observe)."""
        self.costs.observe(1, seconds, self._last_width)
        self._last_width = 1

    def observe_round(
        self, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float, catch_up_seconds: float = 0.0,
        draft_calls: int = 0,
    ) -> None:
        """Learn from a round whose drafter made `drafted` tokens (in `draft_seconds` and `draft_calls`
        model calls, catching up excluded: `catch_up_seconds`), of which the target kept `accepted`,
        verified in `verify_seconds`.

        A draft model is judged by the tokens it made; a free drafter by the whole width, whose
        guesses are lookups too: a round without any match then still counts, so a prompt that
        never repeats itself leads to plain steps.
        """
        width = self._round_k + 1
        self.costs.observe(width, verify_seconds, self._last_width)
        self._last_width = width
        judged = self.k if self.free else drafted
        accepted = min(accepted, judged)
        if not self.dynamic or judged == 0:
            return
        self.draft_length = min(self.draft_length + 2, self.k) if accepted == judged else max(1, self.draft_length - 1)
        m = self.memory
        m.observe_acceptance(judged, accepted, _ALPHA_DECAY)
        t_step = self.t_step
        if t_step is None:
            return
        if catch_up_seconds:
            m.probe_cost = catch_up_seconds / t_step
        calls = draft_calls or judged  # a drafter without calls (lookup) is priced per token
        m.observe_calls(drafted, draft_calls)
        c = draft_seconds / calls / t_step
        m.draft_cost = c if m.draft_cost is None else _DECAY * m.draft_cost + (1 - _DECAY) * c
        if self.drafting_pays():
            m.pause = _FIRST_PAUSE
        else:
            m.plain_left = m.pause
            longest = _MAX_PAUSE if m.probe_cost is None else min(_MAX_PAUSE, max(_MIN_MAX_PAUSE, m.probe_cost / _PROBE_SHARE))
            m.pause = min(2 * m.pause, int(longest))


# Prompt lookup's acceptance per draft, before a generation has shown its own: by how far back the
# lookup's match reaches (a long match is a copy under way), for the source just past an edited token
# (RESUMED), and for guesses without any match (the last token repeated), which are seldom right.
# Measured on the default target's answers: the share of rounds whose first draft Qwen2.5-Coder-1.5B
# kept, per kind of match, replaying HumanEval 0-99 at N=330 (bench/calls.py --replay). The priors
# before (SmolLM2's, on grounded prompts: 1-gram 0.5, 2-gram 0.68, 3-gram 0.85, RESUMED 0.5) were
# twice too sure of short matches: on an AVX2 CPU, where a verify call of 2 costs 1.3 steps, lookup
# verified guesses that lost to plain decoding on open questions (0.97x predicted, 0.94x measured).
# Replayed on answers they were not taken from (open coding, code editing; N=100 and 160), the
# median decode speed-up rose on both cost curves: AVX2 0.97x -> 1.00x, 1.28x -> 1.33x, 1.21x -> 1.30x;
# the Xeon's 1.10x -> 1.12x, 1.82x -> 1.85x, 1.58x -> 1.62x.
RESUMED = -1
_MATCH_BUCKETS = (1, 2, 3, 4, 8, 16, 32)  # a match of length L counts in the largest bucket <= L
_PRIOR_LOOKUP_ALPHA = {0: 0.1, 1: 0.24, 2: 0.40, 3: 0.58, 4: 0.69, 8: 0.90, 16: 0.98, 32: 0.98, RESUMED: 0.07}
_PRIOR_WEIGHT = 2.0  # the prior counts as this many rounds
# Lookup's counts forget more slowly than the costs: a kind of match is seen only now and then, and
# one unlucky round must not make it look worthless (0.9 kept more per call than 0.7, 0.85 or 0.95
# when replayed on the code-editing prompts, see bench/calls.py --replay).
_LOOKUP_DECAY = 0.9
# A verify call of width w, in one-token steps, before this generation has timed it: Qwen2.5-Coder-1.5B
# INT8 at the default precision on 2 cores, 400 tokens in the cache, each width called several times
# in a row (a one-token step took 69 ms); linear in between and beyond. A memory-bound target reads
# its weights once per call whatever the width, until the multiplications themselves show.
PRIOR_WIDTH_COST = {1: 1.0, 2: 1.0, 3: 1.05, 4: 1.18, 5: 1.23, 6: 1.33, 7: 1.36, 9: 1.44, 13: 1.67, 17: 2.08, 25: 2.58, 33: 3.32}
# The same at F32 (Exact mode: f32 compute and KV cache, no 8-bit activations; a step 120-124 ms),
# two runs averaged: wide calls cost far more, and not monotonically (17 is cheaper than 13 and 33
# than 25: the plugin's kernels for those widths differ).
PRIOR_WIDTH_COST_F32 = {1: 1.0, 2: 1.1, 3: 1.16, 4: 1.27, 5: 1.61, 6: 1.71, 7: 2.46, 9: 2.58, 13: 3.55, 17: 2.72, 25: 6.03, 33: 4.21}
_PRIOR_SWITCH = 0.25  # and a call right after one of another width this many steps more


def prior_width_cost(width: int, curve: dict[int, float] = PRIOR_WIDTH_COST) -> float:
    """What a call of this width costs in one-token steps, before it is measured (by `curve`)."""
    widths = sorted(curve)
    if width <= widths[-1]:
        return float(np.interp(width, widths, [curve[w] for w in widths]))
    (w0, c0), (w1, c1) = [(w, curve[w]) for w in widths[-2:]]
    return c1 + (width - w1) * max(0.0, (c1 - c0) / (w1 - w0))


# Match length from which lookup's copy is counted on before costs are timed: the hybrid tries lookup
# before the draft model, and lookup verifies it before a plain step has been timed.
_SURE_COPY = 2


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


def lookup_state(lookup: PromptLookupDrafter, context) -> tuple[int, int]:
    """(acceptance key of the match the lookup would copy from now, tokens available after it); (0, 0) without one."""
    match = lookup.match(context)
    return (match_key(match.length, match.resumed), match.available) if match else (0, 0)


@dataclass
class CallCosts:
    """What the target's calls cost per input width on this device, as its generations timed them.

    A property of the compiled target, so it carries over to the target's next generation: before,
    each one started from the prior curve (the default precision on one CPU), and Exact mode's wide
    f32 calls, far dearer than that, lost to plain decoding on HumanEval/2 (0.65x) before being timed.
    """

    seconds: dict[int, float] = field(default_factory=dict)  # width -> decayed seconds of a call at a steady width
    switch: float | None = None  # seconds a call pays extra right after one of another width
    prior: dict[int, float] = field(default_factory=lambda: PRIOR_WIDTH_COST)  # the curve until widths are timed

    @classmethod
    def for_precision(cls, precision: str) -> "CallCosts":
        """Nothing timed yet, and the prior curve measured at this precision."""
        return cls(prior=PRIOR_WIDTH_COST_F32 if precision == F32 else PRIOR_WIDTH_COST)

    def cost(self, width: int, last_width: int | None) -> float:
        """Seconds a call of this width takes right after one of `last_width`, counting the switch when it differs."""
        seconds = self.steady(width)
        if last_width is not None and width != last_width:
            seconds += self.switch if self.switch is not None else _PRIOR_SWITCH * self.steady(1)
        return seconds

    def steady(self, width: int) -> float:
        """Seconds a call of this width takes among calls of the same width (in steps before any is timed)."""
        measured = self.seconds
        if width in measured:
            return measured[width]
        if not measured:  # in steps: only ratios matter before anything is measured
            return prior_width_cost(width, self.prior)
        widths = sorted(measured)
        if widths[0] < width < widths[-1]:  # between two timed widths: their own line, not another CPU's curve
            return float(np.interp(width, widths, [measured[w] for w in widths]))
        near = min(measured, key=lambda w: abs(w - width))  # scaled by the prior curve
        return measured[near] * prior_width_cost(width, self.prior) / prior_width_cost(near, self.prior)

    def observe(self, width: int, seconds: float, last_width: int | None) -> None:
        """Learn from a call of this width that took `seconds` right after one of `last_width` (None: unknown)."""
        if last_width == width:
            old = self.seconds.get(width)
            self.seconds[width] = seconds if old is None else _DECAY * old + (1 - _DECAY) * seconds
        elif last_width is not None and width in self.seconds:
            extra = max(0.0, seconds - self.seconds[width])
            self.switch = extra if self.switch is None else _DECAY * self.switch + (1 - _DECAY) * extra


class LookupK:
    """Dynamic K for prompt lookup, which costs nothing to draft: each round, the K whose verify call
    yields most tokens per second, decided from the lookup itself.

    What a round will keep depends on whether the context's suffix occurred before, and how far
    back that match reaches (LookupAcceptance). Costs are measured per verify width, plus the extra a
    call pays right after one of another width (OpenVINO re-prepares the model), so K widens only
    when a long copy pays for it (up to 32 drafts, a width of 33) and a round without a match takes
    a plain step only when that is cheaper than verifying guesses.
    """

    def __init__(
        self, k: int, max_ngram: int = 3, choices: tuple[int, ...] | None = None, lookup: PromptLookupDrafter | None = None,
        costs: CallCosts | None = None,
    ):
        self.k = k  # the K asked for: where the schedule starts
        self.choices = choices or tuple(sorted({1, 2, 4, 8, 16, 32, k}))
        self.lookup = lookup if lookup is not None else PromptLookupDrafter(max_ngram)  # asked what it would copy
        self.acceptance = LookupAcceptance()
        self.costs = costs if costs is not None else CallCosts()  # the target's, shared with its other generations
        self._last_width: int | None = None
        self._plan = Round(k, k, PROMPT_LOOKUP)
        self._match: tuple[int, int] = (0, 0)  # (acceptance key, tokens available) the round was planned on

    def cost(self, width: int) -> float:
        """Seconds a call of this width takes now, counting the switch when the width changes."""
        return self.costs.cost(width, self._last_width)

    def rates(self, key: int, available: int) -> dict[Round, float]:
        """Expected tokens per second of each round it could take now (k = 0: a plain step)."""
        rates = {Round(k, k, PROMPT_LOOKUP): self.acceptance.expected_tokens(k, key, available) / self.cost(k + 1)
                 for k in self.choices}
        rates[Round(0, 0)] = 1.0 / self.cost(1)
        return rates

    def next_round(self, context) -> Round:
        key, available = self._match = lookup_state(self.lookup, context)
        if self._last_width is None and not self.costs.seconds:
            self._plan = Round(self.k, self.k, PROMPT_LOOKUP)  # nothing measured yet: the K asked for
        elif 1 not in self.costs.seconds and key < _SURE_COPY:
            # A plain step is what every round is weighed against: time it (two in a row) before
            # weighing rounds of guesses, as DynamicK does. Priced from a verify call through another
            # CPU's curve, it looked 1.6 times its cost on an AVX2 CPU (where a verify call of 5 costs
            # 1.9 steps, not 1.23), and lookup never took one: 0.63x plain decoding on an open question.
            self._plan = Round(0, 0)
        else:
            rates = self.rates(key, available)
            self._plan = max(rates, key=rates.get)
        return self._plan

    def observe_prefill(self) -> None:
        self._last_width = None

    def observe_plain(self, seconds: float) -> None:
        self._observe_call(1, seconds)

    def observe_round(
        self, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float, catch_up_seconds: float = 0.0,
        draft_calls: int = 0,
    ) -> None:
        """Learn from the round just planned: the drafter made `drafted` of its k drafts, `accepted` were kept."""
        key, available = self._match
        self.acceptance.observe(self._plan.k, key, min(available, drafted), accepted)
        self._observe_call(self._plan.k + 1, verify_seconds)

    def _observe_call(self, width: int, seconds: float) -> None:
        self.costs.observe(width, seconds, self._last_width)
        self._last_width = width


# The hybrid probes the draft model again where lookup has no sure copy after _FIRST_PAUSE rounds
# without it, doubling up to this while probes confirm that it does not pay. Its estimates change
# only in rounds it drafts: without probes, a few bad rounds early on (or on an earlier prompt: the
# pair's memory is shared) left SmolLM2 unused for good on open questions, 1.02x where it alone made 1.22x.
_HYBRID_MAX_PAUSE = 64


class HybridK(LookupK):
    """Each round, prompt lookup (at the K that pays best, as LookupK) or the draft model, whichever is
    expected to keep more tokens per second of the round.

    The draft model's side: its acceptance, the seconds of one of its calls (re-encoding included)
    and the calls a round makes beyond its drafts, as this pair measured them, drafting n tokens
    checked at a width of n+1 to K+1 (free guesses fill the rest), both chosen by the same rate when
    dynamic. Its whole round is counted: after rounds it did not draft, the draft model first
    catches up on what the target kept (a call of its own), so taking over from a copy costs more
    than going on drafting, and the hybrid does not pay for the draft model where lookup would copy.
    The model's estimates change only in rounds it drafts, so where lookup has no sure copy it is
    probed after a pause without it (8 rounds, doubling to 64 while probes confirm it does not pay).
    """

    def __init__(
        self, k: int, dynamic: bool = True, memory: PairMemory | None = None, max_ngram: int = 3,
        lookup: PromptLookupDrafter | None = None, costs: CallCosts | None = None,
    ):
        super().__init__(k, max_ngram, None if dynamic else (k,), lookup, costs)
        self.dynamic = dynamic
        self.memory = memory if memory is not None else PairMemory()
        self._read_prompt = False  # whether the draft model has read the prompt (its first round's "catch-up")
        self.without_model = 0  # rounds since the draft model last drafted
        self.pause = _FIRST_PAUSE  # rounds without it before the next probe

    def rates(self, key: int, available: int) -> dict[Round, float]:
        rates = super().rates(key, available)
        m, behind = self.memory, 0.0
        if self._plan.source != DRAFT_MODEL:  # it is behind: one call first to feed it what the target kept
            behind = m.catch_up_seconds if m.catch_up_seconds is not None else m.call_seconds
        verify = {k: self.cost(k + 1) for k in (range(1, self.k + 1) if self.dynamic else (self.k,))}
        guessed = self.acceptance.alpha(0)
        for n in range(1, self.k + 1) if self.dynamic else (self.k,):
            tokens, survive = 1.0, 1.0
            for k in range(1, self.k + 1):  # the draft model's n tokens, then guesses up to width K+1
                survive *= m.alpha if k <= n else guessed
                tokens += survive
                if k >= n and k in verify:
                    rates[Round(k, n, DRAFT_MODEL)] = tokens / (verify[k] + behind + m.round_seconds(n))
        if not self.dynamic:
            rates = {plan: rate for plan, rate in rates.items() if plan.k == self.k}
        return rates

    def next_round(self, context) -> Round:
        if self.memory.call_seconds is None or (self._last_width is None and not self.costs.seconds):
            # Not timed yet: the draft model first (to time it), unless the lookup already matches well.
            key, available = self._match = lookup_state(self.lookup, context)
            self._plan = Round(self.k, self.k, PROMPT_LOOKUP if key >= _SURE_COPY else DRAFT_MODEL)
            return self._plan
        plan = super().next_round(context)
        if plan.source == DRAFT_MODEL:  # chosen on its merits
            self.without_model, self.pause = 0, _FIRST_PAUSE
        elif self.without_model >= self.pause and self._match[0] < _SURE_COPY:
            self._plan = self.probe()
        else:
            self.without_model += 1
        return self._plan

    def probe(self) -> Round:
        """A draft-model round although another looked better: the model's estimates are only as
        fresh as its last round. The next pause is longer, unless the model then wins on its merits."""
        rates = self.rates(*self._match)
        self.without_model, self.pause = 0, min(2 * self.pause, _HYBRID_MAX_PAUSE)
        return max((plan for plan in rates if plan.source == DRAFT_MODEL), key=rates.get)

    def observe_round(
        self, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float, catch_up_seconds: float = 0.0,
        draft_calls: int = 0,
    ) -> None:
        if self._plan.source != DRAFT_MODEL:
            super().observe_round(drafted, accepted, draft_seconds, verify_seconds)
            return
        self._observe_call(self._plan.k + 1, verify_seconds)
        m = self.memory
        if catch_up_seconds:
            # The first is reading the prompt: no catch-up after a few rounds. The others are the pair's
            # on this device, and carry over to its next generation: learned afresh in each, a catch-up
            # was priced as one ordinary call until one had been timed (SmolLM2 behind Qwen on an AVX2 CPU,
            # 31 model rounds: 0.39 s of catching up priced, 1.39 s measured), and rounds that lost to plain
            # steps looked to pay.
            if self._read_prompt:
                c = m.catch_up_seconds
                m.catch_up_seconds = catch_up_seconds if c is None else _DECAY * c + (1 - _DECAY) * catch_up_seconds
            self._read_prompt = True
        m.observe_acceptance(drafted, accepted, _DECAY)
        if drafted:
            m.observe_calls(drafted, draft_calls)
            seconds = draft_seconds / (draft_calls or drafted)
            d = m.call_seconds
            m.call_seconds = seconds if d is None else _DECAY * d + (1 - _DECAY) * seconds
