"""Sampling transforms, prompt lookup and dynamic K: small pure pieces of the engine."""
import numpy as np
import pytest

from spec.adaptive_k import DynamicK
from spec.drafters import prompt_lookup
from spec.sampling import probabilities, sample


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


def test_dynamic_k_grows_on_full_acceptance_and_backs_off_when_drafting_does_not_pay():
    schedule = DynamicK(k=4, max_k=10)
    assert schedule.next_k() == 0  # the first step is plain: it measures a target step
    schedule.observe_plain(0.010)
    schedule.observe_round(4, 4, draft_seconds=0.004, verify_seconds=0.012)  # 5 tokens in 16 ms: pays
    assert schedule.next_k() == 6
    # A draft as slow as the target that is rarely right: speculation cannot pay, so plain steps follow.
    schedule.observe_round(6, 0, draft_seconds=0.05, verify_seconds=0.012)
    assert [schedule.next_k() for _ in range(8)] == [0] * 8
    assert schedule.next_k() > 0  # then one probe round
    schedule.observe_round(5, 0, draft_seconds=0.05, verify_seconds=0.012)
    assert [schedule.next_k() for _ in range(16)] == [0] * 16  # failed again: a pause twice as long


def test_fixed_k_never_falls_back():
    schedule = DynamicK(k=3, max_k=10, dynamic=False)
    schedule.observe_round(3, 0, draft_seconds=1.0, verify_seconds=1.0)
    assert [schedule.next_k() for _ in range(3)] == [3, 3, 3]
