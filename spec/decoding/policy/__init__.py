"""The drafting policy: each round, how many tokens to draft, by which drafter, checked at what
width, or a plain target step.

Three schedules play one role (`Schedule`): DynamicK for a draft model (or fixed K), LookupK for
prompt lookup, HybridK for the two together. They plan from what a target call costs per width
(`costs`) and from what drafts are expected to keep (`expectations`), pause a drafter that does not
pay (`pause`) and let old measurements fade (`decay`). The loop (spec.decoding.speculative) asks
`schedule_for` for one and plans through the Schedule protocol alone, never a schedule's class.
"""
from __future__ import annotations

from spec.decoding.drafters import Drafter, HybridDrafter, PromptLookupDrafter
from spec.decoding.policy.costs import PRIOR_WIDTH_COST, PRIOR_WIDTH_COST_F32, CallCosts, prior_width_cost
from spec.decoding.policy.dynamic_k import DynamicK
from spec.decoding.policy.expectations import (
    LookupAcceptance, PairMemory, expected_tokens, match_key, predicted_speedup,
)
from spec.decoding.policy.hybrid_k import HybridK
from spec.decoding.policy.lookup_k import LookupK
from spec.decoding.policy.pause import Pause
from spec.decoding.policy.schedule import Round, RoundResult, Schedule

__all__ = [
    "PRIOR_WIDTH_COST", "PRIOR_WIDTH_COST_F32", "CallCosts", "DynamicK", "HybridK", "LookupAcceptance", "LookupK",
    "PairMemory", "Pause", "Round", "RoundResult", "Schedule", "expected_tokens", "match_key", "predicted_speedup", "prior_width_cost",
    "schedule_for",
]


def schedule_for(
    drafter: Drafter, k: int, dynamic_k: bool = True, memory: PairMemory | None = None, lookup_ngram: int = 3,
    costs: CallCosts | None = None,
) -> Schedule:
    """The schedule that plans `drafter`'s rounds, starting from K = `k`: the hybrid's for the hybrid;
    with dynamic K, LookupK for a free drafter (it asks the lookup what it would copy); otherwise
    DynamicK (fixed K when not dynamic). `memory`: what the pair learned in earlier generations;
    `costs`: what the target's calls cost in its earlier ones (None: start afresh)."""
    if isinstance(drafter, HybridDrafter):
        return HybridK(k, dynamic_k, memory, lookup_ngram, drafter.lookup, costs)
    if dynamic_k and drafter.free:
        return LookupK(k, lookup_ngram, lookup=drafter if isinstance(drafter, PromptLookupDrafter) else None, costs=costs)
    return DynamicK(k, dynamic_k, drafter.free, memory, costs=costs)
