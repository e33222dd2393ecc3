"""Prompt lookup and the free guesses that keep every verify call at the same width."""
import numpy as np

from spec.decoding.drafters import pad_draft, prompt_lookup


def test_prompt_lookup_copies_what_followed_the_latest_longest_match():
    context = np.array([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3])
    assert prompt_lookup(context, 2).tolist() == [7, 8]  # the 3-gram [1 2 3] last stood before 7 8
    assert prompt_lookup(np.array([4, 5, 6]), 3).tolist() == []


def test_pad_draft_keeps_the_drafts_and_fills_the_width():
    context = [10, 11, 12, 13, 14, 10, 11]
    assert pad_draft(context, np.array([12, 13, 14]), 3).tolist() == [12, 13, 14]
    # One draft, then what followed [10 11 12] earlier in the context.
    assert pad_draft(context, np.array([12]), 5).tolist() == [12, 13, 14, 10, 11]
    # No draft and no match: the last token repeated, still k tokens wide.
    assert pad_draft([1, 2, 3], np.empty(0, dtype=np.int64), 4).tolist() == [3, 3, 3, 3]
    assert pad_draft(context, np.array([12, 13, 14, 15]), 2).tolist() == [12, 13]


def test_a_draft_model_reports_every_call_a_round_makes(tiny_pairs, monkeypatch):
    """Dynamic K prices a round by its draft calls: the count must be the calls made, the catch-up's excepted."""
    from spec.config import GenerationConfig
    from spec.decoding.drafters import DraftModelDrafter
    from spec.decoding.engine import generate

    target, draft = tiny_pairs["llama"]
    seen, real = [], DraftModelDrafter.propose

    def counting(self, context, n, source=None):
        made, forward = [], self.cache.forward
        self.cache.forward = lambda ids, keep=None: made.append(len(ids)) or forward(ids, keep=keep)
        try:
            proposal = real(self, context, n, source)
        finally:
            del self.cache.forward
        seen.append((proposal, len(made)))
        return proposal

    monkeypatch.setattr(DraftModelDrafter, "propose", counting)
    config = GenerationConfig(max_new_tokens=40, num_assistant_tokens=1, dynamic_k=False)  # often all kept
    list(generate("Hello world, hello world, hello", target, config, "speculative", "draft-model", draft))
    assert len(seen) > 3 and all(p.calls + (p.catch_up_seconds > 0) == made for p, made in seen)
    assert any(p.calls > len(p.tokens) for p, _ in seen)  # a round that fed the target's token in a call of its own
