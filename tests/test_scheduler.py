"""Races on a shared server: one computation per distinct race, joined while it runs, replayed once
it ran, preheated before anyone asks, watched at a bounded rate; and the recording they share."""
from __future__ import annotations

import threading
import time

import pytest

from spec.config import DRAFT_MODEL, PROMPT_LOOKUP, GenerationConfig, ModelKey
from spec.errors import Cancelled
from spec.models.registry import ModelRegistry
from spec.serving.limits import Limits, PromptTooLong
from spec.serving.phases import RacePhase, Viewing
from spec.serving.playback import watch
from spec.serving.recording import Recording
from spec.serving.scheduler import Busy, RaceRequest, RecordingStore, Scheduler
from spec.serving.verdict import CANCELLED, REPLACED
from tests.conftest import models_dir_at

PROMPT = "The quick brown fox"


@pytest.fixture
def pair(tiny_checkpoints, tiny_models_dir):
    """A registry holding the tiny target and draft (f32), and their keys."""
    registry = ModelRegistry()
    keys = ModelKey(str(tiny_checkpoints[0]), "fp32", "f32"), ModelKey(str(tiny_checkpoints[1]), "fp32", "f32")
    with models_dir_at(tiny_models_dir):
        for key in keys:
            registry.get(key)
    return registry, keys


def request(keys, prompt=PROMPT, drafter=DRAFT_MODEL, **config) -> RaceRequest:
    config = {"max_new_tokens": 24, "num_assistant_tokens": 3, "dynamic_k": False, **config}
    return RaceRequest(prompt, keys[0], keys[1] if drafter != PROMPT_LOOKUP else None, drafter, GenerationConfig(**config))


def views(scheduler, recording, how, interval=0.0, cancel=None):
    return list(watch(recording, how, scheduler.place, cancel or threading.Event(), interval))


def test_the_same_race_is_computed_once_joined_while_it_runs_and_replayed_after(pair):
    registry, keys = pair
    scheduler = Scheduler(registry, start=False)  # nothing runs until the requests are in
    first, how_first = scheduler.submit(request(keys))
    second, how_second = scheduler.submit(request(keys))
    assert (how_first, how_second) == (Viewing.LIVE, Viewing.JOINED) and second is first and first.viewers == 2
    other, how_other = scheduler.submit(request(keys, prompt="Once upon a time"))
    assert how_other == Viewing.LIVE and other is not first
    scheduler.start()
    live, joined = views(scheduler, first, Viewing.LIVE), views(scheduler, first, Viewing.JOINED)
    for seen in (live, joined):
        assert seen[-1].phase == RacePhase.DONE and seen[-1].verdict.identical
    texts = ["".join(t for t, _ in seen[-1].speculative.pieces) for seen in (live, joined)]
    assert texts[0] == texts[1] and texts[0]
    replay, how = scheduler.submit(request(keys))
    assert how == Viewing.REPLAY and replay is first, "a finished race is replayed, not computed again"
    fresh, how = scheduler.submit(request(keys), fresh=True)
    assert how == Viewing.LIVE and fresh is not first, "'race it live' computes it again"
    views(scheduler, fresh, Viewing.LIVE)
    assert len(scheduler.store) == 2
    target, draft = (registry.get(key) for key in keys)
    assert list(scheduler.learned.about(target).pairs) == [(str(draft.resolved.path), DRAFT_MODEL)], \
        "what its races learned of the pair is kept for the target's next race, by the scheduler"


@pytest.mark.parametrize("change", [
    dict(num_assistant_tokens=4), dict(max_new_tokens=20), dict(dynamic_k=True), dict(drafter=PROMPT_LOOKUP),
    dict(temperature=0.7, seed=1), dict(precision="default"),
])
def test_a_changed_setting_is_a_different_race(pair, change):
    registry, keys = pair
    scheduler = Scheduler(registry, start=False)
    base = request(keys)
    if "precision" in change:
        changed = RaceRequest(PROMPT, ModelKey(keys[0].ref, "fp32", "default"), keys[1], DRAFT_MODEL, base.config)
    elif "drafter" in change:
        changed = request(keys, drafter=change["drafter"])
    else:
        changed = request(keys, **change)
    scheduler.submit(base)
    assert scheduler.submit(changed)[1] == Viewing.LIVE


def test_greedy_ignores_the_seed_but_sampling_without_one_is_never_shared(pair):
    registry, keys = pair
    assert request(keys, seed=0).key == request(keys, seed=7).key
    assert request(keys, temperature=0.8, seed=1).key != request(keys, temperature=0.8, seed=2).key
    assert request(keys, temperature=0.8).key is None
    scheduler = Scheduler(registry, start=False)
    scheduler.submit(request(keys, temperature=0.8))
    assert scheduler.submit(request(keys, temperature=0.8))[1] == Viewing.LIVE


def test_a_replay_keeps_the_recorded_pace_and_says_when_it_ran(pair):
    registry, keys = pair
    scheduler = Scheduler(registry)
    recording, _ = scheduler.submit(request(keys, max_new_tokens=40))
    views(scheduler, recording, Viewing.LIVE)
    span = recording.frames[-1].at
    replay, how = scheduler.submit(request(keys, max_new_tokens=40))
    started = time.monotonic()
    seen = views(scheduler, replay, how)
    assert time.monotonic() - started >= span * 0.9, "a replay is shown at its recorded pace, not at once"
    assert how == Viewing.REPLAY and all(view.how == Viewing.REPLAY for view in seen)

    import render
    from spec.serving.numbers import view_numbers

    config = request(keys).config
    status = render.outputs(seen[-1], config, DRAFT_MODEL, True, None)[0]
    assert "Replay of a race run on this server at" in status and "UTC" in status
    numbers = view_numbers(seen[-1])
    assert numbers["how"] == Viewing.REPLAY and numbers["replay_of"].startswith("replay of a race run on this server at")
    assert numbers["speculative"]["text"] == numbers["autoregressive"]["text"]


def _race_by_hand(recording: Recording, steps: int, pause: float) -> None:
    """Record a race of `steps` steps a lane, one step every `pause` seconds, as the scheduler would."""
    from spec.decoding.metrics import Stats
    from spec.serving.lanes import Lane
    from spec.serving.race import RaceUpdate
    from spec.serving.verdict import Verdict

    lanes = [Lane("autoregressive", iter(())), Lane("speculative", iter(()))]
    for n in range(1, steps + 1):
        for lane in lanes:
            lane.pieces.append((f"t{n} ", "target"))
            lane.token_ids.append(n)
            lane.stats = Stats(new_tokens=n, seconds=n * pause, ttft_seconds=pause)
            lane.trace.append((lane.stats.seconds, n))
            recording.record(RaceUpdate(RacePhase.RACING, *lanes))
        time.sleep(pause)
    recording.record(RaceUpdate(RacePhase.DONE, *lanes, verdict=Verdict(1.0, False, True, None, None)))


def test_lanes_computed_in_turns_are_recorded_as_if_they_took_steps_in_turn():
    from spec.decoding.metrics import Stats
    from spec.serving.lanes import Lane
    from spec.serving.race import RaceUpdate
    from spec.serving.verdict import Verdict

    recording = Recording(("turns",))
    ar, sp = Lane("autoregressive", iter(())), Lane("speculative", iter(()))

    def step(lane, seconds, last=False):
        lane.pieces.append((f"{lane.mode[0]}{seconds} ", "target"))
        lane.token_ids.append(len(lane.token_ids))
        lane.stats = Stats(new_tokens=len(lane.token_ids), seconds=seconds)
        lane.trace.append((seconds, lane.stats.new_tokens))
        lane.finished = last
        recording.record(RaceUpdate(RacePhase.RACING, ar, sp))

    for seconds in (0.1, 0.2, 0.3, 0.4, 0.5):  # autoregressive's turn, finishing it
        step(ar, seconds, last=seconds == 0.5)
    assert recording.frames == [], "nothing shown before the other lane has computed as far"
    step(sp, 0.25)
    assert [(f.lane[0], f.at) for f in recording.frames] == [("a", 0.2), ("a", 0.4), ("s", 0.5)]
    step(sp, 0.5)
    step(sp, 0.75)  # speculative alone now: shown at its own pace after autoregressive's 0.5 s
    recording.record(RaceUpdate(RacePhase.DONE, ar, sp, verdict=Verdict(1.0, False, True, None, None)))
    shown = [(f.lane[0], round(f.at, 6)) for f in recording.frames]
    assert shown == [("a", 0.2), ("a", 0.4), ("s", 0.5), ("a", 0.6), ("a", 0.8), ("a", 1.0), ("s", 1.0), ("s", 1.25)]
    assert "".join(text for f in recording.frames if f.lane == "speculative" for text, _ in f.pieces) == "s0.25 s0.5 s0.75 "


def test_views_come_at_a_bounded_rate_and_carry_only_what_is_new():
    recording = Recording(("by hand",))
    racing = threading.Thread(target=_race_by_hand, args=(recording, 150, 0.01))
    racing.start()
    stamps, seen = [], []
    for view in watch(recording, Viewing.LIVE, lambda r: (0, None), threading.Event(), interval=0.2):
        stamps.append(time.monotonic())
        seen.append(view)
    racing.join()
    during = [s for s, v in zip(stamps, seen) if v.phase == RacePhase.RACING]
    gaps = [b - a for a, b in zip(during, during[1:])]
    assert len(gaps) >= 3 and min(gaps) >= 0.19, gaps
    detailed = [s for s, v in zip(stamps, seen) if v.phase == RacePhase.RACING and v.details]
    assert all(b - a >= 0.95 for a, b in zip(detailed, detailed[1:])), "the numbers beside the text refresh at most once a second"
    assert seen[-1].phase == RacePhase.DONE and seen[-1].details
    frames = [frame for view in seen for frames in view.new.values() for frame in frames]
    assert len(frames) == len(recording.frames) == 300, "every step shown exactly once"
    assert "".join(text for text, _ in seen[-1].speculative.pieces) == "".join(f"t{n} " for n in range(1, 151))


def test_the_store_drops_the_least_recently_watched_beyond_its_bounds():
    def finished(key, nbytes):
        recording = Recording(key)
        recording.nbytes, recording.phase = nbytes, RacePhase.DONE
        return recording

    store = RecordingStore(max_races=2, max_bytes=1000)
    store.put(finished(("a",), 100))
    store.put(finished(("b",), 100))
    assert store.get(("a",)) is not None  # watched: b is now the least recent
    store.put(finished(("c",), 100))
    assert store.get(("b",)) is None and store.get(("a",)) and store.get(("c",))
    store.put(finished(("d",), 950))  # over the byte budget: all older ones go
    assert len(store) == 1 and store.nbytes == 950
    with pytest.raises(ValueError, match="non-negative"):
        RecordingStore(-1)


def test_preheating_yields_to_a_visitor_and_runs_again_after(pair):
    registry, keys = pair
    scheduler = Scheduler(registry, start=False)
    examples = [request(keys, prompt="Tell me a story", max_new_tokens=400), request(keys, prompt="Once upon a time")]
    assert scheduler.preheat(examples) == 2
    assert scheduler.preheat(examples) == 0, "queued once"
    scheduler.start()
    deadline = time.monotonic() + 10
    while scheduler.counts()[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    visitor, how = scheduler.submit(request(keys, prompt="A different question"))
    assert how == Viewing.LIVE and scheduler.place(visitor)[0] == 1
    seen = views(scheduler, visitor, Viewing.LIVE)
    assert seen[-1].phase == RacePhase.DONE
    deadline = time.monotonic() + 60
    while len(scheduler.store) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scheduler.store.get(examples[0].key) is not None, "the preheat that yielded ran again"
    replay, how = scheduler.submit(examples[1])
    assert how == Viewing.REPLAY and views(scheduler, replay, how)[-1].phase == RacePhase.DONE


def test_a_visitor_who_leaves_stops_a_race_nobody_else_watches(pair):
    registry, keys = pair
    scheduler = Scheduler(registry, start=False)
    blocker, _ = scheduler.submit(request(keys, prompt="Tell me a story", max_new_tokens=300))
    waiting, _ = scheduler.submit(request(keys))
    shared, _ = scheduler.submit(request(keys, prompt="Once upon a time"))
    scheduler.submit(request(keys, prompt="Once upon a time"))  # a second viewer
    assert scheduler.place(waiting) == (1, None) and scheduler.counts() == (0, 3)
    scheduler.leave(waiting)
    assert waiting.phase == RacePhase.STOPPED and waiting.verdict.stopped == CANCELLED and scheduler.counts() == (0, 2)
    scheduler.leave(shared)
    assert not shared.cancel.is_set(), "another visitor still watches it"
    cancel = threading.Event()
    scheduler.start()
    seen = []
    for view in watch(blocker, Viewing.LIVE, scheduler.place, cancel, 0.0):
        seen.append(view)
        if view.phase == RacePhase.RACING:
            cancel.set()  # Stop: this viewer stops watching at once
    assert seen[-1].phase == RacePhase.STOPPED and seen[-1].verdict.stopped == CANCELLED
    scheduler.leave(blocker)
    assert blocker.cancel.is_set(), "nobody watches it any more: the computation stops"


def stopped_view(scheduler, recording):
    """The last view of a viewer who presses Stop once both lanes show tokens."""
    cancel, seen = threading.Event(), []
    for view in watch(recording, Viewing.LIVE, scheduler.place, cancel, 0.0):
        seen.append(view)
        if view.autoregressive.token_ids and view.speculative.token_ids:
            cancel.set()
    return seen[-1]


def test_a_stopped_greedy_race_compares_the_texts_shown_a_sampled_one_does_not(pair):
    registry, keys = pair
    scheduler = Scheduler(registry)
    greedy, _ = scheduler.submit(request(keys, max_new_tokens=200))
    last = stopped_view(scheduler, greedy)
    assert last.phase == RacePhase.STOPPED and last.verdict.stopped == CANCELLED
    assert last.verdict.identical is True, "f32 greedy: what both lanes showed is the same text so far"
    scheduler.leave(greedy)
    sampled, _ = scheduler.submit(request(keys, prompt="Once upon a time", max_new_tokens=200, temperature=0.8, seed=1))
    last = stopped_view(scheduler, sampled)
    assert last.verdict.stopped == CANCELLED and last.verdict.identical is None, "sampled texts may rightly differ"
    scheduler.leave(sampled)


def test_the_line_is_bounded_and_a_waiting_race_knows_its_wait(pair):
    registry, keys = pair
    scheduler = Scheduler(registry, max_waiting=2, start=False)
    first, _ = scheduler.submit(request(keys, prompt="one"))
    scheduler.submit(request(keys, prompt="two"))
    with pytest.raises(Busy) as busy:
        scheduler.submit(request(keys, prompt="three"))
    assert (busy.value.running, busy.value.waiting) == (0, 2)
    assert scheduler.submit(request(keys, prompt="one"))[1] == Viewing.JOINED, "joining takes no place in line"
    scheduler._durations.append(10.0)  # as if one race had been measured
    assert scheduler.place(first) == (0, 0.0)
    ahead, wait = scheduler.place(scheduler._waiting[1][0])
    assert ahead == 1 and wait == pytest.approx(10.0)
    seen = next(watch(first, Viewing.LIVE, scheduler.place, threading.Event()))
    assert seen.phase == RacePhase.WAITING and seen.ahead == 0


def test_a_prompt_too_long_is_refused_at_once_and_a_failure_reaches_every_viewer(pair):
    registry, keys = pair
    scheduler = Scheduler(registry, Limits(max_prompt_tokens=4))
    with pytest.raises(PromptTooLong):
        scheduler.submit(request(keys, prompt="a much longer prompt than four tokens, surely"))
    other = ModelRegistry()  # the target not loaded yet: the prompt is checked once it is
    late = Scheduler(other, Limits(max_prompt_tokens=4))
    recording, how = late.submit(request(keys, prompt="a much longer prompt than four tokens, surely"))
    seen = views(late, recording, how)
    assert seen[-1].phase == RacePhase.FAILED and "shorten it" in seen[-1].error


def test_a_model_that_fails_tells_visitors_without_the_servers_folders(pair, monkeypatch, caplog, tmp_path):
    from spec.errors import ModelError
    from spec.models.conversion_cache import models_dir
    from spec.serving import scheduler as scheduling

    registry, keys = pair
    monkeypatch.setenv("SPEC_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HOME", str(tmp_path / "alice"))
    said = f"The disk ran out of space while converting target into {models_dir()} (read {tmp_path / 'alice' / 'notes'})."

    def fails(*args):
        raise ModelError(said)

    monkeypatch.setattr(scheduling, "load_pair", fails)
    caplog.set_level("WARNING")
    scheduler = Scheduler(registry)
    recording, how = scheduler.submit(request(keys))
    seen = views(scheduler, recording, how)[-1]
    assert seen.phase == RacePhase.FAILED
    assert seen.error == "The disk ran out of space while converting target into the server's models folder (read ~/notes)."
    assert said in caplog.text, "the operator's log has the whole sentence"


def test_a_second_request_from_one_session_replaces_its_first_in_line(pair):
    registry, keys = pair
    scheduler = Scheduler(registry, max_waiting=2, start=False)
    other, _ = scheduler.submit(request(keys, prompt="someone else's"), session="other")
    first_watch = threading.Event()
    first, _ = scheduler.submit(request(keys, prompt="one"), session="me", cancel=first_watch)
    second_watch = threading.Event()
    second, how = scheduler.submit(request(keys, prompt="two"), session="me", cancel=second_watch)
    assert how == Viewing.LIVE and scheduler.counts() == (0, 2), "the second took the first's place, not another"
    assert [r for r, _ in scheduler._waiting] == [other, second]
    assert first.phase == RacePhase.STOPPED and first.verdict.stopped == REPLACED and first_watch.is_set()
    seen = views(scheduler, first, Viewing.LIVE, cancel=first_watch)
    assert seen[-1].phase == RacePhase.STOPPED and seen[-1].verdict.stopped == REPLACED
    import render

    assert "Replaced by your newer request" in render.outputs(seen[-1], request(keys).config, DRAFT_MODEL, True, None)[0]
    # A race others watch too stays in line for them when one of its viewers asks for another.
    shared, _ = scheduler.submit(request(keys, prompt="someone else's"), session="me", cancel=threading.Event())
    assert shared is other and other.viewers == 2 and second not in [r for r, _ in scheduler._waiting]
    third, _ = scheduler.submit(request(keys, prompt="three"), session="me")
    scheduler.leave(other)  # as the watch whose cancel was set does
    assert other.viewers == 1 and not other.ended and [r for r, _ in scheduler._waiting] == [other, third]
    again, how = scheduler.submit(request(keys, prompt="three"), session="me")  # the same again: still one place
    assert (again, how) == (third, Viewing.JOINED) and third.viewers == 2 and scheduler.counts() == (0, 2)
    replaced, _ = scheduler.submit(request(keys, prompt="five"), session="me")  # both its watches give it up
    assert third.phase == RacePhase.STOPPED and third.verdict.stopped == REPLACED and scheduler.counts() == (0, 2)
    assert [r for r, _ in scheduler._waiting] == [other, replaced]
    with pytest.raises(Busy):
        scheduler.submit(request(keys, prompt="four"))  # no session, no place to give up: the line is full


def test_finished_races_survive_a_restart_and_replay_labelled_with_when_and_where(pair, tmp_path, monkeypatch):
    from spec.serving import playback as playback_module, recording as recording_module, scheduler as scheduler_module, store as store_module
    from spec.serving.numbers import view_numbers
    from spec.serving.playback import replay_label

    registry, keys = pair
    kept = tmp_path / "recordings"
    scheduler = Scheduler(registry, store=RecordingStore(directory=kept))
    examples = [request(keys, prompt=prompt) for prompt in ("one", "two", "three")]
    ran = [views(scheduler, *scheduler.submit(example))[-1] for example in examples]
    assert len(list(kept.glob("*.json.gz"))) == 3
    restarted = Scheduler(ModelRegistry(), store=RecordingStore(directory=kept), start=False)  # no model loaded, no worker
    assert restarted.preheat(examples) == 0, "kept races from this CPU are not raced again"
    for example, before in zip(examples, ran):
        replay, how = restarted.submit(example)
        assert how == Viewing.REPLAY, "a restarted server replays from the first click"
        seen = views(restarted, replay, how)[-1]
        assert [f.token_ids for f in replay.frames] == [f.token_ids for f in before.recording.frames]
        assert seen.speculative.pieces == before.speculative.pieces and seen.verdict == before.verdict
    label = replay_label(seen)
    assert label.startswith("replay of a race run on this server at") and label.endswith(f"on its {recording_module.cpu_name()}")
    assert view_numbers(seen)["ran_on"] == recording_module.cpu_name()
    # Restarted on other hardware: still replayed at once, labelled with the CPU it ran on, and raced again here.
    monkeypatch.setattr(recording_module, "cpu_name", lambda: "AMD EPYC 7R13 Processor")
    monkeypatch.setattr(playback_module, "cpu_name", lambda: "AMD EPYC 7R13 Processor")
    monkeypatch.setattr(scheduler_module, "cpu_name", lambda: "AMD EPYC 7R13 Processor")
    moved = Scheduler(ModelRegistry(), store=RecordingStore(directory=kept), start=False)
    assert moved.preheat(examples) == 3
    replay, how = moved.submit(examples[0])
    assert how == Viewing.REPLAY and "on another server" in replay_label(views(moved, replay, how)[-1])
    assert "(this one: AMD EPYC 7R13 Processor)" in replay_label(views(moved, replay, how)[-1])
    # Bounded on disk as in memory: the least recently watched go first; a file it cannot read is dropped.
    (kept / "0000.json.gz").write_bytes(b"not gzip")
    small = RecordingStore(max_races=2, directory=kept)
    assert len(small) == 2 and len(list(kept.glob("*.json.gz"))) == 2
    assert small.peek(examples[0].key) is not None and small.peek(examples[1].key) is None, "the first was watched last"
    assert store_module.RecordingStore(directory=tmp_path / "none").nbytes == 0


class _Untimed:
    """A model whose whole curve a first start left for later: its first timing runs until stopped."""

    ref = "untimed"

    def __init__(self, log: list[str]):
        self.log, self.done, self.race = log, threading.Event(), None

    @property
    def untimed(self) -> bool:
        return not self.done.is_set()

    def time_curves(self, stopped, progress) -> None:
        if "timing" in self.log:
            self.log.append("timed after the race" if self.race is not None and self.race.ended else "timed")
            self.done.set()
            return
        self.log.append("timing")
        deadline = time.monotonic() + 5
        while not stopped() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.log.append("stopped")
        raise Cancelled("the cores are wanted")


def test_curves_a_first_start_left_are_timed_before_preheats_and_give_way_to_a_visitor(pair, monkeypatch):
    registry, keys = pair
    log: list[str] = []
    model = _Untimed(log)
    monkeypatch.setattr(registry, "untimed", lambda: [model] if model.untimed else [])
    scheduler = Scheduler(registry)
    deadline = time.monotonic() + 5
    while "timing" not in log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["timing"], "with nobody waiting, the worker times the curve"
    scheduler.preheat([request(keys, prompt="Once upon a time")])
    time.sleep(0.2)
    assert log == ["timing"], "a preheat nobody watches does not stop the timing"
    model.race, _ = scheduler.submit(request(keys))
    assert views(scheduler, model.race, Viewing.LIVE)[-1].phase == RacePhase.DONE
    assert model.done.wait(5) and log == ["timing", "stopped", "timed after the race"], \
        "a visitor's race stops the timing and runs; then the timing starts over"


def test_one_worker_times_the_curves_the_others_wait_for_races(pair, monkeypatch):
    registry, _ = pair
    inside, most, done = [], [], threading.Event()

    class Slow:
        ref, untimed = "slow", True

        def time_curves(self, stopped, progress):
            inside.append(self)
            most.append(len(inside))
            time.sleep(0.3)
            inside.remove(self)
            self.untimed = False
            done.set()

    model = Slow()
    monkeypatch.setattr(registry, "untimed", lambda: [model] if model.untimed else [])
    Scheduler(registry, slots=2)
    assert done.wait(5) and max(most) == 1 and len(most) == 1


def test_what_races_learned_of_a_pair_is_kept_for_the_next_start(pair, tmp_path, caplog):
    """After each race the pair's record is in the folder given, and a scheduler started later on
    that folder drafts from it; a folder that cannot be written is said once in the log, and races go on."""
    from spec.decoding.kept_pairs import FILE

    registry, keys = pair
    scheduler = Scheduler(registry, learned_in=tmp_path)
    recording, _ = scheduler.submit(request(keys, dynamic_k=True))  # fixed K learns nothing of the pair
    assert views(scheduler, recording, Viewing.LIVE)[-1].phase == RacePhase.DONE
    target, draft = registry.get(keys[0]), registry.get(keys[1])
    learned = scheduler.learned.pair(target, draft, DRAFT_MODEL)
    deadline = time.monotonic() + 5
    while not (tmp_path / FILE).exists() and time.monotonic() < deadline:  # kept once the race is finished
        time.sleep(0.01)
    later = Scheduler(registry, learned_in=tmp_path, start=False).learned.pair(target, draft, DRAFT_MODEL)
    assert later is not learned and (later.accepted, later.call_seconds) == (learned.accepted, learned.call_seconds)
    assert later.call_seconds is not None

    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    scheduler = Scheduler(registry, learned_in=blocked)
    for prompt in ("Once upon a time", "In the beginning"):
        recording, _ = scheduler.submit(request(keys, prompt=prompt))
        assert views(scheduler, recording, Viewing.LIVE)[-1].phase == RacePhase.DONE
    deadline = time.monotonic() + 5
    while scheduler.learned.kept_in is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.message for r in caplog.records].count(next(r.message for r in caplog.records if "Could not keep" in r.message)) == 1
