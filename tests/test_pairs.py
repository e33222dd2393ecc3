"""Pairs: a shared vocabulary shares ids (padded embeddings are fine); another one drafts through text."""
import pytest

from spec.config import GenerationConfig
from spec.decoding.engine import generate
from tests.conftest import load_tiny
from tests.tiny_models import build_checkpoint


@pytest.fixture(scope="module")
def odd_models(tmp_path_factory, tiny_models_dir):
    root = tmp_path_factory.mktemp("odd")
    other = build_checkpoint(root / "other-vocab", seed=3, tokenizer_kind="other")
    padded = build_checkpoint(root / "padded", seed=4, vocab_size=400)
    return load_tiny(other, tiny_models_dir), load_tiny(padded, tiny_models_dir)


def test_a_draft_with_another_vocabulary_drafts_across_tokenizers(tiny_pairs, odd_models):
    from spec.decoding.cross_tokenizer import CrossTokenizerDrafter
    from spec.decoding.engine import make_drafter

    target, _ = tiny_pairs["llama"]
    other, _ = odd_models
    config = GenerationConfig(max_new_tokens=16)
    assert isinstance(make_drafter("draft-model", target, other, config, None, "Hello"), CrossTokenizerDrafter)
    want = generate("Hello", target, config).token_ids
    got = generate("Hello", target, config, draft=other).token_ids
    assert got == want


def test_only_the_same_mapping_and_special_tokens_share_ids(tiny_pairs):
    import copy

    from spec.decoding.vocab import shared_vocab_size

    target, _ = tiny_pairs["llama"]
    assert shared_vocab_size(target.tokenizer, copy.deepcopy(target.tokenizer)) == len(target.tokenizer)
    draft_tokenizer = copy.deepcopy(target.tokenizer)
    draft_tokenizer.eos_token = "<pad>"  # same mapping, but the draft would stop on another token
    assert shared_vocab_size(target.tokenizer, draft_tokenizer) is None
    draft_tokenizer = copy.deepcopy(target.tokenizer)
    draft_tokenizer.pad_token = "<unk>"  # padding is never used at batch 1: no reason to refuse
    assert shared_vocab_size(target.tokenizer, draft_tokenizer) == len(target.tokenizer)


def test_padded_embedding_never_yields_ids_past_the_vocabulary(tiny_pairs, odd_models):
    target, _ = tiny_pairs["llama"]
    _, padded = odd_models
    assert padded.model.vocab_size == 400 > padded.vocab_size == len(target.tokenizer)
    config = GenerationConfig(max_new_tokens=30, temperature=1.5, seed=0)
    for first, second in ((padded, target), (target, padded)):
        ar = generate("Hello world", first, config).token_ids
        sp = generate("Hello world", first, config, draft=second).token_ids
        assert max(ar + sp) < len(target.tokenizer)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(temperature=-1.0), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(num_assistant_tokens=0), "num_assistant_tokens"),
    ],
)
def test_bad_settings_name_the_offending_value(tiny_pairs, settings, message):
    target, draft = tiny_pairs["llama"]
    with pytest.raises(ValueError, match=message):
        generate("Hello", target, GenerationConfig(**settings), draft=draft)

