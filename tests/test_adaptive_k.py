"""Dynamic K: the cost model against Leviathan et al.'s formula, and the schedule it drives."""
import numpy as np
import pytest

from spec.config import DRAFT_MODEL, HYBRID, PROMPT_LOOKUP, GenerationConfig
from spec.decoding.drafters import Drafter, HybridDrafter, PromptLookupDrafter
from spec.decoding.plugins import PLUGINS
from spec.decoding.policy import (
    CallCosts,
    DynamicK,
    FixedK,
    HybridK,
    LookupAcceptance,
    LookupK,
    LookupYields,
    PairMemory,
    Pause,
    Round,
    RoundResult,
    Schedule,
    expected_tokens,
    match_key,
    predicted_speedup,
    prior_width_cost,
)

T = 0.010  # seconds of a plain target step in these tests


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 0.99])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_expected_tokens_per_round_match_a_simulation(alpha, k):
    """Each draft is kept with probability α until the first rejection; the target adds one token."""
    rng = np.random.default_rng(0)
    kept = (rng.random((200_000, k)) < alpha).cumprod(axis=1).sum(axis=1)
    assert expected_tokens(alpha, k) == pytest.approx(kept.mean() + 1, rel=0.01)
    assert expected_tokens(1.0, k) == k + 1


def test_predicted_speedup_is_leviathans_formula():
    # (1 - α^(K+1)) / ((1 - α)(Kc + 1)) when a verify call costs what a one-token step costs.
    assert predicted_speedup(0.8, 4, 0.05) == pytest.approx((1 - 0.8**5) / (0.2 * (4 * 0.05 + 1)))
    # A verify call measured at 1.5 plain steps takes the place of the 1.
    assert predicted_speedup(0.8, 4, 0.05, 1.5) == pytest.approx((1 - 0.8**5) / (0.2 * (4 * 0.05 + 1.5)))


def test_each_drafter_names_its_schedule_and_each_schedule_plays_the_one_role():
    """The loop depends on the Schedule protocol alone; each drafter's plug-in picks the class."""

    class DraftModel(Drafter):  # a drafter that costs something to run, as a draft model does
        name = "draft model"

    lookup, dynamic, fixed = PromptLookupDrafter(), GenerationConfig(), GenerationConfig(dynamic_k=False)
    chosen = {
        "hybrid": PLUGINS[HYBRID].schedule(HybridDrafter(DraftModel(), lookup), dynamic, None, None),
        "lookup": PLUGINS[PROMPT_LOOKUP].schedule(lookup, dynamic, None, None),
        "lookup, fixed K": PLUGINS[PROMPT_LOOKUP].schedule(lookup, fixed, None, None),
        "draft model": PLUGINS[DRAFT_MODEL].schedule(DraftModel(), dynamic, None, None),
        "draft model, fixed K": PLUGINS[DRAFT_MODEL].schedule(DraftModel(), fixed, None, None),
    }
    assert {name: type(schedule) for name, schedule in chosen.items()} == {
        "hybrid": HybridK, "lookup": LookupK, "lookup, fixed K": FixedK, "draft model": DynamicK, "draft model, fixed K": FixedK,
    }
    assert chosen["hybrid"].lookup is lookup and chosen["lookup"].lookup is lookup
    assert all(isinstance(schedule, Schedule) for schedule in chosen.values())


def measured(k: int = 10, first_draft_length: int = 4, **kwargs) -> DynamicK:
    """A schedule as the loop has it after the prompt and two plain steps: a step's cost is known."""
    schedule = DynamicK(k, first_draft_length=first_draft_length, **kwargs)
    schedule.observe_other_call()
    assert schedule.next_draft_length() == 0  # the first step is plain: it measures what a round must beat
    schedule.observe_plain(T)  # right after the prompt's width: no fair sample
    assert schedule.t_step is None and schedule.next_draft_length() == 0
    schedule.observe_plain(T)
    assert schedule.t_step == T
    return schedule


def test_draft_length_grows_on_full_acceptance_within_what_the_cost_model_allows():
    schedule = measured()
    schedule.observe_round(RoundResult(4, 4, draft_seconds=0.1 * T * 4, verify_seconds=1.2 * T))  # cheap, all kept
    assert schedule.next_draft_length() == 6  # +2
    schedule.observe_round(RoundResult(6, 2, draft_seconds=0.1 * T * 6, verify_seconds=1.3 * T))
    n, speedup = schedule.best_draft_length()
    assert schedule.costs.seconds == pytest.approx({1: T, 11: 1.3 * T})  # the first round changed width: only this one timed
    assert speedup > 1 and 1 <= n <= 10
    assert schedule.next_draft_length() == min(5, n)  # -1, and never past the length the cost model expects to pay best


def test_a_rounds_extra_draft_calls_are_priced_per_round_not_per_drafted_token():
    """Across tokenizers a round makes about one draft call more than it drafts (the token whose text
    may still grow). Priced per drafted token, that call makes 1-draft rounds look twice as dear per
    token as longer rounds are, and a draft that pays looks as if it did not; priced per round, longer
    rounds amortize it."""
    schedule = measured(k=4, first_draft_length=1)
    for accepted in [0, 1, 1, 1] * 5:  # rounds of one draft, kept 3 times in 4, each two calls of 0.3 steps
        schedule.observe_round(RoundResult(1, accepted, draft_seconds=0.3 * T * 2, verify_seconds=1.2 * T, draft_calls=2))
    m = schedule.memory
    assert m.extra_calls == pytest.approx(1.0, abs=0.01) and schedule.draft_cost == pytest.approx(0.3)
    n, speedup = schedule.best_draft_length()
    assert n >= 3 and speedup == pytest.approx(
        expected_tokens(m.alpha, n) / ((n + m.extra_calls) * 0.3 + schedule.verify_cost(n)[1]))
    per_token = max(predicted_speedup(m.alpha, n, 0.6, 1.2) for n in range(1, 5))  # each at the timed width 5
    assert speedup > 1.2 and per_token < 1.05, (speedup, per_token)  # a clear win, against break-even


def test_a_draft_that_cannot_pay_gets_plain_steps_and_ever_rarer_probes():
    # A draft nearly as slow as the target (an INT4 copy of it): even a good acceptance cannot pay.
    schedule = measured()
    schedule.observe_round(RoundResult(4, 3, draft_seconds=0.8 * T * 4, verify_seconds=1.5 * T))
    schedule.observe_round(RoundResult(3, 2, draft_seconds=0.8 * T * 3, verify_seconds=1.5 * T))
    assert schedule.best_draft_length()[1] < 1
    assert [schedule.next_draft_length() for _ in range(8)] == [0] * 8
    assert schedule.next_draft_length() == 1  # the probe is the cheapest round
    schedule.observe_round(RoundResult(1, 1, draft_seconds=0.8 * T, verify_seconds=1.1 * T))
    assert [schedule.next_draft_length() for _ in range(16)] == [0] * 16  # failed again: a pause twice as long
    assert schedule.next_draft_length() == 1


def test_a_draft_that_pays_resumes_after_one_good_probe_despite_a_bad_start():
    """SmolLM2 drafting for Qwen (a call 0.19 steps, one call more per round than it drafts) kept
    a third of its drafts over its first rounds and paused; then it would pay. The pause's plain
    steps fade that start and one good probe resumes drafting (before, a 1-token probe could not
    outweigh six rounds of history: 276 plain steps of 286 calls on HumanEval/2)."""
    memory = PairMemory(accepted=2.0, rejected=4.0, call_seconds=0.19 * T, extra_calls=1.0,
                        pause=Pause(left=8, length=16))
    schedule = DynamicK(4, memory=memory, costs=CallCosts({1: T, 5: 1.23 * T}))
    assert schedule.best_draft_length()[1] < 1
    assert [schedule.next_draft_length() for _ in range(8)] == [0] * 8
    probe = schedule.next_draft_length()
    assert 1 <= probe <= 4
    schedule.observe_round(RoundResult(probe, probe, draft_seconds=0.19 * T * (probe + 1), verify_seconds=1.23 * T, draft_calls=probe + 1))
    assert schedule.next_draft_length() > 0
    # A probe that keeps nothing confirms the pause, twice as long.
    paused = DynamicK(4, memory=PairMemory(accepted=2.0, rejected=4.0, call_seconds=0.19 * T, extra_calls=1.0,
                                           pause=Pause(left=8, length=16)), costs=CallCosts({1: T, 5: 1.23 * T}))
    assert [paused.next_draft_length() for _ in range(8)] == [0] * 8
    probe = paused.next_draft_length()
    paused.observe_round(RoundResult(probe, 0, draft_seconds=0.19 * T * (probe + 1), verify_seconds=1.23 * T, draft_calls=probe + 1))
    assert [paused.next_draft_length() for _ in range(16)] == [0] * 16


def test_a_draft_that_pays_on_its_record_drafts_through_a_few_unlucky_rounds():
    """SmolLM2 for Qwen keeps about 4 drafts in 5 over a run, yet two or three rounds that keep
    nothing drag the recent estimate below break-even; pausing then cost it 44% of its calls as
    plain steps (HumanEval 0-15: 1.32x dynamic against 1.38x at K=4). The long record says it
    pays, so it drafts on; a draft whose record does not pay pauses as before."""
    def pair(long_accepted: float, long_rejected: float) -> DynamicK:
        return DynamicK(4, memory=PairMemory(accepted=3.0, rejected=1.0, long_accepted=long_accepted,
                                             long_rejected=long_rejected, call_seconds=0.19 * T, extra_calls=1.3),
                        costs=CallCosts({1: T, 5: 1.19 * T}))

    for schedule, pauses in [(pair(40.0, 10.0), False), (pair(5.0, 5.0), True)]:
        for _ in range(3):
            schedule.observe_round(RoundResult(4, 0, draft_seconds=0.19 * T * 5, verify_seconds=1.19 * T, draft_calls=5))
        assert schedule.best_draft_length()[1] < 1  # the recent rounds alone would pause
        assert (schedule.memory.pause.left > 0) == pauses
        assert (schedule.next_draft_length() == 0) == pauses


def test_what_a_pair_learned_carries_over_to_its_next_generation():
    memory = PairMemory()
    first = measured(memory=memory)
    first.observe_round(RoundResult(4, 3, draft_seconds=0.8 * T * 4, verify_seconds=1.5 * T))
    first.observe_round(RoundResult(3, 2, draft_seconds=0.8 * T * 3, verify_seconds=1.5 * T))
    for _ in range(3):
        first.next_draft_length()  # the generation ends 3 steps into its 8-step pause
    second = DynamicK(10, first_draft_length=4, memory=memory, costs=first.costs)  # the same target's
    assert [second.next_draft_length() for _ in range(5)] == [0] * 5  # the rest of the pause: no re-learning
    assert second.next_draft_length() == 1
    # A fresh pair starts by measuring: plain steps, then the length asked for.
    fresh = measured(memory=PairMemory())
    assert fresh.next_draft_length() == 4


def test_fixed_k_never_falls_back():
    schedule = FixedK(3)
    schedule.observe_plain(T)
    schedule.observe_round(RoundResult(3, 0, draft_seconds=1.0, verify_seconds=1.0))
    assert [schedule.next_round([1, 2, 3]) for _ in range(3)] == [Round(3, 3)] * 3 and schedule.verify_k(1) == 3


def test_calls_that_are_no_fair_sample_do_not_move_the_costs():
    """A call right after one of another width pays for OpenVINO re-preparing the model: the cost
    model must not learn from it."""
    schedule = measured(k=4)
    schedule.observe_round(RoundResult(4, 2, draft_seconds=1e-5, verify_seconds=5 * T))  # the first round: the width changed
    assert 5 not in schedule.costs.seconds and schedule.draft_cost is not None
    schedule.observe_round(RoundResult(4, 2, draft_seconds=1e-5, verify_seconds=1.1 * T))
    assert schedule.costs.seconds[5] == pytest.approx(1.1 * T)
    schedule.observe_plain(3 * T)  # the first plain step after rounds
    assert schedule.t_step == T


# Seconds of the target's calls per width: Qwen2.5-Coder-1.5B INT8 on an AVX2-only CPU (bench/results/
# qwen-avx2.json) and on the AMX Xeon (its prior curve at the same step), with their switch costs.
AVX2_CALLS, AVX2_SWITCH = {1: 0.194, 2: 0.236, 3: 0.293, 5: 0.363, 9: 0.508}, 0.034
XEON_CALLS, XEON_SWITCH = {w: 0.194 * prior_width_cost(w) for w in (1, 2, 3, 5, 9)}, 0.25 * 0.194


def smollm2_for_qwen(alpha: float, calls: dict[int, float], switch: float) -> DynamicK:
    """SmolLM2 drafting for Qwen (a call 0.115 steps, one call more per round than it drafts), right after a round of 5."""
    memory = PairMemory(accepted=10 * alpha, rejected=10 * (1 - alpha), long_accepted=10 * alpha,
                        long_rejected=10 * (1 - alpha), call_seconds=0.115 * calls[1], extra_calls=1.0)
    schedule = DynamicK(4, memory=memory, costs=CallCosts(dict(calls), switch))
    schedule._last_width = 5
    return schedule


def test_a_short_draft_is_checked_at_its_own_width_where_wide_calls_are_dear():
    """On an AVX2 CPU a call of 5 costs 1.87 steps and a call of 2 1.22: at α 0.64 one draft checked at
    width 2 yields most (about 1.13x), where every round at width 5 yielded at most 1.04x (0.93x of
    plain decoding on open questions, measured). Where a call of 5 costs 1.23 steps (the Xeon) and
    changing width a quarter of a step, rounds stay at width 5, guesses filling what is not drafted."""
    avx2 = smollm2_for_qwen(0.64, AVX2_CALLS, AVX2_SWITCH)
    assert avx2.next_round([1, 2, 3]) == Round(1, 1) and avx2.best_draft_length()[1] > 1.1
    assert max(predicted_speedup(0.64, n, 0.115, AVX2_CALLS[5] / AVX2_CALLS[1] + 0.115) for n in range(1, 5)) < 1.05
    assert smollm2_for_qwen(0.8, AVX2_CALLS, AVX2_SWITCH).next_round([1, 2, 3]) == Round(4, 4)  # long rounds pay there
    xeon = smollm2_for_qwen(0.64, XEON_CALLS, XEON_SWITCH)
    assert xeon.next_round([1, 2, 3]) == Round(4, 2)


def test_a_draft_that_stopped_early_is_checked_at_its_own_width_where_that_costs_less():
    """A round planned at 4 drafts whose draft model stopped after one token it doubted: on the AVX2
    CPU its call of 2 costs less than one of 5, the switch counted, so the three free guesses are not
    worth their width; on the Xeon a call of 5 costs what one of 2 does, and they fill it."""
    avx2 = smollm2_for_qwen(0.8, AVX2_CALLS, AVX2_SWITCH)
    assert avx2.next_round([1, 2, 3]) == Round(4, 4)
    assert avx2.verify_k(1) == 1
    avx2.observe_round(RoundResult(1, 1, draft_seconds=0.022, verify_seconds=0.25, draft_calls=1))
    assert avx2._last_width == 2  # the call is timed at the width it ran at
    assert smollm2_for_qwen(0.8, AVX2_CALLS, AVX2_SWITCH).verify_k(4) == 4  # it made all it was asked for
    xeon = smollm2_for_qwen(0.8, XEON_CALLS, XEON_SWITCH)
    assert xeon.next_round([1, 2, 3]).k == 4 and xeon.verify_k(1) == 4
    assert FixedK(4).verify_k(1) == 4


def test_a_round_at_a_new_width_is_timed_and_priced_on_the_timed_line_until_then():
    schedule = smollm2_for_qwen(0.64, {1: 0.194, 5: 0.363}, AVX2_SWITCH)  # widths 2 and 3 not timed yet
    assert schedule.verify_cost(1)[1] == pytest.approx((0.194 + (0.363 - 0.194) / 4) / 0.194)
    plan = schedule.next_round([1, 2, 3])
    assert plan.k == plan.draft_length < 4  # a short round at its own width, priced on the line from 1 to 5
    schedule.observe_round(RoundResult(plan.k, 1, draft_seconds=0.022, verify_seconds=0.4, draft_calls=plan.k + 1))
    assert plan.k + 1 not in schedule.costs.seconds  # right after a call of 5: no fair sample
    assert schedule.next_round([1, 2, 3]) == plan
    schedule.observe_round(RoundResult(plan.k, 1, draft_seconds=0.022, verify_seconds=0.3, draft_calls=plan.k + 1))
    assert schedule.costs.seconds[plan.k + 1] == 0.3  # the second call at that width in a row is a fair sample


# --- prompt lookup: K from the match each round ----------------------------------------------------

COPYING = list(range(100, 140)) + [7, 8, 9] + list(range(100, 130))  # the tail repeats the start: a long copy
NEW_TEXT = list(range(100, 140)) + [7, 8, 9, 1, 2, 3, 4, 5]  # the tail never occurred before


def lookup_measured(**seconds) -> LookupK:
    """A LookupK that has measured a plain step (1.0 s), its verify widths, and the switch cost."""
    schedule = LookupK(4)
    schedule.costs.seconds = {1: 1.0, 2: 1.02, 3: 1.05, 5: 1.1, 9: 1.45, **{int(w[1:]): s for w, s in seconds.items()}}
    schedule.costs.switch = 0.25
    schedule._last_width = 5
    return schedule


def test_lookup_starts_at_the_k_asked_for():
    assert LookupK(4).next_round(COPYING) == Round(4, 4, "prompt-lookup")
    assert LookupK(4).choices == (1, 2, 3, 4, 8, 16, 32)  # long copies may verify up to 32 drafts at once


def test_lookup_verifies_at_width_4_where_that_is_the_cheap_width():
    """On the AVX2 EPYC a call of 4 cost 1.13 steps, of 3 1.26 and of 5 1.58-2.31 (issue 38): lookup
    chose K from 1, 2, 4, 8... and never verified at width 4. A 3-gram match keeping about 3 of 8
    is now verified at K=3 there."""
    avx2 = {1: 1.0, 2: 0.99, 3: 1.26, 4: 1.13, 5: 1.95, 6: 2.0, 9: 2.71}
    match_3 = list(range(200, 240)) + [5, 6, 7] + list(range(40, 60)) + [5, 6, 7]  # the suffix occurred once, 23 tokens back
    for choices, best in ((None, 3), ((1, 2, 4, 8, 16, 32), 2)):
        schedule = LookupK(4, choices=choices)
        schedule.costs.seconds, schedule.costs.switch, schedule._last_width = dict(avx2), 0.1, 4
        for _ in range(8):
            schedule._match, schedule._plan = (3, 20), Round(8, 8)
            schedule.observe_round(RoundResult(8, 3, 1e-5, avx2[9]))
        assert schedule.next_round(match_3) == Round(best, best, "prompt-lookup")


def test_a_long_3_gram_copy_widens_k_and_no_match_does_not():
    schedule = lookup_measured()
    for _ in range(6):  # this generation has been copying: 3-gram matches are kept through
        schedule._match, schedule._plan = (3, 20), Round(8, 8)
        schedule.observe_round(RoundResult(8, 8, 1e-5, 1.45))
    assert schedule.next_round(COPYING).k >= 8
    plan = schedule.next_round(NEW_TEXT)
    assert schedule._match == (0, 0) and plan.k <= 2  # no match: guesses are seldom right, verify few or none


def test_a_match_after_a_run_of_misses_is_verified_at_once():
    """Not a collapsing average: the misses were rounds without a match; a 3-gram match still looks good."""
    schedule = lookup_measured()
    for _ in range(20):
        schedule._match, schedule._plan = (0, 0), Round(2, 2)
        schedule.observe_round(RoundResult(0, 0, 1e-5, 1.02))
    assert schedule.acceptance.alpha(0) < 0.05 and schedule.acceptance.alpha(3) == LookupAcceptance().alpha(3)
    assert schedule.next_round(COPYING).k >= 4


def test_plain_steps_only_when_verifying_guesses_costs_more_than_a_switch():
    cheap_verify = lookup_measured()
    for _ in range(20):
        cheap_verify._match, cheap_verify._plan = (0, 0), Round(2, 2)
        cheap_verify.observe_round(RoundResult(0, 0, 1e-5, 1.02))
    assert cheap_verify.next_round(NEW_TEXT).k > 0  # a width-3 call costs 2% more than a step: keep verifying
    dear_verify = lookup_measured(w2=1.6, w3=1.7, w5=1.9)
    dear_verify._last_width = 1
    for _ in range(20):
        dear_verify.acceptance.count(0, 0, True)
    assert dear_verify.next_round(NEW_TEXT).k == 0


def test_lookup_measures_each_width_and_the_switch():
    schedule = LookupK(4)
    schedule.observe_other_call()
    schedule.observe_round(RoundResult(4, 0, 1e-5, 3.0))  # right after the prompt: no fair sample of anything
    assert schedule.costs.seconds == {} and schedule.costs.switch is None
    schedule.observe_round(RoundResult(4, 0, 1e-5, 1.1))
    assert schedule.costs.seconds == {5: 1.1}
    schedule.observe_plain(1.4)  # a width change: 1.4 s, though no steady step was measured yet
    schedule.observe_plain(1.0)
    schedule.observe_round(RoundResult(4, 0, 1e-5, 1.4))  # 0.3 s more than a steady width-5 call
    assert schedule.costs.seconds[1] == 1.0 and schedule.costs.switch == pytest.approx(0.3)


def test_after_the_other_lanes_step_a_round_pays_the_switch_and_a_step_does_not():
    """The race's lanes call one compiled target, which re-prepares for a call of another width
    whoever made the last one (bench.studies.other_lane): after the other lane's step a round is
    priced with the switch and a step is not, and a step then is timed as a steady one."""
    schedule = LookupK(4, costs=CallCosts({1: 1.0, 5: 1.1}, switch=0.2))
    schedule.observe_other_call(1)
    assert schedule.cost(5) == pytest.approx(1.3) and schedule.cost(1) == pytest.approx(1.0)
    schedule._called.add(1)  # this generation has stepped before
    schedule.observe_plain(0.8)
    assert schedule.costs.seconds[1] < 1.0, "learned as a steady step"
    unknown = LookupK(4, costs=CallCosts({1: 1.0, 5: 1.1}, switch=0.2))
    unknown.observe_other_call()
    unknown._called.add(1)
    unknown.observe_plain(0.8)
    assert unknown.costs.seconds[1] == 1.0, "after a call of unknown width, nothing is learned"


def test_a_generations_first_call_at_a_width_teaches_no_switch():
    """A generation's first call at a width also pays OpenVINO preparing that width for its own
    cache, once: far more than the switch between two widths it has called. Learned as a switch, one
    such call priced every change of width at about a step for rounds to come (docs/design-notes.md)."""
    schedule = LookupK(4, costs=CallCosts({1: 1.0, 5: 1.1, 33: 2.0}))
    schedule.observe_other_call()
    schedule.observe_round(RoundResult(4, 0, 1e-5, 1.3))  # right after the prompt
    schedule.observe_round(RoundResult(4, 0, 1e-5, 1.1))
    schedule._plan = Round(32, 32, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(32, 0, 1e-5, 4.0))  # its first call of 33: twice a steady one
    assert schedule.costs.switch is None and schedule.costs.seconds[33] == 2.0
    schedule._plan = Round(4, 4, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(4, 0, 1e-5, 1.2))  # back to 5: a switch of 0.1 s
    schedule._plan = Round(32, 32, PROMPT_LOOKUP)
    schedule.observe_round(RoundResult(32, 0, 1e-5, 2.1))  # 33 again, now prepared
    assert schedule.costs.switch == pytest.approx(0.1)


def test_what_the_targets_calls_cost_carries_over_to_its_next_generation():
    """A verify call's cost is the target's on this device: the next generation plans from it at
    once, not from the prior curve (measured at another precision, on another CPU)."""
    costs = CallCosts()
    first = LookupK(4, costs=costs)
    first.observe_other_call()
    for seconds in (9.0, 1.0, 1.0):  # a slow, wide f32 call: 9 times a plain step
        first.observe_plain(seconds)
    for seconds in (30.0, 9.0, 9.0):
        first.observe_round(RoundResult(4, 0, 1e-5, seconds))
    assert costs.seconds == {1: 1.0, 5: 9.0}
    second = LookupK(4, costs=costs)
    second.observe_other_call()
    assert second.next_round(NEW_TEXT).k <= 1  # no width-5 call of guesses at 9 steps a call
    assert LookupK(4).next_round(NEW_TEXT) == Round(4, 4, "prompt-lookup")  # afresh: the K asked for


# A 1.5B's calls under AVX2 kernels (emulated on the Zen 5, seconds): a call of 33 costs 13 steps.
AVX2_CURVE = {1: 0.056, 2: 0.077, 3: 0.099, 4: 0.121, 5: 0.205, 9: 0.284, 17: 0.427, 33: 0.740}
LONG_COPY = list(range(100, 180)) + [7, 8, 9] + list(range(100, 140))  # a 40-token match, 80 tokens to copy after it


def copying_whole(yields: LookupYields | None = None) -> LookupK:
    """A LookupK on the AVX2 curve whose generation has kept three long copies whole, at K=16."""
    schedule = LookupK(4, costs=CallCosts(dict(AVX2_CURVE), switch=0.0), yields=yields)
    schedule._called.update(AVX2_CURVE)
    for _ in range(3):
        schedule._match, schedule._plan, schedule._last_width = (32, 80), Round(16, 16, PROMPT_LOOKUP), 17
        schedule.observe_round(RoundResult(16, 16, 1e-5, AVX2_CURVE[17]))
    return schedule


def test_a_k_whose_rounds_kept_half_their_promise_is_weighed_at_that():
    """Under emulated AVX2 lookup's rounds of 32 kept 0.49 of what they promised (the copy broke at
    the next edit) and a round of 32 costs 13 steps: the served lane that took them most fell to
    0.86 of the same generation alone. Weighed at what its rounds kept, 32 gives way to 16."""
    assert copying_whole().next_round(LONG_COPY).k == 32  # every copy so far was kept whole: 32 looks best
    yields = LookupYields()
    earlier = copying_whole(yields)  # an earlier generation on this target: its rounds of 32 kept half their promise
    for _ in range(4):
        earlier.next_round(LONG_COPY)
        earlier._plan = Round(32, 32, PROMPT_LOOKUP)
        earlier.observe_round(RoundResult(32, int(earlier._lookup_promises[32] / 2), 1e-5, AVX2_CURVE[33]))
    assert yields.factor(32) < 0.7 and yields.factor(16) == 1.0
    assert copying_whole(yields).next_round(LONG_COPY).k == 16


def test_a_copy_kept_whole_never_weighs_a_k_above_its_promise():
    """A copy kept whole already raised this generation's acceptance: counted in the yield too, one
    lucky copy would send the next rounds wider still."""
    yields = LookupYields()
    yields.observe(32, 20.0, 33)
    assert yields.factor(32) == 1.0
    yields.observe(32, 20.0, 2)
    assert yields.factor(32) < 1.0


def test_exact_mode_plans_from_the_f32_curve_before_it_has_timed_a_call():
    """At f32 a call of 9 costs about 2.6 steps, not 1.4: guesses that pay at the default precision do not there."""
    from spec.decoding.policy import PRIOR_WIDTH_COST_F32

    assert CallCosts.for_precision("f32").prior is PRIOR_WIDTH_COST_F32
    assert CallCosts.for_precision("default").prior == CallCosts().prior
    assert prior_width_cost(9, PRIOR_WIDTH_COST_F32) > 1.7 * prior_width_cost(9)
    assert prior_width_cost(40, PRIOR_WIDTH_COST_F32) >= prior_width_cost(33, PRIOR_WIDTH_COST_F32)  # never cheaper beyond
    weak = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 3, 4, 5, 6, 99, 4, 5, 6]  # a 3-gram match, then guesses
    default, exact = LookupK(4, choices=(1, 2, 4, 8)), LookupK(4, choices=(1, 2, 4, 8), costs=CallCosts.for_precision("f32"))
    for schedule in (default, exact):
        schedule.observe_other_call()
        schedule.next_round(weak)
        schedule._last_width = 1
    assert exact.next_round(weak).k < default.next_round(weak).k


def test_a_pause_doubles_while_probes_confirm_it_up_to_its_cap_and_is_short_again_once_drafting_pays():
    """One mechanism for dynamic K's plain steps and the hybrid's rounds without the draft model."""
    pause, lengths = Pause(), []
    assert pause.over  # nothing paused yet
    for _ in range(5):
        pause.start(longest=32)
        lengths.append(pause.left)
        while not pause.over:
            pause.tick()
    assert lengths == [8, 16, 32, 32, 32]
    pause.reset()
    pause.start(longest=32)
    assert pause.left == 8


def test_pauses_are_as_long_as_a_probe_is_dear():
    """Probes stay within about 2% of the time: a draft whose catching up costs 10 steps is paused up
    to 500 steps (512 at most), one that costs a tenth of a step up to 32."""
    for catch_up, longest in ((10 * T, 500), (20 * T, 512), (0.1 * T, 32)):
        schedule = measured()
        schedule.observe_round(RoundResult(4, 0, 0.9 * T * 4, 1.5 * T, catch_up_seconds=catch_up))
        pauses = []
        for _ in range(8):
            schedule.observe_round(RoundResult(4, 0, 0.9 * T * 4, 1.5 * T))  # cannot pay: pause, and pause again
            pauses.append(schedule.memory.pause.left)
            schedule.memory.pause.left = 0
        assert max(pauses) == longest, (catch_up, pauses)


def test_unmeasured_widths_are_priced_from_the_measured_cost_curve():
    assert prior_width_cost(1) == 1.0 and prior_width_cost(5) == pytest.approx(1.23)
    assert prior_width_cost(8) == pytest.approx((1.36 + 1.44) / 2), "linear between measured widths"
    assert prior_width_cost(3) < prior_width_cost(9) < prior_width_cost(17) < prior_width_cost(33) < prior_width_cost(65)
    schedule = LookupK(4)
    schedule.costs.seconds = {1: 0.1, 9: 0.16}  # a faster machine: the curve is scaled from the nearest measured width
    assert schedule.costs.steady(17) == pytest.approx(0.16 * prior_width_cost(17) / prior_width_cost(9))


def test_a_long_copy_under_way_verifies_16_to_32_drafts_at_once():
    """Once a generation has kept long copies whole, a match reaching far back with hundreds of tokens
    available pays for the widest calls the cost curve allows; a short match does not."""
    schedule = LookupK(4)
    schedule.costs.seconds = {w: prior_width_cost(w) for w in (1, 2, 3, 5, 9, 17, 33)}
    schedule.costs.switch, schedule._last_width = 0.25, 17
    for _ in range(4):
        schedule._match, schedule._plan = (match_key(40), 300), Round(16, 16)
        schedule.observe_round(RoundResult(16, 16, 1e-5, 1.75))
    long_copy = list(range(100, 180)) + [7] + list(range(100, 150))
    assert schedule.next_round(long_copy).k >= 16
    assert schedule._match == (32, 81)  # a match reaching 50 back; the rest of the context follows it
    assert schedule.next_round(NEW_TEXT).k <= 2
    assert match_key(1) == 1 and match_key(5) == 4 and match_key(40) == 32 and match_key(0, resumed=True) == -1


def test_a_plain_step_is_timed_before_lookup_weighs_guesses_against_it():
    """Having timed only its width-5 call, lookup took no plain step on an AVX2 CPU: priced from that
    call through another CPU's curve, a plain step looked dear (0.63x plain decoding on an open
    question). Without a sure copy it now times two plain steps in a row first."""
    schedule = LookupK(4)
    schedule.observe_other_call()
    for seconds in (3.0, 1.9, 1.9):  # verify calls of 5 at 1.9 plain steps, as on that CPU
        schedule.observe_round(RoundResult(4, 0, 1e-5, seconds))
    assert schedule.next_round(NEW_TEXT) == Round(0, 0)
    schedule.observe_plain(1.1)  # right after a width-5 call: no steady sample yet
    assert schedule.next_round(NEW_TEXT) == Round(0, 0)
    schedule.observe_plain(1.0)
    assert schedule.costs.seconds == {1: 1.0, 5: 1.9}
    for _ in range(3):  # guesses that are never kept
        schedule._match, schedule._plan = (0, 0), Round(4, 4)
        schedule.observe_round(RoundResult(4, 0, 1e-5, 1.9))
    schedule._last_width = 1
    assert schedule.next_round(NEW_TEXT) == Round(0, 0)  # weighed now, and guesses at 1.9 steps do not pay
    copying = LookupK(4)
    copying.costs.seconds = {5: 1.9}
    assert copying.next_round(COPYING).k > 0  # a sure copy is verified at once


def test_a_width_between_two_timed_widths_is_priced_on_their_line():
    """Another CPU's curve said a width-3 call costs what a plain step does; timed widths 1 and 5
    of this one say otherwise."""
    schedule = LookupK(4)
    schedule.costs.seconds = {1: 0.2, 5: 0.38}
    assert schedule.costs.steady(3) == pytest.approx(0.29)
    assert schedule.costs.steady(9) == pytest.approx(0.38 * prior_width_cost(9) / prior_width_cost(5))


def test_a_one_token_match_is_not_worth_a_verify_call_where_wide_calls_are_dear():
    """On an AVX2 CPU a verify call of 2 costs 1.3 steps; the target keeps the draft of a 1-token
    match about a quarter of the time (Qwen2.5-Coder on HumanEval), so a plain step yields more. A
    prior of 0.5 (SmolLM2's) verified such guesses and lost to plain decoding on open questions."""
    one_gram = [1, 2, 3, 4, 5, 6, 7, 8, 3]  # "3" occurred once before, followed by 4
    schedule = LookupK(4)
    schedule.costs.seconds = {1: 1.0, 2: 1.28, 3: 1.48, 5: 1.96, 9: 2.73}  # an AVX2 CPU's curve, in steps
    schedule.costs.switch = 0.07
    schedule._last_width = 1
    assert schedule.next_round(one_gram) == Round(0, 0) and schedule._match == (1, 6)
    copying = lookup_measured()  # where a call of 2 costs 1.02 steps, guessing on it still pays
    copying._last_width = 2
    assert copying.next_round(one_gram).k >= 1
