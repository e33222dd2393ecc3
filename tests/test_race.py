"""The race the Space shows: waiting its turn, loading, taking turns by compute time, its limits,
the verdict, and why speculative wins or loses."""
from __future__ import annotations

import io
import threading
import time

import pytest

from spec.config import AUTOREGRESSIVE, DRAFT_MODEL, SPECULATIVE, GenerationConfig, ModelKey
from spec.decoding.metrics import Stats
from spec.decoding.policy import expected_tokens
from spec.models.registry import ModelRegistry
from spec.serving.lanes import Lane
from spec.serving.limits import Limits, PromptTooLong, check_prompt
from spec.serving.loading import load_pair
from spec.serving.phases import RacePhase
from spec.serving.race import run_race
from spec.serving.verdict import MIN_TOKENS_FOR_VERDICT, OUT_OF_TIME, explain, verdict
from tests.conftest import models_dir_at


@pytest.mark.parametrize("turn", [0.0, 0.004])
def test_the_method_behind_in_compute_time_goes_next_until_a_turn_ahead(tiny_pairs, turn):
    target, draft = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=40, num_assistant_tokens=4, dynamic_k=False)
    lengths, updates = [], []  # the lanes are live objects: record how far each was at every update
    for update in run_race("The quick brown fox", target, draft, DRAFT_MODEL, config, threading.Event(), turn=turn):
        updates.append(update)
        lengths.append((len(update.autoregressive.trace), len(update.speculative.trace)))
    assert {u.phase for u in updates[:-1]} == {RacePhase.RACING} and updates[-1].phase == RacePhase.DONE
    ar, sp = updates[-1].autoregressive, updates[-1].speculative
    assert ar.mode == AUTOREGRESSIVE and sp.mode == SPECULATIVE
    assert lengths[-1] == (len(ar.trace), len(sp.trace)) and len(ar.trace) > len(sp.trace) > 1

    def seconds(trace, n):  # compute time of a lane after its first n steps
        return trace[n - 1][0] if n else 0.0

    previous, mover = (0, 0), sp
    for n_ar, n_sp in lengths:
        moved = [(n_ar, previous[0], ar, n_sp, sp), (n_sp, previous[1], sp, n_ar, ar)][n_ar == previous[0]]
        n, before, lane, n_other, other = moved
        assert n == before + 1, "one step per update"
        other_done = n_other == len(other.trace)
        assert seconds(lane.trace, before) <= seconds(other.trace, n_other) + turn or other_done, "the lane ahead moved"
        if lane is not mover:  # the other lane had its turn: it had run more than `turn` ahead, or finished
            n_mover = n_other
            assert seconds(mover.trace, n_mover) > seconds(lane.trace, before) + turn or n_mover == len(mover.trace)
            mover = lane
        previous = (n_ar, n_sp)
    assert ar.trace[-1][1] == ar.stats.new_tokens == 40 and sp.trace[-1][1] == 40
    result = updates[-1].verdict
    assert result.identical and result.speedup > 0 and not result.stopped
    assert "".join(text for text, _ in ar.pieces) == "".join(text for text, _ in sp.pieces)


def test_the_speculative_lane_learns_no_call_that_came_right_after_the_other_lanes(tiny_pairs, monkeypatch):
    """Both lanes call one compiled target, whose calls pay for re-preparing after one of another
    width: the speculative lane's schedule hears of each call the other lane made in between, as
    of the prompt's, so that it times no such call as a steady one. Alone, it hears of the prompt only."""
    from spec.decoding.engine import generate, stream
    from spec.decoding.policy.costs import TimedSchedule

    heard = []
    monkeypatch.setattr(TimedSchedule, "observe_other_call", lambda self, width=None: heard.append(self) or setattr(self, "_last_width", width))
    target, draft = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=24, num_assistant_tokens=3, dynamic_k=True)
    generate("The quick brown fox", target, config, draft=draft)
    assert len(heard) == 1
    heard.clear()
    ar = stream("The quick brown fox", target, config)
    sp = stream("The quick brown fox", target, config, draft=draft)
    steps = 0
    for _ in sp:  # the lanes take turns at every step, the autoregressive one first (it has as many steps or more)
        steps += 1
        next(ar)
    assert len(heard) == steps > 1 and len({id(schedule) for schedule in heard}) == 1


def test_stop_ends_both_lanes_with_a_stopped_verdict(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    cancel = threading.Event()
    updates = []
    for update in run_race("Tell me a story", target, draft, DRAFT_MODEL, GenerationConfig(max_new_tokens=400), cancel):
        updates.append(update)
        if len(updates) == 6:
            cancel.set()
    assert updates[-1].phase == RacePhase.STOPPED and updates[-1].verdict.stopped
    assert updates[-1].autoregressive.stats.new_tokens < 400


def _lane(token_ids: list[int], tokens_per_second: float) -> Lane:
    """A finished lane whose first token came after 1 s, then decoded at `tokens_per_second`."""
    seconds = 1.0 + (len(token_ids) - 1) / tokens_per_second
    stats = Stats(new_tokens=len(token_ids), seconds=seconds, ttft_seconds=1.0, stop_reason="max_new_tokens")
    return Lane(AUTOREGRESSIVE, iter(()), token_ids=token_ids, stats=stats, finished=True)


def test_the_verdict_names_the_first_differing_token_and_the_speedup():
    greedy = GenerationConfig()
    result = verdict(_lane([1, 2, 3, 4], 10.0), _lane([1, 2, 9, 4], 25.0), greedy)
    assert result.identical is False and result.first_difference == 2 and abs(result.speedup - 2.5) < 1e-9
    assert verdict(_lane([1, 2], 10.0), _lane([1, 2, 3], 10.0), greedy).first_difference == 2  # one is a prefix
    assert verdict(_lane([1, 2], 10.0), _lane([5, 6], 5.0), GenerationConfig(temperature=0.7)).identical is None


def test_loading_reports_progress_then_gives_the_pair(tiny_checkpoints, tiny_models_dir):
    target_dir, draft_dir = tiny_checkpoints
    registry = ModelRegistry()
    keys = ModelKey(str(target_dir), "fp32", "f32"), ModelKey(str(draft_dir), "fp32", "f32")
    with models_dir_at(tiny_models_dir):
        updates = []
        models = load_pair(registry, *keys, threading.Event(), updates.append)
    assert updates and all(u.phase == RacePhase.LOADING for u in updates) and {"Target", "Draft"} <= set(updates[-1].loading)
    assert [m.key for m in models] == list(keys) and set(registry.loaded()) == set(keys)


def test_preload_converts_a_pairs_models_before_it_compiles_either(tiny_checkpoints, tmp_path, monkeypatch):
    from spec.models import registry as registry_module
    from spec.progress import TerminalProgress
    from spec.serving import warmup

    target_dir, draft_dir = tiny_checkpoints
    keys = [ModelKey(str(target_dir), "fp32", "f32"), ModelKey(str(draft_dir), "fp32", "f32")]
    order, registry = [], ModelRegistry()
    convert, load = registry_module.resolve_model, registry_module.load_model
    monkeypatch.setattr(registry_module, "resolve_model", lambda ref, *a, **k: order.append(("convert", ref)) or convert(ref, *a, **k))
    monkeypatch.setattr(registry_module, "load_model", lambda key, *a, **k: order.append(("compile", key.ref)) or load(key, *a, **k))
    with models_dir_at(tmp_path / "models"):
        ready = warmup.preload(registry, {"tiny pair": lambda: keys}, TerminalProgress(io.StringIO()))
    assert ready == {"tiny pair"} and set(registry.loaded()) == set(keys)
    # (Loading resolves again: the files are found converted.) The two convert side by side.
    assert set(order[:2]) == {("convert", str(target_dir)), ("convert", str(draft_dir))} and order[2] == ("compile", str(target_dir))
    with pytest.raises(ValueError, match="visitor's model"):
        registry.convert(ModelKey("owner/name", hub_only=True))


def test_stop_while_loading_leaves_the_models_loading(tiny_checkpoints, tiny_models_dir):
    target_dir, _ = tiny_checkpoints
    registry = ModelRegistry()
    key = ModelKey(str(target_dir), "fp32", "f32")
    cancel = threading.Event()
    cancel.set()
    with models_dir_at(tiny_models_dir):
        models = load_pair(registry, key, None, cancel)
        assert models is None  # stopped before the race began
        # The load goes on in the background, so the next race starts sooner.
        deadline = time.monotonic() + 60
        while key not in registry.loaded() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert key in registry.loaded()


def test_time_budget_stops_both_lanes_and_says_why(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    updates = list(run_race("Tell me a story", target, draft, DRAFT_MODEL, GenerationConfig(max_new_tokens=400), threading.Event(), max_seconds=0.0))
    final = updates[-1]
    assert final.phase == RacePhase.STOPPED and final.verdict.stopped == OUT_OF_TIME
    assert not final.autoregressive.finished and not final.speculative.finished


def test_a_short_race_is_not_a_verdict(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=MIN_TOKENS_FOR_VERDICT - 1, num_assistant_tokens=4, dynamic_k=False)
    final = list(run_race("The quick brown fox", target, draft, DRAFT_MODEL, config, threading.Event()))[-1]
    assert final.verdict.speedup is not None and not final.verdict.settled
    config = GenerationConfig(max_new_tokens=MIN_TOKENS_FOR_VERDICT, num_assistant_tokens=4, dynamic_k=False)
    final = list(run_race("The quick brown fox", target, draft, DRAFT_MODEL, config, threading.Event()))[-1]
    assert final.verdict.settled


def test_decode_speed_leaves_the_prefill_out():
    stats = Stats(new_tokens=11, seconds=3.0, ttft_seconds=1.0)
    assert stats.decode_tokens_per_second == 5.0  # 10 tokens after the first, in the 2 s after it
    assert Stats(new_tokens=1, seconds=1.0, ttft_seconds=1.0).decode_tokens_per_second == 0.0


def test_the_explanation_follows_leviathan_from_the_measured_costs():
    k = 4
    ar = Stats(new_tokens=41, seconds=4.1, ttft_seconds=0.1, plain_steps=40, target_seconds=4.0)  # 100 ms a step
    # 10 verify calls of 120 ms: 4 kept all 4, 6 kept 1 (then a correction); 2 plain steps of 100 ms.
    sp = Stats(
        new_tokens=1 + 4 * 5 + 6 * 2 + 2, seconds=1.8, ttft_seconds=0.1, plain_steps=2, target_seconds=1.4,
        verify_seconds=1.2, draft_seconds=0.0, drafted=40, accepted=4 * 4 + 6 * 1, accepted_histogram=[0, 6, 0, 0, 4],
        target_calls=13,
    )
    ex = explain(ar, sp, k)
    assert abs(ex.verify_cost - 1.2) < 1e-9 and ex.draft_cost == 0.0
    alpha = 22 / (22 + 6)  # kept drafts over kept drafts plus rounds ended by a rejection
    assert abs(ex.alpha - alpha) < 1e-9
    rounds = 10 * expected_tokens(alpha, k)
    assert abs(ex.predicted - (rounds + 2) / (10 * 1.2 + 2)) < 1e-9
    assert abs(ex.tokens_per_call - sp.new_tokens / 13) < 1e-9
    assert abs(ex.speedup - sp.decode_tokens_per_second / ar.decode_tokens_per_second) < 1e-9
    no_rounds = explain(ar, Stats(new_tokens=5, seconds=0.5, ttft_seconds=0.1, plain_steps=4, target_seconds=0.4), k)
    assert no_rounds.predicted is None and no_rounds.alpha is None and no_rounds.verify_seconds is None


@pytest.fixture
def loaded(tiny_checkpoints, tiny_models_dir):
    """A registry holding the tiny target (f32), and its key."""
    registry = ModelRegistry()
    key = ModelKey(str(tiny_checkpoints[0]), "fp32", "f32")
    with models_dir_at(tiny_models_dir):
        registry.get(key)
    return registry, key


def test_a_prompt_too_long_is_refused_with_how_much_to_cut(loaded):
    registry, key = loaded
    target = registry.get(key)
    long_prompt = "one two three four " * 200
    started = time.monotonic()
    with pytest.raises(PromptTooLong, match=r"at most 100 tokens"):
        check_prompt(long_prompt, target, GenerationConfig(max_new_tokens=8), Limits(max_prompt_tokens=100))
    assert time.monotonic() - started < 1.0
    with pytest.raises(PromptTooLong, match=r"far more than"):  # refused without tokenizing megabytes
        check_prompt("x" * 1_000_000, target, GenerationConfig(max_new_tokens=8), Limits(max_prompt_tokens=100))
    # The model's context (512 tokens for the tiny model) bounds the prompt and the answer together.
    with pytest.raises(PromptTooLong, match=r"context of 512 tokens"):
        check_prompt("one two three " * 40, target, GenerationConfig(max_new_tokens=400), Limits(max_prompt_tokens=1000))
    assert check_prompt("Hello", target, GenerationConfig(max_new_tokens=8), Limits()) > 0
