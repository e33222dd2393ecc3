"""The acceptance rule, against an exact brute-force reference and hand-made distributions."""

import numpy as np
import pytest

from spec.decoding.acceptance import speculative_accept
from spec.decoding.sampling import probabilities


def reference_outcomes(p, q, draft):
    """Exact probability of each (accepted, next_token) outcome, computed by enumeration."""
    k = len(draft)
    outcomes = {}
    reach = 1.0
    for i, x in enumerate(draft):
        q_x = 1.0 if q is None else q[i, x]
        accept = min(1.0, p[i, x] / q_x)
        if accept < 1.0:
            residual = np.maximum(p[i] - (np.eye(p.shape[1])[x] if q is None else q[i]), 0)
            residual /= residual.sum()
            for y, r in enumerate(residual):
                if r > 0:
                    outcomes[(i, y)] = reach * (1 - accept) * r
        reach *= accept
    for y, r in enumerate(p[k]):
        if r > 0:
            outcomes[(k, y)] = outcomes.get((k, y), 0) + reach * r
    return outcomes


def empirical(p, q, draft, trials, seed=0):
    rng = np.random.default_rng(seed)
    counts = {}
    for _ in range(trials):
        outcome = tuple(speculative_accept(p, q, np.asarray(draft), rng))
        counts[outcome] = counts.get(outcome, 0) + 1
    return {key: n / trials for key, n in counts.items()}


def random_dist(rng, rows, vocab, sharpness=1.0):
    return probabilities(rng.normal(size=(rows, vocab)) * sharpness, temperature=1.0)


@pytest.mark.parametrize("deterministic_draft", [False, True])
def test_matches_brute_force_reference(deterministic_draft):
    rng = np.random.default_rng(1)
    p = random_dist(rng, 4, 5)
    q = None if deterministic_draft else random_dist(rng, 3, 5)
    draft = [1, 3, 0]
    want = reference_outcomes(p, q, draft)
    got = empirical(p, q, draft, trials=20000)
    assert set(got) <= set(want)
    for key, prob in want.items():
        # 20000 trials: a standard error of at most 0.0036; 5 sigma keeps this test deterministic and tight.
        assert abs(got.get(key, 0.0) - prob) < 0.018, (key, got.get(key), prob)


def test_first_token_follows_target_exactly():
    """Summed over the draft's choice x ~ q, the first emitted token is distributed as p (the theorem)."""
    rng = np.random.default_rng(2)
    p = random_dist(rng, 2, 6)
    q = random_dist(rng, 1, 6, sharpness=3.0)  # a poor draft: much sharper than the target
    marginal = np.zeros(6)
    for x in range(6):
        for (accepted, y), prob in reference_outcomes(p, q, [x]).items():
            token = x if accepted == 1 else y
            marginal[token] += q[0, x] * prob
    np.testing.assert_allclose(marginal, p[0], atol=1e-12)

    # ... and the implementation, sampling x ~ q itself, gets the same marginal.
    counts = np.zeros(6)
    for _ in range(20000):
        x = rng.choice(6, p=q[0])
        accepted, y = speculative_accept(p, q, np.array([x]), rng)
        counts[x if accepted == 1 else y] += 1
    np.testing.assert_allclose(counts / counts.sum(), p[0], atol=0.018)


def test_hand_made_cases():
    rng = np.random.default_rng(0)
    p = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    q = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    # Token 1 has p = q = 1: always kept. Token 2 has p = 0: always rejected, replaced from max(0, p - q).
    for _ in range(50):
        accepted, token = speculative_accept(p, q, np.array([1, 2]), rng)
        assert accepted == 1 and token in (0, 1)
    # A draft the target is sure of is kept, and the bonus comes from the last row of p.
    assert speculative_accept(p[[0, 2]], q[:1], np.array([1]), rng) == (1, 2)


def test_greedy_is_the_matching_prefix_then_the_target_argmax():
    target_logits = np.array([[0, 5, 1], [3, 0, 1], [0, 1, 9], [7, 0, 0]], dtype=float)
    p = probabilities(target_logits, temperature=0.0)
    rng = np.random.default_rng(0)
    for draft, want in {(1, 0, 2): (3, 0), (1, 0, 0): (2, 2), (2, 0, 2): (0, 1), (1, 2, 2): (1, 0)}.items():
        assert tuple(speculative_accept(p, None, np.array(draft), rng)) == want
        q = probabilities(np.eye(3)[list(draft)] * 10, temperature=0.0)  # a greedy draft model: one-hot q
        assert tuple(speculative_accept(p, q, np.array(draft), rng)) == want


def test_rejects_mismatched_shapes():
    p = np.full((3, 4), 0.25)
    with pytest.raises(ValueError, match="K\\+1 rows"):
        speculative_accept(p, None, np.array([0, 1, 2]), np.random.default_rng(0))
