"""Sampling transforms, prompt lookup and dynamic K: small pure pieces of the engine."""
import numpy as np
import pytest

from spec.decoding.drafters import prompt_lookup
from spec.decoding.sampling import probabilities, sample


def naive_top_p(probs, top_p):
    order = np.argsort(-probs, kind="stable")
    keep = order[: int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1]
    out = np.zeros_like(probs)
    out[keep] = probs[keep]
    return out / out.sum()


@pytest.mark.parametrize("top_p", [0.05, 0.5, 0.9, 0.999])
def test_top_p_matches_a_full_sort(top_p):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(4, 5000)) * 3
    full = probabilities(logits, temperature=0.7)
    got = probabilities(logits, temperature=0.7, top_p=top_p)
    for row_full, row in zip(full, got):
        np.testing.assert_allclose(row, naive_top_p(row_full, top_p), atol=1e-12)


def test_top_k_and_temperature():
    logits = np.array([[1.0, 3.0, 2.0, 0.0]])
    probs = probabilities(logits, temperature=1.0, top_k=2)
    assert probs[0, 0] == 0 and probs[0, 3] == 0
    np.testing.assert_allclose(probs[0, [1, 2]], np.exp([3, 2]) / np.exp([3, 2]).sum())
    np.testing.assert_array_equal(probabilities(logits, temperature=0.0), [[0, 1, 0, 0]])


def test_sample_follows_the_distribution():
    rng = np.random.default_rng(0)
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    counts = np.bincount([sample(probs, rng) for _ in range(20000)], minlength=4)
    np.testing.assert_allclose(counts / counts.sum(), probs, atol=0.015)


def test_prompt_lookup_copies_what_followed_the_latest_match():
    context = np.array([5, 6, 7, 8, 9, 1, 5, 6, 7, 2, 3, 9, 5, 6, 7])
    # The trigram (5, 6, 7) occurred twice before; the latest occurrence was followed by 2, 3, 9.
    np.testing.assert_array_equal(prompt_lookup(context, 3), [2, 3, 9])
    np.testing.assert_array_equal(prompt_lookup(context, 10), [2, 3, 9, 5, 6, 7])
    # No earlier occurrence of the last token: nothing to propose.
    assert len(prompt_lookup(np.array([1, 2, 3, 4]), 4)) == 0


def test_a_sampler_over_part_of_the_vocabulary_maps_its_logits_to_their_tokens():
    """A draft head pruned to frequent tokens: logit i stands for token_ids[i], and q spans the whole
    vocabulary with zeros outside the subset, so it lines up with the target's p."""
    from spec.decoding.sampling import Sampler

    token_ids = np.array([7, 2, 9])
    logits = np.array([0.5, 3.0, 1.0])
    greedy = Sampler(0.0, 0, 1.0, 12, np.random.default_rng(0), token_ids)
    assert greedy.next_token(logits) == (2, None)
    sampled = Sampler(1.0, 0, 1.0, 12, np.random.default_rng(0), token_ids)
    q = sampled.distribution(logits)[0]
    assert q.shape == (12,) and q[[0, 1, 3, 4, 5, 6, 8, 10, 11]].sum() == 0
    np.testing.assert_allclose(q[token_ids], np.exp(logits) / np.exp(logits).sum())
    draws = [sampled.next_token(logits)[0] for _ in range(300)]
    assert set(draws) == {7, 2, 9}
    with pytest.raises(ValueError, match="below vocab_size"):
        Sampler(0.0, 0, 1.0, 9, np.random.default_rng(0), token_ids)
