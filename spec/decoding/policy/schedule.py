"""The one interface of the drafting policy: a schedule plans each round and learns from it."""
from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence


class Round(NamedTuple):
    k: int  # drafts the verify call checks (its width is k + 1); 0: a plain one-token step instead
    draft_length: int  # of which the drafter makes; free guesses fill the rest
    source: str | None = None  # for the hybrid drafter: which of its drafters makes them


class Schedule(Protocol):
    """Plans each round of speculative decoding and learns from the target calls it planned, as
    transformers' CandidateGenerator drafts and then updates its strategy. The loop asks for the
    next round, then reports each call the target made: the prompt's, a plain step's or a round's."""

    def next_round(self, context: Sequence[int]) -> Round:
        """The next round for `context` (the prompt and every token kept so far); k 0: a plain step."""

    def observe_prefill(self) -> None:
        """The prompt went through the target: the next call changes width."""

    def observe_plain(self, seconds: float) -> None:
        """A plain one-token target step took `seconds`."""

    def observe_round(
        self, drafted: int, accepted: int, draft_seconds: float, verify_seconds: float, catch_up_seconds: float = 0.0,
        draft_calls: int = 0,
    ) -> None:
        """Learn from the round just planned."""
