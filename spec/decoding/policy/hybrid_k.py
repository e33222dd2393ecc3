"""The hybrid's schedule: each round prompt lookup or the draft model, whichever pays more."""
from __future__ import annotations

from typing import Sequence

from spec.config import DRAFT_MODEL, PROMPT_LOOKUP
from spec.decoding.drafters import READ_WITH_FIRST_STEP, PromptLookupDrafter
from spec.decoding.policy.costs import CallCosts
from spec.decoding.policy.decay import DECAY, decayed_average
from spec.decoding.policy.expectations import LookupYields, PairMemory
from spec.decoding.policy.lookup_k import SURE_COPY, LookupK, lookup_state
from spec.decoding.policy.pause import Pause
from spec.decoding.policy.schedule import Round, RoundResult

# The hybrid probes the draft model again where lookup has no sure copy after FIRST_PAUSE rounds
# without it, doubling up to this while probes confirm that it does not pay. Its estimates change
# only in rounds it drafts: without probes, a few bad rounds early on (or on an earlier prompt: the
# pair's memory is shared) would leave it unused for good.
_HYBRID_MAX_PAUSE = 64
# Draft-model rounds between two catch-ups, until this generation has shown its own.
_PRIOR_RUN = 4.0


class HybridK(LookupK):
    """Each round, prompt lookup (at the K that pays best, as LookupK) or the draft model, whichever is
    expected to keep more tokens per second of the round.

    The draft model's side: its acceptance, the seconds of one of its calls (re-encoding included)
    and the calls a round makes beyond its drafts, as this pair measured them, drafting n tokens
    checked at a width of n+1 to K+1 (free guesses fill the rest), both chosen by the same rate when
    dynamic. Its whole round is counted: after rounds it did not draft, the draft model first
    catches up on what the target kept (a call of its own), so taking over from a copy costs more
    than going on drafting, and the hybrid does not pay for the draft model where lookup would copy.
    That call is paid once per run of draft-model rounds, so each round of a run bears its share (at
    the length runs have had); and only where the draft is more tokens behind than its first step
    reads anyway. Priced whole on every round after lookup's, even one that kept nothing, it kept the
    model out wherever lookup's guesses beat one round by a little, however long the text without a copy.
    Its first catch-up in a generation is reading the prompt, dear where a prompt is read in f32:
    each token the draft model would keep bears a share of that reading, spread over the tokens the
    generation may still write (`budget`), so the model is not brought in for rounds that only tie
    with lookup's or plain steps.
    The model's estimates change only in rounds it drafts, so where lookup has no sure copy it is
    probed after a pause without it (8 rounds, doubling to 64 while probes confirm it does not pay),
    once it has read the prompt. Where it sat out the pair's last generations, the generation first
    times a bare call, and a kept call cost far above it is dropped, so the model is timed afresh
    (`PairMemory.refresh`, done by the hybrid's plug-in, which holds the model).
    Its rounds are chosen where they look best, so the tokens they were expected to keep are, on
    average, overestimated: they are scaled by what such rounds kept for each token expected, over
    the pair's long record (`PairMemory.yielded`). That matters where its rounds only tie with plain
    steps, as on AVX2 kernels, and changes little where they win by far.
    """

    def __init__(
        self, k: int, dynamic: bool = True, memory: PairMemory | None = None, max_ngram_size: int = 3,
        lookup: PromptLookupDrafter | None = None, costs: CallCosts | None = None, budget: int | None = None,
        yields: LookupYields | None = None,
    ):
        super().__init__(k, max_ngram_size, None if dynamic else (k,), lookup, costs, yields)
        self.dynamic = dynamic
        self.memory = memory if memory is not None else PairMemory()
        self.budget = budget  # new tokens the generation may write (None: not said, the prompt's reading is not priced)
        self._context = 0  # tokens in the context the round was planned for
        self._prompt: int | None = None  # of which the prompt: the context at the first round, but its last token
        self._read_prompt = False  # whether the draft model has read the prompt (its first round's "catch-up")
        self._unread = 0  # tokens the target kept that the draft model has not read
        self._promises: dict[Round, float] = {}  # tokens each draft-model round last weighed would keep, before the yield
        self._promised: float | None = None  # of which the planned round's (None: planned without weighing)
        self._run = 0  # draft-model rounds since its last catch-up
        self._in_run = False  # the last round was the draft model's
        self.run_length: float | None = None  # draft-model rounds between two catch-ups, on average
        self.pause = Pause()  # rounds without the draft model before it is probed: the first pause starts now
        self.pause.start(_HYBRID_MAX_PAUSE)
        self.memory.idle_generations += 1  # this one too, until it drafts (PairMemory.refresh_due)

    def rates(self, key: int, available: int) -> dict[Round, float]:
        rates = super().rates(key, available)
        m, behind, read_share = self.memory, 0.0, 0.0
        if self._prices_prompt():  # seconds per kept token: the prompt's reading, spread over what is left to write
            left = max(1, self.budget - (self._context - self._prompt))
            read_share = m.read_seconds * (self._context - 1) / left
        elif self._unread > READ_WITH_FIRST_STEP:  # it is behind: one call first to feed it what the target kept
            catch_up = m.catch_up_seconds if m.catch_up_seconds is not None else m.call_seconds
            behind = catch_up / max(1.0, self.run_length if self.run_length is not None else _PRIOR_RUN)
        verify = {k: self.cost(k + 1) for k in (range(1, self.k + 1) if self.dynamic else (self.k,))}
        # A few unlucky rounds must not push the model out (its estimates move only in rounds it
        # drafts): it is weighed at the better of its recent acceptance and the pair's long record.
        alpha, guessed = max(m.alpha, m.long_alpha), self.acceptance.alpha(0)
        self._promises = {}
        for n in range(1, self.k + 1) if self.dynamic else (self.k,):
            tokens, survive = 1.0, 1.0
            for k in range(1, self.k + 1):  # the draft model's n tokens, then guesses up to width K+1
                survive *= alpha if k <= n else guessed
                tokens += survive
                if k >= n and k in verify:
                    self._promises[Round(k, n, DRAFT_MODEL)] = tokens
                    kept = tokens * m.yielded  # as many as such rounds have kept for each one expected
                    rates[Round(k, n, DRAFT_MODEL)] = kept / (verify[k] + behind + m.round_seconds(n) + kept * read_share)
        if self._in_run:
            # Leaving a run of its rounds: the change of width back is paid once for the plain steps that
            # follow, not by the first of them alone, which kept rounds that only tie going on.
            rates[Round(0, 0)] = 1.0 / self.costs.steady(1)
        if not self.dynamic:
            rates = {plan: rate for plan, rate in rates.items() if plan.k == self.k}
        return rates

    def _prices_prompt(self) -> bool:
        """Whether the draft model's next round reads the prompt first, and that reading has a price."""
        return not self._read_prompt and self.memory.read_seconds is not None and self.budget is not None

    def next_round(self, context: Sequence[int]) -> Round:
        self._context = len(context)
        if self._prompt is None:
            self._prompt = len(context) - 1
        if self.memory.call_seconds is None or (self._last_width is None and not self.costs.seconds):
            # Not timed yet: the draft model first (to time it), unless the lookup already matches well.
            key, available = self._match = lookup_state(self.lookup, context)
            self._plan = Round(self.k, self.k, PROMPT_LOOKUP if key >= SURE_COPY else DRAFT_MODEL)
            self._promised, self._lookup_promises = None, {}
            return self._plan
        plan = super().next_round(context)
        if plan.source == DRAFT_MODEL:  # chosen on its merits: a short pause again from here
            self.pause.reset()
            self.pause.start(_HYBRID_MAX_PAUSE)
        elif self.pause.over and self._match[0] < SURE_COPY and not self._prices_prompt():
            # A probe refreshes estimates earlier prompts made; before the model has read this prompt it
            # would cost that whole reading, and its rounds were weighed above at what they cost with it.
            self._plan = self.probe()
        else:
            self.pause.tick()
        self._promised = self._promises.get(self._plan)
        return self._plan

    def probe(self) -> Round:
        """A draft-model round although another looked better: the model's estimates are only as
        fresh as its last round. The next pause is longer, unless the model then wins on its merits."""
        rates = self.rates(*self._match)
        self.pause.start(_HYBRID_MAX_PAUSE)
        return max((plan for plan in rates if plan.source == DRAFT_MODEL), key=rates.get)

    def verify_k(self, drafted: int) -> int:
        """The planned K, or where the draft model stopped early, the K that yields most per second
        for the tokens it made, guesses filling the rest: as dear as wide calls are on this CPU."""
        plan = self._plan
        if plan.source == DRAFT_MODEL and self.dynamic and 0 < drafted < plan.draft_length and self.memory.call_seconds is not None:
            rates = self.rates(*self._match)
            shorter = [round_ for round_ in rates if round_.source == DRAFT_MODEL and round_.draft_length == drafted and round_.k <= plan.k]
            self._plan = max(shorter, key=rates.get)
        return self._plan.k

    def observe_plain(self, seconds: float) -> None:
        super().observe_plain(seconds)
        self._unread += 1
        self._in_run = False

    def observe_round(self, result: RoundResult) -> None:
        """Learn from the round just planned: lookup's as LookupK does; the draft model's into the pair's memory."""
        self._in_run = self._plan.source == DRAFT_MODEL
        if not self._in_run:
            super().observe_round(result)
            self._unread += result.accepted + 1
            return
        drafted, accepted, draft_seconds, verify_seconds, catch_up_seconds, draft_calls = result
        self.memory.idle_generations = 0
        # It read what it missed and its own drafts but the last: what the target kept past those is new.
        self._unread = 1 if accepted < drafted else accepted - drafted + 2
        if catch_up_seconds and self._read_prompt:
            self.run_length = decayed_average(self.run_length, self._run)
            self._run = 0
        self._run += 1
        self._observe_call(self._plan.k + 1, verify_seconds)
        m = self.memory
        if catch_up_seconds:
            # The first is reading the prompt, no catch-up after rounds without the model. The others
            # are the pair's on this device and carry over to its next generation, so a catch-up is
            # priced at what it costs from the first round after lookup, not as one ordinary call.
            if self._read_prompt:
                m.catch_up_seconds = decayed_average(m.catch_up_seconds, catch_up_seconds)
            else:  # it read all of the context but its last token
                m.read_seconds = decayed_average(m.read_seconds, catch_up_seconds / max(1, self._context - 1))
            self._read_prompt = True
        m.observe_acceptance(drafted, accepted, DECAY)
        if self._promised is not None:
            m.observe_yield(self._promised, accepted + 1)
        if drafted:
            m.observe_drafting(drafted, draft_calls, draft_seconds)
