"""What one race may take from a shared server (`Limits`), and the prompt check that refuses, with
a sentence saying by how much, a prompt too long for them or for the model's context."""
from __future__ import annotations

from dataclasses import dataclass

from spec.config import GenerationConfig
from spec.decoding.engine import encode_prompt
from spec.models.registry import LoadedModel


@dataclass(frozen=True)
class Limits:
    """What one race may take from a shared server."""

    max_prompt_tokens: int = 2048  # prompt tokens, chat template included; the model's context bounds it too
    max_race_seconds: float | None = 120.0  # wall-clock seconds the lanes race before both stop; None: no limit


class PromptTooLong(ValueError):
    """The prompt does not fit the race's limits; str(e) says by how much and what to do."""


def check_prompt(prompt: str, target: LoadedModel, config: GenerationConfig, limits: Limits) -> int:
    """The prompt's length in tokens (chat template included); PromptTooLong when it and the new
    tokens would not fit the model's context, or it is longer than the server allows."""
    context = target.context_length
    room_left = None if context is None else context - config.max_new_tokens
    allowed = limits.max_prompt_tokens if room_left is None else min(limits.max_prompt_tokens, room_left)
    # No token of these vocabularies spans this many characters: a longer prompt cannot fit, and
    # is refused without tokenizing megabytes.
    if len(prompt) > 64 * max(allowed, 1):
        raise PromptTooLong(
            f"The prompt is {len(prompt):,} characters long, far more than the {allowed:,} tokens this server "
            "takes: shorten it."
        )
    n = len(encode_prompt(target.tokenizer, prompt, config.chat))
    if room_left is not None and n > room_left and room_left < limits.max_prompt_tokens:
        if room_left < 1:
            raise PromptTooLong(
                f"{config.max_new_tokens:,} new tokens do not fit the model's context of {context:,} tokens: ask for fewer."
            )
        raise PromptTooLong(
            f"The prompt is {n:,} tokens long; with {config.max_new_tokens:,} new tokens it would not fit the "
            f"model's context of {context:,} tokens: shorten it to at most {room_left:,} tokens, or ask for fewer new tokens."
        )
    if n > limits.max_prompt_tokens:
        raise PromptTooLong(
            f"The prompt is {n:,} tokens long; this server takes prompts of at most {limits.max_prompt_tokens:,} "
            "tokens: shorten it."
        )
    return n
