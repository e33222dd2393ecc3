"""The Space: autoregressive decoding and speculative sampling race side by side, token by token.

`python app.py` serves on 127.0.0.1:7860; `--share` gives a public link; `--host` / `--port`
choose where it listens (on a Hugging Face Space, SPACE_ID is set and it listens on 0.0.0.0).
The engine in `spec/` does the work and yields steps; this file only renders them.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import html
import logging
import os
import queue
import socket
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import gradio as gr

from spec.config import GenerationConfig
from spec.engine import LoadedModel, ModelRegistry, generate
from spec.generation import Step
from spec.metrics import Stats
from spec.models import ModelError
from spec.presets import CUSTOM, PRESETS, Preset

log = logging.getLogger("app")


# --- Settings (environment variables; command-line flags override host and port) ----------------


def _env(name: str, default, cast=str):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a valid {cast.__name__}") from None


HOST = _env("SPEC_HOST", "0.0.0.0" if os.environ.get("SPACE_ID") else "127.0.0.1")
PORT = _env("SPEC_PORT", 7860, int)
CONCURRENCY = _env("SPEC_CONCURRENCY", 1, int)  # races at once: each one wants every core for a fair measurement
MAX_QUEUE = _env("SPEC_MAX_QUEUE", 16, int)  # visitors waiting beyond this are told the app is busy
MEMORY_BUDGET_GB = _env("SPEC_MEMORY_BUDGET_GB", 12.0, float)  # model weights kept loaded (least recently used go first)
MAX_NEW_TOKENS = _env("SPEC_APP_MAX_NEW_TOKENS", 512, int)  # the slider's upper end
UPDATE_SECONDS = _env("SPEC_APP_UPDATE_SECONDS", 0.05, float)  # at most one page update per this many seconds
PRELOAD = _env("SPEC_APP_PRELOAD", "1") != "0"  # load the default pair at start-up, before the first visitor
DEVICE = _env("SPEC_DEVICE", "CPU")
STOP_GRACE_SECONDS = 1.0  # after Stop, how long a running race has to show its last update before queued ones are dropped

# SPEC_APP_TARGET / SPEC_APP_DRAFT put a pair of your own first in the list (tests use tiny models).
_TARGET, _DRAFT = _env("SPEC_APP_TARGET", None), _env("SPEC_APP_DRAFT", None)
if _TARGET:
    PRESETS = (
        Preset(
            f"{Path(_TARGET).name} (SPEC_APP_TARGET)",
            _TARGET,
            _DRAFT,
            "The pair set by `SPEC_APP_TARGET` and `SPEC_APP_DRAFT` on the server.",
            weight_format=_env("SPEC_APP_WEIGHT_FORMAT", "int8"),
            precision=_env("SPEC_APP_PRECISION", "default"),
            needs_hub=False,
        ),
        *PRESETS,
    )
PRESET_BY_LABEL = {preset.label: preset for preset in PRESETS}
DEFAULT_PRESET = PRESETS[0]

# One registry for every visitor: a model loads once per process and is shared.
registry = ModelRegistry(budget_bytes=int(MEMORY_BUDGET_GB * 2**30))

DRAFTER_CHOICES = [("Draft model", "draft-model"), ("Prompt lookup", "prompt-lookup")]
KIND_LABELS = {  # the speculative pane's colours: (legend label, what it means)
    "accepted": ("accepted draft", "a draft token the target kept"),
    "correction": ("correction", "the target's own token where it rejected a draft"),
    "bonus": ("bonus", "the target's extra token after it kept every draft"),
    "target": ("target step", "a plain target step, made without a draft"),
}

EXAMPLES = [
    (
        "Summarize (prompt lookup shines)",
        "Summarize the following text in two sentences.\n\n"
        "OpenVINO is an open-source toolkit for optimizing and deploying deep learning models. It "
        "converts models from frameworks such as PyTorch and TensorFlow into an intermediate "
        "representation, compresses their weights to 8 or 4 bits, and runs them on CPUs, GPUs and NPUs. "
        "Speculative sampling speeds up text generation: a small draft model proposes several tokens, "
        "and the large target model checks them all in a single forward pass, keeping the ones it "
        "agrees with. The output is exactly what the target model alone would have produced.",
    ),
    (
        "Fix this code",
        "Fix the bug in this Python function and show the corrected function.\n\n"
        "def average(numbers):\n"
        "    total = 0\n"
        "    for number in numbers:\n"
        "        total += number\n"
        "    return total / len(numbers) + 1\n",
    ),
    (
        "Rewrite politely",
        "Rewrite this message so that it sounds friendly and professional.\n\n"
        "hey, the report you sent is wrong again. the numbers in table 2 dont match table 1 and the "
        "chart has no labels. fix it by tomorrow, the client meeting is at 10.",
    ),
    ("Open-ended: a story", "Write a short story about a lighthouse keeper who finds a message in a bottle."),
    ("Open-ended: explain", "Explain to a ten-year-old why the sky is blue."),
]


# --- A short description ---------------------------------------------------------------------

DESCRIPTION = """
# Autoregressive vs speculative decoding, on OpenVINO

**Left:** the target model writes one token per forward pass. **Right:** a cheap drafter guesses
the next K tokens and the target checks all of them in *one* pass, keeping the guesses it would
have made itself. Same text (token for token when greedy), fewer target passes.
The drafter is a small **draft model** of the same family, or **prompt lookup**, which copies
spans of the prompt and shines when the answer repeats its input (summaries, rewrites, code fixes).
"""

MEASUREMENT = """
**How the race is measured.** Both methods run on this machine, by alternating steps: whichever has
used less compute time goes next, so they never compete for the CPU and both panes advance at their
true relative pace. Each method's clock runs only while it computes (rendering and the other
method's turn are not counted); tokens/s is new tokens over that time, and time to first token
includes reading the prompt. Models are loaded before the clocks start.
""" + (
    f"This server runs up to {CONCURRENCY} races at once, so visitors' races can slow each other down.\n"
    if CONCURRENCY > 1
    else ""
)


# --- Generator functions ---------------------------------------------------------------------


class _Sessions:
    """The cancel events of the races running per browser session, so Stop can reach them."""

    def __init__(self):
        self._events: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def track(self, session: str) -> Iterator[threading.Event]:
        event = threading.Event()
        with self._lock:
            self._events.setdefault(session, set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                self._events[session].discard(event)
                if not self._events[session]:
                    del self._events[session]

    def stop(self, session: str) -> int:
        with self._lock:
            events = list(self._events.get(session, ()))
        for event in events:
            event.set()
        return len(events)

    def running(self) -> int:
        with self._lock:
            return sum(len(events) for events in self._events.values())


sessions = _Sessions()
_hub: dict[str, bool | None] = {"reachable": None}  # None until the start-up check has answered


def check_hub() -> bool:
    """Whether the Hugging Face Hub answers from here (HF_HUB_OFFLINE=1 counts as no)."""
    from huggingface_hub import constants

    reachable = False
    if not constants.is_offline_mode():
        host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
        try:
            socket.create_connection((host, 443), timeout=3).close()
            reachable = True
        except OSError:
            pass
    _hub["reachable"] = reachable
    if not reachable:
        log.info("The Hugging Face Hub is unreachable: only the embedded model and local folders will work.")
    return reachable


@dataclass
class _Lane:
    """One side of the race: an engine generator and what it has produced so far."""

    steps: Iterator[Step]
    colour: bool  # wrap each piece in a span named after its provenance
    html: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    finished: bool = False

    @property
    def seconds(self) -> float:
        return self.stats.seconds

    def advance(self) -> None:
        try:
            step = next(self.steps)
        except StopIteration:
            self.finished = True
            return
        self.stats = step.stats
        self.token_ids += step.token_ids
        for text, kind in step.pieces:
            escaped = html.escape(text)
            self.html.append(f'<span class="tok tok-{kind}">{escaped}</span>' if self.colour else escaped)
        self.finished = step.finished


def _pane(lane: _Lane | None, placeholder: str = "") -> str:
    if lane is None or (not lane.html and not lane.finished):
        return f'<div class="pane"><span class="placeholder">{html.escape(placeholder)}</span></div>'
    caret = "" if lane.finished else '<span class="caret"></span>'
    return f'<div class="pane">{"".join(lane.html)}{caret}</div>'


def _cell(label: str, value: str, title: str = "") -> str:
    return f'<div class="stat" title="{html.escape(title)}"><b>{value}</b><span>{label}</span></div>'


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _stats(lane: _Lane | None, speculative: bool) -> str:
    s = lane.stats if lane is not None else Stats()
    cells = [
        _cell("tokens/s", f"{s.tokens_per_second:.1f}", "new tokens / compute time"),
        _cell("time to first token", _seconds(s.ttft_seconds), "prompt prefill plus the first step"),
        _cell("elapsed (compute)", _seconds(s.seconds if s.ttft_seconds is not None else None), "time this method spent computing"),
        _cell("new tokens", str(s.new_tokens)),
        _cell("target calls", str(s.target_calls), "forward passes of the target model, prefill included"),
    ]
    if not speculative:
        return f'<div class="stats">{"".join(cells)}</div>'
    cells += [
        _cell("acceptance rate", f"{s.acceptance_rate:.0%}" if s.drafted else "–", f"{s.accepted} of {s.drafted} verified draft tokens kept (free guesses included)"),
        _cell("tokens per target call", f"{s.tokens_per_target_call:.2f}", "autoregressive decoding makes exactly 1"),
    ]
    return f'<div class="stats">{"".join(cells)}</div>{_histogram(s)}'


def _histogram(s: Stats) -> str:
    """Draft tokens kept per verifying target call, as small bars."""
    counts = s.accepted_histogram
    if not counts and not s.plain_steps:
        return ""
    top = max([*counts, s.plain_steps, 1])
    rows = [
        f'<div class="bar-row"><span class="bar-label">{n} kept</span>'
        f'<span class="bar" style="width:{100 * count / top:.0f}%"></span><span class="bar-count">{count}</span></div>'
        for n, count in enumerate(counts)
    ]
    if s.plain_steps:
        rows.append(
            f'<div class="bar-row"><span class="bar-label">no draft</span>'
            f'<span class="bar plain" style="width:{100 * s.plain_steps / top:.0f}%"></span>'
            f'<span class="bar-count">{s.plain_steps}</span></div>'
        )
    return f'<div class="hist"><div class="hist-title">Draft tokens kept per target call</div>{"".join(rows)}</div>'


def _summary(message: str, kind: str = "info") -> str:
    return f'<div class="summary summary-{kind}">{message}</div>'


def _final_summary(ar: _Lane, sp: _Lane, config: GenerationConfig, pair: Preset, drafter: str) -> str:
    if "cancelled" in (ar.stats.stop_reason, sp.stats.stop_reason):
        return _summary("Stopped. The numbers above cover the tokens produced until then.", "info")
    how = "prompt lookup" if drafter == "prompt-lookup" else "a draft model"
    k = f"K={config.num_assistant_tokens}" + (" (dynamic)" if config.dynamic_k else "")
    ar_speed, sp_speed = ar.stats.tokens_per_second, sp.stats.tokens_per_second
    if ar_speed > 0 and sp_speed > 0:
        ratio = sp_speed / ar_speed
        verdict = f"<b>{ratio:.2f}× faster</b>" if ratio >= 1 else f"<b>{1 / ratio:.2f}× slower</b>"
        speed = f"Speculative with {how}, {k}: {verdict} — {sp_speed:.1f} vs {ar_speed:.1f} tokens/s, both measured."
    else:
        speed = "No tokens were generated, so there is no speed to compare."
    if not config.greedy:
        same = (
            f"Sampling at temperature {config.temperature:g}: the texts may differ, but both follow the "
            "target model's distribution."
        )
    elif ar.token_ids == sp.token_ids:
        same = f"Greedy: the two texts are <b>identical</b>, token for token ({len(ar.token_ids)} tokens). ✓"
    else:
        first = next((i for i, (a, b) in enumerate(zip(ar.token_ids, sp.token_ids)) if a != b), min(len(ar.token_ids), len(sp.token_ids)))
        same = f"Greedy: the texts <b>differ</b> from token {first + 1} on."
        if pair.precision != "f32":
            same += (
                " At the CPU's default precision (bf16 on many CPUs), checking K tokens in one pass can "
                "round a near-tie differently from one-by-one decoding. Tick <i>Exact (f32)</i> under "
                "Advanced for texts identical token for token (its verify calls cost more)."
            )
    return _summary(f"{speed}<br>{same}", "done")


def _loading_status(role_messages: dict[str, str], started: float) -> str:
    lines = "<br>".join(f"{html.escape(role)}: {html.escape(message)}" for role, message in role_messages.items())
    return _summary(f"Loading models ({time.monotonic() - started:.0f} s; only the first use of a pair waits)<br>{lines}", "loading")


_warmed: weakref.WeakSet = weakref.WeakSet()  # compiled models whose first inference has run


def _warm_up(model: LoadedModel) -> LoadedModel:
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


def _load(pair: Preset, target_ref: str, draft_ref: str | None, cancel: threading.Event):
    """Get the pair from the shared registry; yields page updates while it loads, returns (target, draft)."""
    wanted = [("Target", target_ref)] + ([("Draft", draft_ref)] if draft_ref else [])
    keys = {(ref, pair.weight_format, pair.precision, DEVICE) for _, ref in wanted}
    if keys <= set(registry.loaded()):
        models = [_warm_up(registry.get(ref, pair.weight_format, pair.precision, DEVICE)) for _, ref in wanted]
        return models[0], (models[1] if draft_ref else None)

    updates: queue.Queue = queue.Queue()
    result: dict = {}

    def work():
        try:
            models = []
            for role, ref in wanted:
                def progress(message: str, fraction: float | None, role=role) -> None:
                    percent = f" {fraction:.0%}" if fraction is not None else ""
                    updates.put((role, f"{message}{percent}"))

                updates.put((role, f"{ref}: starting"))
                models.append(_warm_up(registry.get(ref, pair.weight_format, pair.precision, DEVICE, progress)))
                updates.put((role, f"{ref}: ready"))
            result["models"] = models
        except BaseException as error:  # handed to the page's thread, which turns it into a message
            result["error"] = error
        finally:
            updates.put(None)

    threading.Thread(target=work, name="load-models", daemon=True).start()
    started, status, blank = time.monotonic(), {}, _pane(None, "Waiting for the models…")
    while True:
        try:
            update = updates.get(timeout=0.5)
        except queue.Empty:
            update = ...
        if update is None:
            break
        if update is not ...:
            status[update[0]] = update[1]
        if cancel.is_set():
            yield blank, blank, _stats(None, False), _stats(None, True), _summary(
                "Stopped. The models keep loading in the background, so the next run starts sooner."
            )
            return None, None
        yield blank, blank, _stats(None, False), _stats(None, True), _loading_status(status, started)
    if "error" in result:
        raise result["error"]
    models = result["models"]
    return models[0], (models[1] if draft_ref else None)


class _Problem(Exception):
    """Something the visitor can fix; the message says what and how."""


def _choose_models(preset_label: str, custom_target: str, custom_draft: str, drafter: str) -> tuple[Preset, str, str | None]:
    """The pair to race and the references to load (the draft only when the drafter needs it)."""
    pair = PRESET_BY_LABEL.get(preset_label)
    if pair is None:
        raise _Problem(f"Unknown model pair {preset_label!r}: pick one from the list.")
    target_ref, draft_ref = pair.target, pair.draft
    if pair.label == CUSTOM:
        target_ref, draft_ref = (custom_target or "").strip(), (custom_draft or "").strip() or None
        if not target_ref:
            raise _Problem("Custom pair: type a target model (a Hub id like owner/name, or a local folder).")
    if drafter not in ("draft-model", "prompt-lookup"):
        raise _Problem("Choose a drafter: draft model or prompt lookup.")
    if drafter == "draft-model" and not draft_ref:
        raise _Problem("This pair has no draft model: choose prompt lookup, or type a draft model in the custom pair.")
    return pair, target_ref, draft_ref if drafter == "draft-model" else None


def _config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed) -> GenerationConfig:
    """The engine's settings from the page's controls; the usual slips become sentences first."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise _Problem("The prompt is empty: type some text, or pick one of the examples.")
    if max_new_tokens is None or int(max_new_tokens) < 1:
        raise _Problem("Max new tokens must be at least 1.")
    if k is None or int(k) < 1:
        raise _Problem("K (tokens drafted per target call) must be at least 1.")
    if temperature is None or temperature < 0:
        raise _Problem("Temperature must be 0 (greedy) or more.")
    if top_p is None or not 0 < top_p <= 1:
        raise _Problem("Top-p must be above 0 and at most 1.")
    if seed is not None and (seed < 0 or seed != int(seed)):
        raise _Problem("The seed must be a whole number, 0 or more (or empty for a random one).")
    return GenerationConfig(
        max_new_tokens=int(max_new_tokens),
        temperature=float(temperature),
        top_p=float(top_p),
        seed=None if seed is None else int(seed),
        num_assistant_tokens=int(k),
        dynamic_k=bool(dynamic_k),
    ).validate()


def race(
    prompt: str,
    preset_label: str,
    custom_target: str,
    custom_draft: str,
    drafter: str,
    k: float,
    dynamic_k: bool,
    temperature: float,
    top_p: float,
    seed: float | None,
    max_new_tokens: float,
    exact: bool,
    request: gr.Request,
) -> Iterator[tuple[str, str, str, str, str]]:
    """Run both methods on the prompt, alternating steps; yields (ar pane, spec pane, ar stats, spec stats, summary)."""
    with sessions.track(getattr(request, "session_hash", None) or "") as cancel:
        try:
            pair, target_ref, draft_ref = _choose_models(preset_label, custom_target, custom_draft, drafter)
            if exact:
                pair = dataclasses.replace(pair, precision="f32")
            config = _config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed)
            target, draft = yield from _load(pair, target_ref, draft_ref, cancel)
            if target is not None:  # None: stopped while loading
                yield from _race(prompt, pair, target, draft, drafter, config, cancel)
            return
        except (_Problem, ModelError) as error:
            message = str(error)
        except ValueError as error:
            message = f"These settings do not work: {error}."
        except Exception as error:
            if _out_of_memory(error):
                message = "The server ran out of memory: try a smaller model pair or fewer new tokens, or come back later."
            else:
                # The prompt stays out of the log; the traceback names only code.
                log.exception("race failed (%s)", type(error).__name__)
                message = "Something went wrong on the server; it has been logged. Please try again."
        # The message stays on the page under the panes as well as in the pop-up.
        blank = _pane(None, "No output.")
        yield blank, blank, _stats(None, False), _stats(None, True), _summary(html.escape(message), "error")
        raise gr.Error(message, print_exception=False)


def _out_of_memory(error: BaseException) -> bool:
    """Python's MemoryError, or OpenVINO failing to allocate (it raises a RuntimeError)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and ("bad_alloc" in text or "allocate" in text))


def _race(prompt: str, pair: Preset, target: LoadedModel, draft: LoadedModel | None, drafter: str, config: GenerationConfig, cancel: threading.Event):
    """The race proper: the method that has used less compute time takes the next step."""
    ar = _Lane(generate(prompt, target, config, "autoregressive", cancel=cancel), colour=False)
    sp = _Lane(generate(prompt, target, config, "speculative", drafter, draft, cancel), colour=True)
    last_update = 0.0
    try:
        while not (ar.finished and sp.finished):
            # On a tie (the very first step) speculative goes first: any cold-start cost the first
            # call still pays then counts against the method being shown off, not the baseline.
            lane = min((lane for lane in (sp, ar) if not lane.finished), key=lambda lane: lane.seconds)
            lane.advance()
            if time.monotonic() - last_update >= UPDATE_SECONDS:
                yield _pane(ar), _pane(sp), _stats(ar, False), _stats(sp, True), _summary(
                    f"Racing… autoregressive {ar.stats.new_tokens} tokens, speculative {sp.stats.new_tokens} tokens "
                    f"(after {ar.seconds:.2f} s and {sp.seconds:.2f} s of compute)."
                )
                last_update = time.monotonic()
        yield _pane(ar), _pane(sp), _stats(ar, False), _stats(sp, True), _final_summary(ar, sp, config, pair, drafter)
    finally:
        # Closing frees each generation's KV cache now, also when the visitor left or pressed Stop.
        ar.steps.close()
        sp.steps.close()


def stop(request: gr.Request) -> None:
    """Stop every race of this browser session; each pane ends at its next step."""
    sessions.stop(getattr(request, "session_hash", None) or "")


def hub_notice():
    """On page load: say plainly when the Hub presets cannot work here, and why."""
    reachable = _hub["reachable"] if _hub["reachable"] is not None else check_hub()
    if reachable:
        return gr.Markdown(visible=False)
    return gr.Markdown(
        "⚠️ **The Hugging Face Hub cannot be reached from this server** (no network, or `HF_HUB_OFFLINE=1`), "
        "so the Hub model pairs work only if they are already cached here. The embedded SmolLM2 model and "
        "local model folders work offline.",
        visible=True,
    )


def choose_preset(label: str):
    """Show the pair's notes, its drafters and (for a custom pair) the two model boxes."""
    pair = PRESET_BY_LABEL.get(label, DEFAULT_PRESET)
    custom = pair.label == CUSTOM
    allowed = ("draft-model", "prompt-lookup") if custom else pair.drafters
    notes = pair.notes
    if (pair.needs_hub or custom) and _hub["reachable"] is False:
        notes += (
            "\n\n⚠️ The Hugging Face Hub is unreachable from this server, so models that are not "
            "cached here cannot be downloaded. The embedded model and local folders work offline."
        )
    return (
        gr.Radio(choices=[c for c in DRAFTER_CHOICES if c[1] in allowed], value=allowed[0]),
        gr.Row(visible=custom),
        notes,
    )


# --- Layout -----------------------------------------------------------------------------------

CSS = """
.gradio-container { max-width: 1280px !important; margin: 0 auto; }
.pane { min-height: 15rem; white-space: pre-wrap; overflow-wrap: anywhere;
  line-height: 1.65; padding: 0.9rem 1rem; border: 1px solid var(--border-color-primary);
  border-radius: var(--radius-lg); background: var(--background-fill-secondary); font-size: 0.95rem; }
.pane .placeholder { color: var(--body-text-color-subdued); font-style: italic; }
.tok { border-radius: 3px; }
.tok-accepted { background: rgba(34, 197, 94, 0.30); }
.tok-correction { background: rgba(249, 115, 22, 0.35); }
.tok-bonus { background: rgba(59, 130, 246, 0.32); }
.caret::after { content: "▍"; animation: blink 1s steps(1) infinite; color: var(--body-text-color-subdued); }
@keyframes blink { 50% { opacity: 0; } }
.legend { display: flex; flex-wrap: wrap; gap: 0.3rem 0.8rem; font-size: 0.8rem; min-height: 1.4rem;
  color: var(--body-text-color-subdued); }
.legend .tok { display: inline-block; width: 1.4rem; height: 0.9rem; vertical-align: -0.1rem; margin-right: 0.2rem; }
.legend .tok-target { border: 1px solid var(--border-color-primary); }
.pane-title { margin: 0.4rem 0 0.1rem; font-size: 1.15rem; font-weight: 600; }
.stats { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 0.45rem; margin-top: 0.5rem; }
.stat { border: 1px solid var(--border-color-primary); border-radius: var(--radius-md); padding: 0.35rem 0.55rem; }
.stat b { display: block; font-size: 1.15rem; font-variant-numeric: tabular-nums; }
.stat span { font-size: 0.75rem; color: var(--body-text-color-subdued); }
.hist { margin-top: 0.6rem; font-size: 0.78rem; }
.hist-title { color: var(--body-text-color-subdued); margin-bottom: 0.2rem; }
.bar-row { display: flex; align-items: center; gap: 0.4rem; height: 1.05rem; }
.bar-label { width: 4.2rem; text-align: right; color: var(--body-text-color-subdued); flex: none; }
.bar { display: inline-block; height: 0.7rem; min-width: 2px; max-width: calc(100% - 8rem);
  background: rgba(34, 197, 94, 0.65); border-radius: 2px; }
.bar.plain { background: rgba(148, 163, 184, 0.7); }
.bar-count { font-variant-numeric: tabular-nums; }
.summary { padding: 0.7rem 1rem; border-radius: var(--radius-lg); border: 1px solid var(--border-color-primary);
  line-height: 1.6; }
.summary-done { border-color: rgba(34, 197, 94, 0.6); background: rgba(34, 197, 94, 0.08); }
.summary-error { border-color: rgba(239, 68, 68, 0.6); background: rgba(239, 68, 68, 0.06); }
.summary-loading { border-color: rgba(59, 130, 246, 0.6); background: rgba(59, 130, 246, 0.06); }
.measurement { font-size: 0.85rem; color: var(--body-text-color-subdued); }
#run, #stop { min-width: 7rem; }
.hidden-control { display: none !important; }
"""

# System fonts: the page must not wait on a font server that an offline workshop cannot reach.
THEME = gr.themes.Soft(
    font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"],
)
LAUNCH_OPTIONS = dict(css=CSS, theme=THEME, show_error=False)


def _legend() -> str:
    chips = "".join(
        f'<span title="{html.escape(meaning)}"><span class="tok tok-{kind}"></span>{html.escape(label)}</span>'
        for kind, (label, meaning) in KIND_LABELS.items()
    )
    return f'<div class="legend">{chips}</div>'


with gr.Blocks(title="Speculative sampling race on OpenVINO") as demo:
    gr.Markdown(DESCRIPTION)
    offline_notice = gr.Markdown(visible=False, elem_id="hub-notice")
    with gr.Row(equal_height=False):
        prompt = gr.Textbox(
            label="Prompt", lines=5, max_lines=14, elem_id="prompt", scale=5,
            placeholder="Ask something, or paste a text and ask to summarize, rewrite or fix it.",
        )
        with gr.Column(scale=1, min_width=140):
            run = gr.Button("Race ▶", variant="primary", elem_id="run")
            stop_button = gr.Button("Stop ■", variant="stop", elem_id="stop")
            cancel_queued = gr.Button("cancel queued races", elem_id="cancel-queued", elem_classes="hidden-control")
    gr.Examples(
        examples=[[text] for _, text in EXAMPLES], inputs=[prompt], example_labels=[label for label, _ in EXAMPLES],
        label="Examples: input-grounded prompts suit prompt lookup; open-ended ones need a draft model",
    )
    with gr.Row():
        preset = gr.Dropdown(
            choices=[p.label for p in PRESETS], value=DEFAULT_PRESET.label, label="Model pair (target + draft)", scale=3
        )
        drafter = gr.Radio(
            choices=[c for c in DRAFTER_CHOICES if c[1] in DEFAULT_PRESET.drafters], value=DEFAULT_PRESET.drafters[0],
            label="Drafter", scale=2,
        )
        max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS, value=128, step=1, label="Max new tokens", scale=2, elem_id="max-new-tokens")
    preset_notes = gr.Markdown(DEFAULT_PRESET.notes)
    with gr.Row(visible=False) as custom_row:
        custom_target = gr.Textbox(label="Target model", placeholder="owner/name or /path/to/model")
        custom_draft = gr.Textbox(label="Draft model (same tokenizer; empty for prompt lookup only)", placeholder="owner/name or /path/to/model")
    with gr.Accordion("Advanced: K, sampling, seed", open=False):
        with gr.Row():
            k = gr.Slider(1, 16, value=4, step=1, label="K: tokens each target call verifies")
            dynamic_k = gr.Checkbox(value=True, label="Dynamic K (adapt K to acceptance; plain steps when drafting does not pay)")
        with gr.Row():
            temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = greedy)")
            top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Top-p")
            seed = gr.Number(value=0, precision=0, label="Seed (empty = random)")
        exact = gr.Checkbox(
            value=False, label="Exact (f32): greedy texts identical token for token; slower verify calls than the CPU's default precision",
        )
    with gr.Row(equal_height=False):
        with gr.Column():
            gr.HTML('<div class="pane-title">Autoregressive</div><div class="legend">one target call per token</div>')
            ar_output = gr.HTML(_pane(None, "The plain decoding appears here."), elem_id="ar-output")
            ar_stats = gr.HTML(_stats(None, False), elem_id="ar-stats")
        with gr.Column():
            gr.HTML('<div class="pane-title">Speculative</div>' + _legend())
            spec_output = gr.HTML(_pane(None, "The speculative decoding appears here."), elem_id="spec-output")
            spec_stats = gr.HTML(_stats(None, True), elem_id="spec-stats")
    summary = gr.HTML(_summary("Type a prompt (or pick an example) and press Race."), elem_id="summary")
    gr.Markdown(MEASUREMENT, elem_classes="measurement")

    # The race is the only heavy event; Stop and the preset switch are cheap and skip the queue.
    race_event = gr.on(
        triggers=[run.click],
        fn=race,
        inputs=[prompt, preset, custom_target, custom_draft, drafter, k, dynamic_k, temperature, top_p, seed, max_new_tokens, exact],
        outputs=[ar_output, spec_output, ar_stats, spec_stats, summary],
        api_name="race",
        concurrency_id="race",
        concurrency_limit=CONCURRENCY,
        show_progress="minimal",
        show_progress_on=[summary],
    )
    # Stop ends a running race at its next step, so it still shows what it made. A moment later a
    # script clicks a hidden control whose listener drops whatever of this visitor's still waits in
    # the queue (Gradio honours `cancels` only on a triggered listener, not on a chained `.then`,
    # and cancelling at once would cut the running race off before its last update).
    stop_button.click(stop, None, None, queue=False, api_name="stop").then(
        None, None, None, queue=False, api_visibility="private",
        js=f"() => new Promise(done => setTimeout(() => {{ document.querySelector('#cancel-queued')?.click(); done(); }}, {STOP_GRACE_SECONDS * 1000:.0f}))",
    )
    cancel_queued.click(None, None, None, queue=False, cancels=[race_event], api_visibility="private")
    preset.change(choose_preset, preset, [drafter, custom_row, preset_notes], queue=False, api_visibility="private")
    demo.load(hub_notice, None, offline_notice, queue=False, api_visibility="private")

demo.queue(default_concurrency_limit=CONCURRENCY, max_size=MAX_QUEUE)


def _preload() -> None:
    """Load the default pair and ask whether the Hub answers, so the first visitor does not wait."""
    check_hub()
    if not PRELOAD:
        return
    for ref in (DEFAULT_PRESET.target, DEFAULT_PRESET.draft):
        if ref:
            try:
                _warm_up(registry.get(ref, DEFAULT_PRESET.weight_format, DEFAULT_PRESET.precision, DEVICE))
                log.info("Preloaded %s", ref)
            except Exception as error:  # the first race reports it properly
                log.warning("Could not preload %s: %s", ref, str(error).splitlines()[0] if str(error) else type(error).__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Race autoregressive against speculative decoding in the browser.")
    parser.add_argument("--host", default=HOST, help=f"address to listen on (default {HOST}; env SPEC_HOST)")
    parser.add_argument("--port", type=int, default=PORT, help=f"port (default {PORT}; env SPEC_PORT)")
    parser.add_argument("--share", action="store_true", help="also serve on a public gradio.live link")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    threading.Thread(target=_preload, name="preload", daemon=True).start()
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, **LAUNCH_OPTIONS)


if __name__ == "__main__":
    main()
