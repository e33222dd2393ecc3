"""Drafting across tokenizers: the draft's text, re-encoded for the target, exactly verified.

A tiny target with a BPE tokenizer (merges) races a tiny draft whose tokenizer has one token per
byte. Random tiny models rarely agree, so the mechanics (re-encoding, roll back, one call per
draft step) are also checked with an oracle draft that knows the target's greedy text.
"""
from __future__ import annotations

import numpy as np
import pytest

from spec.config import DRAFT_MODEL, GenerationConfig
from spec.decoding.cross_tokenizer import CrossTokenizerDrafter, to_target_tokens
from spec.decoding.engine import encode_prompt, stream
from spec.decoding.generation import Generation
from spec.decoding.plugins import PLUGINS
from spec.decoding.sampling import Sampler
from spec.decoding.speculative import speculative
from tests.conftest import assert_follows, exact_first_tokens

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False).input_ids


# --- boundaries -----------------------------------------------------------------------------------


def test_reencoding_starts_where_both_tokenizations_agree(cross_models):
    target, _ = cross_models
    tok = target.tokenizer
    # " the" is ["Ġ", "the"]: after a context ending in "Ġ", the draft's "the cat" continues that token's
    # word; re-encoding from the anchor gives "the", not a token that would swallow the "Ġ" again.
    context = ids(tok, "Hello ")
    assert tok.convert_ids_to_tokens(context[-1:]) == ["Ġ"]
    got = to_target_tokens(tok, context, "the cat", ended=True)
    assert tok.decode(got) == "the cat" and got[:1] == ids(tok, "the")
    # When re-encoding would merge across the boundary ("He" + "llo" is one token "Hello"), the
    # context's tokens are kept as they are and only the draft's text is encoded.
    context = ids(tok, "He")
    got = to_target_tokens(tok, context, "llo world", ended=True)
    assert tok.decode(got) == "llo world"


def test_the_last_token_is_dropped_unless_the_draft_ended(cross_models):
    tok = cross_models[0].tokenizer
    context = ids(tok, "Hello")
    ended = to_target_tokens(tok, context, " world", ended=True)
    going_on = to_target_tokens(tok, context, " world", ended=False)
    assert ended == ids(tok, " world") and going_on == ended[:-1]  # " wor" + "ld" might have been " world" + more


def test_text_ending_inside_a_character_is_cut_before_it(cross_models):
    tok = cross_models[0].tokenizer
    got = to_target_tokens(tok, ids(tok, "Hello"), " caf\ufffd", ended=True)
    assert tok.decode(got) == " caf"


def test_special_tokens_are_never_proposed(cross_models):
    tok = cross_models[0].tokenizer
    got = to_target_tokens(tok, ids(tok, "Hello"), " hi</s> there", ended=True)
    assert tok.eos_token_id not in got and tok.decode(got) == " hi</s> there"  # the text, as ordinary pieces


# --- the drafter, with an oracle draft ------------------------------------------------------------


class OracleDraft:
    """A stand-in for a draft model's KV cache that always drafts the next piece of a known text, one
    byte-level token at a time, and counts its calls."""

    def __init__(self, tokenizer, prompt_ids: list[int], future: str, wrong_every: int = 0, strict: bool = True):
        self.tokenizer, self.prompt, self.future, self.strict = tokenizer, prompt_ids, future, strict
        self.fed: list[int] = []
        self.calls = 0
        self.fresh_calls = 0  # calls that do not feed the token the previous call drafted: one per round at most
        self._returned = None
        self.wrong_every, self._drafted = wrong_every, 0

    @property
    def length(self) -> int:
        return len(self.fed)

    def forward(self, token_ids, keep=None):
        self.calls += 1
        fresh = list(token_ids) != [self._returned]  # the first call of a round: what the target wrote
        self.fresh_calls += fresh
        self.fed += list(token_ids)
        assert self.fed[: len(self.prompt)] == self.prompt[: len(self.fed)], "the draft must read its prompt first"
        read = self.tokenizer.decode(self.fed[len(self.prompt) :], clean_up_tokenization_spaces=False)
        if self.strict and fresh:  # within a round the draft reads its own drafts; at its start, only kept text
            assert self.future.startswith(read), f"the draft was fed text the target never wrote: {read!r}"
        if self.future.startswith(read):
            rest = self.future[len(read) :]  # "": the text ends here, so the oracle drafts its end of sequence
        else:
            rest = "" if read.startswith(self.future) else "x"
        self._drafted += 1
        if self.wrong_every and self._drafted % self.wrong_every == 0:
            rest = "#" + rest  # a wrong guess, for the target to reject
        token = ids(self.tokenizer, rest)[0] if rest else self.tokenizer.eos_token_id
        logits = np.full((1, len(self.tokenizer)), -10.0, dtype=np.float32)
        logits[0, token] = 10.0
        self._returned = token
        return logits

    def trim(self, length: int) -> None:
        assert 0 <= length <= len(self.fed)
        del self.fed[length:]

    def reset(self) -> None:
        self.fed = []

    def release(self) -> None:
        pass


def run_with(target, drafter_cache_factory, bytes_tokenizer, k=4, max_new_tokens=48, dynamic_k=False):
    """Speculative decoding of PROMPT on `target` with a cross-tokenizer drafter over the given cache."""
    config = GenerationConfig(max_new_tokens=max_new_tokens, num_assistant_tokens=k, dynamic_k=dynamic_k)
    prompt_ids = encode_prompt(target.tokenizer, PROMPT)
    draft_prompt = encode_prompt(bytes_tokenizer, PROMPT)
    cache = drafter_cache_factory(draft_prompt)
    drafter = CrossTokenizerDrafter(cache, bytes_tokenizer, target.tokenizer, draft_prompt, len(prompt_ids), {2}, len(bytes_tokenizer))
    sampler = Sampler(0.0, 0, 1.0, target.vocab_size, np.random.default_rng(0))
    generation = Generation(target.tokenizer, prompt_ids, config, target.eos_token_ids)
    target_cache = target.model.new_cache()
    try:
        schedule = PLUGINS[DRAFT_MODEL].schedule(drafter, config, None, None)
        steps = list(speculative(target_cache, drafter, schedule, sampler, generation))
    finally:
        target_cache.release()
    return [t for s in steps for t in s.token_ids], steps, cache


def greedy_text(target, max_new_tokens=48):
    steps = list(stream(PROMPT, target, max_new_tokens=max_new_tokens))
    return [t for s in steps for t in s.token_ids], "".join(s.text for s in steps)


def test_an_oracle_draft_is_mostly_kept_and_costs_one_call_per_draft_step(cross_models):
    target, bytes_draft = cross_models
    want, text = greedy_text(target)
    oracles = []
    tokens, steps, oracle = run_with(
        target, lambda prompt: oracles.append(OracleDraft(bytes_draft.tokenizer, prompt, text)) or oracles[-1], bytes_draft.tokenizer
    )
    stats = steps[-1].stats
    assert tokens == want
    assert stats.accepted / stats.drafted > 0.6, "an oracle's text should mostly be kept: re-encoding loses it"
    # Catching up on what the target added rides on the round's first draft step: every other call
    # feeds the token the call before it drafted, so no round pays a call of its own to catch up.
    assert oracle.fresh_calls <= stats.verify_calls + 1 and oracle.calls > 2 * stats.verify_calls


def test_it_reports_every_draft_call_a_round_makes(cross_models, monkeypatch):
    """Dynamic K prices a round by its draft calls: the count must be the calls made, the catch-up's excepted."""
    target, bytes_draft = cross_models
    _, text = greedy_text(target)
    proposals, real = [], CrossTokenizerDrafter.propose
    monkeypatch.setattr(CrossTokenizerDrafter, "propose", lambda self, *a, **kw: proposals.append(real(self, *a, **kw)) or proposals[-1])
    oracles = []
    run_with(target, lambda prompt: oracles.append(OracleDraft(bytes_draft.tokenizer, prompt, text, wrong_every=5)) or oracles[-1],
             bytes_draft.tokenizer)
    assert sum(p.calls + (p.catch_up_seconds > 0) for p in proposals) == oracles[-1].calls
    assert any(p.calls > len(p.tokens) for p in proposals)  # the draft token whose text may still grow


def test_after_a_rejection_the_draft_keeps_only_text_the_target_kept(cross_models):
    target, bytes_draft = cross_models
    want, text = greedy_text(target)
    oracles = []
    tokens, steps, oracle = run_with(
        target, lambda prompt: oracles.append(OracleDraft(bytes_draft.tokenizer, prompt, text, wrong_every=5)) or oracles[-1],
        bytes_draft.tokenizer,
    )
    assert tokens == want
    stats = steps[-1].stats
    assert stats.accepted < stats.drafted and stats.accepted > 0  # some rounds rejected, some kept
    # (OracleDraft asserts on every call that the draft only ever read text the target wrote.)


def test_a_draft_that_ends_proposes_nothing_past_its_end(cross_models, monkeypatch):
    target, bytes_draft = cross_models
    want, text = greedy_text(target, 24)
    short = text[:9]  # the oracle believes the text ends here: it drafts its end-of-sequence token
    proposed = []
    real_propose = CrossTokenizerDrafter.propose

    def spy(self, context, n, source=None):
        proposal = real_propose(self, context, n, source)
        generated = target.tokenizer.decode(list(context[self.target_prompt_length :]))
        proposed.append(generated + target.tokenizer.decode(proposal.tokens.tolist()) if len(proposal.tokens) else None)
        return proposal

    monkeypatch.setattr(CrossTokenizerDrafter, "propose", spy)
    oracles = []
    tokens, steps, _ = run_with(
        target, lambda prompt: oracles.append(OracleDraft(bytes_draft.tokenizer, prompt, short, strict=False)) or oracles[-1],
        bytes_draft.tokenizer, max_new_tokens=24,
    )
    assert tokens == want
    assert any(proposed) and all(p is None or short.startswith(p) for p in proposed), proposed
    assert proposed[-1] is None  # past the end the draft knew, nothing is proposed


# --- the real thing: two tiny models with different tokenizers ---------------------------------


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_greedy_cross_tokenizer_equals_greedy_autoregressive(cross_models, k):
    target, bytes_draft = cross_models
    want, _ = greedy_text(target)
    config = GenerationConfig(max_new_tokens=48, num_assistant_tokens=k, dynamic_k=False)
    steps = list(stream(PROMPT, target, config, draft=bytes_draft, drafter=DRAFT_MODEL))
    assert [t for s in steps for t in s.token_ids] == want
    assert steps[-1].stats.drafted > 0


def test_sampled_cross_tokenizer_drafts_follow_the_target_distribution(cross_models):
    """The joint law of the first three new tokens matches the target's, computed exactly, when an
    oracle drafts the target's greedy text through the other tokenizer (so its drafts, one-hot q, are
    often right and sometimes wrong: both paths of the acceptance rule run)."""
    target, bytes_draft = cross_models
    _, text = greedy_text(target)
    settings = dict(temperature=1.0, top_k=4, max_new_tokens=4)
    prompt_ids = encode_prompt(target.tokenizer, PROMPT)
    exact = exact_first_tokens(target, prompt_ids)

    draft_prompt = encode_prompt(bytes_draft.tokenizer, PROMPT)
    runs, counts, kept = 1200, {}, 0
    for seed in range(runs):
        config = GenerationConfig(seed=seed, num_assistant_tokens=2, dynamic_k=False, **settings)
        oracle = OracleDraft(bytes_draft.tokenizer, draft_prompt, text, strict=False)
        drafter = CrossTokenizerDrafter(oracle, bytes_draft.tokenizer, target.tokenizer, draft_prompt, len(prompt_ids), {2},
                                        len(bytes_draft.tokenizer))
        rng = np.random.default_rng(seed)
        generation = Generation(target.tokenizer, prompt_ids, config, target.eos_token_ids)
        target_cache = target.model.new_cache()
        try:
            schedule = PLUGINS[DRAFT_MODEL].schedule(drafter, config, None, None)
            steps = list(speculative(target_cache, drafter, schedule, Sampler(1.0, 4, 1.0, target.vocab_size, rng), generation))
        finally:
            target_cache.release()
        tokens = [t for s in steps for t in s.token_ids]
        counts[tuple(tokens[:3])] = counts.get(tuple(tokens[:3]), 0) + 1
        kept += steps[-1].stats.accepted > 0
    assert runs * 0.2 < kept < runs * 0.95, f"drafts kept in {kept} of {runs} runs: the test checks too little"
    assert_follows(counts, exact, runs)
