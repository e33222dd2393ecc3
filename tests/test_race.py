"""The race the Space shows: loading, alternating by compute time, and the verdict."""
from __future__ import annotations

import threading
import time

from spec.config import AUTOREGRESSIVE, DRAFT_MODEL, SPECULATIVE, GenerationConfig, ModelKey
from spec.metrics import Stats
from spec.race import DONE, LOADING, RACING, STOPPED, Lane, race, run_race, verdict
from spec.registry import ModelRegistry
from tests.conftest import models_dir_at


def test_the_method_behind_in_compute_time_always_goes_next(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=40, num_assistant_tokens=4, dynamic_k=False)
    lengths, updates = [], []  # the lanes are live objects: record how far each was at every update
    for update in run_race("The quick brown fox", target, draft, DRAFT_MODEL, config, threading.Event()):
        updates.append(update)
        lengths.append((len(update.autoregressive.trace), len(update.speculative.trace)))
    assert {u.phase for u in updates[:-1]} == {RACING} and updates[-1].phase == DONE
    ar, sp = updates[-1].autoregressive, updates[-1].speculative
    assert ar.mode == AUTOREGRESSIVE and sp.mode == SPECULATIVE
    assert lengths[-1] == (len(ar.trace), len(sp.trace)) and len(ar.trace) > len(sp.trace) > 1

    def seconds(trace, n):  # compute time of a lane after its first n steps
        return trace[n - 1][0] if n else 0.0

    previous = (0, 0)
    for n_ar, n_sp in lengths:
        moved = [(n_ar, previous[0], ar, n_sp, sp), (n_sp, previous[1], sp, n_ar, ar)][n_ar == previous[0]]
        n, before, lane, n_other, other = moved
        assert n == before + 1, "one step per update"
        other_done = n_other == len(other.trace)
        assert seconds(lane.trace, before) <= seconds(other.trace, n_other) or other_done, "the lane ahead moved"
        previous = (n_ar, n_sp)
    assert ar.trace[-1][1] == ar.stats.new_tokens == 40 and sp.trace[-1][1] == 40
    result = updates[-1].verdict
    assert result.identical and result.speedup > 0 and not result.stopped
    assert "".join(text for text, _ in ar.pieces) == "".join(text for text, _ in sp.pieces)


def test_stop_ends_both_lanes_with_a_stopped_verdict(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    cancel = threading.Event()
    updates = []
    for update in run_race("Tell me a story", target, draft, DRAFT_MODEL, GenerationConfig(max_new_tokens=400), cancel):
        updates.append(update)
        if len(updates) == 6:
            cancel.set()
    assert updates[-1].phase == STOPPED and updates[-1].verdict.stopped
    assert updates[-1].autoregressive.stats.new_tokens < 400


def _lane(token_ids: list[int], tokens_per_second: float) -> Lane:
    stats = Stats(new_tokens=len(token_ids), seconds=len(token_ids) / tokens_per_second, stop_reason="max_new_tokens")
    return Lane(AUTOREGRESSIVE, iter(()), token_ids=token_ids, stats=stats, finished=True)


def test_the_verdict_names_the_first_differing_token_and_the_speedup():
    greedy = GenerationConfig()
    result = verdict(_lane([1, 2, 3, 4], 10.0), _lane([1, 2, 9, 4], 25.0), greedy)
    assert result.identical is False and result.first_difference == 2 and abs(result.speedup - 2.5) < 1e-9
    assert verdict(_lane([1, 2], 10.0), _lane([1, 2, 3], 10.0), greedy).first_difference == 2  # one is a prefix
    assert verdict(_lane([1, 2], 10.0), _lane([5, 6], 5.0), GenerationConfig(temperature=0.7)).identical is None


def test_loading_reports_progress_then_races(tiny_checkpoints, tiny_models_dir):
    target_dir, draft_dir = tiny_checkpoints
    registry = ModelRegistry()
    keys = ModelKey(str(target_dir), "fp32", "f32"), ModelKey(str(draft_dir), "fp32", "f32")
    with models_dir_at(tiny_models_dir):
        updates = list(race("Hello", *keys, DRAFT_MODEL, GenerationConfig(max_new_tokens=8), registry, threading.Event()))
    loading = [u for u in updates if u.phase == LOADING]
    assert loading and {"Target", "Draft"} <= set(loading[-1].loading)
    assert updates[-1].phase == DONE and set(registry.loaded()) == set(keys)


def test_stop_while_loading_leaves_the_models_loading(tiny_checkpoints, tiny_models_dir):
    target_dir, _ = tiny_checkpoints
    registry = ModelRegistry()
    key = ModelKey(str(target_dir), "fp32", "f32")
    cancel = threading.Event()
    cancel.set()
    with models_dir_at(tiny_models_dir):
        updates = list(race("Hello", key, None, "prompt-lookup", GenerationConfig(max_new_tokens=4), registry, cancel))
        assert updates[-1].phase == STOPPED and updates[-1].verdict.stopped
        assert updates[-1].autoregressive is None  # stopped before the race began
        # The load goes on in the background, so the next race starts sooner.
        deadline = time.monotonic() + 60
        while key not in registry.loaded() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert key in registry.loaded()
