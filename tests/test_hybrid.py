"""The hybrid drafter: each round prompt lookup or the draft model, whichever should keep more per second."""
from __future__ import annotations

import pytest

from spec.config import DRAFT_MODEL, HYBRID, PROMPT_LOOKUP, GenerationConfig
from spec.decoding.engine import generate, stream
from spec.decoding.generation import ACCEPTED, LOOKUP
from spec.decoding.policy import HybridK, LookupAcceptance, PairMemory, Round, RoundResult
from spec.decoding.policy.expectations import LEAST_YIELD
from tests.test_adaptive_k import COPYING, NEW_TEXT
from tests.test_cross_tokenizer import PROMPT, greedy_text


def timed(k: int = 4, alpha_draft: float = 0.6, call_seconds: float = 0.1, verify_seconds: float = 1.2) -> HybridK:
    """A HybridK whose pair has measured a verify call and what a call of the draft model costs."""
    counts = dict(accepted=10 * alpha_draft, rejected=10 * (1 - alpha_draft))
    memory = PairMemory(**counts, long_accepted=counts["accepted"], long_rejected=counts["rejected"], call_seconds=call_seconds)
    schedule = HybridK(k, memory=memory)
    schedule.costs.seconds = {1: 1.0, k + 1: verify_seconds}  # a plain step takes 1 s here
    schedule.costs.switch, schedule._last_width = 0.25, k + 1
    return schedule


def test_the_draft_model_is_timed_first_unless_the_lookup_matches_well():
    assert HybridK(4).next_round(NEW_TEXT).source == DRAFT_MODEL
    assert HybridK(4).next_round(COPYING).source == PROMPT_LOOKUP


def test_lookup_where_the_answer_copies_the_prompt_and_the_draft_where_it_does_not():
    schedule = timed()
    assert schedule.next_round(COPYING).source == PROMPT_LOOKUP  # a 3-gram match: likely kept, and free
    plan = schedule.next_round(NEW_TEXT)
    assert plan.source == DRAFT_MODEL and 1 <= plan.draft_length <= 4
    expensive = timed(call_seconds=2.0)  # a draft as slow as the target: lookup's guesses win
    assert expensive.next_round(NEW_TEXT).source == PROMPT_LOOKUP


def rates_behind_and_not(schedule: HybridK) -> tuple[float, float]:
    """The rate of a draft-model round of 4 as the schedule stands, and were the draft not behind."""
    draft, unread = Round(4, 4, DRAFT_MODEL), schedule._unread
    behind = schedule.rates(0, 0)[draft]
    schedule._unread = 0
    in_step = schedule.rates(0, 0)[draft]
    schedule._unread = unread
    return behind, in_step


def test_taking_over_from_lookup_pays_for_the_draft_models_catch_up():
    """Right after lookup rounds that kept tokens the draft model must first be fed them: a call paid
    once per run of draft-model rounds, so each round of a run bears its share. Reading the prompt,
    the model's first round, is no such call: for SmolLM2 drafting for Qwen it took 0.4 s against
    0.1 s for a catch-up, and priced every generation's model rounds after lookup as dear."""
    schedule = timed(alpha_draft=0.6, call_seconds=0.06)
    for catch_up in (3.0, 0.0, 0.0, 0.0):  # reading the prompt (no catch-up), then a run of 4 rounds
        schedule._plan = Round(4, 4, DRAFT_MODEL)
        schedule.observe_round(RoundResult(4, 2, 0.24, 1.2, catch_up_seconds=catch_up))
    assert schedule.memory.catch_up_seconds is None
    schedule._plan = Round(4, 4, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(4, 3, 1e-5, 1.2))  # lookup keeps 3 tokens: the draft is 5 behind
    behind, in_step = rates_behind_and_not(schedule)
    # The round's 1.2 s verify call and 0.24 s of drafting, plus a catch-up priced as one call (0.06 s)
    # spread over the 4 rounds a run lasts before this generation has finished one.
    assert behind == pytest.approx(in_step * 1.44 / (1.44 + 0.06 / 4))
    schedule._plan = Round(4, 4, DRAFT_MODEL)
    schedule.observe_round(RoundResult(4, 2, 0.24, 1.2, catch_up_seconds=1.2))  # as dear as a verify call
    schedule._plan = Round(4, 4, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(4, 3, 1e-5, 1.2))
    behind, in_step = rates_behind_and_not(schedule)
    assert schedule.memory.catch_up_seconds == 1.2 and schedule.run_length == 4
    assert behind == pytest.approx(in_step * 1.44 / (1.44 + 1.2 / 4))
    # The pair's next generation prices it so from its first round after lookup, not as one ordinary call.
    following = HybridK(4, memory=schedule.memory, costs=schedule.costs)
    following._last_width, following._plan, following._unread, following.run_length = 5, Round(4, 4, PROMPT_LOOKUP), 5, 4
    assert following.rates(0, 0)[Round(4, 4, DRAFT_MODEL)] == pytest.approx(behind)


def test_the_catch_up_is_priced_only_where_there_is_one_and_shared_by_the_run_it_starts():
    schedule = timed(alpha_draft=0.6, call_seconds=0.06)
    schedule._plan = Round(4, 4, DRAFT_MODEL)
    schedule.observe_round(RoundResult(4, 2, 0.24, 1.2, catch_up_seconds=3.0))  # reads the prompt
    schedule.memory.catch_up_seconds = 1.2
    schedule._match, schedule._plan = (0, 0), Round(1, 1, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(1, 0, 1e-5, 1.2))  # a failed guess: the next first step reads the one new token
    behind, in_step = rates_behind_and_not(schedule)
    assert behind == in_step
    schedule.observe_plain(1.0)  # one token more: now a catch-up call first
    behind, in_step = rates_behind_and_not(schedule)
    assert behind < in_step
    for _ in range(6):  # runs of one round between catch-ups: each round pays for a whole one
        schedule._plan = Round(4, 4, PROMPT_LOOKUP)
        schedule.observe_round(RoundResult(4, 4, 1e-5, 1.2))
        schedule._plan = Round(4, 4, DRAFT_MODEL)
        schedule.observe_round(RoundResult(4, 2, 0.24, 1.2, catch_up_seconds=1.2))
    schedule._plan = Round(4, 4, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(4, 4, 1e-5, 1.2))
    assert schedule.run_length == pytest.approx(1.0, abs=0.05)
    behind, in_step = rates_behind_and_not(schedule)
    assert behind == pytest.approx(in_step * 1.44 / (1.44 + 1.2 * schedule.run_length ** -1))


def test_the_draft_models_first_reading_of_the_prompt_is_priced_over_what_is_left_to_write():
    """A draft model reads the prompt before its first draft (on AVX2 kernels in f32, the dearest part
    of its drafting): where its rounds tie with lookup's it is not worth that reading for a short
    answer, and is for a long one. The price is learned from the pair's first reading."""
    first = timed(alpha_draft=0.6, call_seconds=0.1)
    first.budget = 64
    first.next_round(NEW_TEXT)
    first._plan = Round(4, 4, DRAFT_MODEL)
    first.observe_round(RoundResult(4, 2, 0.4, 1.2, catch_up_seconds=0.02 * (len(NEW_TEXT) - 1)))
    assert first.memory.read_seconds == pytest.approx(0.02)

    def source(budget: int | None, read_seconds: float | None) -> str:
        schedule = timed(alpha_draft=0.6, call_seconds=0.1)
        schedule.budget, schedule.memory.read_seconds = budget, read_seconds
        return schedule.next_round(NEW_TEXT).source

    # Reading its 47 tokens takes 9.4 s here, where a verify call takes 1.2 s.
    assert source(16, None) == source(None, 0.2) == DRAFT_MODEL  # not priced: as before
    assert source(16, 0.2) != DRAFT_MODEL  # 16 tokens at most to share it: a plain step yields more
    assert source(4096, 0.2) == DRAFT_MODEL
    # Nor is it probed before it has read this prompt: a probe would cost that whole reading.
    poor = timed(alpha_draft=0.15, call_seconds=0.3)
    poor.budget, poor.memory.read_seconds = 512, 0.2
    assert plans_until_the_model_drafts(poor, NEW_TEXT, limit=40) == 40


def test_each_source_learns_from_its_own_rounds():
    schedule = timed(alpha_draft=0.9)
    for _ in range(10):  # the draft keeps failing here
        schedule.next_round(NEW_TEXT)
        schedule.observe_round(RoundResult(4, 0, 0.4, 1.2))
    assert schedule.memory.alpha < 0.2 and schedule.acceptance.alpha(3) == LookupAcceptance().alpha(3)  # lookup's untouched
    assert schedule.next_round(COPYING).source == PROMPT_LOOKUP


def test_a_few_unlucky_rounds_do_not_push_out_a_draft_that_pays_over_its_long_record():
    schedule = timed(alpha_draft=0.7, call_seconds=0.2)
    schedule.memory.promised_tokens = schedule.memory.kept_tokens = 60.0  # about twenty rounds that kept what they promised
    schedule.memory.long_accepted, schedule.memory.long_rejected = 70.0, 30.0  # 70% of its drafts kept, a hundred of them
    for _ in range(6):  # six rounds in a row that keep nothing
        schedule.next_round(NEW_TEXT)
        schedule._plan = Round(4, 4, DRAFT_MODEL)
        schedule.observe_round(RoundResult(4, 0, 0.8, 1.2))
    assert schedule.memory.alpha < 0.25 and schedule.memory.long_alpha > 0.4
    assert schedule.next_round(NEW_TEXT).source == DRAFT_MODEL
    recent_only = timed(alpha_draft=0.2, call_seconds=0.2)  # where both agree it is poor, lookup's guesses win
    assert recent_only.next_round(NEW_TEXT).source == PROMPT_LOOKUP


def test_the_draft_models_rounds_are_weighed_at_what_such_rounds_kept():
    """Its rounds are weighed at the better of two estimates of its acceptance, and chosen where they
    beat the others: the round chosen is, on average, one whose tokens were overestimated. Where its
    rounds only tie with plain steps (a verify call costing two steps, a prompt read in f32) that is
    the difference between winning and losing, so what such rounds kept, against what was expected
    of them, scales what the next ones are expected to keep: measured on the machine at hand."""
    memory = PairMemory()
    assert memory.yielded == 1.0
    memory.observe_yield(3.0, 3)
    assert memory.yielded == 1.0
    memory.observe_yield(4.0, 1)
    assert memory.yielded < 0.9

    def rounds_until_lookup(promised: float) -> int:
        """Rounds of a model whose long record promises much (70% of its drafts kept over a hundred
        rounds) while it now keeps nothing, until lookup's guesses win; `promised`: tokens its
        rounds have kept as expected over the long record."""
        schedule = timed(alpha_draft=0.7, call_seconds=0.1)
        m = schedule.memory
        m.long_accepted, m.long_rejected = 70.0, 30.0
        m.promised_tokens = m.kept_tokens = promised
        for rounds in range(100):
            plan = schedule.next_round(NEW_TEXT)
            if plan.source != DRAFT_MODEL:
                return rounds
            schedule.observe_round(RoundResult(plan.draft_length, 0, 0.1 * plan.draft_length, 1.2))
        return 100

    # The long record alone (its yield never moving) would keep it for dozens of rounds.
    assert rounds_until_lookup(promised=12.0) * 2 < rounds_until_lookup(promised=1e9)
    schedule = timed(alpha_draft=0.7, call_seconds=0.1)
    schedule.memory.promised_tokens, schedule.memory.kept_tokens = 100.0, 10.0
    assert schedule.memory.yielded == LEAST_YIELD  # however poor its record: its rounds pay by far on other CPUs

def plans_until_the_model_drafts(schedule: HybridK, context: list[int], limit: int = 200) -> int:
    """Rounds the schedule plans (each observed as a lookup or plain round that kept nothing) until it
    picks the draft model; that round is left unobserved."""
    for rounds in range(limit):
        plan = schedule.next_round(context)
        if plan.source == DRAFT_MODEL:
            return rounds
        if plan.k == 0:
            schedule.observe_plain(1.0)
        else:
            schedule.observe_round(RoundResult(plan.k, 0, 1e-5, 1.2))
    return limit


def test_a_draft_model_that_looked_poor_is_probed_again_where_lookup_has_no_copy():
    """The model's estimates change only in rounds it drafts: a few bad early rounds must not leave
    it unused for good (SmolLM2 for Qwen on open questions: 1.02x where it alone made 1.22x)."""
    schedule = timed(alpha_draft=0.15, call_seconds=0.3)  # looks poor and dear: lookup or plain steps win on merit
    assert plans_until_the_model_drafts(schedule, NEW_TEXT) == 8  # the first pause
    schedule.observe_round(RoundResult(4, 0, 0.4, 1.2))  # the probe confirms it
    assert plans_until_the_model_drafts(schedule, NEW_TEXT) == 16  # the pause doubles
    schedule.observe_round(RoundResult(4, 0, 0.4, 1.2))
    assert plans_until_the_model_drafts(schedule, NEW_TEXT) == 32
    for _ in range(6):  # the text has changed: now the model keeps all it drafts
        schedule.observe_round(RoundResult(4, 4, 0.4, 1.2))
        assert schedule.next_round(NEW_TEXT).source == DRAFT_MODEL  # on its merits now
    assert schedule.pause.left == 8  # so a later slump is probed soon again
    copying = timed(alpha_draft=0.15, call_seconds=0.3)
    assert plans_until_the_model_drafts(copying, COPYING, limit=100) == 100  # a sure copy is never interrupted


def test_a_draft_model_kept_out_by_a_stale_cost_is_timed_afresh_once_a_bare_call_shows_it():
    """Before the model has read a generation's prompt, a probe waits: it would cost that reading.
    But the model's estimates change only in rounds it drafts, and the pair's memory outlives each
    generation (and a restart), so a draft call once timed on a busy machine (37 ms where it takes 13)
    kept it out of every race. After two generations without it, the next times a bare call: a kept
    cost over twice that is dropped, and the model's first round times it afresh, as at a first start."""
    memory = PairMemory(accepted=8.0, rejected=2.0, long_accepted=8.0, long_rejected=2.0, call_seconds=2.0,
                        read_seconds=0.01)  # drafts well, but its call was timed at 2 steps

    def generation() -> HybridK:  # 128 tokens at most, a plain step of 1 s
        schedule = HybridK(4, memory=memory, budget=128)
        schedule.costs.seconds = {1: 1.0, 5: 1.2}
        schedule.costs.switch, schedule._last_width = 0.25, 5
        return schedule

    assert not memory.refresh_due()
    assert plans_until_the_model_drafts(generation(), NEW_TEXT) == 200, "probed though it has not read the prompt"
    assert plans_until_the_model_drafts(generation(), NEW_TEXT) == 200
    assert memory.refresh_due(), "two generations without it: time a bare call"
    memory.refresh(1.5)  # a call while drafting costs more than a bare one (sampling): not stale
    assert memory.call_seconds == 2.0
    memory.refresh(0.1)
    assert memory.call_seconds is None, "kept at 20 bare calls: stale"
    third = generation()
    assert plans_until_the_model_drafts(third, NEW_TEXT) == 0, "timed afresh by its first round"
    third.observe_round(RoundResult(4, 3, 0.5, 1.2, catch_up_seconds=0.5, draft_calls=4))
    assert memory.call_seconds == pytest.approx(0.125) and memory.idle_generations == 0


def test_a_draft_model_that_sits_out_is_timed_again_ever_more_rarely():
    """Where the model rightly sits out (AVX2 kernels, where its rounds only tie), a bare call is
    timed after 2, 4, 8, ... generations without it, not in every one."""
    memory = PairMemory()
    due = []
    for _ in range(20):
        due.append(memory.refresh_due())
        memory.idle_generations += 1
    assert [n for n, is_due in enumerate(due) if is_due] == [2, 4, 8, 16]


def test_the_hybrid_times_a_draft_model_that_sat_out_through_its_empty_cache(tiny_pairs):
    """The plug-in times the bare call before the generation's first round, on the generation's own
    draft cache, which it leaves empty: the answer is the same, and a stale kept cost is timed afresh."""
    from spec.decoding.target_memory import LearnedState

    target, draft = tiny_pairs["llama"]
    prompt = "one two three four five six one two three four five six one two"
    config = GenerationConfig(max_new_tokens=24, num_assistant_tokens=4)
    want = generate(prompt, target, config).token_ids
    learned = LearnedState()
    assert generate(prompt, target, config, draft=draft, drafter=HYBRID, learned=learned).token_ids == want
    memory = learned.pair(target, draft, HYBRID)
    memory.call_seconds, memory.idle_generations = 100.0, 2  # timed at a dreadful moment, then sat out twice
    assert generate(prompt, target, config, draft=draft, drafter=HYBRID, learned=learned).token_ids == want
    assert memory.call_seconds < 1.0  # a tiny model's calls take milliseconds


def test_timing_a_bare_call_needs_an_empty_cache_and_leaves_it_empty(tiny_pairs):
    from spec.decoding.drafters import time_bare_call

    _, draft = tiny_pairs["llama"]
    cache = draft.model.new_cache()
    try:
        assert 0 < time_bare_call(cache) < 1.0 and cache.length == 0
        cache.forward([1, 2, 3])
        with pytest.raises(ValueError, match="empty KV cache"):
            time_bare_call(cache)
    finally:
        cache.release()


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_greedy_hybrid_across_tokenizers_equals_greedy_autoregressive(cross_models, k):
    target, bytes_draft = cross_models
    want, _ = greedy_text(target)
    config = GenerationConfig(max_new_tokens=48, num_assistant_tokens=k)
    steps = list(stream(PROMPT, target, config, draft=bytes_draft, prompt_lookup=True))
    assert [t for s in steps for t in s.token_ids] == want
    stats = steps[-1].stats
    assert stats.drafted_by == "hybrid: draft model, cross-tokenizer or prompt lookup"
    kinds = [kind for s in steps for kind in s.kinds]
    assert kinds.count(LOOKUP) == stats.accepted_lookup and kinds.count(ACCEPTED) == stats.accepted - stats.accepted_lookup


def test_greedy_hybrid_with_a_same_family_draft_equals_autoregressive(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    prompt = "one two three four five six one two three four five six one two"
    config = GenerationConfig(max_new_tokens=40, num_assistant_tokens=4)
    want = generate(prompt, target, config).token_ids
    steps = list(stream(prompt, target, config, draft=draft, drafter=HYBRID))
    assert [t for s in steps for t in s.token_ids] == want
    assert steps[-1].stats.drafted_by == "hybrid: draft model or prompt lookup"


def test_the_draft_models_round_is_checked_at_a_width_the_costs_allow():
    """Where a call of 5 costs 1.87 steps (an AVX2 CPU), a short model round is checked at its own
    width; where it costs 1.23 (the Xeon's curve), at K+1 with guesses filling the rest."""
    from tests.test_adaptive_k import AVX2_CALLS, AVX2_SWITCH, XEON_CALLS, XEON_SWITCH

    for calls, switch, narrow in ((AVX2_CALLS, AVX2_SWITCH, True), (XEON_CALLS, XEON_SWITCH, False)):
        schedule = timed(alpha_draft=0.55, call_seconds=0.022)
        schedule.costs.seconds, schedule.costs.switch = dict(calls), switch
        schedule._plan = Round(4, 2, DRAFT_MODEL)  # right after a model round at width 5
        plan = schedule.next_round(NEW_TEXT)
        assert plan.source == DRAFT_MODEL and (plan.k < 4) == narrow, (calls, plan)


def test_a_draft_model_round_that_stopped_early_is_checked_at_the_width_that_yields_most():
    """The draft model stopped after its first token: where a call of 5 costs two steps (the AVX2
    CPU), that token alone is checked at width 2; where it costs 1.2, guesses fill the width."""
    dear = timed(alpha_draft=0.8, call_seconds=0.3, verify_seconds=2.0)
    plan = dear.next_round(NEW_TEXT)
    assert plan == Round(4, 4, DRAFT_MODEL)
    assert dear.verify_k(1) == 1 and dear._plan == Round(1, 1, DRAFT_MODEL)  # timed, and judged, at width 2
    dear._plan = plan
    assert dear.verify_k(4) == 4  # it made all it was asked for
    cheap = timed(alpha_draft=0.8, call_seconds=0.3, verify_seconds=1.2)
    assert cheap.next_round(NEW_TEXT).k == 4 and cheap.verify_k(1) == 4


def test_a_run_of_the_models_rounds_is_left_at_a_plain_steps_steady_price():
    """After one of its rounds a plain step changes the call's width, paid once for the plain steps that
    follow. Priced on the first of them alone (0.67 of a step under emulated AVX2), rounds that only tie
    went on round after round; entering a run still pays the change of width into it."""
    schedule = timed(alpha_draft=0.7, call_seconds=0.1)
    plan = schedule.next_round(NEW_TEXT)
    assert plan.source == DRAFT_MODEL
    schedule.observe_round(RoundResult(plan.draft_length, 1, 0.1 * plan.draft_length, 1.2))
    assert schedule.rates(0, 0)[Round(0, 0)] == pytest.approx(1.0)  # the step's steady second, no switch
    schedule.observe_plain(1.0)
    schedule._plan, schedule._unread = Round(0, 0), 0  # not behind: no catch-up in the price
    rates = schedule.rates(0, 0)
    assert rates[Round(0, 0)] == pytest.approx(1.0)  # after a step: a step, as before
    kept = schedule._promises[Round(4, 4, DRAFT_MODEL)] * schedule.memory.yielded
    into_run = schedule.costs.steady(5) + schedule.costs.switch + schedule.memory.round_seconds(4)
    assert rates[Round(4, 4, DRAFT_MODEL)] == pytest.approx(kept / into_run)  # into a run: with the switch
