"""A draft head that scores only the target's most frequent tokens (FR-Spec): cheaper draft steps,
the same output."""
from __future__ import annotations

import numpy as np
import pytest

from spec.config import GenerationConfig, ModelKey
from spec.decoding.engine import encode_prompt, generate, stream
from spec.decoding.generation import ACCEPTED, CORRECTION
from spec.errors import ModelError
from spec.models import draft_vocabulary
from spec.models.draft_vocabulary import frequent_token_ids
from tests.conftest import assert_follows, exact_first_tokens, models_dir_at
from tests.tiny_models import build_checkpoint

PROMPT = "def add(a, b):\n    return a + b\n\ndef add("


@pytest.fixture(scope="module")
def tokenizer(tiny_checkpoints):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_checkpoints[0])


def test_the_subset_is_the_most_used_tokens_and_always_the_special_ones(tokenizer, tmp_path, monkeypatch):
    with models_dir_at(tmp_path):
        ids = frequent_token_ids(tokenizer, 80)
        assert len(ids) == 80 and np.all(np.diff(ids) > 0)
        assert set(tokenizer.all_special_ids) <= set(ids.tolist())
        common = tokenizer(" the", add_special_tokens=False).input_ids + tokenizer("e", add_special_tokens=False).input_ids
        assert set(common) <= set(ids.tolist())
        rare = tokenizer("\x07", add_special_tokens=False).input_ids  # a control character: no source file has it
        assert not set(rare) & set(ids.tolist())
        monkeypatch.setattr(draft_vocabulary, "_rank", lambda *a: pytest.fail("counted again instead of read from disk"))
        np.testing.assert_array_equal(frequent_token_ids(tokenizer, 80), ids)
    for size in (0, len(tokenizer), 2.5):
        with pytest.raises(ValueError, match="draft vocabulary"):
            frequent_token_ids(tokenizer, size)


def test_a_drafts_tokens_are_counted_beside_its_conversion_and_once(tiny_checkpoints, tmp_path, monkeypatch):
    """CountAhead counts from the source's tokenizer on a thread while the model converts, and the
    load reads the count kept; where that count could not run, finishing counts from the converted model."""
    counted, said, rank = [], [], draft_vocabulary._rank
    monkeypatch.setattr(draft_vocabulary, "_rank", lambda tokenizer, size: counted.append(size) or rank(tokenizer, size))
    with models_dir_at(tmp_path):
        ahead = draft_vocabulary.CountAhead("tiny", 80, lambda message, fraction: said.append(message))
        ahead.start(tiny_checkpoints[0])
        ahead.finish(tiny_checkpoints[0])
        assert counted == [80] and said[0] == draft_vocabulary.choosing("tiny", 80)
        ahead = draft_vocabulary.CountAhead("tiny", 81, lambda *a: None)
        ahead.start(tmp_path / "no tokenizer here")
        ahead.finish(tiny_checkpoints[0])
        assert counted == [80, 81]
        ahead = draft_vocabulary.CountAhead("tiny", 82, lambda *a: None)
        with pytest.raises(ModelError, match="Could not count tiny's most frequent tokens"):
            ahead.finish(tmp_path / "no tokenizer here")


@pytest.mark.parametrize("arch, weight_format", [("llama", "fp32"), ("qwen2", "fp32"), ("llama", "int8"), ("qwen2", "int8")])
def test_a_restricted_head_scores_its_tokens_exactly_as_the_whole_head(tmp_path, tiny_models_dir, arch, weight_format):
    """Untied and tied heads (qwen2 shares the embedding's constants, which must keep every row),
    plain and INT8-compressed weights."""
    from spec.models.registry import load_model

    path = build_checkpoint(tmp_path / arch, arch=arch, seed=3)
    with models_dir_at(tiny_models_dir):
        whole = load_model(ModelKey(str(path), weight_format, "f32"))
        part = load_model(ModelKey(str(path), weight_format, "f32", vocabulary=60))
    assert part.model.vocab_size == 60 and len(part.token_ids) == 60
    assert part.vocab_size == whole.vocab_size  # the ids it may produce are still the tokenizer's
    prompt = whole.tokenizer("The quick brown fox", add_special_tokens=False).input_ids
    caches = whole.model.new_cache(), part.model.new_cache()
    try:
        logits = [cache.forward(prompt) for cache in caches]
        np.testing.assert_allclose(logits[0][:, part.token_ids], logits[1], rtol=1e-5, atol=1e-5)
        more = [cache.forward([5, 6]) for cache in caches]  # the embedding still reads every row
        np.testing.assert_allclose(more[0][:, part.token_ids], more[1], rtol=1e-5, atol=1e-5)
    finally:
        for cache in caches:
            cache.release()


@pytest.fixture(scope="module")
def pruned_pair(tiny_pairs, tiny_models_dir):
    """The llama pair's target, and its draft scoring only a third of the vocabulary."""
    from spec.models.registry import load_model

    target, draft = tiny_pairs["llama"]
    with models_dir_at(tiny_models_dir):
        pruned = load_model(ModelKey(str(draft.key.ref), "fp32", "f32", vocabulary=100))
    return target, pruned


def test_greedy_with_a_restricted_draft_equals_greedy_autoregressive(pruned_pair):
    target, draft = pruned_pair
    config = GenerationConfig(max_new_tokens=40, num_assistant_tokens=4, dynamic_k=False)
    want = generate(PROMPT, target, config).token_ids
    steps = list(stream(PROMPT, target, config, draft=draft))
    assert [t for step in steps for t in step.token_ids] == want
    assert steps[-1].stats.accepted > 0, "the restricted draft kept nothing: the test compares too little"


def test_sampled_with_a_restricted_draft_follows_the_target(pruned_pair):
    """q is zero outside the subset: the target's tokens there come from the residual max(0, p - q)."""
    target, draft = pruned_pair
    exact = exact_first_tokens(target, encode_prompt(target.tokenizer, PROMPT))
    outside = sum(prob for outcome, prob in exact.items() if not set(outcome) <= set(draft.token_ids.tolist()))
    assert outside > 0.05, "the target rarely writes a token outside the subset: the test checks too little"
    runs, counts, corrected = 1500, {}, 0
    for seed in range(runs):
        config = GenerationConfig(seed=seed, temperature=1.0, top_k=4, num_assistant_tokens=2, dynamic_k=False, max_new_tokens=4)
        steps = list(stream(PROMPT, target, config, draft=draft))
        tokens = tuple(t for step in steps for t in step.token_ids)[:3]
        counts[tokens] = counts.get(tokens, 0) + 1
        corrected += CORRECTION in steps[1].kinds and ACCEPTED not in steps[1].kinds
    assert corrected > runs * 0.05
    assert_follows(counts, exact, runs)


def test_a_restricted_int4_head_keeps_its_packed_rows(tmp_path, tiny_models_dir):
    """INT4 weights come two to a byte: each kept row must be the row's own bytes."""
    import nncf
    import openvino as ov

    from spec.models.registry import load_model
    from spec.models.runtime import compile_model

    path = build_checkpoint(tmp_path / "llama", arch="llama", seed=4)
    with models_dir_at(tiny_models_dir):
        whole = load_model(ModelKey(str(path), "fp32", "f32"))
    model = nncf.compress_weights(ov.Core().read_model(str(whole.resolved.path / "openvino_model.xml")),
                                  mode=nncf.CompressWeightsMode.INT4_ASYM, group_size=16, ratio=1.0, all_layers=True)
    assert any(op.get_element_type() == ov.Type.u4 and op.get_output_shape(0)[0] == whole.model.vocab_size
               for op in model.get_ops() if op.get_type_name() == "Constant"), "the head is not INT4: the test checks too little"
    xml = tmp_path / "int4" / "openvino_model.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    token_ids = np.arange(3, whole.model.vocab_size, 5)
    caches = compile_model(xml, "f32").new_cache(), compile_model(xml, "f32", token_ids=token_ids).new_cache()
    prompt = [10, 11, 12, 13]
    logits = [cache.forward(prompt) for cache in caches]
    np.testing.assert_allclose(logits[0][:, token_ids], logits[1], rtol=1e-5, atol=1e-5)


def test_a_loaded_draft_has_paid_its_first_calls_one_off_costs(pruned_pair, tiny_models_dir):
    """A compiled model's first call pays a one-off set-up (0.7 s for the 0.5B draft's first read of
    a prompt, then 42 ms): load_model runs it, or the first generation would be charged that and the
    hybrid would learn it as what reading a prompt costs. A draft is not timed at load (no curve), so
    only this warm-up calls it, and hands its warm request to the first generation."""
    from spec.models.registry import load_model

    _, pruned = pruned_pair
    with models_dir_at(tiny_models_dir):
        draft = load_model(pruned.key)  # loaded afresh: nothing has run on it yet
    assert draft.curve is None
    assert draft.model.calls >= 2 and len(draft.model._idle) == 1
