"""The engine's front door in the field's shape: `generate` returns the whole answer, `stream` yields
Steps; plain decoding unless a draft model or prompt lookup is given; settings as keywords."""
from __future__ import annotations

import re

import pytest

import spec
from spec.config import DRAFT_MODEL, HYBRID, PROMPT_LOOKUP, GenerationConfig, ModelKey
from spec.decoding.engine import generate, stream
from spec.decoding.generation import GenerationResult, Step
from spec.decoding.plugins import PLUGINS
from spec.models.registry import load_model, model_key
from tests.conftest import models_dir_at

PROMPT = "Hello world, hello world, hello"


def test_the_front_door_exports_the_api():
    assert spec.generate is generate and spec.stream is stream
    assert spec.GenerationResult is GenerationResult and spec.Step is Step and spec.load_model is load_model


def test_generate_decodes_plainly_by_default(tiny_pairs):
    target, _ = tiny_pairs["llama"]
    result = generate(PROMPT, target, max_new_tokens=12)
    assert isinstance(result, GenerationResult) and result.drafter is None
    assert result.stats.drafted == 0 and result.stats.drafted_by is None and result.stats.verify_calls == 0
    assert result.stats.new_tokens == len(result.token_ids) == len(result.kinds) > 0
    assert set(result.kinds) == {"target"} and str(result) == result.text


@pytest.mark.parametrize("asked, drafter, drafted_by", [
    (dict(draft=True), DRAFT_MODEL, "draft model"),
    (dict(prompt_lookup=True), PROMPT_LOOKUP, "prompt lookup"),
    (dict(draft=True, prompt_lookup=True), HYBRID, "hybrid: draft model or prompt lookup"),
    (dict(draft=True, drafter=HYBRID), HYBRID, "hybrid: draft model or prompt lookup"),
])
def test_a_draft_or_prompt_lookup_turns_speculation_on_and_keeps_the_greedy_text(tiny_pairs, asked, drafter, drafted_by):
    target, draft = tiny_pairs["llama"]
    plain = generate(PROMPT, target, max_new_tokens=24)
    # Fixed K: dynamic K may rightly take only plain steps on tiny models (more so on a loaded machine).
    result = generate(PROMPT, target, max_new_tokens=24, dynamic_k=False, **{**asked, **({"draft": draft} if "draft" in asked else {})})
    assert result.drafter == drafter and result.stats.drafted_by == drafted_by
    assert result.stats.drafted > 0 and result.stats.verify_calls > 0
    assert result.token_ids == plain.token_ids and result.text == plain.text


def test_keyword_settings_override_a_config_and_leave_it_as_it_was(tiny_pairs):
    target, _ = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=40, temperature=1.0, top_k=4, seed=3)
    by_keywords = generate(PROMPT, target, max_new_tokens=7, temperature=1.0, top_k=4, seed=3)
    by_both = generate(PROMPT, target, config, max_new_tokens=7)
    assert config.max_new_tokens == 40, "the caller's config was changed"
    assert by_keywords.token_ids == by_both.token_ids and len(by_both.token_ids) <= 7
    assert generate(PROMPT, target, config).token_ids[:len(by_both.token_ids)] == by_both.token_ids
    assert GenerationConfig(stop_strings="###").stop_strings == ("###",)  # one string, not three characters


def test_the_whole_answer_is_what_the_stream_yields_and_each_step_keeps_its_own_stats(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    steps = list(stream(PROMPT, target, draft=draft, max_new_tokens=24, num_assistant_tokens=3, dynamic_k=False))
    result = generate(PROMPT, target, draft=draft, max_new_tokens=24, num_assistant_tokens=3, dynamic_k=False)
    assert result.token_ids == [t for step in steps for t in step.token_ids]
    assert result.text == "".join(step.text for step in steps)
    made = 0
    for step in steps:  # a stats object shared by all steps would show the last step's count on each
        made += len(step.token_ids)
        assert step.stats.new_tokens == made
    assert len({id(step.stats) for step in steps}) == len(steps)
    assert steps[0].stats.accepted_histogram == [] and sum(steps[-1].stats.accepted_histogram) == steps[-1].stats.verify_calls
    with pytest.raises(AttributeError):
        steps[0].text = "changed"  # a Step is a record of what happened


@pytest.mark.parametrize("call, message", [
    (dict(max_new_tokens=0), "max_new_tokens must be an integer from 1 to 8192, got 0"),
    (dict(temperature="hot"), "temperature must be a number from 0 to 10, got 'hot'"),
    (dict(top_p=1.5), r"top_p must be in \(0, 1\], got 1.5"),
    (dict(max_matching_ngram_size=0), "max_matching_ngram_size must be an integer from 1 to 16, got 0"),
    (dict(mode="speculative"), "unknown generation setting.* mode: the settings are max_new_tokens"),
    (dict(assistant_model=None), "unknown generation setting.* assistant_model"),
    (dict(drafter="fast"), re.escape(f"drafter must be one of {', '.join(PLUGINS)}, got 'fast'")),
    (dict(drafter=HYBRID), "the hybrid drafter needs a draft model"),
    (dict(prompt_lookup="yes"), "prompt_lookup must be True or False, got 'yes'"),
    (dict(draft="owner/name"), "draft must be a model from load_model.*'owner/name'"),
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt=["Hello"]), "prompt must be a string, got list"),
    (dict(prompt="word " * 600), "the prompt is [0-9,]+ tokens .* would not fit the model's context of 512 tokens"),
    (dict(max_new_tokens=500), "with max_new_tokens=500 it would not fit the model's context of 512 tokens"),
    (dict(cancel=True), r"cancel must be a threading.Event \(set it to stop\) or None, got bool"),
    (dict(learned="x"), "learned must be a LearnedState or None, got str"),
    (dict(history=[]), "history must be an AnswerHistory or None, got list"),
    (dict(config={"max_new_tokens": 4}), "config must be a GenerationConfig, got dict"),
    (dict(target=None), r"target must be a model from load_model\(...\), got NoneType: load it first"),
    (dict(prompt="caf\ud800"), r"prompt is not valid text at character 3 \('\\ud800', half of a character\)"),
    (dict(temperature=1e-320), r"temperature must be 0 \(greedy\) or from 0.01 to 10"),
    (dict(target="owner/name"), r"target must be a model from load_model.*load_model\('owner/name'\)"),
])
def test_bad_input_is_a_value_error_naming_the_offending_value(tiny_pairs, call, message):
    target, _ = tiny_pairs["llama"]
    arguments = {"prompt": PROMPT, "target": target, **call}
    prompt, target = arguments.pop("prompt"), arguments.pop("target")
    for entry in (generate, stream):
        with pytest.raises(ValueError, match=message):
            entry(prompt, target, **arguments)


def test_contradictory_drafters_are_refused(tiny_pairs):
    target, draft = tiny_pairs["llama"]
    with pytest.raises(ValueError, match=r"drafter='prompt-lookup' drafts without a model, but draft="):
        generate(PROMPT, target, draft=draft, drafter=PROMPT_LOOKUP)
    with pytest.raises(ValueError, match="drafter='draft-model' drafts with the model alone, but prompt_lookup=True"):
        generate(PROMPT, target, draft=draft, prompt_lookup=True, drafter=DRAFT_MODEL)


def test_load_model_takes_a_plain_reference(tiny_checkpoints, tiny_models_dir):
    with models_dir_at(tiny_models_dir):
        model = load_model(str(tiny_checkpoints[0]), weight_format="fp32", precision="f32")
    assert model.key == ModelKey(str(tiny_checkpoints[0]), "fp32", "f32", "CPU")
    assert generate(PROMPT, model, max_new_tokens=3).token_ids


def test_a_model_reference_becomes_a_key_with_the_device_from_the_environment(monkeypatch):
    monkeypatch.delenv("SPEC_DEVICE", raising=False)
    assert model_key("owner/name") == ModelKey("owner/name", "int8", "default", "CPU")
    monkeypatch.setenv("SPEC_DEVICE", "GPU")
    assert model_key("owner/name").device == "GPU" and model_key("owner/name", device="NPU").device == "NPU"
    key = ModelKey("owner/name", "int4")
    assert model_key(key) is key
    with pytest.raises(ValueError, match="a ModelKey carries its own settings: set precision in it"):
        model_key(key, precision="f32")
    with pytest.raises(ValueError, match="weight_format must be one of int8, int4, fp32, got 'int3'"):
        model_key("owner/name", weight_format="int3")
    with pytest.raises(ValueError, match="precision must be one of f32, default, got 'bf16'"):
        model_key("owner/name", precision="bf16")
    with pytest.raises(ValueError, match="model must be a Hub id.*got int 7"):
        model_key(7)
    with pytest.raises(ValueError, match="precision must be one of f32, default, got 'fp32'"):
        model_key(ModelKey("owner/name", precision="fp32"))  # a key's own settings are checked as much, before any download
    with pytest.raises(ValueError, match="device must be a name such as 'CPU'"):
        model_key("owner/name", device=0)  # not taken for "unset"


class _TwoGpus:  # OpenVINO's Core on a machine with two GPUs beside its CPU
    available_devices = ["CPU", "GPU.0", "GPU.1"]


def test_a_device_openvino_does_not_see_is_named_before_the_model_is_fetched(monkeypatch):
    from spec.models import runtime

    monkeypatch.setattr(runtime, "core", _TwoGpus)
    for device in ("CPU", "GPU", "GPU.1", "AUTO:GPU,CPU", "HETERO:GPU.0,CPU"):
        runtime.check_device(device)
    with pytest.raises(ValueError, match=r"no device 'NPU' on this machine: use one of CPU, GPU.0, GPU.1$"):
        runtime.check_device("NPU")
    with pytest.raises(ValueError, match=r"no device 'gpu' on this machine \(GPU: names are upper case\)"):
        runtime.check_device("gpu")
    with pytest.raises(ValueError, match=r"does not take 'GPU:1': name one device as it lists them \(CPU, GPU.0, GPU.1\)"):
        runtime.check_device("GPU:1")
    # load_model says so before it looks for the model: this one is on no Hub and in no cache.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="no device 'NPU'"):
        load_model("owner/not-fetched", device="NPU")


def test_the_server_stops_at_start_up_on_a_device_or_a_format_it_cannot_use(monkeypatch):
    from spec.models import runtime
    from spec.serving.settings import ServerSettings

    monkeypatch.setattr(runtime, "core", _TwoGpus)
    assert ServerSettings.from_env({"SPEC_DEVICE": "GPU"}).device == "GPU"
    with pytest.raises(SystemExit, match="SPEC_DEVICE='NPU': OpenVINO finds no device 'NPU'"):
        ServerSettings.from_env({"SPEC_DEVICE": "NPU"})
    with pytest.raises(SystemExit, match="SPEC_APP_WEIGHT_FORMAT must be one of int8, int4, fp32, got 'int3'"):
        ServerSettings.from_env({"SPEC_APP_WEIGHT_FORMAT": "int3"})
    with pytest.raises(SystemExit, match="SPEC_APP_PRECISION must be one of f32, default, got 'bf16'"):
        ServerSettings.from_env({"SPEC_APP_PRECISION": "bf16"})


def test_a_visitor_names_the_servers_folders_only_where_nobody_else_can_open_the_page():
    from spec.serving.settings import ServerSettings

    here = ServerSettings.from_env({})
    assert here.local_models_allowed("127.0.0.1", share=False)
    assert not here.local_models_allowed("0.0.0.0", share=False)  # a workshop's network
    assert not here.local_models_allowed("127.0.0.1", share=True)  # a public link
    assert not ServerSettings.from_env({"SPACE_ID": "a/b"}).local_models_allowed("127.0.0.1", share=False)
    assert ServerSettings.from_env({"SPEC_ALLOW_LOCAL_MODELS": "1"}).local_models_allowed("0.0.0.0", share=True)  # told so
    assert not ServerSettings.from_env({"SPEC_ALLOW_LOCAL_MODELS": "0"}).local_models_allowed("127.0.0.1", share=False)


def test_a_scripts_numpy_numbers_are_settings_like_pythons():
    """K swept with np.arange, a temperature from an np.float32 array: taken, and kept as Python's numbers."""
    import dataclasses
    import json

    import numpy as np

    config = GenerationConfig(max_new_tokens=np.int64(5), num_assistant_tokens=np.int32(3), temperature=np.float32(0.5)).validate()
    assert (config.max_new_tokens, config.num_assistant_tokens, config.temperature) == (5, 3, 0.5)
    assert json.dumps(dataclasses.asdict(config))  # what a result records stays JSON
    with pytest.raises(ValueError, match="max_new_tokens must be an integer"):
        GenerationConfig(max_new_tokens=np.bool_(True)).validate()
