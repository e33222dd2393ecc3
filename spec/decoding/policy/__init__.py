"""The drafting policy: each round, how many tokens to draft, by which drafter, checked at what
width, or a plain target step.

Four schedules play one role (`Schedule`): FixedK, the plain baseline (K drafts every round);
DynamicK for a draft model; LookupK for prompt lookup; HybridK for the two together. The adaptive
ones plan from what a target call costs per width (`costs`) and from what drafts are expected to
keep (`expectations`), pause a drafter that does not pay (`pause`) and let old measurements fade
(`decay`). Each drafter names its schedule (spec.decoding.plugins); the loop
(spec.decoding.speculative) plans through the Schedule protocol alone, never a schedule's class.
"""
from __future__ import annotations

from spec.decoding.policy.costs import PRIOR_WIDTH_COST, PRIOR_WIDTH_COST_F32, CallCosts, prior_width_cost
from spec.decoding.policy.dynamic_k import DynamicK
from spec.decoding.policy.expectations import LookupAcceptance, LookupYields, PairMemory, expected_tokens, match_key, predicted_speedup
from spec.decoding.policy.fixed_k import FixedK
from spec.decoding.policy.hybrid_k import HybridK
from spec.decoding.policy.lookup_k import LookupK
from spec.decoding.policy.pause import Pause
from spec.decoding.policy.schedule import Round, RoundResult, Schedule

__all__ = [
    "PRIOR_WIDTH_COST", "PRIOR_WIDTH_COST_F32", "CallCosts", "DynamicK", "FixedK", "HybridK", "LookupAcceptance",
    "LookupK", "LookupYields", "PairMemory", "Pause", "Round", "RoundResult", "Schedule", "expected_tokens", "match_key",
    "predicted_speedup", "prior_width_cost",
]
