"""Whether a draft and its target speak the same vocabulary: the same token -> id mapping and the
special tokens decoding relies on. A pair that does shares token ids; one that does not drafts
across tokenizers (spec.decoding.cross_tokenizer), through text."""
from __future__ import annotations

# The special tokens decoding relies on. Padding is not among them: one sequence is never padded,
# and draft/target pairs often differ only there.
_SPECIAL = ("bos_token_id", "eos_token_id", "unk_token_id")


def shared_vocab_size(target_tokenizer, draft_tokenizer) -> int | None:
    """How many ids the pair may share, or None when their vocabularies differ.

    Embedding sizes may differ by padding (151936 vs 152064): that is fine, because the samplers
    never produce an id at or past the tokenizer's real vocabulary.
    """
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        return None
    if any(getattr(target_tokenizer, name, None) != getattr(draft_tokenizer, name, None) for name in _SPECIAL):
        return None
    return len(target_tokenizer)
