"""Drafters as plug-ins: each way of drafting is one file here, a DrafterPlugin (plugin.py), and
one line of PLUGINS below. The engine builds a generation's drafter and schedule from it; the
command line, the page's choices, the presets and the benchmark read what it says about itself.
docs/adding-a-drafter.md walks through adding one.
"""
from __future__ import annotations

from spec.decoding.plugins.draft_model import DraftModelPlugin
from spec.decoding.plugins.hybrid import HybridPlugin
from spec.decoding.plugins.plugin import DrafterPlugin, DraftSetup
from spec.decoding.plugins.prompt_lookup import PromptLookupPlugin

# name -> plug-in, in the order the page offers them (the first a pair supports is its default).
PLUGINS: dict[str, DrafterPlugin] = {plugin.name: plugin for plugin in (
    HybridPlugin(),
    DraftModelPlugin(),
    PromptLookupPlugin(),
)}

__all__ = ["PLUGINS", "DraftSetup", "DrafterPlugin", "drafter_plugin", "needs_draft_model"]


def drafter_plugin(name: str) -> DrafterPlugin:
    """The plug-in called `name`; ValueError lists the drafters there are."""
    if not isinstance(name, str) or name not in PLUGINS:
        raise ValueError(f"drafter must be one of {', '.join(PLUGINS)}, got {name!r}")
    return PLUGINS[name]


def needs_draft_model(name: str | None) -> bool:
    """Whether the drafter called `name` drafts with a draft model (None, plain decoding: no)."""
    return name is not None and drafter_plugin(name).needs_draft_model
