"""Draft and target must speak the same vocabulary: the same token -> id mapping and special tokens."""
from __future__ import annotations

from spec.errors import ModelError

# The special tokens decoding relies on. Padding is not among them: one sequence is never padded,
# and draft/target pairs often differ only there.
_SPECIAL = ("bos_token_id", "eos_token_id", "unk_token_id")


def shared_vocab_size(target_ref: str, target_tokenizer, draft_ref: str, draft_tokenizer) -> int:
    """Check the pair can share tokens; return how many ids both may use.

    Embedding sizes may differ by padding (151936 vs 152064): that is fine, because the samplers
    never produce an id at or past the tokenizer's real vocabulary.
    """
    target_vocab, draft_vocab = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if target_vocab != draft_vocab:
        differing = sorted(set(target_vocab.items()) ^ set(draft_vocab.items()), key=lambda item: item[1])[:3]
        examples = ", ".join(f"{token!r}->{index}" for token, index in differing)
        raise ModelError(
            f"The draft {draft_ref} and the target {target_ref} use different vocabularies "
            f"({len(draft_vocab)} vs {len(target_vocab)} tokens; e.g. {examples}). "
            "Pick a draft from the same model family, or use prompt lookup."
        )
    for name in _SPECIAL:
        ours, theirs = getattr(target_tokenizer, name, None), getattr(draft_tokenizer, name, None)
        if ours != theirs:
            raise ModelError(
                f"The draft {draft_ref} and the target {target_ref} disagree on {name.removesuffix('_id')} "
                f"({theirs} vs {ours}). Pick a draft from the same model family, or use prompt lookup."
            )
    return len(target_vocab)
