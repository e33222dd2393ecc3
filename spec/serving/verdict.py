"""The race's verdict and its explanation: who won, by how much, whether that is more than noise,
whether the texts agree, and why speculative is as fast as it is, from what the race itself measured."""
from __future__ import annotations

from dataclasses import dataclass

from spec.config import GenerationConfig
from spec.decoding.metrics import Stats
from spec.decoding.policy import expected_tokens
from spec.serving.lanes import Lane

# Why a race ended early (Verdict.stopped): Stop (or the visitor left); the time budget ran out;
# its visitor asked for another race while this one waited.
CANCELLED, OUT_OF_TIME, REPLACED = "cancelled", "out of time", "replaced"

# New tokens each lane must make before a speed-up means something: a short race's speed-up is
# mostly noise on a shared machine, so with fewer tokens the page calls it uncertain instead of
# naming a winner.
MIN_TOKENS_FOR_VERDICT = 64


@dataclass(frozen=True)
class Verdict:
    """Who won, by how much, whether that is more than noise, and whether the texts agree."""

    speedup: float | None  # speculative ÷ autoregressive decode tokens/s; None until both have decoded
    settled: bool  # both lanes made MIN_TOKENS_FOR_VERDICT tokens: fewer make the speed-up mostly noise
    identical: bool | None  # greedy only: the same tokens; None when sampling (texts may rightly differ)
    first_difference: int | None  # index of the first differing token, when not identical
    stopped: str | None  # why the race ended early (CANCELLED, OUT_OF_TIME, REPLACED); None when both lanes finished


@dataclass(frozen=True)
class Explanation:
    """Why speculative is faster or slower, from this race's own measurements.

    Leviathan et al.'s model: a round verifies K drafts in one target call, each kept with
    probability α while the ones before it were kept, and yields (1 − α^(K+1)) / (1 − α) tokens
    for the price of the drafting plus one verify call. Here both prices are measured against the
    autoregressive lane's one-token step, in this race, on this machine.
    """

    speedup: float | None  # measured: speculative ÷ autoregressive decode tokens/s
    settled: bool  # enough decode tokens on both lanes to call a winner
    tokens: int  # the fewer new tokens of the two lanes: what the speed-up is measured on
    tokens_per_call: float  # speculative tokens per target call (autoregressive makes 1)
    alpha: float | None  # chance the target keeps a draft token given it kept the earlier ones; None before a verify call
    step_seconds: float | None  # autoregressive: mean one-token step
    verify_seconds: float | None  # speculative: mean verify call (K+1 tokens)
    verify_cost: float | None  # verify_seconds ÷ step_seconds
    draft_cost: float | None  # drafting per verify call ÷ step_seconds (about 0 for prompt lookup)
    predicted: float | None  # the speed-up Leviathan et al.'s formula gives for these measurements
    compiled_with: tuple[str | None, str | None] = (None, None)  # (autoregressive, speculative): the target's compile settings
    verify_width: float | None = None  # tokens a verify call checked on average (the drafts and the pending token)


def measured_speedup(ar: Stats, sp: Stats) -> tuple[float | None, bool]:
    """(speculative ÷ autoregressive decode tokens/s, whether both made MIN_TOKENS_FOR_VERDICT tokens).

    Decode speed leaves the prefill out: both lanes read the same prompt the same way, and short
    answers would otherwise mostly measure that.
    """
    ar_speed, sp_speed = ar.decode_tokens_per_second, sp.decode_tokens_per_second
    speedup = sp_speed / ar_speed if ar_speed > 0 and sp_speed > 0 else None
    settled = speedup is not None and min(ar.new_tokens, sp.new_tokens) >= MIN_TOKENS_FOR_VERDICT
    return speedup, settled


def verdict(ar: Lane, sp: Lane, config: GenerationConfig, stopped: str | None = None) -> Verdict:
    """Compare two lanes at the end of a race; `stopped` says why it ended early (else a lane's Stop)."""
    if stopped is None and CANCELLED in (ar.stats.stop_reason, sp.stats.stop_reason):
        stopped = CANCELLED
    speedup, settled = measured_speedup(ar.stats, sp.stats)
    if not config.greedy:
        return Verdict(speedup, settled, None, None, stopped)
    if ar.token_ids == sp.token_ids:
        return Verdict(speedup, settled, True, None, stopped)
    pairs = zip(ar.token_ids, sp.token_ids)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ar.token_ids), len(sp.token_ids)))
    if stopped and first == min(len(ar.token_ids), len(sp.token_ids)):  # one is a prefix of the other: cut short, not different
        return Verdict(speedup, settled, True, None, stopped)
    return Verdict(speedup, settled, False, first, stopped)


def explain(ar: Stats, sp: Stats, k: int) -> Explanation:
    """Why speculative is as fast as it is, from the two lanes' statistics so far (K = `k`)."""
    speedup, settled = measured_speedup(ar, sp)
    rounds = sp.verify_calls
    all_kept = sp.accepted_histogram[k] if len(sp.accepted_histogram) > k else 0
    # Maximum-likelihood α for prefix acceptance: each round is a run of kept drafts ended by a
    # rejection, or by the K-th draft. (accepted ÷ drafted would count drafts after a rejection,
    # which the target never judged, as rejected.)
    judged = sp.accepted + (rounds - all_kept)
    alpha = sp.accepted / judged if judged else None
    step, verify = ar.step_seconds, sp.verify_call_seconds
    verify_cost = verify / step if verify is not None and step else None
    draft_cost = sp.draft_seconds / rounds / step if rounds and step else None
    predicted = None
    if alpha is not None and verify_cost is not None and draft_cost is not None:
        # Rounds at the formula's rate, plain steps (dynamic K's fallback) at one token per step.
        tokens = rounds * expected_tokens(alpha, k) + sp.plain_steps
        cost = rounds * (draft_cost + verify_cost) + sp.plain_steps
        predicted = tokens / cost
    return Explanation(
        speedup, settled, min(ar.new_tokens, sp.new_tokens), sp.tokens_per_target_call, alpha,
        step, verify, verify_cost, draft_cost, predicted, (ar.compiled_with, sp.compiled_with),
        sp.drafted / rounds + 1 if rounds else None,
    )
