"""Drafting across tokenizers: a draft model whose vocabulary differs from the target's.

The draft model proposes greedily in its own vocabulary; its text is encoded with the target's
tokenizer, and those target tokens enter the verify call as deterministic drafts (q one-hot). The
acceptance rule then keeps greedy output token for token equal to autoregressive decoding, and
sampled output distributed exactly as p, whatever the draft proposed. What the draft proposes
only decides how often it is right, so boundaries are handled on purpose:

- the draft's text is re-encoded together with the context's last target tokens, from the first
  point where that re-encoding reproduces them (a token boundary both tokenizations agree on);
- the last target token is dropped, since more text could have made it part of a longer one;
- text that ends inside a multi-byte character is cut before it;
- special tokens are never proposed (their text is encoded as ordinary text, and any special id ends
  the proposal), and a draft that ends with its end-of-sequence token proposes nothing past it;
- after verification the draft's cache is rolled back to the longest prefix of its tokens whose
  text the target kept, and what the target added is fed with the next draft step, in one call
  (no separate catch-up call), whose time counts as the round's: dynamic K sees everything a round
  costs but reading the prompt (or what a pause skipped).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

import numpy as np

from spec.decoding.drafters import Drafter, Proposal

if TYPE_CHECKING:
    from spec.models.runtime import StatefulLM

_ANCHOR_TOKENS = 3  # how many of the context's last target tokens re-encoding may start from
_MAX_DRAFT_STEPS = 3  # draft steps per target token asked for, at most (tokenizers split text differently)


def complete_text(text: str) -> str:
    """`text` without a trailing incomplete character (decoders show one as U+FFFD)."""
    return text.rstrip("\ufffd")


def to_target_tokens(target_tokenizer, context_tail: Sequence[int], draft_text: str, ended: bool) -> list[int]:
    """Target tokens for `draft_text`, the draft's continuation of a context ending in `context_tail`.

    ended: the draft finished its text (end of sequence), so its last token cannot grow any longer.
    """
    draft_text = complete_text(draft_text)
    if not draft_text:
        return []
    special = set(target_tokenizer.all_special_ids)

    def encode(text: str) -> list[int]:
        # split_special_tokens: "<|im_end|>" written out by the draft is text, not the special token.
        return target_tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]

    tokens = None
    for anchor in range(min(_ANCHOR_TOKENS, len(context_tail)), 0, -1):
        tail = list(context_tail[-anchor:])
        if any(t in special for t in tail):
            continue
        prefix = target_tokenizer.decode(tail, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if "\ufffd" in prefix:
            continue  # the tail holds part of a character: no clean boundary there
        encoded = encode(prefix + draft_text)
        if encoded[:anchor] == tail:  # re-encoding agrees with the tokens the target already has
            tokens = encoded[anchor:]
            break
    if tokens is None:
        tokens = encode(draft_text)
    if not ended and tokens:
        tokens = tokens[:-1]  # more text might have merged into it
    for i, token in enumerate(tokens):
        if token in special:
            return tokens[:i]
    return tokens


class CrossTokenizerDrafter(Drafter):
    """A draft model with a tokenizer of its own, drafting target tokens through its text."""

    name = "draft model, cross-tokenizer"

    def __init__(
        self,
        cache: "StatefulLM",
        draft_tokenizer,
        target_tokenizer,
        draft_prompt_ids: Sequence[int],
        target_prompt_length: int,
        draft_eos_ids: set[int],
        draft_vocab_size: int,
        token_ids: np.ndarray | None = None,
    ):
        self.cache = cache
        self.draft_tokenizer, self.target_tokenizer = draft_tokenizer, target_tokenizer
        self.prompt = list(draft_prompt_ids)  # the prompt in the draft's own chat template
        self.target_prompt_length = target_prompt_length
        self.eos = draft_eos_ids
        self.vocab_size = draft_vocab_size
        self.token_ids = token_ids  # the token each logit stands for, when the draft scores only its frequent ones
        self._cached: list[int] = []  # draft tokens in the draft's KV cache, the prompt first
        self._texts: list[str] = []  # per generated draft token in the cache: the generated text up to it

    def propose(self, context: Sequence[int], n: int, source: str | None = None) -> Proposal:
        started = time.perf_counter()
        text = self._decode(self.target_tokenizer, list(context[self.target_prompt_length :]))
        if n <= 0 or text.endswith("\ufffd"):  # the context ends inside a character: no clean place to go on from
            return Proposal(np.empty(0, dtype=np.int64), None, time.perf_counter() - started)
        pending = self._sync(text)
        # Reading the prompt, or all the target wrote during a pause, is no cost of an ordinary round
        # (dynamic K must not judge the draft by it); what the target added in one round is.
        catching_up = len(pending) > 2 * n + 2
        catch_up = 0.0
        drafted: list[int] = []
        ended = False
        for step in range(_MAX_DRAFT_STEPS * n):
            call_started = time.perf_counter()
            logits = self.cache.forward(pending, keep=1)  # the first call also feeds what the target added
            if step == 0 and catching_up:
                catch_up = time.perf_counter() - call_started
            self._remember(pending)
            if self.token_ids is None:
                token = int(logits[-1][: self.vocab_size].argmax())
            else:
                token = int(self.token_ids[logits[-1][: len(self.token_ids)].argmax()])
            if token in self.eos:
                ended = True
                break
            drafted.append(token)
            pending = [token]  # fed with the next step, if there is one
            if len(self._target_tokens(context, drafted, ended=False)) >= n:
                break
        tokens = self._target_tokens(context, drafted, ended)[:n]
        calls = step + 1 - (1 if catching_up else 0)  # the catch-up call is no cost of an ordinary round
        return Proposal(np.asarray(tokens, dtype=np.int64), None, time.perf_counter() - started, catch_up, calls=calls)

    def roll_back(self, context: Sequence[int]) -> None:
        pass  # the next proposal compares texts and rolls the draft's cache back then

    def release(self) -> None:
        self.cache.release()

    def _target_tokens(self, context: Sequence[int], drafted: list[int], ended: bool) -> list[int]:
        draft_text = self._decode(self.draft_tokenizer, drafted)
        return to_target_tokens(self.target_tokenizer, context[-_ANCHOR_TOKENS:], draft_text, ended)

    @staticmethod
    def _decode(tokenizer, ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _encode(self, text: str) -> list[int]:
        if not text:
            return []
        return self.draft_tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]

    def _sync(self, text: str) -> list[int]:
        """Roll the draft's cache back to its longest prefix whose text the target kept, and return
        the draft tokens to feed with the next draft step so that the draft has read all of `text`."""
        prompt = len(self.prompt)
        if len(self._cached) < prompt:  # the first round: the prompt and the target's first token, in one call
            self.cache.reset()
            self._cached, self._texts = [], []
            return self.prompt + self._encode(text)
        keep = 0
        while keep < len(self._texts) and text.startswith(self._texts[keep]):
            keep += 1
        feed = self._encode(text[len(self._texts[keep - 1]) if keep else 0 :])
        length = prompt + keep
        if not feed:  # nothing new to read: re-feed the last token, whose logits the next step needs
            length -= 1
            feed = [self._cached[length]]
        self.cache.trim(length)
        del self._cached[length:]
        del self._texts[max(0, length - prompt) :]
        return feed

    def _remember(self, fed: list[int]) -> None:
        prompt = len(self.prompt)
        for token in fed:
            self._cached.append(token)
            if len(self._cached) > prompt:
                self._texts.append(self._decode(self.draft_tokenizer, self._cached[prompt:]))
