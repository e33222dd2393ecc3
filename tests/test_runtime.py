"""The KV cache: trimming and continuing must equal a fresh prefill; one cache per generation."""
import numpy as np
import pytest

from spec.config import DEFAULT_PRECISION, F32
from spec.models import runtime
from spec.models.runtime import _MAX_DEAD_SLOTS, cpu_class, cpu_has_amx, cpu_model, precision_config


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_trim_then_continue_equals_fresh_prefill(tiny_pairs, arch):
    target, _ = tiny_pairs[arch]
    tokens = [5, 40, 77, 120, 9, 300, 41, 42, 43, 44]
    cache = target.model.new_cache()
    cache.forward(tokens[:6])
    cache.forward([200, 201, 202])  # rejected drafts
    cache.trim(6)
    assert cache.length == 6
    continued = cache.forward(tokens[6:])

    fresh = target.model.new_cache().forward(tokens)
    np.testing.assert_allclose(continued, fresh[6:], atol=1e-4, rtol=1e-4)


def test_caches_of_one_compiled_model_are_independent(tiny_pairs):
    target, _ = tiny_pairs["llama"]
    a, b = target.model.new_cache(), target.model.new_cache()
    a.forward([5, 6, 7])
    b.forward([100, 101])
    one = a.forward([8])
    a.reset()
    a.forward([5, 6, 7])
    np.testing.assert_allclose(a.forward([8]), one, atol=1e-5)


def test_a_cache_knows_how_wide_another_caches_call_of_its_model_was_since_its_own_last(tiny_pairs):
    """Caches of one compiled model share its prepared shapes: the race's two lanes learn from this
    which of their calls came right after the other's, and of which width, so whether it paid for a
    change of width (bench.studies.other_lane)."""
    target, _ = tiny_pairs["llama"]
    a, b = target.model.new_cache(), target.model.new_cache()
    a.forward([5, 6, 7])
    assert a.others_width is None
    b.forward([100, 101])
    assert a.others_width == 2 and b.others_width is None, "the width of the other's call: what the next one switches from"
    a.forward([8])
    assert a.others_width is None and b.others_width == 1


def test_trim_rejects_lengths_it_does_not_hold(tiny_pairs):
    cache = tiny_pairs["llama"][0].model.new_cache()
    cache.forward([1, 2, 3])
    with pytest.raises(ValueError, match="cannot trim"):
        cache.trim(5)


def test_keeping_only_the_last_logits_changes_nothing_but_the_work(tiny_pairs):
    target, _ = tiny_pairs["llama"]
    assert "logits_to_keep" in target.model.input_names, "the LM head was not found: prefill computes every row"
    tokens = [5, 40, 77, 120, 9, 300]
    every = target.model.new_cache().forward(tokens)
    last_two = target.model.new_cache().forward(tokens, keep=2)
    assert every.shape[0] == 6 and last_two.shape[0] == 2
    np.testing.assert_allclose(last_two, every[-2:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_many_roll_backs_then_compaction_equal_a_fresh_prefill(tiny_pairs, arch):
    """Rolled-back tokens are masked, then compacted away: logits must not notice either."""
    target, _ = tiny_pairs[arch]
    rng = np.random.default_rng(0)
    kept = [5, 40, 77]
    cache = target.model.new_cache()
    cache.forward(kept)
    compacted = False
    for _ in range(_MAX_DEAD_SLOTS // 4 + 8):  # rounds of 4 rejected drafts: past the compaction threshold
        token = int(rng.integers(4, 300))
        cache.forward([token, *rng.integers(4, 300, size=4).tolist()])
        slots_before = len(cache._slots)
        cache.trim(len(kept) + 1)
        compacted |= len(cache._slots) < slots_before
        kept.append(token)
        assert cache.length == len(kept)
    assert compacted, "the cache was never compacted: the test checks too little"
    continued = cache.forward([11, 12])
    fresh = target.model.new_cache().forward(kept + [11, 12])
    np.testing.assert_allclose(continued, fresh[-2:], atol=1e-4, rtol=1e-4)


def test_a_finished_generation_hands_its_request_to_the_next_one_empty(tiny_pairs):
    """Infer requests are reused (warm buffers), but a reused cache starts as empty as a new one."""
    target, _ = tiny_pairs["llama"]
    first = target.model.new_cache()
    first.forward([5, 40, 77, 120])
    request = first._request
    first.release()
    second = target.model.new_cache()
    assert second._request is request and second.length == 0
    other = target.model.new_cache()  # a second live cache never gets the same request
    assert other._request is not request
    np.testing.assert_allclose(second.forward([9, 300]), other.forward([9, 300]), atol=1e-5)
    with pytest.raises(ValueError, match="released"):
        first.forward([1])  # a released cache cannot be used by mistake
    second.release()
    other.release()


def test_a_stream_dropped_before_its_first_step_gives_its_caches_back(tiny_pairs):
    """A generator never started never runs its `finally`: the caches it borrowed (warm infer
    requests) must still go back to their pools when it is dropped, as when it ends or is closed."""
    from spec.decoding.engine import generate, stream

    target, draft = tiny_pairs["llama"]
    models = {id(m): m for m in (target.model, target.for_rounds()[0], draft.model)}.values()
    for drafted in ({}, {"draft": draft}):
        generate("The quick brown fox", target, max_new_tokens=3, **drafted)  # the pools hold warm requests
        pooled = [len(model._idle) for model in models]
        steps = stream("The quick brown fox", target, max_new_tokens=3, **drafted)
        assert [len(model._idle) for model in models] != pooled, "the stream borrowed no cache: the test checks nothing"
        del steps
        assert [len(model._idle) for model in models] == pooled, f"dropped unstarted, it kept its caches ({drafted or 'plain'})"
        finished = stream("The quick brown fox", target, max_new_tokens=3, **drafted)
        list(finished)
        del finished  # ended, then dropped: given back once, not twice
        assert [len(model._idle) for model in models] == pooled


def test_a_large_generation_gives_its_memory_back_instead_of_pooling_it(tiny_pairs):
    """A long prompt grows the request's state and the model's scratch buffers: neither is kept."""
    from spec.models.runtime import _POOL_MAX_WIDTH

    target, _ = tiny_pairs["llama"]
    large = target.model.new_cache()
    large.forward(list(range(4, 4 + _POOL_MAX_WIDTH + 1)), keep=1)
    request = large._request
    large.release()
    assert not target.model._grown, "the compiled model still holds the large call's buffers"
    after = target.model.new_cache()
    assert after._request is not request, "a request that grew large went back to the pool"
    np.testing.assert_allclose(after.forward([9, 300]), target.model.new_cache().forward([9, 300]), atol=1e-5)
    after.release()


def test_the_cpu_class_is_the_widest_vector_unit_openvino_sees(tmp_path, monkeypatch):
    monkeypatch.delenv("SPEC_CPU_CLASS", raising=False)
    flags = {"AMX": "avx2 avx512f amx_tile", "AVX-512": "avx2 avx_vnni avx512f avx512_vnni", "AVX2 + VNNI": "avx2 avx_vnni",
             "AVX2": "fma avx2", "other": "sse4_2"}
    for name, listed in flags.items():
        (tmp_path / name).write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu {listed}\n")
        assert cpu_class(tmp_path / name) == name
    assert cpu_class(tmp_path / "missing") == "other"
    monkeypatch.setenv("SPEC_CPU_CLASS", "AVX2_VNNI")
    assert cpu_class(tmp_path / "AMX") == "AMX", "the variable alone, without the CPUID mask, names nothing"
    monkeypatch.setenv("LD_PRELOAD", "/somewhere/cpuid_mask.so")
    assert cpu_class(tmp_path / "AMX") == "AVX2 + VNNI"


def test_a_bare_cpu_name_is_told_apart_by_its_family_and_model(tmp_path):
    """Under KVM a Zen 4 and a Zen 5 both say "AMD EPYC", with steps twofold apart: a figure or a kept
    timing named only so could be taken for the other's."""
    block = "processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: {name}\n\n"
    zen5, zen4 = tmp_path / "zen5", tmp_path / "zen4"
    zen5.write_text(block.format(n=0, family=26, model=2, name="AMD EPYC") + block.format(n=1, family=26, model=2, name="AMD EPYC"))
    zen4.write_text(block.format(n=0, family=25, model=17, name="AMD  EPYC"))
    assert cpu_model(zen5) == "AMD EPYC (family 26 model 2)"
    assert cpu_model(zen4) == "AMD EPYC (family 25 model 17)"
    named = tmp_path / "named"
    named.write_text(block.format(n=0, family=6, model=143, name="Intel(R) Xeon(R) Platinum 8480+"))
    assert cpu_model(named) == "Intel(R) Xeon(R) Platinum 8480+", "a name with its number says enough"
    assert cpu_model(tmp_path / "missing")  # elsewhere than Linux: what Python knows, never empty


def test_the_default_precision_computes_in_f32_only_where_the_cpu_has_amx(tmp_path, monkeypatch):
    amx, avx512 = tmp_path / "amx", tmp_path / "avx512"
    amx.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n")
    avx512.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n")
    assert cpu_has_amx(amx) and not cpu_has_amx(avx512) and not cpu_has_amx(tmp_path / "missing")
    for has_amx in (True, False):
        monkeypatch.setattr(runtime, "cpu_has_amx", lambda has_amx=has_amx: has_amx)
        config = precision_config(DEFAULT_PRECISION)
        assert config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "128"
        assert config.get("INFERENCE_PRECISION_HINT") == ("f32" if has_amx else None)
        assert config["ENABLE_CPU_PINNING"] is True, "the server's threads must not push OpenVINO's off their cores"
    exact = precision_config(F32)
    assert exact["INFERENCE_PRECISION_HINT"] == "f32" and exact["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "0"
    with pytest.raises(ValueError, match="precision must be one of"):
        precision_config("bf16")
