"""The race: autoregressive decoding against speculative sampling on one prompt, step by step.

Both methods run in this process, taking turns: whichever has used less compute time goes next
and keeps going until it is TURN_SECONDS ahead, so they never compete for the CPU and both advance
at their true relative pace. Each method's clock runs only while it computes (see
spec.decoding.generation), so the consumer's rendering and the other method's turn are not charged
to it. Models load (and warm up) before any clock starts.

A race is bounded (`Limits`): a prompt too long for the pair is refused (`check_prompt`), and the
two lanes stop together when the race's time runs out. On a shared server the scheduler
(spec.serving.scheduler) decides when a race runs and records what `load_pair` and `run_race` yield.

`run_race` yields a RaceUpdate per step; `explain` says why speculative wins or loses, from what the
race itself measured.
"""
from __future__ import annotations

import json
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Iterator

from spec.config import AUTOREGRESSIVE, SPECULATIVE, GenerationConfig, ModelKey
from spec.decoding.engine import encode_prompt, stream
from spec.decoding.generation import Step
from spec.decoding.metrics import Stats
from spec.decoding.policy import expected_tokens
from spec.models.registry import LoadedModel, ModelRegistry

WAITING, LOADING, RACING, DONE, STOPPED = "waiting", "loading", "racing", "done", "stopped"  # a race's phase
CANCELLED, OUT_OF_TIME = "cancelled", "out of time"  # Verdict.stopped: Stop (or the visitor left); the time budget ran out
REPLACED = "replaced"  # Verdict.stopped: its visitor asked for another race while this one waited

# New tokens each lane must make before a speed-up means something: a short race's speed-up is
# mostly noise on a shared machine, so with fewer tokens the page calls it uncertain instead of
# naming a winner.
MIN_TOKENS_FOR_VERDICT = 64

# How far ahead in compute time a lane runs before the other takes over: switching after every
# step makes each step dearer, and the recording shows both lanes moving together all the same
# (spec.serving.recording).
TURN_SECONDS = 0.5


@dataclass(frozen=True)
class Limits:
    """What one race may take from a shared server."""

    max_prompt_tokens: int = 2048  # prompt tokens, chat template included; the model's context bounds it too
    max_race_seconds: float | None = 120.0  # wall-clock seconds the lanes race before both stop; None: no limit


class PromptTooLong(ValueError):
    """The prompt does not fit the race's limits; str(e) says by how much and what to do."""


@dataclass
class Lane:
    """One method's side of the race: everything it has produced so far."""

    mode: str  # AUTOREGRESSIVE or SPECULATIVE
    steps: Iterator[Step] = field(repr=False)
    pieces: list[tuple[str, str]] = field(default_factory=list)  # (text, provenance) in order
    token_ids: list[int] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    trace: list[tuple[float, int]] = field(default_factory=list)  # (compute seconds, new tokens) after each step
    finished: bool = False

    @property
    def seconds(self) -> float:
        return self.stats.seconds

    def advance(self) -> None:
        """Run this method's next step."""
        try:
            step = next(self.steps)
        except StopIteration:
            self.finished = True
            return
        self.stats = step.stats
        self.token_ids += step.token_ids
        self.pieces += step.pieces
        self.trace.append((step.stats.seconds, step.stats.new_tokens))
        self.finished = step.finished


@dataclass(frozen=True)
class Verdict:
    """Who won, by how much, whether that is more than noise, and whether the texts agree."""

    speedup: float | None  # speculative ÷ autoregressive decode tokens/s; None until both have decoded
    settled: bool  # both lanes made MIN_TOKENS_FOR_VERDICT tokens: fewer make the speed-up mostly noise
    identical: bool | None  # greedy only: the same tokens; None when sampling (texts may rightly differ)
    first_difference: int | None  # index of the first differing token, when not identical
    stopped: str | None  # why the race ended early (CANCELLED, OUT_OF_TIME, REPLACED); None when both lanes finished


@dataclass(frozen=True)
class Explanation:
    """Why speculative is faster or slower, from this race's own measurements.

    Leviathan et al.'s model: a round verifies K drafts in one target call, each kept with
    probability α while the ones before it were kept, and yields (1 − α^(K+1)) / (1 − α) tokens
    for the price of the drafting plus one verify call. Here both prices are measured against the
    autoregressive lane's one-token step, in this race, on this machine.
    """

    speedup: float | None  # measured: speculative ÷ autoregressive decode tokens/s
    settled: bool  # enough decode tokens on both lanes to call a winner
    tokens: int  # the fewer new tokens of the two lanes: what the speed-up is measured on
    tokens_per_call: float  # speculative tokens per target call (autoregressive makes 1)
    alpha: float | None  # chance the target keeps a draft token given it kept the earlier ones; None before a verify call
    step_seconds: float | None  # autoregressive: mean one-token step
    verify_seconds: float | None  # speculative: mean verify call (K+1 tokens)
    verify_cost: float | None  # verify_seconds ÷ step_seconds
    draft_cost: float | None  # drafting per verify call ÷ step_seconds (about 0 for prompt lookup)
    predicted: float | None  # the speed-up Leviathan et al.'s formula gives for these measurements


@dataclass
class RaceUpdate:
    phase: str  # LOADING, RACING, DONE or STOPPED
    autoregressive: Lane | None = None
    speculative: Lane | None = None
    loading: dict[str, str] = field(default_factory=dict)  # role ("Target", "Draft") -> latest progress message
    loading_seconds: float = 0.0
    verdict: Verdict | None = None  # set when the race is DONE or STOPPED


def context_length(model: LoadedModel) -> int | None:
    """The model's context window from its config.json (max_position_embeddings), or None if unstated."""
    path = model.resolved.path / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        if isinstance(config.get(name), int) and config[name] > 0:
            return config[name]
    return None


def check_prompt(prompt: str, target: LoadedModel, config: GenerationConfig, limits: Limits) -> int:
    """The prompt's length in tokens (chat template included); PromptTooLong when it and the new
    tokens would not fit the model's context, or it is longer than the server allows."""
    context = context_length(target)
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


def run_race(
    prompt: str,
    target: LoadedModel,
    draft: LoadedModel | None,
    drafter: str,
    config: GenerationConfig,
    cancel: threading.Event,
    max_seconds: float | None = None,
    turn: float | None = None,
) -> Iterator[RaceUpdate]:
    """The race proper: the method that has used less compute time takes the next steps, until it
    is `turn` seconds ahead, and so on until both finish, `cancel` is set, or `max_seconds` of
    wall-clock time have passed. `turn` defaults to TURN_SECONDS, read at call time."""
    turn = TURN_SECONDS if turn is None else turn
    ar = Lane(AUTOREGRESSIVE, stream(prompt, target, config, cancel=cancel))
    sp = Lane(SPECULATIVE, stream(prompt, target, config, draft=draft, drafter=drafter, cancel=cancel))
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    out_of_time = False
    # Speculative goes first: any cold-start cost the first call still pays then counts against
    # the method being shown off, not the baseline.
    lane, other = sp, ar
    try:
        while not (ar.finished and sp.finished):
            if deadline is not None and time.monotonic() > deadline:
                out_of_time = True
                break
            if lane.finished or (not other.finished and lane.seconds > other.seconds + turn):
                lane, other = other, lane
            lane.advance()
            if not (ar.finished and sp.finished):
                yield RaceUpdate(RACING, ar, sp)
        result = verdict(ar, sp, config, OUT_OF_TIME if out_of_time else None)
        yield RaceUpdate(STOPPED if result.stopped else DONE, ar, sp, verdict=result)
    finally:
        # Closing frees each generation's KV cache now, also when the visitor left or pressed Stop.
        ar.steps.close()
        sp.steps.close()


def lane_numbers(lane: Lane, target: str | None, draft: str | None, drafter: str | None) -> dict:
    """One lane as one flat JSON-ready dict, with the keys of `python -m spec run --json`: its text,
    token ids, mode, the models and drafter that made it, and its statistics."""
    return {
        "text": "".join(text for text, _ in lane.pieces), "token_ids": list(lane.token_ids), "mode": lane.mode,
        "drafter": drafter, "target": target, "draft": draft, **lane.stats.as_dict(),
    }


def measured_speedup(ar: Stats, sp: Stats) -> tuple[float | None, bool]:
    """(speculative ÷ autoregressive decode tokens/s, whether both made MIN_TOKENS_FOR_VERDICT tokens).

    Decode speed leaves the prefill out: both lanes read the same prompt the same way, and short
    answers would otherwise mostly measure that.
    """
    ar_speed, sp_speed = ar.decode_tokens_per_second, sp.decode_tokens_per_second
    speedup = sp_speed / ar_speed if ar_speed > 0 and sp_speed > 0 else None
    settled = speedup is not None and min(ar.new_tokens, sp.new_tokens) >= MIN_TOKENS_FOR_VERDICT
    return speedup, settled


def verdict(ar: Lane, sp: Lane, config: GenerationConfig, stopped: str | None = None) -> Verdict:
    """Compare two lanes at the end of a race; `stopped` says why it ended early (else a lane's Stop)."""
    if stopped is None and CANCELLED in (ar.stats.stop_reason, sp.stats.stop_reason):
        stopped = CANCELLED
    speedup, settled = measured_speedup(ar.stats, sp.stats)
    if not config.greedy:
        return Verdict(speedup, settled, None, None, stopped)
    if ar.token_ids == sp.token_ids:
        return Verdict(speedup, settled, True, None, stopped)
    pairs = zip(ar.token_ids, sp.token_ids)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ar.token_ids), len(sp.token_ids)))
    if stopped and first == min(len(ar.token_ids), len(sp.token_ids)):  # one is a prefix of the other: cut short, not different
        return Verdict(speedup, settled, True, None, stopped)
    return Verdict(speedup, settled, False, first, stopped)


def explain(ar: Stats, sp: Stats, k: int) -> Explanation:
    """Why speculative is as fast as it is, from the two lanes' statistics so far (K = `k`)."""
    speedup, settled = measured_speedup(ar, sp)
    rounds = sp.verify_calls
    all_kept = sp.accepted_histogram[k] if len(sp.accepted_histogram) > k else 0
    # Maximum-likelihood α for prefix acceptance: each round is a run of kept drafts ended by a
    # rejection, or by the K-th draft. (accepted ÷ drafted would count drafts after a rejection,
    # which the target never judged, as rejected.)
    judged = sp.accepted + (rounds - all_kept)
    alpha = sp.accepted / judged if judged else None
    step, verify = ar.step_seconds, sp.verify_call_seconds
    verify_cost = verify / step if verify is not None and step else None
    draft_cost = sp.draft_seconds / rounds / step if rounds and step else None
    predicted = None
    if alpha is not None and verify_cost is not None and draft_cost is not None:
        # Rounds at the formula's rate, plain steps (dynamic K's fallback) at one token per step.
        tokens = rounds * expected_tokens(alpha, k) + sp.plain_steps
        cost = rounds * (draft_cost + verify_cost) + sp.plain_steps
        predicted = tokens / cost
    return Explanation(
        speedup, settled, min(ar.new_tokens, sp.new_tokens), sp.tokens_per_target_call, alpha,
        step, verify, verify_cost, draft_cost, predicted,
    )


_warmed: weakref.WeakSet = weakref.WeakSet()  # compiled models whose first inference has run


def warm_up(model: LoadedModel) -> LoadedModel:
    """Run a throwaway inference once per compiled model.

    A model's first call pays one-off set-up costs (tens of ms); the race must not charge them
    to whichever method happens to go first.
    """
    if model.model not in _warmed:
        cache = model.model.new_cache()
        cache.forward(list(range(8)))  # a prompt-sized call, then a one-token decode call
        cache.forward([0])
        cache.release()  # the first race gets this warm infer request
        _warmed.add(model.model)
    return model


def load_pair(
    registry: ModelRegistry, target_key: ModelKey, draft_key: ModelKey | None, cancel: threading.Event
) -> Iterator[RaceUpdate]:
    """Get the pair from the shared registry, warmed up; yields LOADING updates while it loads.

    Returns (target, draft or None), or None when stopped while loading (an operator's model goes
    on loading in the background, so the next race starts sooner; a visitor's stops once nobody
    waits for it, see ModelRegistry.get).
    """
    wanted = [("Target", target_key)] + ([("Draft", draft_key)] if draft_key else [])
    if {key for _, key in wanted} <= set(registry.loaded()):
        models = [warm_up(registry.get(key)) for _, key in wanted]
        return models[0], (models[1] if draft_key else None)

    updates: queue.Queue = queue.Queue()
    result: dict = {}

    def work() -> None:
        try:
            models = []
            for role, key in wanted:
                def progress(message: str, fraction: float | None, role=role) -> None:
                    percent = f" {fraction:.0%}" if fraction is not None else ""
                    updates.put((role, f"{message}{percent}"))

                updates.put((role, f"{key.ref}: starting"))
                # Only a visitor's model stops loading with the race: the operator's are worth finishing.
                models.append(warm_up(registry.get(key, progress, cancel if key.hub_only else None)))
                updates.put((role, f"{key.ref}: ready"))
            result["models"] = models
        except BaseException as error:  # handed to the caller's thread, which raises it
            result["error"] = error
        finally:
            updates.put(None)

    threading.Thread(target=work, name="load-models", daemon=True).start()
    started, status = time.monotonic(), {}
    while True:
        try:
            update = updates.get(timeout=0.5)
        except queue.Empty:
            update = ...
        if update is None or cancel.is_set():
            break
        if update is not ...:
            status[update[0]] = update[1]
        yield RaceUpdate(LOADING, loading=dict(status), loading_seconds=time.monotonic() - started)
    if cancel.is_set():
        return None
    if "error" in result:
        raise result["error"]
    models = result["models"]
    return models[0], (models[1] if draft_key else None)
