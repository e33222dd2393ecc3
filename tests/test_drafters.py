"""Prompt lookup and the free guesses that keep every verify call at the same width."""
import numpy as np
import pytest

from spec.decoding.drafters import PromptLookupDrafter, find_match, pad_draft, prompt_lookup


def test_prompt_lookup_copies_what_followed_the_latest_longest_match():
    context = np.array([1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3])
    assert prompt_lookup(context, 2).tolist() == [7, 8]  # the 3-gram [1 2 3] last stood before 7 8
    assert prompt_lookup(np.array([4, 5, 6]), 3).tolist() == []


def test_the_match_reaching_furthest_back_wins_over_a_more_recent_short_one():
    """An editor copies the unchanged code on: a 3-gram that also occurs in between (a repeated
    `    return`) must not pull the copy away from its source."""
    source = [50, 51, 52, 1, 2, 3, 60, 61, 62]  # the code being edited, in the prompt
    between = [9, 1, 2, 3, 70, 71]  # the same 3-gram, more recently, followed by something else
    context = np.array(source + between + [50, 51, 52, 1, 2, 3])  # the answer copying the source
    match = find_match(context)
    assert match.length == 6 and context[match.start] == 60
    assert prompt_lookup(context, 3).tolist() == [60, 61, 62]


def test_equally_long_matches_that_disagree_follow_the_continuation_most_agree_on():
    context = np.array([0, 1, 2, 3, 7, 0, 1, 2, 3, 7, 0, 1, 2, 3, 8, 0, 1, 2, 3])
    # [0 1 2 3] occurred three times: twice followed by 7, most recently by 8.
    assert find_match(context).length == 4
    assert prompt_lookup(context, 1).tolist() == [7]
    assert prompt_lookup(np.array([1, 2, 9, 1, 2, 8, 1, 2]), 1).tolist() == [8]  # no majority: the most recent


def test_the_generated_text_is_searched_as_well_as_the_prompt():
    prompt = [10, 11, 12]
    answer = [20, 21, 22, 23, 24, 5, 20, 21, 22]  # the answer repeats itself, not the prompt
    assert prompt_lookup(np.array(prompt + answer), 2).tolist() == [23, 24]


def test_a_copy_goes_on_past_a_token_an_edit_replaced():
    """Renaming x to n: the target replaces one copied token, and the copy resumes after it."""
    x, n = 90, 91
    source = [30, 31, x, 32, 33, 34, x, 35]
    lookup = PromptLookupDrafter()
    context = source + [7, 30, 31]  # the answer has copied the start of the source
    proposal = lookup.propose(context, 6)
    assert proposal.tokens.tolist() == [x, 32, 33, 34, x, 35]
    context += [n]  # the target rejected the first draft: it writes n where the source has x
    match = lookup.match(context)
    assert match.resumed and context[match.start : match.start + 3] == [32, 33, 34]
    assert lookup.propose(context, 3).tokens.tolist() == [32, 33, 34]
    m = 92
    context += [32, 33, 34, m]  # all 3 kept, and the target's own token is m where the source has x
    assert lookup.propose(context, 1).tokens.tolist() == [35]
    # A match in the text, even of one token, wins over the guess: n was followed by 32 before.
    assert lookup.match(context[:-1] + [n]).length == 1
    # A round that kept every draft needs no resuming: the match itself goes on.
    fresh = PromptLookupDrafter()
    fresh.propose(source + [7, 30, 31], 2)
    assert not fresh.match(source + [7, 30, 31, x, 32, 33]).resumed


def test_pad_draft_keeps_the_drafts_and_fills_the_width():
    context = [10, 11, 12, 13, 14, 10, 11]
    assert pad_draft(context, np.array([12, 13, 14]), 3).tolist() == [12, 13, 14]
    # One draft, then what followed [10 11 12] earlier in the context.
    assert pad_draft(context, np.array([12]), 5).tolist() == [12, 13, 14, 10, 11]
    # No draft and no match: the last token repeated, still k tokens wide.
    assert pad_draft([1, 2, 3], np.empty(0, dtype=np.int64), 4).tolist() == [3, 3, 3, 3]
    assert pad_draft(context, np.array([12, 13, 14, 15]), 2).tolist() == [12, 13]


def test_a_draft_model_reports_every_call_a_round_makes(tiny_pairs, monkeypatch):
    """Dynamic K prices a round by its draft calls: the count must be the calls made, the catch-up's
    excepted. After a round that kept every draft, the last draft and the target's token are read by
    the first draft step, not by a call of their own."""
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
        seen.append((proposal, made))
        return proposal

    monkeypatch.setattr(DraftModelDrafter, "propose", counting)
    config = GenerationConfig(max_new_tokens=40, num_assistant_tokens=1, dynamic_k=False)  # often all kept
    generate("Hello world, hello world, hello", target, config, draft=draft)
    assert len(seen) > 3 and all(p.calls + (p.catch_up_seconds > 0) == len(made) for p, made in seen)
    assert all(p.calls == len(p.tokens) for p, _ in seen)
    assert any(made == [2] for p, made in seen if not p.catch_up_seconds)  # folded: one call of two tokens


def test_a_round_searches_the_context_once(monkeypatch):
    """The schedule asks what the lookup would copy, then the round drafts it: one search, not two."""
    import spec.decoding.drafters as drafters

    searches = []
    real = drafters.find_match
    monkeypatch.setattr(drafters, "find_match", lambda *a: searches.append(1) or real(*a))
    lookup = PromptLookupDrafter()
    context = [1, 2, 3, 4, 5, 1, 2]
    planned = lookup.match(context)
    assert lookup.propose(context, 3).tokens.tolist() == [3, 4, 5] and planned.start == 2
    assert len(searches) == 1
    lookup.propose(context + [3], 2)
    assert len(searches) == 2


class _DraftLogits:
    """A draft model's KV cache that answers each call with the next of `rows` (logits over 4 tokens)."""

    def __init__(self, rows):
        self.rows, self.calls = [np.asarray(row, dtype=np.float32) for row in rows], 0

    def forward(self, ids, keep=None):
        self.calls += 1
        return self.rows.pop(0)[None, :]

    def trim(self, length):
        pass


SURE, DOUBTFUL = [12.0, 0.0, 0.0, 0.0], [1.0, 0.9, 0.8, 0.0]  # token 0 at p ≈ 1.0, and at p ≈ 0.31


def test_a_draft_model_stops_its_round_after_a_token_it_doubts(monkeypatch):
    """Tokens after one the draft gave little probability are seldom kept, and each costs a call:
    the round ends with the doubtful token (as transformers' assistant_confidence_threshold)."""
    import spec.decoding.drafters as drafters
    from spec.decoding.sampling import Sampler

    greedy = Sampler(0.0, 0, 1.0, 4, np.random.default_rng(0))
    draft = _DraftLogits([SURE, DOUBTFUL, SURE, SURE])
    proposal = drafters.DraftModelDrafter(draft, greedy).propose([5], 4)
    assert proposal.tokens.tolist() == [0, 0] and proposal.calls == draft.calls == 2
    monkeypatch.setattr(drafters, "STOP_BELOW", 0.0)  # every token the schedule asked for
    assert drafters.DraftModelDrafter(_DraftLogits([SURE, DOUBTFUL, SURE, SURE]), greedy).propose([5], 4).calls == 4


def test_how_likely_the_model_found_its_token():
    from spec.decoding.sampling import Sampler

    greedy = Sampler(0.0, 0, 1.0, 6, np.random.default_rng(0), token_ids=np.array([4, 1]))
    row = np.array([2.0, 0.0, 99.0])  # a head of two scored tokens, then padding the sampler never reads
    assert greedy.probability(row, 4, None) == pytest.approx(np.exp(2) / (np.exp(2) + 1))
    sampled = Sampler(1.0, 0, 1.0, 3, np.random.default_rng(0))
    assert sampled.probability(np.zeros(3), 2, np.array([0.5, 0.3, 0.2])) == 0.2  # the probability it was drawn with
