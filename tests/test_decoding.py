"""The signature test and its neighbours: speculative decoding changes the speed, never the output."""
from __future__ import annotations

import pytest

from spec.config import GenerationConfig
from spec.decoding.engine import stream
from spec.decoding.generation import ACCEPTED, BONUS, CORRECTION, TARGET
from spec.decoding.policy import DynamicK, LookupK, PairMemory
from spec.decoding.target_memory import LearnedState
from tests.conftest import assert_follows, exact_first_tokens, real_models_dir

PROMPTS = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def add(a, b):\n    return a + b\n\ndef add(",
    "Hello world, hello world, hello",
]


def run(prompt, target, mode, drafter="draft-model", draft=None, **settings):
    """One generation: plain decoding, or speculative with `drafter` (and `draft` when it drafts with a model)."""
    drafter = None if mode == "autoregressive" else drafter
    draft = draft if drafter in ("draft-model", "hybrid") else None
    steps = list(stream(prompt, target, GenerationConfig(max_new_tokens=40), draft=draft, drafter=drafter, **settings))
    tokens = [t for step in steps for t in step.token_ids]
    return tokens, "".join(step.text for step in steps), steps


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("drafter", ["draft-model", "prompt-lookup"])
def test_greedy_speculative_equals_greedy_autoregressive(tiny_pairs, arch, drafter):
    target, draft = tiny_pairs[arch]
    kept_some = False
    for prompt in PROMPTS:
        want, want_text, _ = run(prompt, target, "autoregressive")
        assert want and (len(want) == 40 or target.tokenizer.eos_token_id is not None)
        for k, dynamic in [(1, False), (2, False), (4, False), (8, False), (4, True)]:
            got, text, steps = run(prompt, target, "speculative", drafter, draft, num_assistant_tokens=k, dynamic_k=dynamic)
            assert got == want, f"{arch} {drafter} K={k} dynamic={dynamic} prompt={prompt!r}"
            assert text == want_text
            stats = steps[-1].stats
            kept_some |= stats.accepted > 0 if drafter == "draft-model" else stats.drafted > 0
            assert stats.target_calls == len(steps)
            assert sum(stats.accepted_histogram) == stats.target_calls - stats.plain_steps - 1
    # Random tiny models rarely copy their context, so prompt lookup's drafts are mostly corrected
    # here; its accept path (q = None) is covered by the acceptance-rule tests.
    assert kept_some, "no draft was accepted (draft model) or proposed (prompt lookup): the test checks too little"


def test_greedy_equality_holds_on_the_real_int8_model_at_f32():
    """On real INT8 weights the CPU quantizes activations on the fly, differently for one token than
    for K+1; tiny random models have no near-ties to show it, SmolLM2 does (within 64 tokens)."""
    from spec.config import ModelKey
    from spec.models.embedded import QUICK_REF
    from spec.models.registry import load_model

    with real_models_dir():  # SmolLM2 by name: the default (None) is Qwen, whose preparation test_embedded_qwen watches
        target = load_model(ModelKey(QUICK_REF, "int8", "f32"))
    prompt = "Summarize in two sentences: The city council met on Tuesday to discuss the new bike lanes. " \
        "Residents spoke for and against. The council voted 5 to 2 to build the lanes next spring."
    want, _, _ = run(prompt, target, "autoregressive", max_new_tokens=64)
    got, _, _ = run(prompt, target, "speculative", "prompt-lookup", None, max_new_tokens=64, num_assistant_tokens=8, dynamic_k=False)
    assert got == want


def test_provenance_and_stats_add_up(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    tokens, _, steps = run(PROMPTS[0], target, "speculative", "draft-model", draft, num_assistant_tokens=4, dynamic_k=False)
    kinds = [kind for step in steps for kind in step.kinds]
    assert kinds[0] == TARGET and set(kinds[1:]) <= {ACCEPTED, CORRECTION, BONUS, TARGET}
    stats = steps[-1].stats
    assert kinds.count(ACCEPTED) == stats.accepted <= stats.drafted
    assert stats.new_tokens == len(tokens) and stats.stop_reason == "max_new_tokens"
    assert sum(n * count for n, count in enumerate(stats.accepted_histogram)) == stats.accepted
    assert 0 < stats.ttft_seconds <= stats.seconds and stats.tokens_per_second > 0
    assert stats.verify_calls == stats.target_calls - stats.plain_steps - 1  # the prefill is neither
    assert 0 < stats.verify_seconds <= stats.target_seconds and stats.verify_call_seconds > 0
    _, _, plain = run(PROMPTS[0], target, "autoregressive")
    assert plain[-1].stats.plain_steps == plain[-1].stats.target_calls - 1 and plain[-1].stats.step_seconds > 0
    assert plain[-1].stats.verify_call_seconds is None


@pytest.mark.parametrize("drafted", [2, 1], ids=["draft-fills-the-width", "free-guess-fills-the-width"])
def test_sampled_speculative_follows_the_target_distribution(tiny_pairs, monkeypatch, drafted):
    """The joint law of the first three new tokens matches the target's, computed exactly.

    With K=2 the first round verifies two drafts, so tokens 2 and 3 come from the acceptance rule
    (kept drafts or corrections): a wrong rule, a q/p mix-up or transforms applied to one side only
    all show up here. When the draft model makes only one token, a free guess fills the second slot
    with a one-hot q: the output must still follow p.
    """
    from spec.decoding.engine import encode_prompt

    monkeypatch.setattr(DynamicK, "next_draft_length", lambda self: drafted)
    target, draft = tiny_pairs["llama"]
    settings = dict(temperature=1.0, top_k=4, num_assistant_tokens=2, dynamic_k=False, max_new_tokens=4)
    prompt = PROMPTS[1]

    exact = exact_first_tokens(target, encode_prompt(target.tokenizer, prompt))

    runs = 1500
    counts: dict = {}
    second_slot_rejected = 0
    for seed in range(runs):
        config = GenerationConfig(seed=seed, **settings)
        steps = list(stream(prompt, target, config, draft=draft))
        tokens = [t for step in steps for t in step.token_ids]
        counts[tuple(tokens[:3])] = counts.get(tuple(tokens[:3]), 0) + 1
        second_slot_rejected += steps[1].kinds == [ACCEPTED, CORRECTION]
    assert second_slot_rejected > runs * 0.05, "the second slot is rarely rejected: the test checks too little"
    assert_follows(counts, exact, runs)


def test_stop_strings_are_never_streamed(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    _, text, _ = run(PROMPTS[0], target, "autoregressive", max_new_tokens=60)
    for stop in (text[10:14], text[20:21]):
        for mode in ("autoregressive", "speculative"):
            _, cut, steps = run(PROMPTS[0], target, mode, "draft-model", draft, max_new_tokens=60, stop_strings=(stop,))
            assert cut == text[: text.find(stop)], (mode, stop)
            assert steps[-1].stats.stop_reason == "stop_string"


def test_cancel_stops_between_steps(tiny_pairs):
    import threading

    target, draft = tiny_pairs["llama"]
    cancel = threading.Event()
    steps = stream(PROMPTS[0], target, max_new_tokens=200, draft=draft, cancel=cancel)
    seen = [next(steps), next(steps)]
    cancel.set()
    seen += list(steps)
    assert seen[-1].finished and seen[-1].stats.stop_reason == "cancelled"
    assert seen[-1].stats.new_tokens < 200


def test_incremental_text_never_splits_a_character(tiny_pairs):
    """Byte-level tokens split multi-byte characters; the stream must only ever carry whole ones."""
    target, _ = tiny_pairs["llama"]
    ids = target.tokenizer("héllo wörld ✓ 日本", add_special_tokens=False)["input_ids"]
    from spec.decoding.generation import IncrementalDetokenizer

    detokenizer = IncrementalDetokenizer(target.tokenizer)
    pieces = [detokenizer.push(i) for i in ids]
    assert "".join(pieces) == "héllo wörld ✓ 日本"
    assert all("\ufffd" not in piece for piece in pieces)
    assert any(piece == "" for piece in pieces), "no character spanned tokens: the test checks nothing"


def test_a_draft_model_is_judged_by_the_drafts_it_made(tiny_pairs, monkeypatch):
    """Not by the free guesses that fill the rest of the width."""
    target, draft = tiny_pairs["llama"]
    judged = []
    real_observe = PairMemory.observe_acceptance

    def observe(self, drafted, accepted, decay):
        judged.append(drafted)
        return real_observe(self, drafted, accepted, decay)

    monkeypatch.setattr(PairMemory, "observe_acceptance", observe)
    monkeypatch.setattr(DynamicK, "next_draft_length", lambda self: 1)  # the draft model makes one token a round
    _, _, steps = run(PROMPTS[2], target, "speculative", "draft-model", draft, num_assistant_tokens=4)
    rounds = steps[-1].stats.verify_calls
    assert rounds > 0 and judged == [1] * rounds


def test_dynamic_k_for_prompt_lookup_plans_each_round_from_the_match(tiny_pairs, monkeypatch):
    target, _ = tiny_pairs["llama"]
    plans = []
    real_next = LookupK.next_round

    def spy(self, context):
        plan = real_next(self, context)
        plans.append((self._match, plan))
        return plan

    monkeypatch.setattr(LookupK, "next_round", spy)
    prompt = "one two three four five six seven one two three four five six seven one two three"
    tokens, _, steps = run(prompt, target, "speculative", "prompt-lookup", None, num_assistant_tokens=4, max_new_tokens=48)
    want, _, _ = run(prompt, target, "autoregressive", max_new_tokens=48)
    assert tokens == want
    assert plans and all(plan.k in (0, *LookupK(4).choices) and plan.draft_length == plan.k for _, plan in plans)
    verified = sum(1 for _, plan in plans if plan.k > 0)
    assert verified - 1 <= steps[-1].stats.verify_calls <= verified  # the last round may be a plain step for one token


def test_the_targets_call_costs_outlive_a_generation(tiny_pairs):
    """What prompt lookup's schedule timed of the target's calls is there for its next generation
    given the same learned state, and only for it: nothing is kept behind the caller's back."""
    target, _ = tiny_pairs["llama"]
    learned, prompt = LearnedState(), "one two three four five six seven one two three four five six seven one two three"
    learned.about(target).call_costs.seconds.clear()  # not even calibration's curve
    run(prompt, target, "speculative", "prompt-lookup", None, num_assistant_tokens=4, max_new_tokens=32, learned=learned)
    costs = learned.about(target).call_costs
    assert costs.seconds and all(seconds > 0 for seconds in costs.seconds.values())
    assert LearnedState().about(target).call_costs is not costs


@pytest.mark.parametrize("drafter", ["prompt-lookup", "hybrid"])
def test_lookups_rounds_are_weighed_by_what_the_targets_earlier_ones_kept(tiny_pairs, monkeypatch, drafter):
    """Lookup's schedule, alone or in the hybrid, weighs each K at what that K's rounds kept of their
    promise in the target's earlier generations given the same learned state (LookupYields)."""
    target, draft = tiny_pairs["llama"]
    learned, seen, real_next = LearnedState(), [], LookupK.next_round

    def spy(self, context):
        seen.append(self.yields)
        return real_next(self, context)

    monkeypatch.setattr(LookupK, "next_round", spy)
    run("one two three one two three", target, "speculative", drafter, draft if drafter == "hybrid" else None,
        num_assistant_tokens=4, max_new_tokens=8, learned=learned)
    assert seen and all(yields is learned.about(target).lookup_yields for yields in seen)
    assert LearnedState().about(target).lookup_yields is not learned.about(target).lookup_yields


def test_a_pairs_record_kept_in_a_file_is_where_the_next_start_begins(tiny_pairs, tmp_path, monkeypatch):
    """What the hybrid learned of a pair, kept in a file, is what a later LearnedState given that file
    starts from, field for field; a pair under another drafter, on another machine or with no file
    starts from nothing."""
    import dataclasses

    import spec.decoding.kept_pairs as kept_pairs
    from spec.decoding.policy import PairMemory

    target, draft = tiny_pairs["llama"]
    learned = LearnedState(tmp_path / kept_pairs.FILE)
    run(PROMPTS[0], target, "speculative", "hybrid", draft, max_new_tokens=24, learned=learned)
    learned.keep()
    before = learned.pair(target, draft, "hybrid")
    assert before.call_seconds is not None and before.accepted != PairMemory().accepted  # it drafted and learned

    def record(pair):
        return {name: value for name, value in dataclasses.asdict(pair).items() if name != "pause"}

    later = LearnedState(tmp_path / kept_pairs.FILE).pair(target, draft, "hybrid")
    assert later is not before and record(later) == record(before)
    assert record(LearnedState(tmp_path / kept_pairs.FILE).pair(target, draft, "draft-model")) == record(PairMemory())
    assert record(LearnedState().pair(target, draft, "hybrid")) == record(PairMemory())
    from spec.models import calibration

    monkeypatch.setattr(calibration, "machine", lambda: {"cpu": "another CPU", "cores": 2, "openvino": "x"})
    assert record(LearnedState(tmp_path / kept_pairs.FILE).pair(target, draft, "hybrid")) == record(PairMemory())


def test_what_lookups_rounds_kept_on_a_target_is_where_the_next_start_begins(tiny_pairs, tmp_path):
    """A target's lookup yields, kept in the file, are what a later LearnedState given that file
    starts from for that target (and a race's keep writes them); another target starts from the prior."""
    import spec.decoding.kept_pairs as kept_pairs

    target, draft = tiny_pairs["llama"]
    learned = LearnedState(tmp_path / kept_pairs.FILE)
    learned.about(target).lookup_yields.observe(32, 30.0, 9)  # a copy of 32 planned to keep 30 tokens kept 9
    learned.keep()
    before = learned.about(target).lookup_yields
    later = LearnedState(tmp_path / kept_pairs.FILE).about(target).lookup_yields
    assert later is not before and (later.promised, later.kept) == (before.promised, before.kept) and later.factor(32) < 0.5
    assert LearnedState(tmp_path / kept_pairs.FILE).about(draft).lookup_yields.factor(32) == 1.0
    assert LearnedState().about(target).lookup_yields.factor(32) == 1.0


def test_a_kept_targets_lookup_yields_are_read_only_when_whole(tmp_path):
    import json

    import spec.decoding.kept_pairs as kept_pairs
    from spec.decoding.policy import LookupYields, PairMemory

    path = tmp_path / kept_pairs.FILE
    kept_pairs.keep_pairs(path, {"pair": PairMemory()}, {"t": LookupYields({32: 20.0}, {32: 8.0})})
    assert kept_pairs.read_lookup_yields(path, "t") == LookupYields({32: 20.0}, {32: 8.0})
    assert kept_pairs.read_lookup_yields(path, "pair") is None and kept_pairs.read_pair(path, "t") is None
    assert kept_pairs.describe(path) == "1 pair's record in learned.json (long α 0.50), and prompt lookup's yields on 1 target"
    entry = json.loads(path.read_text())["t"]
    for bad in ({"lookup_promised": {"32": 0.0}}, {"lookup_promised": {"wide": 3.0}}, {"lookup_kept": {"32": -1.0}},
                {"lookup_kept": {"32": None}}, {"lookup_promised": {"-4": 3.0}}, {"lookup_kept": [8.0]}):
        path.write_text(json.dumps({"t": {**entry, **bad}}))
        assert kept_pairs.read_lookup_yields(path, "t") is None, bad


def test_a_kept_record_is_read_only_when_whole_and_the_file_stays_bounded(tmp_path, monkeypatch):
    import json

    import spec.decoding.kept_pairs as kept_pairs
    from spec.decoding.policy import PairMemory

    path = tmp_path / kept_pairs.FILE
    kept_pairs.keep_pairs(path, {"a": PairMemory(accepted=3.0, call_seconds=0.01)})
    assert kept_pairs.read_pair(path, "a") == PairMemory(accepted=3.0, call_seconds=0.01)
    assert kept_pairs.read_pair(path, "b") is None
    assert kept_pairs.describe(path) == "1 pair's record in learned.json (long α 0.50)"  # the prior's: nothing drafted yet
    assert kept_pairs.describe(tmp_path / "none.json") == "no pair's record in none.json"
    kept_pairs.keep_pairs(path, {"c": PairMemory(long_accepted=4.0, long_rejected=1.0)})
    assert kept_pairs.describe(path) == "2 pairs' records in learned.json (long α 0.80, 0.50)", "the newest first"
    entry = json.loads(path.read_text())["a"]
    for bad in ({"accepted": -1.0}, {"accepted": "3"}, {"accepted": None}, {"kept_tokens": float("nan")}, {"rejected": True}):
        path.write_text(json.dumps({"a": {**entry, **bad}}))
        assert kept_pairs.read_pair(path, "a") is None, bad
    path.write_text("not JSON")
    assert kept_pairs.read_pair(path, "a") is None
    monkeypatch.setattr(kept_pairs, "_KEPT", 3)
    for n in range(5):
        kept_pairs.keep_pairs(path, {f"pair {n}": PairMemory()})
    assert sorted(json.loads(path.read_text())) == ["pair 2", "pair 3", "pair 4"]  # the most recently kept


def test_the_hybrid_learns_apart_from_the_draft_model_alone(tiny_pairs):
    """The hybrid drafts with the model only where lookup finds nothing: what it sees there must
    not be what the model alone starts from."""
    target, draft = tiny_pairs["llama"]
    learned = LearnedState()
    run(PROMPTS[0], target, "speculative", "hybrid", draft, max_new_tokens=24, learned=learned)
    pairs = learned.about(target).pairs
    assert list(pairs) == [(str(draft.resolved.path), "hybrid")]
    run(PROMPTS[0], target, "speculative", "draft-model", draft, max_new_tokens=24, learned=learned)
    hybrid, alone = (pairs[str(draft.resolved.path), kind] for kind in ("hybrid", "draft-model"))
    assert hybrid is not alone


@pytest.mark.parametrize("wide_call_seconds, narrower", [(2.0, True), (1.0, False)])
def test_a_draft_that_stopped_early_is_verified_narrower_where_wide_calls_are_dear(tiny_pairs, monkeypatch, wide_call_seconds, narrower):
    """Every round's draft stops after its first token. Where a call of 5 costs two steps, each is
    checked at width 2 (the K of each round is the one token drafted); where it costs one, the
    round keeps its width and free guesses fill it. The output is the same either way."""
    import spec.decoding.drafters as drafters
    from spec.decoding.policy import CallCosts

    monkeypatch.setattr(drafters, "STOP_BELOW", 1.01)  # every draft token is doubted
    monkeypatch.setattr(CallCosts, "observe", lambda *args, **kwargs: None)  # the tiny models' calls would redraw the curve
    target, draft = tiny_pairs["llama"]
    want, _, _ = run(PROMPTS[1], target, "autoregressive")
    learned = LearnedState()
    learned.about(target).call_costs = CallCosts({1: 1.0, 2: 1.0, 5: wide_call_seconds}, switch=0.1)
    got, _, steps = run(PROMPTS[1], target, "speculative", "draft-model", draft, num_assistant_tokens=4, learned=learned)
    assert got == want
    stats = steps[-1].stats
    assert stats.draft_tokens == stats.target_calls - stats.plain_steps - 1 > 0  # one draft token a round
    assert (stats.drafted == stats.draft_tokens) is narrower  # K summed over the rounds
