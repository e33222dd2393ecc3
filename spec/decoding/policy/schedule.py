"""The one interface of the drafting policy: a schedule plans each round and learns from it."""
from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence, runtime_checkable


class Round(NamedTuple):
    k: int  # drafts the verify call checks (its width is k + 1); 0: a plain one-token step instead
    draft_length: int  # of which the drafter makes; free guesses fill the rest
    source: str | None = None  # for the hybrid drafter: which of its drafters makes them


class RoundResult(NamedTuple):
    """What a round did, as the loop measured it."""

    drafted: int  # tokens the drafter made (not the free guesses that filled the rest of the width)
    accepted: int  # drafts the target kept, guesses included
    draft_seconds: float  # drafting, the catch-up excluded
    verify_seconds: float  # the verify call, its sampling and acceptance included (as a plain step's seconds include its sampling)
    catch_up_seconds: float = 0.0  # the draft model first reading what it had not seen (the prompt, or rounds it did not draft)
    draft_calls: int = 0  # the draft model's calls, the catch-up excluded (0: the drafter did not say)


@runtime_checkable
class Schedule(Protocol):
    """Plans each round of speculative decoding and learns from the target calls it planned, as
    transformers' CandidateGenerator drafts and then updates its strategy. The loop asks for the
    next round, how wide to verify what was drafted, then reports each call the target made: the
    prompt's (or another generation's), a plain step's or a round's."""

    def next_round(self, context: Sequence[int]) -> Round:
        """The next round for `context` (the prompt and every token kept so far); k 0: a plain step."""

    def verify_k(self, drafted: int) -> int:
        """The round's K once its drafter has made `drafted` tokens (fewer than planned where a draft
        model stopped after a token it doubts): the planned K, or a narrower call where the free
        guesses that would fill the rest are not worth their width. Between max(1, drafted) and the
        planned K."""

    def observe_other_call(self, width: int | None = None) -> None:
        """The target's last call, of `width` tokens (None: not known), was none of this schedule's
        (the prompt's, or another generation's on the same compiled model): the next call is priced,
        and learned from, as one right after a call of that width."""

    def observe_plain(self, seconds: float) -> None:
        """A plain one-token target step took `seconds`."""

    def observe_round(self, result: RoundResult) -> None:
        """Learn from how the round just planned went."""
