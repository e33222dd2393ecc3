"""A drafter is one file plus one line: a plug-in written here, registered by one line, is drafted
with, raced and offered by every pair without a change anywhere else (docs/adding-a-drafter.md)."""
from __future__ import annotations

import re
import threading
from typing import Sequence

import numpy as np
import pytest

from spec.config import DRAFT_MODEL, HYBRID, PROMPT_LOOKUP, GenerationConfig
from spec.decoding.drafters import Drafter, Proposal
from spec.decoding.engine import choose_drafter, generate
from spec.decoding.generation import LOOKUP
from spec.decoding.plugins import PLUGINS, DraftSetup
from spec.decoding.policy import FixedK, PairMemory, Schedule
from spec.decoding.target_memory import TargetMemory
from spec.serving.phases import RacePhase
from spec.serving.presets import PRESETS
from spec.serving.race import run_race

# --- The new drafter's file: spec/decoding/plugins/repeat_last.py in docs/adding-a-drafter.md ---------


class RepeatLastDrafter(Drafter):
    """Guesses that the text repeats its last token: often wrong, never costly."""

    name = "the last token, repeated"  # what drafted, in words (the statistics say it)
    kind = LOOKUP  # the tokens the target keeps are coloured as copies

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        return Proposal(np.full(n, context[-1], dtype=np.int64), q=None, seconds=0.0, kind=self.kind)


class RepeatLastPlugin:
    name = "repeat-last"
    label = "Repeat last"
    words = "the last token repeated"
    needs_draft_model = False

    def drafter(self, setup: DraftSetup) -> Drafter:
        return RepeatLastDrafter()

    def schedule(self, drafter: Drafter, config: GenerationConfig, memory: PairMemory | None,
                 target_memory: TargetMemory | None) -> Schedule:
        return FixedK(config.num_assistant_tokens, target_memory and target_memory.call_costs)


# --- The one line: its entry in PLUGINS (here for the length of a test) -----------------------------

REGISTERED = tuple(PLUGINS)  # the drafters spec/decoding/plugins/__init__.py registers, the shipped and yours


@pytest.fixture
def repeat_last(monkeypatch):
    monkeypatch.setitem(PLUGINS, RepeatLastPlugin.name, RepeatLastPlugin())
    return RepeatLastPlugin.name


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_new_drafter_drafts_and_the_output_stays_the_targets(tiny_pairs, repeat_last, temperature):
    target, _ = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=24, num_assistant_tokens=3, temperature=temperature, seed=7)
    plain = generate("The quick brown fox", target, config)
    drafted = generate("The quick brown fox", target, config, drafter=repeat_last)
    if temperature == 0.0:
        assert drafted.token_ids == plain.token_ids  # the signature: greedy output token for token
    stats = drafted.stats
    assert stats.drafted_by == RepeatLastDrafter.name and drafted.drafter == repeat_last
    assert stats.verify_calls > 0 and stats.drafted == 3 * stats.verify_calls  # fixed K: three drafts a round
    assert stats.accepted_lookup == stats.accepted  # its kept tokens carry the kind it declares
    assert set(drafted.kinds) <= {"target", LOOKUP, "correction", "bonus"}


def test_a_new_drafter_races_as_the_page_races_it(tiny_pairs, repeat_last):
    target, _ = tiny_pairs["llama"]
    config = GenerationConfig(max_new_tokens=24, num_assistant_tokens=3)
    final = list(run_race("The quick brown fox", target, None, repeat_last, config, threading.Event()))[-1]
    assert final.phase == RacePhase.DONE and final.verdict.speedup is not None
    assert final.speculative.token_ids == final.autoregressive.token_ids
    assert final.speculative.stats.drafted_by == RepeatLastDrafter.name


def test_every_pair_offers_a_drafter_without_a_model_and_the_engine_checks_it(tiny_pairs, repeat_last):
    _, draft = tiny_pairs["llama"]
    with_draft = next(p for p in PRESETS if p.draft)
    without = next(p for p in PRESETS if not p.draft and p.target)
    # Every registered drafter, the new one last; without a draft model, those that need none.
    offered = tuple(dict.fromkeys((*REGISTERED, repeat_last)))  # the doc's own toy may be registered already
    assert with_draft.drafters == offered and with_draft.drafters[0] == HYBRID
    assert without.drafters == tuple(name for name in offered if not PLUGINS[name].needs_draft_model)
    assert PROMPT_LOOKUP in without.drafters and DRAFT_MODEL not in without.drafters
    assert with_draft.models(repeat_last) == (with_draft.target, None)  # the draft model is not loaded for it
    assert choose_drafter(None, False, repeat_last) == repeat_last
    with pytest.raises(ValueError, match="drafts without a model"):
        choose_drafter(draft, False, repeat_last)


def test_the_command_line_drafts_with_a_new_drafter(capsys, repeat_last, tiny_checkpoints, tiny_models_dir):
    import json

    from spec.cli import main
    from tests.conftest import models_dir_at

    target = str(tiny_checkpoints[0])
    with models_dir_at(tiny_models_dir):
        assert main(["run", "Hello world", "--target", target, "--drafter", repeat_last, "--max-new-tokens", "8",
                     "--weight-format", "fp32", "--precision", "f32", "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["drafter"], result["drafted_by"]) == (repeat_last, RepeatLastDrafter.name) and result["drafted"] > 0


def test_an_unknown_drafter_is_named_with_the_ones_there_are():
    with pytest.raises(ValueError, match=re.escape(f"drafter must be one of {', '.join(REGISTERED)}, got 'toy'")):
        choose_drafter(None, False, "toy")


# --- Every registered drafter, shipped or added: the suite tests yours once its line is in PLUGINS ---


@pytest.mark.parametrize("name", REGISTERED)
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_every_registered_drafter_keeps_greedy_output_the_targets_token_for_token(tiny_pairs, name, arch):
    target, draft = tiny_pairs[arch]
    config = GenerationConfig(max_new_tokens=24, num_assistant_tokens=3)
    plain = generate("The quick brown fox jumps over the quick brown fox", target, config)
    drafted = generate("The quick brown fox jumps over the quick brown fox", target, config, drafter=name,
                       draft=draft if PLUGINS[name].needs_draft_model else None)
    assert drafted.token_ids == plain.token_ids
    assert drafted.drafter == name and drafted.stats.verify_calls + drafted.stats.plain_steps > 0


@pytest.mark.parametrize("name", REGISTERED)
def test_every_registered_drafter_races_and_every_pair_that_can_offers_it(tiny_pairs, name):
    target, draft = tiny_pairs["llama"]
    needs = PLUGINS[name].needs_draft_model
    config = GenerationConfig(max_new_tokens=16, num_assistant_tokens=3)
    final = list(run_race("The quick brown fox", target, draft if needs else None, name, config, threading.Event()))[-1]
    assert final.phase == RacePhase.DONE and final.speculative.token_ids == final.autoregressive.token_ids
    for preset in PRESETS:
        if preset.target:
            assert (name in preset.drafters) == (preset.draft is not None or not needs), preset.label
