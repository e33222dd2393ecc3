"""Knowing the machine: each width's cost measured and kept per machine, compile settings chosen by
measurement per method, and schedules that price widths from this CPU's curve from the first round."""
import io
import time

import pytest

from spec.config import DEFAULT_PRECISION, ModelKey
from spec.decoding.engine import LearnedState, generate
from spec.decoding.policy import CallCosts, DynamicK, LookupK, PairMemory, Round
from spec.errors import Cancelled
from spec.models import calibration, registry, tuning, weigh
from spec.models.calibration import CALIBRATED_WIDTHS, CallCurve, calibration_key, curve_for, keep_curve, kept_curve, measure_curve
from spec.models.registry import load_model
from spec.models.runtime import compile_properties
from spec.progress import TerminalProgress
from spec.serving import warmup
from tests.conftest import models_dir_at

STEP = 0.1  # seconds of a one-token step in the made-up curves below
# What a call of each width costs in steps: an AVX2 CPU's curve (a jump at width 5) and an AMX one's.
AVX2 = {1: 1.0, 2: 0.99, 3: 1.26, 4: 1.13, 5: 2.0, 6: 2.0, 7: 2.3, 9: 2.71}
AMX = {1: 1.0, 2: 1.0, 3: 1.05, 4: 1.18, 5: 1.23, 6: 1.33, 7: 1.36, 9: 1.44}
DEAR_ROUNDS = {1: 1.0, 2: 1.4, 3: 1.8, 4: 2.2, 5: 2.6, 6: 3.0, 7: 3.4, 9: 4.2}  # verify calls dear: a made-up curve


def test_a_curve_times_every_width_and_is_kept_for_the_next_start(tiny_pairs, tmp_path, monkeypatch):
    target = tiny_pairs["llama"][0]
    xml = target.resolved.path / "openvino_model.xml"
    curve = curve_for(target.model, xml, tmp_path, widths=(1, 2, 5))
    assert sorted(curve.seconds) == [1, 2, 5] and all(s > 0 for s in curve.seconds.values())
    assert curve.in_steps()[1] == 1.0 and curve.machine["cores"] >= 1

    def measured_again(*args, **kwargs):
        raise AssertionError("a kept curve is read, not measured again")

    monkeypatch.setattr(calibration, "measure_curve", measured_again)
    assert curve_for(target.model, xml, tmp_path, widths=(1, 2, 5)) == curve


def test_tuning_times_enough_to_choose_and_the_chosen_curve_is_timed_whole(tiny_pairs, tmp_path, monkeypatch):
    """Candidates are timed at a few widths, once per run; the curve the schedules read is timed in
    one measurement, none of its widths taken from tuning's, timed at another moment."""
    target = tiny_pairs["llama"][0]
    xml = target.resolved.path / "openvino_model.xml"
    timed = []

    def measure(model, widths, repeats=calibration._REPEATS, stopped=None):
        timed.append((widths, repeats))
        return CallCurve({w: 0.5 for w in widths}, calibration.machine())

    monkeypatch.setattr(tuning, "measure_curve", measure)
    monkeypatch.setattr(calibration, "measure_curve", measure)
    monkeypatch.setattr(tuning, "_applied", lambda model: None)  # no twins: every candidate is timed, whatever this CPU
    chosen = tuning.tune(xml, tmp_path)
    assert timed == [(tuning._WIDTHS, 1)] * len(tuning.CANDIDATES) and set(chosen.curves) == set(tuning.CANDIDATES)
    curve = curve_for(target.model, xml, tmp_path, widths=(1, 2, 9, 17))
    assert timed[-1] == ((1, 2, 9, 17), calibration._REPEATS) and curve.seconds == {1: 0.5, 2: 0.5, 9: 0.5, 17: 0.5}


def test_a_kept_curve_belongs_to_its_machine_and_its_compile_settings(tiny_pairs, tmp_path, monkeypatch):
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    key = calibration_key(xml, {"INFERENCE_PRECISION_HINT": "f32"})
    keep_curve(tmp_path, key, CallCurve({1: 0.01, 2: 0.012}, calibration.machine()))
    assert kept_curve(tmp_path, key).seconds == {1: 0.01, 2: 0.012}
    assert calibration_key(xml, {"INFERENCE_PRECISION_HINT": "bf16"}) != key
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # capped, OpenVINO behaves like another CPU class
    assert "AVX2 (capped" in calibration.cpu_name() and calibration_key(xml, {"INFERENCE_PRECISION_HINT": "f32"}) != key
    (tmp_path / "calibration.json").write_text("{not json")
    assert kept_curve(tmp_path, key) is None  # a damaged file is measured again, never an error


def test_a_curve_timed_on_other_cores_than_its_key_names_is_neither_read_nor_kept(tiny_pairs, tmp_path, monkeypatch):
    """A curve kept under this machine's key but timed on fewer cores (its calls twice as slow as
    here) priced every width here at that speed: it is measured again, and such a timing is not kept."""
    target = tiny_pairs["llama"][0]
    xml = target.resolved.path / "openvino_model.xml"
    here = calibration.machine()
    elsewhere = {**here, "cores": here["cores"] + 1}
    key = calibration._curve_key(target.model, xml, (1, 2))
    keep_curve(tmp_path, key, CallCurve({1: 0.02, 2: 0.03}, elsewhere))
    assert kept_curve(tmp_path, key) is None
    monkeypatch.setattr(calibration, "measure_curve", lambda model, widths, stopped=None: CallCurve({1: 0.01, 2: 0.012}, here))
    assert curve_for(target.model, xml, tmp_path, widths=(1, 2)).seconds == {1: 0.01, 2: 0.012}
    assert kept_curve(tmp_path, key).seconds == {1: 0.01, 2: 0.012}  # measured again here, and kept
    other_key = calibration._curve_key(target.model, xml, (1, 4))
    monkeypatch.setattr(calibration, "measure_curve", lambda model, widths, stopped=None: CallCurve({1: 0.02, 4: 0.05}, elsewhere))
    assert curve_for(target.model, xml, tmp_path, widths=(1, 4)).seconds == {1: 0.02, 4: 0.05}
    assert other_key not in calibration.read_record(tmp_path / "calibration.json")


class _CountingModel:
    """A compiled model's stand-in for timing: each call's (model, width) is appended to `calls`."""

    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    def new_cache(self):
        return self

    def forward(self, tokens, keep=None):
        self.calls.append((self.name, len(tokens)))

    def trim(self, length):
        pass

    def release(self):
        pass


@pytest.fixture
def steady_second_call(monkeypatch):
    """A run's second call as quick as the later ones, whatever the stand-ins' calls took."""
    monkeypatch.setattr(calibration, "_second_call_steady", lambda times: True)


def test_a_curve_times_wide_calls_once_a_run_and_the_rest_thrice(steady_second_call):
    calls = []
    measure_curve(_CountingModel("a", calls), (1, 9, calibration._WIDE, 33), repeats=3)
    counted = {width: calls.count(("a", width)) for width in (1, 9, calibration._WIDE, 33)}
    untimed = calibration._SWITCH_CALLS
    # The widest width's second run follows its first: no change of width, no untimed calls.
    assert counted == {1: 2 * (untimed + 3), 9: 2 * (untimed + 3), calibration._WIDE: 2 * (untimed + 1), 33: untimed + 2}


class _SlowAfterSwitchModel(_CountingModel):
    """Calls of 2 ms, but the first two after a change of width take 40 ms more (as on the Zen 5 EPYC)."""

    def __init__(self, name: str, calls: list):
        super().__init__(name, calls)
        self.last_width, self.since_switch = None, 0

    def forward(self, tokens, keep=None):
        super().forward(tokens, keep)
        self.since_switch = self.since_switch + 1 if len(tokens) == self.last_width else 1
        self.last_width = len(tokens)
        time.sleep(0.002 + 0.04 * (self.since_switch <= 2))


def test_a_slow_second_call_after_a_switch_is_not_timed_where_one_call_a_run_is():
    """One untimed call is enough where the second is steady (the Zen 4 EPYC); where it is slow too,
    a run timed once would take it for the width's cost, and lets it pass untimed. Runs timed thrice
    need not: their median leaves it out."""
    calls = []
    curve = measure_curve(_SlowAfterSwitchModel("a", calls), (1, 9, calibration._WIDE, 33), repeats=3)
    counted = {width: calls.count(("a", width)) for width in (1, 9, calibration._WIDE, 33)}
    one = calibration._SWITCH_CALLS
    assert counted == {1: 2 * (one + 3), 9: 2 * (one + 3), calibration._WIDE: 2 * (one + 2), 33: (one + 2) + 1}
    assert all(seconds < 0.02 for seconds in curve.seconds.values()), curve.seconds  # no slow call priced


def test_a_second_call_is_steady_within_a_tenth_of_the_later_ones():
    assert calibration._second_call_steady([0.105, 0.1, 0.1])
    assert not calibration._second_call_steady([0.115, 0.1, 0.1])


class _SlowModel(_CountingModel):
    """Calls that take (width² × 4) ms: a call of 3 costs 9 steps, of 4 16."""

    def forward(self, tokens, keep=None):
        super().forward(tokens, keep)
        if keep is None:  # the context's prefill is not timed
            time.sleep(len(tokens) ** 2 * 0.004)


def test_calls_costing_two_steps_or_more_are_timed_once_a_run(steady_second_call):
    """On AVX2 kernels a call of 5 costs 3.9 steps and one of 9 5.2: timed thrice a run like a step,
    they made most of the 29 s a first start spent on the target's curve there."""
    calls = []
    curve = measure_curve(_SlowModel("a", calls), (1, 3, 4), repeats=3)
    counted = {width: calls.count(("a", width)) for width in (1, 3, 4)}
    untimed = calibration._SWITCH_CALLS
    # Upwards, a call of 3 is judged by the step before it (1 step: thrice); downwards by its own first run.
    assert counted == {1: 2 * (untimed + 3), 3: (untimed + 3) + (untimed + 1), 4: untimed + 2}
    assert curve.in_steps()[3] > calibration._DEAR


def test_curves_timed_side_by_side_take_turns_at_each_width(steady_second_call):
    calls = []
    curves = calibration.measure_curves([_CountingModel("a", calls), _CountingModel("b", calls)], (1, 4), repeats=1)
    untimed, check = calibration._SWITCH_CALLS, calibration._CHECK_CALLS
    # Widths upwards, then downwards; each model's second run of 4 follows its first, no untimed calls before it.
    # The first two runs time enough calls to check the second call after a switch.
    turns = [((name, width), untimed * (turn != 2) + (check if turn < calibration._CHECKS else 1))
             for turn, width in enumerate((1, 4, 4, 1)) for name in "ab"]
    assert [call for call in calls if call[1] != calibration._CONTEXT] == [call for call, count in turns for _ in range(count)]
    assert len(curves) == 2 and all(sorted(curve.seconds) == [1, 4] for curve in curves)


def test_measuring_rejects_what_it_cannot_time(tiny_pairs):
    with pytest.raises(ValueError, match="repeats"):
        measure_curve(tiny_pairs["llama"][0].model, (1, 2), repeats=0)


def _fake_tuning(monkeypatch, curves: dict[str, dict[int, float] | Exception], applied: dict[str, str] | None = None):
    """tuning.tune timing `curves` (in steps of STEP seconds) for the candidates instead of compiling
    them; `applied`: what the device says each candidate applies (its own name unless given)."""
    monkeypatch.setattr(tuning, "CANDIDATES", {name: {"NAME": name} for name in curves})
    monkeypatch.setattr(tuning, "compile_model", lambda xml, precision, device, cache, ids, settings: settings["NAME"])
    monkeypatch.setattr(tuning, "_applied", lambda name: (applied or {}).get(name, name))

    def measure(name, widths, repeats=1, stopped=None):
        if isinstance(curves[name], Exception):
            raise curves[name]
        return CallCurve({w: STEP * c for w, c in curves[name].items()}, calibration.machine())

    monkeypatch.setattr(tuning, "measure_curve", measure)
    # Side by side: each candidate timed as above, in the order given (the turns at each width are
    # measure_curves's, tested on its own).
    monkeypatch.setattr(tuning, "measure_curves", lambda models, widths, repeats=1: [
        tuning.measure_curve(model, widths, repeats) for model in models])


def test_a_model_that_only_steps_is_tuned_on_its_step_alone(tiny_pairs, tmp_path, monkeypatch):
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    _fake_tuning(monkeypatch, {"quick step": {1: 0.9}, "slow step": {1: 1.0}})
    timed = []
    measure = tuning.measure_curve
    monkeypatch.setattr(tuning, "measure_curve", lambda model, widths, repeats, stopped=None: timed.append(widths) or measure(model, widths))
    chosen = tuning.tune(xml, tmp_path, steps_only=True)
    assert (chosen.steps, chosen.rounds) == ("quick step", "quick step") and timed == [(1,), (1,)]


def test_each_method_runs_with_the_candidate_fastest_for_it(tiny_pairs, tmp_path, monkeypatch):
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    quick_step = {w: c * 0.95 for w, c in DEAR_ROUNDS.items()}  # the fastest step, its verify calls dear
    cheap_rounds = {w: c * 1.02 for w, c in AMX.items()}  # a step 7% slower, verify calls far cheaper
    broken = RuntimeError("could not create a primitive descriptor\nmore")
    _fake_tuning(monkeypatch, {"quick step": quick_step, "cheap rounds": cheap_rounds, "broken": broken})
    chosen = tuning.tune(xml, tmp_path)
    assert (chosen.steps, chosen.rounds) == ("quick step", "cheap rounds")
    assert sorted(chosen.curves) == ["cheap rounds", "quick step"]  # a candidate that does not run here is left out

    # Within noise of each other, one compiled copy serves both methods.
    _fake_tuning(monkeypatch, {"a": AMX, "b": {w: c * 0.99 for w, c in AMX.items()}})
    chosen = tuning.tune(xml, tmp_path / "other")
    assert chosen.steps == chosen.rounds == "b"
    # Steps within noise (2%), rounds far apart: the rounds' settings serve both, in one copy.
    _fake_tuning(monkeypatch, {"tie": {w: c * 0.98 for w, c in DEAR_ROUNDS.items()}, "cheap rounds": AMX})
    chosen = tuning.tune(xml, tmp_path / "tie")
    assert chosen.steps == chosen.rounds == "cheap rounds"

    _fake_tuning(monkeypatch, {"broken": broken})
    with pytest.raises(ValueError, match="could not compile .* broken: could not create a primitive descriptor. Its files may be damaged"):
        tuning.tune(xml, tmp_path / "none")


def test_one_compiled_blob_serves_every_candidate_each_with_its_own_settings(tiny_pairs, tmp_path):
    """What tuning relies on to compile a model once for all candidates: OpenVINO's CPU plugin keeps
    one blob per model and applies the candidates' properties as it reads it back. Should a release
    keep a blob per setting, this fails, and tuning would leave unchosen blobs in the models folder."""
    from spec.models.runtime import compile_model

    def shown(value) -> str:  # OpenVINO reports a precision as a type
        return {"<Type: 'float32'>": "f32"}.get(str(value), str(value))

    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    for settings in tuning.CANDIDATES.values():
        compiled = compile_model(xml, DEFAULT_PRECISION, "CPU", tmp_path, None, settings).compiled
        assert {name: shown(compiled.get_property(name)) for name in settings} == settings
    assert len(list(tmp_path.glob("*.blob"))) == 1


def test_a_candidate_this_cpu_applies_as_another_is_its_twin_and_is_not_timed(tiny_pairs, tmp_path, monkeypatch):
    """On a CPU without bf16, "groups of 128" and "f32, groups of 128" compute alike: the device says
    it applies the same settings to both, so the second is not timed. Its key keeps a copy of its
    twin's curve, and the next start reads that and leaves it out again, timing nothing."""
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    _fake_tuning(monkeypatch, {"own": DEAR_ROUNDS, "groups": AMX, "f32 groups": AMX}, applied={"f32 groups": "groups"})
    timed, fake = [], tuning.measure_curve
    monkeypatch.setattr(tuning, "measure_curve", lambda name, widths, repeats=1, stopped=None: timed.append(name) or fake(name, widths))
    chosen = tuning.tune(xml, tmp_path)
    assert timed == ["own", "groups"] and sorted(chosen.curves) == ["groups", "own"] and chosen.rounds == "groups"
    monkeypatch.setattr(tuning, "measure_curve", lambda *args, **kwargs: pytest.fail("timed again"))
    monkeypatch.setattr(tuning, "compile_model", lambda *args: pytest.fail("compiled again"))
    assert tuning.tune(xml, tmp_path) == chosen


def test_the_device_says_which_settings_it_applies(tiny_pairs, tmp_path, monkeypatch):
    """What twins rest on, on the real CPU plugin: the same settings under two names read back alike,
    a setting that differs reads back apart."""
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    monkeypatch.setattr(tuning, "CANDIDATES", {"groups of 128": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"},
                                               "the same": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"},
                                               "groups of 64": {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "64"}})
    timed, measure = [], tuning.measure_curve
    monkeypatch.setattr(tuning, "measure_curve", lambda model, widths, repeats, stopped=None: timed.append(widths) or measure(model, widths, repeats))
    chosen = tuning.tune(xml, tmp_path)
    assert len(timed) == 2 and sorted(chosen.curves) == ["groups of 128", "groups of 64"]


def _first_timing_in_another_moment(monkeypatch, name: str, factor) -> list:
    """The fake tuning's first timing (of `name`, as it comes first) with each width's time times
    `factor(width)`: a slow or quick moment of the host. Returns the list of (candidate, widths) timed."""
    timed, fake = [], tuning.measure_curve

    def measure(candidate, widths, repeats=1, stopped=None):
        timed.append((candidate, widths))
        curve = fake(candidate, widths)
        moment = factor if candidate == name and len(timed) == 1 else (lambda width: 1.0)
        return CallCurve({w: s * moment(w) for w, s in curve.seconds.items()}, curve.machine)

    monkeypatch.setattr(tuning, "measure_curve", measure)
    return timed


def test_a_split_choice_is_timed_again_so_a_slow_moment_does_not_make_it(tiny_pairs, tmp_path, monkeypatch):
    """"quick" is timed first in a slow moment (all its calls 20% dearer): the step goes to "plain",
    the rounds to "quick". Before two copies are made, each step is timed again, in reverse order;
    at its quicker moment "quick" wins both. A split that holds is kept."""
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    quick = {w: c * 0.9 for w, c in AMX.items()}
    plain = DEAR_ROUNDS
    _fake_tuning(monkeypatch, {"quick": quick, "plain": plain})
    timed = _first_timing_in_another_moment(monkeypatch, "quick", lambda width: 1.2)
    monkeypatch.setattr(tuning, "_room_for_all", lambda xml, copies: False)  # one copy at a time
    chosen = tuning.tune(xml, tmp_path / "drift")
    assert timed == [("quick", tuning._WIDTHS), ("plain", tuning._WIDTHS), ("plain", (1,)), ("quick", (1,))]
    assert (chosen.steps, chosen.rounds) == ("quick", "quick") and chosen.curves["quick"].step == pytest.approx(0.9 * STEP)
    assert tuning.tune(xml, tmp_path / "drift") == chosen  # kept as corrected

    _fake_tuning(monkeypatch, {"quick step": {w: c * 0.95 for w, c in DEAR_ROUNDS.items()}, "cheap rounds": AMX})
    chosen = tuning.tune(xml, tmp_path / "real split")
    assert (chosen.steps, chosen.rounds) == ("quick step", "cheap rounds")  # timed again, still split


def test_a_split_the_memory_cannot_hold_is_neither_chosen_nor_timed_again(tiny_pairs, tmp_path, monkeypatch):
    """Where two copies of the model do not fit (the 1.5B in 4 GB), speculation would verify with
    the step's copy anyway (LoadedModel.for_rounds): tuning gives both methods the quickest step
    and spends no time timing the split again. The curves timed are kept as they are."""
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    _fake_tuning(monkeypatch, {"quick step": {w: c * 0.95 for w, c in DEAR_ROUNDS.items()}, "cheap rounds": AMX})
    timed = _first_timing_in_another_moment(monkeypatch, "quick step", lambda width: 1.0)
    monkeypatch.setattr(tuning, "_room_for_a_split", lambda xml: False)
    chosen = tuning.tune(xml, tmp_path)
    assert (chosen.steps, chosen.rounds) == ("quick step", "quick step")
    assert timed == [("quick step", tuning._WIDTHS), ("cheap rounds", tuning._WIDTHS)]  # nothing timed again
    monkeypatch.setattr(tuning, "measure_curve", lambda *args, **kwargs: pytest.fail("timed again"))
    assert tuning.tune(xml, tmp_path) == chosen  # the next start reads the same choice
    monkeypatch.setattr(tuning, "_room_for_a_split", lambda xml: True)
    assert tuning.tune(xml, tmp_path).rounds == "cheap rounds"  # with room, the split stands


def test_with_room_for_every_setting_a_split_is_timed_side_by_side_so_a_quick_moment_does_not_make_it(
        tiny_pairs, tmp_path, monkeypatch):
    """"own" is timed first in a moment quick for its verify calls (20% cheaper than they are): its
    rounds look best and the step goes to "groups", a split. With room for both copies at once,
    both are timed again in turns, meeting the same moments, and "groups" wins both."""
    xml = tiny_pairs["llama"][0].resolved.path / "openvino_model.xml"
    own = {w: c * (1.05 if w == 1 else 1.15) for w, c in AMX.items()}
    _fake_tuning(monkeypatch, {"own": own, "groups": AMX})
    timed = _first_timing_in_another_moment(monkeypatch, "own", lambda width: 0.8 if width > 1 else 1.0)
    monkeypatch.setattr(tuning, "_room_for_all", lambda xml, copies: False)
    assert tuning.tune(xml, tmp_path / "one at a time").rounds == "own"  # the step timed again does not see it
    timed.clear()
    monkeypatch.setattr(tuning, "_room_for_all", lambda xml, copies: copies == 2)  # both settings' copies
    chosen = tuning.tune(xml, tmp_path / "side by side")
    assert timed == [(name, tuning._WIDTHS) for name in ("own", "groups", "own", "groups")]
    assert (chosen.steps, chosen.rounds) == ("groups", "groups") and chosen.curves["own"].seconds[9] == pytest.approx(
        STEP * own[9])  # each width its quicker time side by side; the quick moment alone is gone
    monkeypatch.setattr(tuning, "measure_curve", lambda *args, **kwargs: pytest.fail("timed again"))
    assert tuning.tune(xml, tmp_path / "side by side") == chosen  # what is kept chooses the same next time

    # A setting whose curve was kept from another moment (a start stopped mid-tuning) is timed side by side too, and kept anew.
    folder = tmp_path / "half kept"
    groups_key = calibration_key(xml, tuning.compile_properties(DEFAULT_PRECISION, "CPU", None, {"NAME": "groups"}), "tuning")
    keep_curve(folder, groups_key, CallCurve({w: STEP * c * (1.3 if w > 1 else 1.0) for w, c in AMX.items()}, calibration.machine()))
    _fake_tuning(monkeypatch, {"own": own, "groups": AMX})  # own's true rounds beat groups' kept ones: a split
    chosen = tuning.tune(xml, folder)
    monkeypatch.setattr(tuning, "measure_curve", lambda *args, **kwargs: pytest.fail("timed again"))
    assert chosen.steps == chosen.rounds == "groups" and tuning.tune(xml, folder) == chosen

    # Settings that do not compile side by side are timed again one at a time, as without room.
    timed.clear()
    _fake_tuning(monkeypatch, {"own": own, "groups": AMX})
    timed = _first_timing_in_another_moment(monkeypatch, "own", lambda width: 0.8 if width > 1 else 1.0)
    compiled, compiles = tuning.compile_model, []

    def fails_side_by_side(*args):
        compiles.append(args)
        if len(compiles) == 3:  # the first of the copies side by side
            raise RuntimeError("out of memory")
        return compiled(*args)

    monkeypatch.setattr(tuning, "compile_model", fails_side_by_side)
    tuning.tune(xml, tmp_path / "no second copy")
    assert timed[2:] == [("groups", (1,)), ("own", (1,))]


def test_a_model_at_the_default_precision_is_tuned_once_and_each_method_runs_with_its_settings(
        tiny_checkpoints, tiny_models_dir, monkeypatch):
    with models_dir_at(tiny_models_dir):
        target = load_model(ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION))
        assert target.tuning.curves and set(target.tuning.curves) <= set(tuning.CANDIDATES)  # twins left out
        assert target.settings() == target.tuning.steps and target.settings(speculative=True) == target.tuning.rounds
        assert target.for_rounds()[1] is not None
        monkeypatch.setattr(tuning, "measure_curve", lambda *args, **kwargs: pytest.fail("tuned again"))
        again = load_model(ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION))
        assert again.tuning == target.tuning
        plain = generate("hello", again, max_new_tokens=8)
        speculative = generate("hello", again, prompt_lookup=True, max_new_tokens=8)
        assert plain.stats.new_tokens == speculative.stats.new_tokens == 8


def _draft_model_schedule(curve_in_steps: dict[int, float]) -> DynamicK:
    """Dynamic K for a draft kept 80% of the time and costing 0.15 of a step, on a target whose calls cost `curve_in_steps`."""
    memory = PairMemory(accepted=8.0, rejected=2.0, long_accepted=8.0, long_rejected=2.0, call_seconds=0.15 * STEP)
    costs = CallCosts.calibrated({w: STEP * c for w, c in curve_in_steps.items()})
    schedule = DynamicK(4, memory=memory, costs=costs)
    assert schedule.next_round([1, 2, 3]) == Round(0, 0)  # a step first: the calibration's was timed at another moment
    costs.observe(1, STEP, last_width=1)  # as calibrated
    return schedule


def test_a_calibrated_curve_keeps_rounds_under_the_width_where_this_cpus_cost_jumps():
    """Before any verify call is timed, the schedule prices widths from this machine's curve: on the
    AVX2 curve 3 drafts are checked at width 4, below the jump at 5; on the AMX curve 4 drafts at width 5."""
    assert _draft_model_schedule(AVX2).next_round([1, 2, 3]) == Round(3, 3)
    assert _draft_model_schedule(AMX).next_round([1, 2, 3]) == Round(4, 4)
    # Widths the calibration never timed follow this curve's slope, not another CPU's.
    costs = CallCosts.calibrated({1: STEP, 2: STEP, 5: 3 * STEP})
    assert costs.steady(9) == pytest.approx(costs.steady(5) + 4 * (costs.steady(5) - costs.steady(2)) / 3)
    with pytest.raises(ValueError, match="one-token step"):
        CallCosts.calibrated({2: STEP})


def test_a_calibrated_step_timed_here_takes_this_moments_price_at_once():
    """A kept curve was timed at another moment: the step's first timing in this process replaces it
    (calibrated in a slow moment, it would otherwise stay priced as dear for as long as speculation
    takes no plain step), and later timings average as any do. Schedules time the step first."""
    costs = CallCosts.calibrated({1: STEP, 2: STEP, 5: 2 * STEP})
    assert not costs.timed(1)
    costs.observe(1, 0.8 * STEP, last_width=2)  # right after another width: no fair sample
    assert costs.steady(1) == STEP and not costs.timed(1)
    costs.observe(1, 0.8 * STEP, last_width=1)
    assert costs.steady(1) == pytest.approx(0.8 * STEP) and costs.timed(1)
    costs.observe(1, 0.9 * STEP, last_width=1)
    assert 0.8 * STEP < costs.steady(1) < 0.9 * STEP
    assert costs.steady(5) == 2 * STEP and not costs.timed(5)
    costs.observe(5, 1.8 * STEP, last_width=5)  # a verify width averages from the calibration's: it is timed often
    assert costs.steady(5) == pytest.approx(0.7 * 2 * STEP + 0.3 * 1.8 * STEP) and costs.timed(5)
    assert LookupK(4, costs=CallCosts.calibrated({1: STEP, 5: 2 * STEP})).next_round(list(range(100, 140))) == Round(0, 0)


def test_the_page_says_when_this_cpu_makes_verify_calls_dear_and_how_each_method_was_compiled():
    import render
    from spec.serving.verdict import Explanation

    def explained(verify_cost: float, compiled: tuple, width: float = 4.5) -> str:
        return render.why(Explanation(1.1, True, 128, 2.5, 0.7, 0.1, 0.1 * verify_cost, verify_cost, 0.3, 1.2, compiled, width))

    dear = explained(2.1, ("groups of 128", "f32, groups of 128"))
    assert "far from free" in dear and "autoregressive groups of 128, speculative f32, groups of 128" in dear
    assert "far from free" not in explained(2.1, ("openvino", "openvino"), width=12)  # a long copy, wide anywhere
    cheap = explained(1.2, ("openvino", "openvino"))
    assert "far from free" not in cheap and "Both compiled as timing on this CPU chose: openvino" in cheap
    assert "compiled" not in explained(1.2, (None, None))  # a recording made before settings were recorded


def test_speculation_gets_its_own_compiled_copy_only_where_tuning_found_one_clearly_faster(tiny_checkpoints, tiny_models_dir,
                                                                                         monkeypatch):
    with models_dir_at(tiny_models_dir):
        target = load_model(ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION))
        same = tuning.Tuning("openvino", "openvino", target.tuning.curves)
        monkeypatch.setattr(target, "tuning", same)
        assert target.for_rounds()[0] is target.model
        monkeypatch.setattr(target, "tuning", tuning.Tuning("openvino", "groups of 128", target.tuning.curves))
        rounds, curve = target.for_rounds()
        assert rounds is not target.model and target.for_rounds()[0] is rounds  # compiled once, then shared
        assert rounds.properties["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "128" and sorted(curve.seconds) == list(CALIBRATED_WIDTHS)
        assert generate("hello", target, prompt_lookup=True, max_new_tokens=8).stats.compiled_with == "groups of 128"
        assert generate("hello", target, max_new_tokens=8).stats.compiled_with == "openvino"

        # Loaded so, the step's copy has no curve timed: the schedules read the copy that verifies.
        two_copies = tuning.Tuning("openvino", "groups of 128", target.tuning.curves)
        monkeypatch.setattr(registry, "tune", lambda *args, **kwargs: two_copies)
        monkeypatch.setattr(calibration, "measure_curve", lambda *args: pytest.fail("timed the step's copy"))
        assert load_model(ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION)).curve is None

        # The server's preload compiles speculation's copy before it says Ready: not in the first race.
        shared, said = registry.ModelRegistry(), io.StringIO()
        ready = warmup.preload(shared, {"pair": lambda: [ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION)]}, TerminalProgress(said))
        assert ready == {"pair"} and shared.get(ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION))._rounds is not None
        assert "for verify calls (groups of 128)" in said.getvalue()


def test_without_room_for_a_second_copy_speculation_verifies_with_the_steps_one(tiny_checkpoints, tiny_models_dir,
                                                                                monkeypatch):
    """A machine (or a container's memory limit) without room for two copies of the target: the
    copy tuning asked for is not made, and speculation verifies with the step's, its curve timed."""
    key = ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION)
    with models_dir_at(tiny_models_dir):
        curves = load_model(key).tuning.curves
        monkeypatch.setattr(registry, "tune", lambda *args, **kwargs: tuning.Tuning("openvino", "groups of 128", curves))
        target, said = load_model(key), []
        monkeypatch.setattr(registry, "available_bytes", lambda: 2 * weigh.LOAD_MEMORY_FACTOR * target.size_bytes - 1)
        rounds, curve = target.for_rounds(lambda message, fraction: said.append(message))
        assert rounds is target.model and curve is target.curve is not None and sorted(curve.seconds) == list(CALIBRATED_WIDTHS)
        assert target.settings(speculative=True) == target.settings() == "openvino"
        assert any(message.startswith(f"Not enough memory for a second copy of {target.ref}") for message in said)
        assert generate("hello", target, prompt_lookup=True, max_new_tokens=8).stats.compiled_with == "openvino"


def test_a_first_start_races_on_tunings_widths_and_times_the_whole_curve_later(tiny_checkpoints, tiny_models_dir, monkeypatch):
    """A server's first start (curves_later) prices its first races by the widths tuning timed for
    the chosen settings; the whole curve, timed when the cores are free, is kept for the next start
    and priced from the target's next generation on. A stopped timing keeps nothing."""
    key = ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION)
    monkeypatch.setattr(calibration, "_FILE", "calibration-first-start.json")  # nothing kept yet, tuning's included
    monkeypatch.setattr(registry, "is_kept", lambda *args, **kwargs: True)  # every setting tuned now: the curve alone later
    # One copy for both methods, whatever a noisy host times: a second copy for verify rounds would
    # only be compiled, and its curve wait for timing, once a race asks for it.
    monkeypatch.setattr(tuning, "_WORTH_A_SECOND_COPY", float("inf"))
    with models_dir_at(tiny_models_dir):
        try:
            server = registry.ModelRegistry(curves_later=True)
            target = server.get(key)
            assert server.untimed() == [target]
            with server.preparing():
                assert server.untimed() == [], "not while models are prepared: their work would be in the timing"
            curve = target.for_rounds()[1]
            assert target.untimed and curve is target.tuning.curves[target.tuning.rounds] and sorted(curve.seconds) == list(tuning._WIDTHS)
            learned = LearnedState()
            assert learned.about(target).call_costs.seconds == curve.seconds
            learned.about(target).call_costs.observe(2, 0.5 * curve.seconds[2], last_width=2)  # a generation timed width 2
            with pytest.raises(Cancelled):
                target.time_curves(stopped=lambda: True)
            assert target.untimed and target.for_rounds()[1] is curve
            target.time_curves()
            whole = target.for_rounds()[1]
            assert not target.untimed and server.untimed() == [] and sorted(whole.seconds) == list(CALIBRATED_WIDTHS)
            costs = learned.about(target).call_costs
            assert costs.seconds[13] == whole.seconds[13] and costs.prior[33] == pytest.approx(whole.seconds[33] / whole.seconds[1])
            assert costs.timed(2) and costs.seconds[2] < curve.seconds[2], "what a generation timed stays"
            monkeypatch.setattr(calibration, "measure_curve", lambda *args, **kwargs: pytest.fail("timed again"))
            again = load_model(key, curves_later=True)
            assert not again.untimed and again.for_rounds()[1] == whole
        finally:
            (tiny_models_dir / "calibration-first-start.json").unlink(missing_ok=True)


def test_a_first_start_times_the_plugins_own_settings_alone_and_the_others_later(tiny_checkpoints, tiny_models_dir,
                                                                                   monkeypatch):
    """Where no settings were ever timed, a server's first start compiles the target with tuning.FIRST
    after timing it alone; the others are timed when the cores are free, and the quickest is compiled
    then and used from the next generation on, what its calls cost learned afresh. A stopped tuning
    changes nothing; a later start times what is still missing before it races."""
    key = ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION)
    monkeypatch.setattr(calibration, "_FILE", "calibration-tuned-later.json")  # nothing kept yet
    timed = []
    real_tune = tuning.tune

    def tune(*args, **kwargs):
        timed.append(kwargs.get("candidates"))
        return real_tune(*args, **kwargs)

    monkeypatch.setattr(registry, "tune", tune)
    compiled, real_compile = [], tuning.compile_model

    def compile_model(*args, **kwargs):
        compiled.append((args, real_compile(*args, **kwargs)))
        return compiled[-1][1]

    monkeypatch.setattr(tuning, "compile_model", compile_model)
    monkeypatch.setattr(registry, "compile_model", compile_model)
    with models_dir_at(tiny_models_dir):
        try:
            server = registry.ModelRegistry(curves_later=True)
            target = server.get(key)
            assert timed == [(tuning.FIRST,)] and list(target.tuning.curves) == [tuning.FIRST]
            (arguments, model), = compiled
            assert target.model is model, "the copy FIRST was timed with is the one loaded: compiled once"
            assert arguments[3] is None, "no compiled blob is written before the first race: the later tuning writes it"
            assert target.untuned and target.untimed and server.untimed() == [target]
            assert target.settings() == target.settings(speculative=True) == tuning.FIRST
            learned, first = LearnedState(), target.model
            assert learned.about(target).compiled_with == tuning.FIRST
            learned.about(target).call_costs.observe(2, 0.5 * target.curve.seconds[2], last_width=2)

            with pytest.raises(Cancelled):
                target.time_curves(stopped=lambda: True)
            assert target.untuned and target.model is first and target.settings() == tuning.FIRST

            # The others timed, and one of them quicker at everything: compiled and run with from now on.
            other = next(name for name in tuning.CANDIDATES if name != tuning.FIRST)
            quicker = {name: CallCurve({w: 0.5 * s for w, s in target.tuning.curves[tuning.FIRST].seconds.items()},
                                       calibration.machine()) for name in tuning.CANDIDATES}
            monkeypatch.setattr(registry, "tune", lambda *args, **kwargs: tuning.Tuning(other, other, quicker))
            target.time_curves()
            assert not target.untuned and not target.untimed and server.untimed() == []
            assert target.model is not first and target.settings() == target.settings(speculative=True) == other
            assert target.model.properties.items() >= compile_properties(DEFAULT_PRECISION, "CPU", None, tuning.CANDIDATES[other]).items()
            memory = learned.about(target)
            assert memory.compiled_with == other and not memory.call_costs.timed(2), "its calls cost anew"
            assert generate("hello", target, prompt_lookup=True, max_new_tokens=8, learned=learned).stats.compiled_with == other

            # The next start finds the plugin's own settings timed: it times the rest before it races.
            monkeypatch.setattr(registry, "tune", tune)
            timed.clear()
            again = load_model(key, curves_later=True)
            assert timed == [None] and not again.untuned and len(again.tuning.curves) >= 2
        finally:
            (tiny_models_dir / "calibration-tuned-later.json").unlink(missing_ok=True)


def test_without_room_for_another_copy_a_first_start_keeps_the_plugins_own_settings(tiny_checkpoints, tiny_models_dir,
                                                                                    monkeypatch):
    """Timing the other settings later compiles each beside the copy in use: where memory holds no
    second copy (a 4 GB container), the target keeps tuning.FIRST's until the next start, and says so."""
    key = ModelKey(str(tiny_checkpoints[0]), "fp32", DEFAULT_PRECISION)
    monkeypatch.setattr(calibration, "_FILE", "calibration-no-room.json")  # nothing kept yet
    with models_dir_at(tiny_models_dir):
        try:
            target = registry.ModelRegistry(curves_later=True).get(key)
            first, said = target.model, []
            monkeypatch.setattr(registry, "available_bytes", lambda: 2 * weigh.LOAD_MEMORY_FACTOR * target.size_bytes - 1)
            monkeypatch.setattr(registry, "tune", lambda *args, **kwargs: pytest.fail("timed without room"))
            target.time_curves(progress=lambda message, fraction: said.append(message))
            assert not target.untuned and target.model is first and target.settings() == tuning.FIRST
            assert any(message.startswith(f"Not enough memory to time {target.ref}'s other settings") for message in said)
        finally:
            (tiny_models_dir / "calibration-no-room.json").unlink(missing_ok=True)


def test_a_whole_curve_timed_later_replaces_only_what_no_generation_timed():
    costs = CallCosts.calibrated({1: STEP, 2: STEP, 4: 1.5 * STEP})
    costs.observe(2, 0.9 * STEP, last_width=2)
    costs.recalibrate({1: 1.1 * STEP, 2: 1.2 * STEP, 3: 1.3 * STEP, 4: 1.4 * STEP, 9: 3 * STEP})
    assert costs.timed(2) and costs.steady(2) == pytest.approx(0.7 * STEP + 0.3 * 0.9 * STEP)
    assert not costs.timed(1) and costs.steady(1) == pytest.approx(1.1 * STEP)
    assert costs.steady(3) == pytest.approx(1.3 * STEP) and costs.steady(4) == pytest.approx(1.4 * STEP)
    assert costs.steady(9) == pytest.approx(3 * STEP) and not costs.timed(9)


def test_memory_left_is_the_machines_or_less_where_a_cgroup_limits_the_process(tmp_path, monkeypatch):
    from spec.models import memory

    def layout(own: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "fs" / name).write_text(text)
        (tmp_path / "own").write_text(own)
        monkeypatch.setattr(memory, "_CGROUPS", tmp_path / "fs")
        monkeypatch.setattr(memory, "_OWN_CGROUPS", tmp_path / "own")

    layout("0::/space\n", {"space/memory.max": "4000000000\n", "space/memory.current": "2500000000\n"})  # v2
    assert memory._cgroup_room() == 1_500_000_000 and memory.available_bytes() <= 1_500_000_000
    layout("0::/space\n", {"space/memory.stat": "anon 1500000000\ninactive_file 1000000000\n"})  # files read long ago: the kernel's to drop
    assert memory._cgroup_room() == 2_500_000_000
    layout("7:pids:/\n4:memory:/job\n", {"memory/job/memory.limit_in_bytes": "9223372036854771712",
                                           "memory/job/memory.usage_in_bytes": "100"})  # v1, no limit
    assert memory._cgroup_room() is None and memory.available_bytes() > 0
    layout("0::/space\n", {"space/memory.max": "max\n", "space/memory.current": "1\n"})
    assert memory._cgroup_room() is None
    # In a container, /proc says /docker/<id> and its own cgroup is mounted as the root.
    layout("4:memory:/docker/abc\n", {"memory/memory.limit_in_bytes": "16000000000", "memory/memory.usage_in_bytes": "6000000000"})
    assert memory._cgroup_room() == 10_000_000_000
