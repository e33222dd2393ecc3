"""What the benchmark writes down of each generation: a worker's Measurement, and the run's Record
of it (which setting ran on which prompt, in which repeat).

The records are the measurement: bench.report derives every median, ratio and verdict from them,
and a results file keeps them (its `records`, one JSON object each) so that its report can be
derived again (bench.rewrite).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(kw_only=True)
class Measurement:
    """What a worker measured of one generation. Every engine reports the fields without a default;
    the others are ours (openvino-genai reports `ttft_seconds`, and `drafted` and `accepted` where
    its pipeline does), None where an engine does not report them."""

    tokens: list[int] | None = None  # the tokens generated, end of sequence left out (kept for the first repeat only)
    new_tokens: int  # how many
    seconds: float  # wall time from the prompt's token ids to the last token, prefill included
    ttft_seconds: float | None = None  # time to the first token: the prefill and the first step
    prompt_tokens: int  # the prompt's length in tokens
    target_calls: int | None = None  # target forward passes, the prefill included
    plain_steps: int | None = None  # of which one-token steps after the prefill, nothing drafted
    drafted: int | None = None  # draft tokens verified
    draft_tokens: int | None = None  # of which the drafter made (a draft model's cost is per token it makes)
    accepted: int | None = None  # draft tokens the target kept ...
    accepted_lookup: int | None = None  # ... of which prompt lookup (or a free guess) proposed
    corrections: int | None = None  # tokens the target wrote in place of a rejected draft token
    draft_seconds: float | None = None  # time spent drafting
    draft_catch_up_seconds: float | None = None  # of which a draft model read the prompt, or what was written while it sat out
    target_seconds: float | None = None  # time spent in target calls, the prefill excluded


@dataclass(kw_only=True)
class Record(Measurement):
    """One timed generation of a run: its setting, repeat and prompt, and what was measured."""

    setting: int  # index into the run's settings
    repeat: int  # 0 for the first timed repeat (the warm-up is not recorded)
    prompt: str  # the prompt's id in its set

    @classmethod
    def of(cls, setting: int, repeat: int, prompt: str, measured: Measurement) -> Record:
        return cls(setting=setting, repeat=repeat, prompt=prompt, **vars(measured))

    def to_json(self) -> dict:
        """As a results file keeps it: where first, then what its engine reported (None left out)."""
        fields = asdict(self)
        where = {key: fields.pop(key) for key in ("setting", "repeat", "prompt")}
        return where | {key: value for key, value in fields.items() if value is not None}

    @classmethod
    def from_json(cls, row: dict) -> Record:
        """A record as a results file keeps it (to_json); TypeError names a field this version does not know."""
        return cls(**row)


def read_records(rows: list[dict]) -> list[Record]:
    """A results file's `records` as Records."""
    return [Record.from_json(row) for row in rows]
