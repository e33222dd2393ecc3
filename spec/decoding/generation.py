"""What both decoding loops share: stopping rules, incremental detokenizing and running stats;
what a generation hands out: a Step per target call, and the whole answer (GenerationResult)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from spec.config import GenerationConfig
from spec.decoding.metrics import Stats

# Provenance of a token, as the speculative pane colours it.
TARGET = "target"  # a plain target step (no draft)
ACCEPTED = "accepted"  # a draft model's token the target kept
LOOKUP = "lookup"  # a prompt-lookup token (or free guess) the target kept
CORRECTION = "correction"  # the target's replacement for the first rejected draft token
BONUS = "bonus"  # the target's extra token after all K drafts were kept


@dataclass(frozen=True)
class Step:
    """What one target call added to a generation (`spec.stream` yields these)."""

    token_ids: list[int]  # tokens this step added
    kinds: list[str]  # provenance of each token
    pieces: list[tuple[str, str]]  # (text, kind) in order; text is only ever whole UTF-8 characters
    text: str  # all text of this step (the pieces joined)
    stats: Stats  # the generation's statistics as they stood after this step: this step's own copy
    finished: bool


@dataclass(frozen=True)
class GenerationResult:
    """A whole generation (what `spec.generate` returns): its text, tokens and statistics."""

    text: str  # the answer, cut at a stop string
    token_ids: list[int]  # the new tokens (the prompt's not included)
    kinds: list[str]  # each token's provenance: TARGET, ACCEPTED, LOOKUP, CORRECTION or BONUS
    stats: Stats  # statistics of the whole generation; stats.stop_reason says why it ended
    drafter: str | None  # the drafter that proposed tokens (DRAFT_MODEL, PROMPT_LOOKUP, HYBRID); None: plain decoding

    def __str__(self) -> str:
        return self.text

    def as_dict(self) -> dict:
        """The answer and its statistics as one flat, JSON-ready dict (`python -m spec run --json`)."""
        return {"text": self.text, "token_ids": list(self.token_ids), "drafter": self.drafter, **self.stats.as_dict()}

    @classmethod
    def of(cls, steps: Iterable[Step], drafter: str | None) -> "GenerationResult":
        """Run `steps` to their end and gather them into one result."""
        texts, token_ids, kinds, last = [], [], [], None
        for last in steps:
            texts.append(last.text)
            token_ids += last.token_ids
            kinds += last.kinds
        return cls("".join(texts), token_ids, kinds, last.stats if last is not None else Stats(), drafter)


class IncrementalDetokenizer:
    """Decodes a growing token list piece by piece, holding back incomplete UTF-8 sequences."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # start of the window re-decoded for context (keeps spacing right)
        self._read = 0  # tokens already turned into text

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        before = self._decode(self._ids[self._prefix : self._read])
        after = self._decode(self._ids[self._prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self._ids)
            return after[len(before) :]
        return ""

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


class Generation:
    """Bookkeeping for one generation: emits Steps, applies EOS / stop strings / max_new_tokens."""

    def __init__(self, tokenizer, prompt_ids: Sequence[int], config: GenerationConfig, eos_token_ids: set[int]):
        self.prompt_ids = list(prompt_ids)
        self.config = config
        self.eos_token_ids = eos_token_ids
        self.token_ids: list[int] = []
        self.text = ""  # all text decoded so far (cut at a stop string)
        self._unreleased: list[tuple[str, str]] = []  # decoded but not yet streamed, as (text, kind)
        self._released = 0  # characters streamed so far
        self.stats = Stats(prompt_tokens=len(self.prompt_ids))
        self._detokenizer = IncrementalDetokenizer(tokenizer)
        # The clock runs only while the generator computes: time the consumer spends between
        # steps (rendering, or running the other pane of a race) is not charged to this method.
        self._busy = 0.0
        self._resumed = time.perf_counter()

    def resume(self) -> None:
        """Restart the clock; the loops call this when the consumer asks for the next step."""
        self._resumed = time.perf_counter()

    def _elapsed(self) -> float:
        now = time.perf_counter()
        self._busy += now - self._resumed
        self._resumed = now
        return self._busy

    @property
    def remaining(self) -> int:
        return self.config.max_new_tokens - len(self.token_ids)

    def emit(self, token_ids: Sequence[int], kinds: Sequence[str]) -> Step:
        """Record the tokens a step produced, cut at the first stopping point, and report them."""
        kept_ids, kept_kinds = [], []
        stop_reason = None
        for token, kind in zip(token_ids, kinds):
            if token in self.eos_token_ids:
                stop_reason = "eos"
                break
            kept_ids.append(int(token))
            kept_kinds.append(kind)
            piece = self._detokenizer.push(int(token))
            if piece:
                self._unreleased.append((piece, kind))
                self.text += piece
            if piece and self._stop_string_at_end(len(piece)):
                stop_reason = "stop_string"
            elif len(self.token_ids) + len(kept_ids) >= self.config.max_new_tokens:
                stop_reason = "max_new_tokens"
            if stop_reason:
                break
        self.token_ids += kept_ids
        self.stats.new_tokens = len(self.token_ids)
        self.stats.seconds = self._elapsed()
        if self.stats.ttft_seconds is None and kept_ids:
            self.stats.ttft_seconds = self.stats.seconds
        self.stats.stop_reason = stop_reason
        if stop_reason == "stop_string":
            self.text = self.text[: min(i for i in map(self.text.find, self.config.stop_strings) if i >= 0)]
        # Until the generation ends, hold back text that may be the start of a stop string.
        pieces = self._release(len(self.text) - (0 if stop_reason else self._may_start_stop_string()))
        return Step(kept_ids, kept_kinds, pieces, "".join(text for text, _ in pieces), self.stats.snapshot(), stop_reason is not None)

    def cancel(self) -> Step:
        """The final Step of a generation stopped from outside."""
        self.stats.stop_reason = "cancelled"
        self.stats.seconds = self._elapsed()
        return Step([], [], [], "", self.stats.snapshot(), True)

    def _stop_string_at_end(self, new_chars: int) -> bool:
        """Did the latest `new_chars` characters complete a stop string?"""
        return any(s in self.text[-(len(s) + new_chars) :] for s in self.config.stop_strings)

    def _may_start_stop_string(self) -> int:
        """Length of the longest end of the text that is the beginning of a stop string."""
        return max(
            (n for s in self.config.stop_strings for n in range(len(s) - 1, 0, -1) if self.text.endswith(s[:n])),
            default=0,
        )

    def _release(self, upto: int) -> list[tuple[str, str]]:
        """Hand out the text up to character `upto` as (text, kind) pieces; keep the rest back."""
        budget = upto - self._released
        pieces = []
        while self._unreleased and budget > 0:
            text, kind = self._unreleased[0]
            if len(text) <= budget:
                pieces.append(self._unreleased.pop(0))
                budget -= len(text)
            else:
                pieces.append((text[:budget], kind))
                self._unreleased[0] = (text[budget:], kind)
                budget = 0
        self._released += sum(len(text) for text, _ in pieces)
        if self._released >= len(self.text):
            self._unreleased.clear()  # text cut at a stop string: the rest is never shown
        return pieces
