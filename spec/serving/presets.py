"""Model pairs the Space offers: a target, the draft that proposes tokens for it, and why they pair.

The Hub ids follow the issue and OpenVINO's own speculative-decoding notebook (docs/design-notes.md
says where each was found). If one moves, the app shows the engine's ModelError for it and the
other presets keep working. OpenVINO's notebook copies the Llama 3.1 target's tokenizer files over
the FastDraft-150M ones before pairing them; the engine's vocabulary check compares the token->id
mapping and the special tokens, so a real difference there is reported, not ignored.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from spec.config import DEFAULT_PRECISION, DRAFT_VOCABULARY, INT4, INT8, MEASURED, ModelKey
from spec.decoding.plugins import PLUGINS
from spec.models.draft_format import draft_format
from spec.models.embedded import DEFAULT_REF, DRAFT_REF, QUICK_REF
from spec.progress import ProgressFn, ignore

CUSTOM = "Custom pair"


@dataclass(frozen=True)
class Preset:
    label: str  # what the dropdown shows
    target: str | None  # model reference (Hub id, local folder, embedded:<name>); None for the custom pair
    draft: str | None  # draft-model reference; None: only the drafters that need no model (prompt lookup)
    notes: str  # one or two sentences shown under the dropdown (Markdown)
    weight_format: str = INT8  # compression if the engine has to convert a checkpoint
    precision: str = DEFAULT_PRECISION  # F32 pins exact results; the default is faster (activations quantized on the fly)
    needs_hub: bool = True  # False when the pair works offline
    draft_weight_format: str | None = None  # compression if the engine converts the draft; None: weight_format
    draft_vocabulary: int | None = DRAFT_VOCABULARY  # the draft's head scores only this many frequent tokens; None: all

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafters this pair supports, the default first: without a draft model, those that need none."""
        with_model = bool(self.draft) or self.label == CUSTOM
        return tuple(name for name, plugin in PLUGINS.items() if with_model or not plugin.needs_draft_model)

    def models(self, drafter: str, custom_target: str = "", custom_draft: str = "") -> tuple[str, str | None]:
        """The target and draft references to load for `drafter` (the draft only when it drafts).

        The custom pair takes them from the two text fields. ValueError says what to fix.
        """
        target, draft = self.target, self.draft
        if self.label == CUSTOM:
            target, draft = (custom_target or "").strip(), (custom_draft or "").strip() or None
            if not target:
                raise ValueError("Custom pair: type a target model (a Hub id like owner/name, or a local folder).")
        if drafter not in PLUGINS:
            *others, last = (plugin.label.lower() for plugin in PLUGINS.values())
            raise ValueError(f"Choose a drafter: {', '.join(others)} or {last}.")
        if not PLUGINS[drafter].needs_draft_model:
            return target, None
        if not draft:
            raise ValueError("This pair has no draft model: choose prompt lookup, or type a draft model in the custom pair.")
        return target, draft

    def keys(self, target: str, draft: str | None, device: str = "CPU", hub_only: bool = False, measure: bool = True
             ) -> tuple[ModelKey, ModelKey | None]:
        """The registry keys of `target` and `draft` (as `models` gives them), loaded as this pair loads them.
        `measure` False: a draft's format this CPU has to time is left MEASURED, for `decided` to time
        later (a preparation converts the other models meanwhile)."""
        target_key = ModelKey(target, self.weight_format, self.precision, device, hub_only)
        if draft is None:
            return target_key, None
        draft_weights = self.draft_weight_format or self.weight_format
        if draft_weights == MEASURED and not device.upper().startswith("CPU"):
            draft_weights = INT4  # timed on the CPU's kernels; another device keeps the smaller INT4
        draft_key = ModelKey(draft, draft_weights, self.precision, device, hub_only, self.draft_vocabulary)
        return target_key, decided(draft_key) if measure else draft_key

    def own_keys(self, device: str = "CPU") -> list[ModelKey]:
        """The registry keys of this pair's own models, as it loads them (none for the custom pair)."""
        return [key for key in self.keys(self.target, self.draft, device) if key is not None] if self.target else []

    def unavailable(self, hub_reachable: bool, cached: Callable[[str], bool]) -> str | None:
        """Why this pair cannot run on this server, or None when it can: a Hub pair needs the Hub,
        or its models already in the Hugging Face cache (`cached(ref)`)."""
        if not self.needs_hub or hub_reachable or self.label == CUSTOM:
            return None
        if all(cached(ref) for ref in (self.target, self.draft) if ref):
            return None
        return "the Hugging Face Hub cannot be reached from this server and its models are not cached here"


def decided(key: ModelKey, report: ProgressFn = ignore) -> ModelKey:
    """`key` in the weight format this CPU multiplies faster, where its format is left MEASURED
    (timed once per machine, `report` told: spec.models.draft_format); any other key as it is."""
    return replace(key, weight_format=draft_format(report)) if key.weight_format == MEASURED else key


PRESETS: tuple[Preset, ...] = (
    Preset(
        "Qwen2.5-Coder-1.5B + 0.5B draft (offline)",
        DEFAULT_REF,
        DRAFT_REF,
        "A real 1.5B coding model with the 0.5B of its own family as the draft, as in the paper, both "
        "prepared on this server from PyPI (no Hub needed). The **hybrid** drafter takes, each round, "
        "whichever is expected to keep more tokens per second: prompt lookup where the answer copies the "
        "prompt (edit, rename, fix code), the draft model where the text is new.",
        needs_hub=False,
        # INT4 or INT8, whichever this CPU multiplies faster: the two guess alike (docs/benchmarks.md),
        # and the draft's token is most of what a round costs on a CPU whose INT4 kernels are slow.
        draft_weight_format=MEASURED,
    ),
    Preset(
        "Qwen2.5-Coder-1.5B + SmolLM2-135M draft (offline, across tokenizers)",
        DEFAULT_REF,
        QUICK_REF,
        "The coding model with SmolLM2 as its draft, though their tokenizers differ: SmolLM2's text is "
        "re-encoded for Qwen and verified exactly.",
        needs_hub=False,
        draft_vocabulary=None,  # the quick pair's target whole: one model to prepare, not two
    ),
    Preset(
        "SmolLM2-135M-Instruct (quick, offline)",
        QUICK_REF,
        None,
        "A tiny model that ships with the app and loads in seconds. Its 140 MB fit in the CPU's cache, "
        "so a step is already cheap and speculation gains little: a quick way to try the page.",
        needs_hub=False,
    ),
    Preset(
        "Qwen2.5-Coder-7B-Instruct INT4 + 0.5B INT4",
        "OpenVINO/Qwen2.5-Coder-7B-Instruct-int4-ov",
        "OpenVINO/Qwen2.5-Coder-0.5B-Instruct-int4-ov",
        "A 7B coding model with the 0.5B of its family as the draft: a target step costs many draft steps, "
        "so speculation has the most room. About 4.9 GB to download; fits a 16 GB Space.",
    ),
    Preset(
        "Qwen2.5-Coder-3B-Instruct INT4 + 0.5B INT4",
        "OpenVINO/Qwen2.5-Coder-3B-Instruct-int4-ov",
        "OpenVINO/Qwen2.5-Coder-0.5B-Instruct-int4-ov",
        "The same family at 3B: about 2.2 GB to download.",
    ),
    Preset(
        "Phi-3-mini-4k-instruct INT4 + FastDraft-50M",
        "OpenVINO/Phi-3-mini-4k-instruct-int4-ov",
        "OpenVINO/Phi-3-mini-FastDraft-50M-int8-ov",
        "The pair OpenVINO's speculative-decoding notebook uses: a 3.8B target with a 50M draft trained "
        "to agree with it. About 2.5 GB to download.",
    ),
    Preset(
        "Qwen3-8B INT4 + Qwen3-0.6B INT8",
        "OpenVINO/Qwen3-8B-int4-ov",
        "OpenVINO/Qwen3-0.6B-int8-ov",
        "The pair of OpenVINO's Qwen3 notebook: an 8B target with the family's smallest model as its "
        "draft. About 5.5 GB to download.",
    ),
    Preset(
        "Llama-3.1-8B-Instruct + FastDraft-150M",
        "meta-llama/Llama-3.1-8B-Instruct",
        "OpenVINO/Llama-3.1-8B-Instruct-FastDraft-150M-int8-ov",
        "Gated: needs `HF_TOKEN` with access to the Llama 3.1 licence. The target is exported and "
        "INT8-compressed on first use, which takes minutes and tens of GB of RAM (more than a free Space has).",
    ),
    Preset(
        "Dolly-v2-7B INT8 + Dolly-v2-3B INT8",
        "OpenVINO/dolly-v2-7b-int8-ov",
        "OpenVINO/dolly-v2-3b-int8-ov",
        "The paper's model family (it pairs 12B with 3B, which does not fit a 16 GB Space). The 3B "
        "draft is deep, so expect a modest speed-up at best. About 10 GB to download.",
    ),
    Preset(
        CUSTOM,
        None,
        None,
        "Type a target and, optionally, a draft from the same family (same tokenizer): Hub ids, "
        "local OpenVINO IR folders or Transformers checkpoints.",
    ),
)


def operator_pair(target: str, draft: str | None, weight_format: str, precision: str) -> Preset:
    """The pair a server's operator names (SPEC_APP_TARGET / SPEC_APP_DRAFT), first in the list."""
    return Preset(
        f"{Path(target).name} (SPEC_APP_TARGET)", target, draft,
        "The pair set by `SPEC_APP_TARGET` and `SPEC_APP_DRAFT` on the server.",
        weight_format=weight_format, precision=precision, needs_hub=False,
    )


def pair_keys(target: str | None, draft: str | None, device: str = "CPU", *, weight_format: str | None = None,
              draft_weight_format: str | None = None, precision: str | None = None, hub_only: bool = False,
              presets: Iterable[Preset] = PRESETS) -> tuple[ModelKey, ModelKey | None]:
    """The registry keys of `target` and `draft` (None: no draft model) as the page loads that pair:
    the page, `spec run`, `spec race` and the benchmark all ask here, so one pair is one pair of models.

    The first of `presets` that pairs them decides the weight formats, the precision and the draft's
    head (with no draft, the first whose target is `target`); any other pair loads as the custom
    pair does. What is given overrides it: `weight_format` both models' compression,
    `draft_weight_format` the draft's, `precision` both models'. `target` None is the default model.
    """
    target = target or DEFAULT_REF
    pair = next((p for p in presets if p.target == target and draft in (p.draft, None)), Preset(CUSTOM, target, draft, ""))
    if weight_format:
        pair = replace(pair, weight_format=weight_format, draft_weight_format=None)
    pair = replace(pair, draft_weight_format=draft_weight_format or pair.draft_weight_format, precision=precision or pair.precision)
    return pair.keys(target, draft, device, hub_only)
