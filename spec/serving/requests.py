"""A visitor's race request, from the page's controls or the API's values: checked, with a sentence
for every slip (never a traceback), and the engine's messages made fit to show a visitor."""
from __future__ import annotations

import re
from typing import Callable

from spec.config import DRAFT_MODEL, GenerationConfig
from spec.decoding.plugins import PLUGINS
from spec.serving.presets import CUSTOM, Preset


def number(value: object, name: str, bounds: tuple[float, float], whole: bool = False) -> float | int:
    """`value` as a number within `bounds`; ValueError with a sentence when it is not."""
    low, high = bounds
    span = f"from {int(low)} to {int(high)}" if whole else f"from {low:g} to {high:g}"
    shown = repr(value)[:40]
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number {span}, got {shown}.")
    try:
        figure = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number {span}, got {shown}.") from None
    if not low <= figure <= high:  # also false for NaN
        raise ValueError(f"{name} must be {span}, got {shown}.")
    if whole and figure != int(figure):
        raise ValueError(f"{name} must be a whole number, got {shown}.")
    return int(figure) if whole else figure


def flag(value: object, name: str) -> bool:
    """A checkbox's value: True or False only (an API client's "false" is not False); ValueError otherwise."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {repr(value)[:40]}.")
    return value


def generation_config(prompt: object, max_new_tokens: object, k: object, dynamic_k: object, temperature: object,
                      top_p: object, seed: object, ranges: dict[str, tuple[float, float]]) -> GenerationConfig:
    """The engine's settings from the visitor's values, whatever their types (an API client sends
    anything); `ranges` bounds each control (the page's sliders)."""
    if not isinstance(prompt, str):
        raise ValueError(f"The prompt must be text, got {type(prompt).__name__} {repr(prompt)[:40]}.")
    if not prompt.strip():
        raise ValueError("The prompt is empty: type some text, or pick one of the examples.")
    if seed is not None and seed != "":
        seed = number(seed, "The seed", (0, 2**63 - 1), whole=True)
    return GenerationConfig(
        max_new_tokens=number(max_new_tokens, "Max new tokens", ranges["max_new_tokens"], whole=True),
        temperature=number(temperature, "Temperature", ranges["temperature"]),
        top_p=number(top_p, "Top-p", ranges["top_p"]),
        seed=None if seed in (None, "") else seed,
        num_assistant_tokens=number(k, "K", ranges["k"], whole=True),
        dynamic_k=flag(dynamic_k, "Dynamic K"),
    ).validate()


def choose_pair(presets: dict[str, Preset], label: object, drafter: object, drafter_names: dict[str, str], hub_reachable: bool,
                cached: Callable[[str], bool]) -> Preset:
    """The pair the visitor names, if it can run here with that drafter; ValueError with a sentence when not."""
    pair = presets.get(label) if isinstance(label, str) else None
    if pair is None:
        raise ValueError(f"Unknown model pair {str(label)[:80]!r}: pick one from the list (through the API, a label "
                         f"exactly as the list shows it, such as {next(iter(presets))!r}).")
    reason = pair.unavailable(hub_reachable, cached)
    if reason:
        raise ValueError(f"“{pair.label}” cannot run on this server: {reason}. Pick another pair.")
    if drafter not in pair.drafters:
        offered = " or ".join(f"{name} ({value!r})" for value, name in drafter_names.items() if value in pair.drafters)
        if drafter == DRAFT_MODEL:
            raise ValueError(f"“{pair.label}” has no draft model: choose {offered}.")
        raise ValueError(f"“{pair.label}” offers {offered} as the drafter, not {str(drafter)[:40]!r}.")
    return pair


def offered_drafters(pair: Preset, choices: list[tuple[str, str]], custom_draft: str = "", current: str | None = None
                     ) -> tuple[list[tuple[str, str]], str | None]:
    """The (label, drafter) choices `pair` offers, and the one to select (`current` if offered, else
    the pair's default): a custom pair offers the draft model only once one is typed."""
    offered = [(label, value) for label, value in choices if value in pair.drafters
               and (pair.label != CUSTOM or not PLUGINS[value].needs_draft_model or (custom_draft or "").strip())]
    values = [value for _, value in offered]
    default = next((d for d in pair.drafters if d in values), values[0] if values else None)
    return offered, current if current in values else default


_SERVER_PATH = re.compile(r"(?<![\w.:/~-])(?:~|\.{1,2})?/[^\s'\"`,;:()]+")


def readable(message: str, pair: Preset | None, allow_local_models: bool) -> str:
    """An engine message as a visitor reads it: a preset named as the list shows it, and (when
    visitors may not use the server's folders) no path on the server."""
    if pair is not None and pair.label != CUSTOM:
        for ref in (pair.target, pair.draft):
            if ref:
                message = message.replace(repr(ref), f"“{pair.label}”").replace(ref, f"“{pair.label}”")
    if not allow_local_models:
        message = _SERVER_PATH.sub("(a path on the server)", message)
        # Where a visitor's pair takes Hub ids only, the engine's "use embedded:NAME" is an offline pair in the list.
        message = re.sub(r"use embedded:[\w.-]*[\w-]", "pick an offline pair from the list", message)
    return message
