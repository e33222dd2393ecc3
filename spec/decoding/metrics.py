"""Running statistics of one generation, as shown under each pane and printed by --json."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


@dataclass
class Stats:
    new_tokens: int = 0  # tokens generated after the prompt
    seconds: float = 0.0  # time spent computing, prefill to latest token (the consumer's time between steps excluded)
    ttft_seconds: float | None = None  # time to first token (prefill + first step)
    prompt_tokens: int = 0
    target_calls: int = 0  # target forward passes, prefill included (each may verify several tokens)
    drafted: int = 0  # draft tokens verified (K per verify call: the drafter's and the free guesses)
    draft_tokens: int = 0  # of which the drafter made (a draft model's cost is per token it makes)
    accepted: int = 0  # draft tokens the target kept ...
    accepted_lookup: int = 0  # ... of which prompt lookup (or a free guess) proposed
    drafted_by: str | None = None  # what drafted, in words (e.g. "draft model, cross-tokenizer")
    plain_steps: int = 0  # one-token target calls after the prefill (all of autoregressive decoding; dynamic K's fallback)
    target_seconds: float = 0.0  # time spent in target calls (prefill excluded)
    verify_seconds: float = 0.0  # of which in verify calls (K+1 tokens each)
    draft_seconds: float = 0.0  # time spent drafting
    draft_catch_up_seconds: float = 0.0  # of which a draft model read the prompt, or what was written while it sat out
    accepted_histogram: list[int] = field(default_factory=list)  # [n] = target calls that kept n draft tokens
    stop_reason: str | None = None  # "eos", "stop_string", "max_new_tokens", "cancelled"
    compiled_with: str | None = None  # the target's compile settings for this method, as timing on this CPU chose them

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after the first ÷ compute time after the first token: decoding speed, prefill left out."""
        if self.ttft_seconds is None or self.new_tokens < 2 or self.seconds <= self.ttft_seconds:
            return 0.0
        return (self.new_tokens - 1) / (self.seconds - self.ttft_seconds)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_target_call(self) -> float:
        return self.new_tokens / self.target_calls if self.target_calls else 0.0

    @property
    def verify_calls(self) -> int:
        return sum(self.accepted_histogram)

    @property
    def step_seconds(self) -> float | None:
        """Mean time of a one-token target call, or None before one was made."""
        return (self.target_seconds - self.verify_seconds) / self.plain_steps if self.plain_steps else None

    @property
    def verify_call_seconds(self) -> float | None:
        """Mean time of a verify call, or None before one was made."""
        return self.verify_seconds / self.verify_calls if self.verify_calls else None

    def snapshot(self) -> "Stats":
        """A copy that later steps of the generation leave as it is."""
        return replace(self, accepted_histogram=list(self.accepted_histogram))

    def record_plain(self, seconds: float) -> None:
        """A one-token target call after the prompt's took `seconds`."""
        self.target_calls += 1
        self.plain_steps += 1
        self.target_seconds += seconds

    def record_round(self, k: int, accepted: int, accepted_lookup: int, draft_tokens: int, draft_seconds: float,
                     catch_up_seconds: float, verify_seconds: float) -> None:
        """A round of speculative decoding: the drafter made `draft_tokens` (in `draft_seconds`, of
        which `catch_up_seconds` catching up), free guesses filled the rest of the K drafts, and one
        verify call of `verify_seconds` kept `accepted` of them (`accepted_lookup` of those lookups)."""
        self.target_calls += 1
        self.target_seconds += verify_seconds
        self.verify_seconds += verify_seconds
        self.draft_seconds += draft_seconds
        self.draft_catch_up_seconds += catch_up_seconds
        self.draft_tokens += draft_tokens
        self.drafted += k
        self.accepted += accepted
        self.accepted_lookup += accepted_lookup
        if len(self.accepted_histogram) <= accepted:
            self.accepted_histogram.extend([0] * (accepted + 1 - len(self.accepted_histogram)))
        self.accepted_histogram[accepted] += 1

    def as_dict(self) -> dict:
        out = asdict(self)
        out.update(
            tokens_per_second=self.tokens_per_second,
            decode_tokens_per_second=self.decode_tokens_per_second,
            acceptance_rate=self.acceptance_rate,
            tokens_per_target_call=self.tokens_per_target_call,
        )
        return out
