"""The one interface of a drafter plug-in: what it is called, whether it needs a draft model, and,
for each generation, the drafter that proposes tokens and the schedule that plans its rounds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from spec.config import GenerationConfig
from spec.decoding.drafters import Drafter
from spec.decoding.policy import PairMemory, Schedule
from spec.decoding.target_memory import TargetMemory

if TYPE_CHECKING:
    from spec.models.registry import LoadedModel


@dataclass(frozen=True)
class DraftSetup:
    """What a plug-in builds one generation's drafter from."""

    target: "LoadedModel"  # the model that verifies
    draft: "LoadedModel | None"  # the draft model, given exactly when the plug-in needs one
    config: GenerationConfig  # the generation's settings
    rng: np.random.Generator | None  # the target sampler's: a seeded run draws from one stream
    prompt: str = ""  # the prompt as text (a draft with a tokenizer of its own encodes it itself)
    history: np.ndarray | None = None  # the target's answers to other prompts (AnswerHistory.corpus), for lookups
    target_memory: TargetMemory | None = None  # what earlier generations learned about the target (None: nothing)


class DrafterPlugin(Protocol):
    """A way of drafting, as the engine, the page, the presets and the benchmark know it. The
    registry (spec.decoding.plugins) lists one instance of each; nothing else names the classes."""

    name: str  # what `drafter=`, the command line and the page's API call it, e.g. "prompt-lookup"
    label: str  # the page's choice, e.g. "Prompt lookup"
    words: str  # the drafter in a sentence, after "with", e.g. "prompt lookup"
    needs_draft_model: bool  # it drafts with a second model (draft=...); False: it takes none

    def drafter(self, setup: DraftSetup) -> Drafter:
        """A fresh drafter for one generation (the page colours its kept tokens by each Proposal's `kind`)."""

    def schedule(self, drafter: Drafter, config: GenerationConfig, memory: PairMemory | None,
                 target_memory: TargetMemory | None) -> Schedule:
        """What plans `drafter`'s rounds from K = config.num_assistant_tokens, adapting them when
        config.dynamic_k. memory: what the pair learned in earlier generations (for a plug-in that
        needs a draft model); target_memory: what the target's earlier generations learned of it, what its
        calls cost (`call_costs`) and what lookup's rounds kept (`lookup_yields`) (None: afresh)."""
