"""Model pairs the Space offers: a target, the draft that proposes tokens for it, and why they pair.

The Hub ids follow the issue and OpenVINO's own speculative-decoding notebook. None could be
downloaded from the machines this was written on (they have no Hub access), but each id stands in
public code that downloads it (OpenVINO Model Server's tests pull the Phi-3 FastDraft, for example)
or in a listing of OpenVINO's Hub repos. If one moves, the app shows the engine's ModelError for
it and the other presets keep working. OpenVINO's notebook copies the Llama 3.1 target's tokenizer
files over the FastDraft-150M ones before pairing them; the engine's vocabulary check compares the
token->id mapping and the special tokens, so a real difference there is reported, not ignored.
"""
from __future__ import annotations

from dataclasses import dataclass

from spec.models import EMBEDDED_REF

CUSTOM = "Custom pair"


@dataclass(frozen=True)
class Preset:
    label: str  # what the dropdown shows
    target: str | None  # model reference (Hub id, local folder, EMBEDDED_REF); None for the custom pair
    draft: str | None  # draft-model reference; None means prompt lookup is the only drafter
    notes: str  # one or two sentences shown under the dropdown (Markdown)
    weight_format: str = "int8"  # compression if the engine has to convert a checkpoint
    precision: str = "default"  # "f32" pins exact results; "default" lets the CPU pick (bf16 on AMX)
    needs_hub: bool = True  # False when the pair works offline

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafters this pair supports, the default first."""
        return ("draft-model", "prompt-lookup") if self.draft else ("prompt-lookup",)


PRESETS: tuple[Preset, ...] = (
    Preset(
        "SmolLM2-135M-Instruct (embedded, offline)",
        EMBEDDED_REF,
        None,
        "Ships with the app, so it works without the Hub. It has no smaller sibling, so it drafts by "
        "**prompt lookup**: try an input-grounded prompt (summarize, rewrite, fix code), where the "
        "answer copies spans of the prompt.",
        needs_hub=False,
    ),
    Preset(
        "Phi-3-mini-4k-instruct INT4 + FastDraft-50M",
        "OpenVINO/Phi-3-mini-4k-instruct-int4-ov",
        "OpenVINO/Phi-3-mini-FastDraft-50M-int8-ov",
        "The pair OpenVINO's speculative-decoding notebook uses: a 3.8B target with a 50M draft trained "
        "to agree with it. About 2.5 GB to download.",
    ),
    Preset(
        "Dolly-v2-7B INT8 + Dolly-v2-3B INT8",
        "OpenVINO/dolly-v2-7b-int8-ov",
        "OpenVINO/dolly-v2-3b-int8-ov",
        "The paper's model family (it pairs 12B with 3B, which does not fit a 16 GB Space). The 3B "
        "draft is deep, so expect a modest speed-up at best. About 10 GB to download.",
    ),
    Preset(
        "Llama-3.1-8B-Instruct + FastDraft-150M",
        "meta-llama/Llama-3.1-8B-Instruct",
        "OpenVINO/Llama-3.1-8B-Instruct-FastDraft-150M-int8-ov",
        "Gated: needs `HF_TOKEN` with access to the Llama 3.1 licence. The target is exported and "
        "INT8-compressed on first use, which takes minutes and tens of GB of RAM (more than a free Space has).",
    ),
    Preset(
        CUSTOM,
        None,
        None,
        "Type a target and, optionally, a draft from the same family (same tokenizer): Hub ids, "
        "local OpenVINO IR folders or Transformers checkpoints.",
    ),
)


def preset(label: str) -> Preset:
    """The preset with this label; ValueError naming the choices otherwise."""
    for candidate in PRESETS:
        if candidate.label == label:
            return candidate
    raise ValueError(f"unknown preset {label!r}; choose one of {[p.label for p in PRESETS]}")
