"""The Space: autoregressive decoding and speculative sampling race side by side, token by token.

`python app.py` serves on 127.0.0.1:7860; `--share` gives a public link; `--host` / `--port`
choose where it listens (on a Hugging Face Space, SPACE_ID is set and it listens on 0.0.0.0).
The engine (`spec.serving.race`) runs the race, bounds it and keeps visitors in line; it yields its
steps, and this file only renders them.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import gradio as gr

import render
from spec.models import hub
from spec.models import library_output
from spec.config import DRAFT_MODEL, F32, HYBRID, PROMPT_LOOKUP, GenerationConfig, ModelKey
from spec.models.embedded import QUICK_REF
from spec.errors import ModelError
from spec.serving.presets import CUSTOM, PRESETS, Preset
from spec.progress import TerminalProgress
from spec.serving.race import MIN_TOKENS_FOR_VERDICT, RACING, Limits, race as run_race, warm_up
from spec.models.registry import ModelRegistry
from spec.serving.sessions import Sessions, WaitingRoom

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


def _flag(raw: str) -> bool:
    if raw.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if raw.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


_flag.__name__ = "flag (1 or 0)"

ON_SPACE = bool(os.environ.get("SPACE_ID"))
HOST = _env("SPEC_HOST", "0.0.0.0" if ON_SPACE else "127.0.0.1")
PORT = _env("SPEC_PORT", 7860, int)
CONCURRENCY = _env("SPEC_CONCURRENCY", 1, int)  # races at once: each one wants every core for a fair measurement
MAX_QUEUE = _env("SPEC_MAX_QUEUE", 16, int)  # races waiting beyond the running ones; more are told the app is busy
MEMORY_BUDGET_GB = _env("SPEC_MEMORY_BUDGET_GB", 12.0, float)  # model weights kept loaded (least recently used go first)
MAX_NEW_TOKENS = _env("SPEC_APP_MAX_NEW_TOKENS", 512, int)  # the slider's upper end
MAX_PROMPT_TOKENS = _env("SPEC_MAX_PROMPT_TOKENS", 1024, int)  # longer prompts are refused (the model's context bounds them too)
MAX_RACE_SECONDS = _env("SPEC_MAX_RACE_SECONDS", 120.0, float)  # both lanes stop after this long; 0 means no limit
# Custom pairs may name folders on this server only when its operator allows it: by default on a
# local run, never on a Space or behind --share (main() turns it off there unless it is set).
ALLOW_LOCAL_MODELS = _env("SPEC_ALLOW_LOCAL_MODELS", not ON_SPACE, _flag)
UPDATE_SECONDS = _env("SPEC_APP_UPDATE_SECONDS", 0.05, float)  # at most one page update per this many seconds
PRELOAD = _env("SPEC_APP_PRELOAD", "1") != "0"  # load the default pair at start-up, before the first visitor
DEVICE = _env("SPEC_DEVICE", "CPU")
HUB_CHECK_SECONDS = 3.0  # the start-up check of the Hub waits this long for an answer, once

LIMITS = Limits(max_prompt_tokens=MAX_PROMPT_TOKENS, max_race_seconds=MAX_RACE_SECONDS or None)
# The UI's ranges, which the API shares (Gradio's own checks are off, so that out-of-range input
# gets a sentence, not a traceback in the server log).
K_RANGE, TEMPERATURE_RANGE, TOP_P_RANGE, NEW_TOKENS_RANGE = (1, 16), (0.0, 2.0), (0.05, 1.0), (1, MAX_NEW_TOKENS)

# SPEC_APP_TARGET / SPEC_APP_DRAFT put a pair of your own first in the list (tests use tiny models).
_TARGET, _DRAFT = _env("SPEC_APP_TARGET", None), _env("SPEC_APP_DRAFT", None)
if _TARGET:
    PRESETS = (
        Preset(
            f"{Path(_TARGET).name} (SPEC_APP_TARGET)", _TARGET, _DRAFT,
            "The pair set by `SPEC_APP_TARGET` and `SPEC_APP_DRAFT` on the server.",
            weight_format=_env("SPEC_APP_WEIGHT_FORMAT", "int8"), precision=_env("SPEC_APP_PRECISION", "default"),
            needs_hub=False,
        ),
        *PRESETS,
    )
PRESET_BY_LABEL = {preset.label: preset for preset in PRESETS}
DEFAULT_PRESET = PRESETS[0]
# While the default pair is prepared for its first use (minutes), the page races on this one.
QUICK_PRESET = next((p for p in PRESETS if p.target == QUICK_REF), DEFAULT_PRESET)

registry = ModelRegistry(budget_bytes=int(MEMORY_BUDGET_GB * 2**30))  # one for every visitor: models load once
sessions = Sessions()
room = WaitingRoom(CONCURRENCY, MAX_QUEUE)  # races take turns here, and a queued visitor sees its place
_hub: dict[str, bool | None] = {"reachable": None}  # None until the start-up check has answered
_hub_lock = threading.Lock()  # the page's first load and the preload may both ask: the Hub is asked once

# The drafters the page offers, in the order shown; a pair offers those in its Preset.drafters.
DRAFTER_CHOICES = [("Hybrid", HYBRID), ("Draft model", DRAFT_MODEL), ("Prompt lookup", PROMPT_LOOKUP)]

EXAMPLES = [  # (label: what it shows, prompt); each tried on the default pair (README, "The Space")
    (
        "Rewrite SQL: the names carry over",
        "Rewrite this SQL query to use a JOIN instead of the subquery. Keep the column names and reply with the "
        "query only.\n\n"
        "SELECT orders.order_id, orders.order_date, orders.total_amount, orders.status, orders.shipping_city\n"
        "FROM orders\n"
        "WHERE orders.customer_id IN (\n"
        "    SELECT customers.customer_id\n"
        "    FROM customers\n"
        "    WHERE customers.country = 'Germany' AND customers.signup_date >= '2024-01-01'\n"
        ")\n"
        "AND orders.status <> 'cancelled'\n"
        "ORDER BY orders.order_date DESC, orders.total_amount DESC;\n",
    ),
    (
        "Rename a variable: the answer copies the code",
        "Rename the variable `tmp` to `subtotal` everywhere in this function. Reply with the whole function.\n\n"
        "def invoice_total(items, tax_rate, discount=0.0):\n"
        "    tmp = 0.0\n"
        "    for item in items:\n"
        "        price = item[\"price\"] * item[\"quantity\"]\n"
        "        if item.get(\"taxable\", True):\n"
        "            price += price * tax_rate\n"
        "        tmp += price\n"
        "    if discount:\n"
        "        tmp -= tmp * discount\n"
        "    return round(tmp, 2)\n",
    ),
    (
        "Add docstrings: most of the answer is the input",
        "Add a one-line docstring to each function. Reply with the complete code.\n\n"
        "def celsius_to_fahrenheit(celsius):\n"
        "    return celsius * 9 / 5 + 32\n\n\n"
        "def fahrenheit_to_celsius(fahrenheit):\n"
        "    return (fahrenheit - 32) * 5 / 9\n\n\n"
        "def kelvin_to_celsius(kelvin):\n"
        "    return kelvin - 273.15\n",
    ),
    (
        "Fix a bug: a small change in copied code",
        "This function should return the average of the numbers, but it is wrong. Fix it and reply with the "
        "corrected function.\n\n"
        "def average(numbers):\n"
        "    total = 0\n"
        "    for i in range(1, len(numbers)):\n"
        "        total += numbers[i]\n"
        "    return total / len(numbers)\n",
    ),
    (
        "Class to dataclass: same fields, new form",
        "Convert this class to a Python dataclass; keep its method as it is. Reply with the code only.\n\n"
        "class Order:\n"
        "    def __init__(self, order_id, customer, items, shipping_address, discount=0.0, shipped=False):\n"
        "        self.order_id = order_id\n"
        "        self.customer = customer\n"
        "        self.items = items\n"
        "        self.shipping_address = shipping_address\n"
        "        self.discount = discount\n"
        "        self.shipped = shipped\n\n"
        "    def total(self):\n"
        "        subtotal = sum(item.price * item.quantity for item in self.items)\n"
        "        return subtotal * (1 - self.discount)\n",
    ),
    (
        "Open question: little to copy, so little to gain",
        "What is the difference between a list and a tuple in Python? Answer in a few sentences.",
    ),
]


# --- A short description ---------------------------------------------------------------------

DESCRIPTION = f"""
# Autoregressive vs speculative decoding, on OpenVINO

**Autoregressive:** the target model writes one token per forward pass. **Speculative:** a drafter
guesses the next K tokens and the target checks them all in *one* pass, keeping those it would have
chosen itself. The drafter is **prompt lookup**, which copies spans of the prompt (edits, fixes,
rewrites), a small **draft model** (even one with another tokenizer), or the **hybrid**, which
picks the better of the two each round. {render.SAME_TEXT_PROMISE}
"""

MEASUREMENT = f"""
**How the race is measured.** Both methods run on this machine, by alternating steps: whichever has
used less compute time goes next, so they never compete for the CPU and both advance at their true
relative pace. Each method's clock runs only while it computes (rendering and the other method's turn
are not counted). Decode tokens/s counts the tokens after the first over the compute time after the
first token; time to first token is reading the prompt, the same work for both. The speed-up is the
ratio of decode speeds, called only once both made at least {MIN_TOKENS_FOR_VERDICT} tokens. Models are loaded before the
clocks start. This server takes prompts of up to {MAX_PROMPT_TOKENS:,} tokens and stops a race after
{MAX_RACE_SECONDS:.0f} s.
""" + (
    f"It runs up to {CONCURRENCY} races at once, so visitors' races can slow each other down.\n"
    if CONCURRENCY > 1
    else ""
)


# --- Handlers ----------------------------------------------------------------------------------


def _number(value, name: str, bounds: tuple[float, float], whole: bool = False) -> float | int:
    """`value` from the page or the API as a number within `bounds`; a sentence when it is not."""
    low, high = bounds
    shown = repr(value)[:40]
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number from {low:g} to {high:g}, got {shown}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number from {low:g} to {high:g}, got {shown}.") from None
    if not low <= number <= high:  # also false for NaN
        raise ValueError(f"{name} must be from {low:g} to {high:g}, got {shown}.")
    if whole and number != int(number):
        raise ValueError(f"{name} must be a whole number, got {shown}.")
    return int(number) if whole else number


def _pair(preset_label, drafter) -> Preset:
    """The pair the page names, if it can run here with that drafter; a sentence when not."""
    pair = PRESET_BY_LABEL.get(preset_label) if isinstance(preset_label, str) else None
    if pair is None:
        raise ValueError(f"Unknown model pair {str(preset_label)[:80]!r}: pick one from the list.")
    reason = pair.unavailable(_hub["reachable"] is not False, hub.cached)
    if reason:
        raise ValueError(f"“{pair.label}” cannot run on this server: {reason}. Pick another pair.")
    if drafter not in pair.drafters:
        offered = " or ".join(label for label, value in DRAFTER_CHOICES if value in pair.drafters)
        if drafter == DRAFT_MODEL:
            raise ValueError(f"“{pair.label}” has no draft model: choose {offered}.")
        raise ValueError(f"“{pair.label}” offers {offered} as the drafter, not {str(drafter)[:40]!r}.")
    return pair


def _config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed) -> GenerationConfig:
    """The engine's settings from the page's controls (or the API's values); slips become sentences."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type some text, or pick one of the examples.")
    if seed is not None and seed != "":
        seed = _number(seed, "The seed", (0, 2**63 - 1), whole=True)
    return GenerationConfig(
        max_new_tokens=_number(max_new_tokens, "Max new tokens", NEW_TOKENS_RANGE, whole=True),
        temperature=_number(temperature, "Temperature", TEMPERATURE_RANGE),
        top_p=_number(top_p, "Top-p", TOP_P_RANGE),
        seed=None if seed in (None, "") else seed,
        num_assistant_tokens=_number(k, "K", K_RANGE, whole=True),
        dynamic_k=bool(dynamic_k),
    ).validate()


_SERVER_PATH = re.compile(r"(?<![\w.:/~-])(?:~|\.{1,2})?/[^\s'\"`,;:()]+")


def _readable(message: str, pair: Preset | None) -> str:
    """An engine message as the page shows it: a preset named as the dropdown shows it, and (when
    visitors may not use the server's folders) no path on the server."""
    if pair is not None and pair.label != CUSTOM:
        for ref in (pair.target, pair.draft):
            if ref:
                message = message.replace(repr(ref), f"“{pair.label}”").replace(ref, f"“{pair.label}”")
    if not ALLOW_LOCAL_MODELS:
        message = _SERVER_PATH.sub("(a path on the server)", message)
    return message


def _page(outputs: tuple) -> tuple:
    """render's outputs for Gradio: None leaves a component as it is."""
    return tuple(gr.skip() if value is None else value for value in outputs)


def race(
    prompt: str, preset_label: str, custom_target: str, custom_draft: str, drafter: str, k: float, dynamic_k: bool,
    temperature: float, top_p: float, seed: float | None, max_new_tokens: float, exact: bool, request: gr.Request,
) -> Iterator[tuple]:
    """Wait for a turn, then run both methods on the prompt, alternating steps; yields the page's
    (status, speed-up, chart, ar pane, spec pane, ar stats, spec stats, summary)."""
    with sessions.track(getattr(request, "session_hash", None) or "") as cancel:
        pair = None
        try:
            pair = _pair(preset_label, drafter)
            target_ref, draft_ref = pair.models(drafter, str(custom_target or ""), str(custom_draft or ""))
            if exact:
                pair = dataclasses.replace(pair, precision=F32)
            config = _config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed)
            hub_only = pair.label == CUSTOM and not ALLOW_LOCAL_MODELS  # a visitor's model: never a server path
            keys = [None if ref is None else ModelKey(ref, pair.weight_format, pair.precision, DEVICE, hub_only)
                    for ref in (target_ref, draft_ref)]
            last_shown = 0.0
            for update in run_race(prompt, keys[0], keys[1], drafter, config, registry, cancel, LIMITS, room):
                if update.phase != RACING or time.monotonic() - last_shown >= UPDATE_SECONDS:
                    yield _page(render.outputs(update, config, drafter, pair.precision == F32, LIMITS.max_race_seconds))
                    last_shown = time.monotonic()
            return
        except (ValueError, ModelError) as error:
            message = _readable(str(error), pair)
        except Exception as error:
            if _out_of_memory(error):
                message = "The server ran out of memory: try a smaller model pair or fewer new tokens, or come back later."
            else:
                # The prompt stays out of the log; the traceback names only code.
                log.exception("race failed (%s)", type(error).__name__)
                message = "Something went wrong on the server; it has been logged. Please try again."
        # The sentence stays next to Race as well as in the pop-up; the previous race stays on screen.
        yield _page(render.failure(message))
        raise gr.Error(message, print_exception=False)


def _out_of_memory(error: BaseException) -> bool:
    """Python's MemoryError, or OpenVINO failing to allocate (it raises a RuntimeError)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and ("bad_alloc" in text or "allocate" in text))


def stop(request: gr.Request) -> None:
    """Stop every race of this browser session, running or waiting; each pane ends at its next step."""
    sessions.stop(getattr(request, "session_hash", None) or "")


def check_hub() -> bool:
    """Whether the Hub (or the mirror HF_ENDPOINT names) answers: asked once, with a short timeout."""
    with _hub_lock:
        if _hub["reachable"] is None:
            _hub["reachable"] = hub.reachable(timeout=HUB_CHECK_SECONDS)
            if not _hub["reachable"]:
                log.info("%s is unreachable: only the embedded models%s will work.", _sentence_case(hub.hub_name()),
                         " and local folders" if ALLOW_LOCAL_MODELS else "")
        return _hub["reachable"]


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _keys(pair: Preset) -> list[ModelKey]:
    return [ModelKey(ref, pair.weight_format, pair.precision, DEVICE) for ref in (pair.target, pair.draft) if ref]


def _preparing_default() -> bool:
    """Whether the default pair is being prepared (installed, converted or compiled) right now."""
    return any(registry.progress(key) is not None for key in _keys(DEFAULT_PRESET))


def _unavailable() -> dict[str, str]:
    """Label -> why, for the pairs that cannot run on this server."""
    reachable = check_hub()
    return {p.label: reason for p in PRESETS if (reason := p.unavailable(reachable, hub.cached))}


def on_load():
    """On page load: the pairs that can run here (the others named once, with why), the default
    pair, or the quick one while the default is still being prepared."""
    unavailable = _unavailable()
    notice = gr.Markdown(visible=False)
    if unavailable:
        names = ", ".join(f"**{label}**" for label in unavailable)
        notice = gr.Markdown(
            f"⚠️ Not available on this server: {names}, because {next(iter(unavailable.values()))}. "
            "The offline pairs work.", visible=True,
        )
    label = QUICK_PRESET.label if _preparing_default() else DEFAULT_PRESET.label
    choices = [p.label for p in PRESETS if p.label not in unavailable]
    placeholder = "owner/name or /path/to/model" if ALLOW_LOCAL_MODELS else "owner/name (a Hugging Face model id)"
    return (
        gr.Dropdown(choices=choices, value=label), *choose_preset(label), notice,
        gr.Textbox(placeholder=placeholder), gr.Textbox(placeholder=placeholder),
    )


def preparation_status(chosen: str):
    """A line above the prompt while the default pair is prepared, saying where it stands; once it
    is ready, a pointer to it for a visitor still on the quick pair. The timer stops then."""
    progress = [registry.progress(key) for key in _keys(DEFAULT_PRESET)]
    latest = next((p for p in progress if p is not None), None)
    if latest is not None:
        return gr.HTML(render.preparing(DEFAULT_PRESET.label, latest[0], QUICK_PRESET.label), visible=True), gr.Timer(active=True)
    ready = set(_keys(DEFAULT_PRESET)) <= set(registry.loaded())
    return gr.HTML(render.prepared(DEFAULT_PRESET.label), visible=ready and chosen == QUICK_PRESET.label), gr.Timer(active=False)


def drafter_choices(pair: Preset, custom_draft: str = "", current: str | None = None) -> gr.Radio:
    """The drafters `pair` offers; a custom pair offers the draft model only once one is typed."""
    offered = [
        (label, value) for label, value in DRAFTER_CHOICES
        if value in pair.drafters and (pair.label != CUSTOM or value == PROMPT_LOOKUP or (custom_draft or "").strip())
    ]
    values = [value for _, value in offered]
    default = next((d for d in pair.drafters if d in values), values[0] if values else None)
    return gr.Radio(choices=offered, value=current if current in values else default)


def choose_preset(label: str):
    """The pair's drafters, its notes, and (for a custom pair) the two model boxes."""
    pair = PRESET_BY_LABEL.get(label, DEFAULT_PRESET)
    notes = pair.notes
    if pair.label == CUSTOM:
        if not ALLOW_LOCAL_MODELS:
            notes += " This server takes Hugging Face model ids (owner/name) only."
        if _hub["reachable"] is False:
            notes += (f" ⚠️ {_sentence_case(hub.hub_name())} is unreachable from this server: only models already "
                      "cached here will load.")
    return drafter_choices(pair), gr.Row(visible=pair.label == CUSTOM), notes


def custom_draft_typed(label: str, custom_draft: str, current: str):
    return drafter_choices(PRESET_BY_LABEL.get(label, DEFAULT_PRESET), custom_draft, current)


# --- Layout -----------------------------------------------------------------------------------

# System fonts: the page must not wait on a font server that an offline workshop cannot reach.
THEME = gr.themes.Soft(
    font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"],
)
# Waiting races hold a worker thread each while they wait their turn: leave room for them.
LAUNCH_OPTIONS = dict(
    css=(Path(__file__).parent / "app.css").read_text(), theme=THEME, show_error=False,
    max_threads=max(40, CONCURRENCY + MAX_QUEUE + 24),
)

with gr.Blocks(title="Speculative sampling race on OpenVINO") as demo:
    gr.Markdown(DESCRIPTION, elem_id="intro")
    offline_notice = gr.Markdown(visible=False, elem_id="hub-notice")
    preparing = gr.HTML(visible=False, elem_id="preparing")
    with gr.Row(equal_height=False, elem_id="top"):
        with gr.Column(scale=5, min_width=320):
            prompt = gr.Textbox(
                value=EXAMPLES[0][1], label="Prompt", lines=9, max_lines=16, elem_id="prompt",
                placeholder="Paste some code and ask to rename, document, fix or convert it, or ask a question.",
            )
            with gr.Row(elem_id="actions"):
                run = gr.Button("Race ▶", variant="primary", elem_id="run", scale=0, min_width=110)
                stop_button = gr.Button("Stop ■", variant="stop", elem_id="stop", scale=0, min_width=100)
                status = gr.HTML(render.status(), elem_id="status", scale=1, min_width=160)
        with gr.Column(scale=4, min_width=320):
            speedup = gr.HTML(render.speedup(None), elem_id="speedup")
            chart = gr.HTML(render.race_chart(None, None, 128), elem_id="race-chart")
    with gr.Row(elem_id="controls"):
        preset = gr.Dropdown(choices=[p.label for p in PRESETS], value=DEFAULT_PRESET.label, label="Model pair (target + draft)", scale=3, min_width=240)
        drafter = gr.Radio(
            choices=[c for c in DRAFTER_CHOICES if c[1] in DEFAULT_PRESET.drafters], value=DEFAULT_PRESET.drafters[0],
            label="Drafter", scale=2, min_width=200,
        )
        max_new_tokens = gr.Slider(*NEW_TOKENS_RANGE, value=128, step=1, label="Max new tokens", scale=2, min_width=200, elem_id="max-new-tokens")
        exact = gr.Checkbox(value=False, label=render.EXACT_LABEL, info=render.EXACT_INFO, scale=2, min_width=200, elem_id="exact")
    preset_notes = gr.Markdown(DEFAULT_PRESET.notes)
    with gr.Row(visible=False) as custom_row:
        custom_target = gr.Textbox(label="Target model", placeholder="owner/name")
        custom_draft = gr.Textbox(label="Draft model (same tokenizer; empty for prompt lookup only)", placeholder="owner/name")
    gr.Examples(
        examples=[[text] for _, text in EXAMPLES], inputs=[prompt], example_labels=[label for label, _ in EXAMPLES],
        label="Examples for the coding model: prompt lookup shines when the answer copies the prompt",
    )
    with gr.Accordion("Advanced: K, sampling, seed", open=False):
        with gr.Row():
            k = gr.Slider(*K_RANGE, value=4, step=1, label="K: tokens each target call verifies")
            dynamic_k = gr.Checkbox(value=True, label="Dynamic K (adapt K to acceptance; plain steps when drafting does not pay)")
        with gr.Row():
            temperature = gr.Slider(*TEMPERATURE_RANGE, value=0.0, step=0.05, label="Temperature (0 = greedy)")
            top_p = gr.Slider(*TOP_P_RANGE, value=1.0, step=0.05, label="Top-p")
            seed = gr.Number(value=0, precision=0, label="Seed (empty = random)")
    with gr.Row(equal_height=False):
        with gr.Column(min_width=300):
            gr.HTML('<div class="pane-title">Autoregressive</div><div class="legend">one target call per token</div>')
            ar_output = gr.HTML(render.pane(None, "The plain decoding appears here."), elem_id="ar-output")
            ar_stats = gr.HTML(render.stats(None, False), elem_id="ar-stats")
        with gr.Column(min_width=300):
            gr.HTML('<div class="pane-title">Speculative</div>' + render.LEGEND)
            spec_output = gr.HTML(render.pane(None, "The speculative decoding appears here."), elem_id="spec-output")
            spec_stats = gr.HTML(render.stats(None, True), elem_id="spec-stats")
    summary = gr.HTML(render.summary("Pick an example (or type a prompt) and press Race."), elem_id="summary")
    gr.Markdown(MEASUREMENT, elem_classes="measurement")

    # The race is the only heavy event. Its turns are kept by the waiting room (spec.serving.sessions),
    # which tells a waiting visitor its place and a visitor past a full line that the app is busy;
    # Gradio runs every race at once so that they can, and its own queue (a bigger one) is only a
    # backstop. Preprocessing is off: the race checks its inputs itself, the same for page and API.
    # Stop and the preset switch are cheap and skip the queue.
    race_event = gr.on(
        triggers=[run.click], fn=race,
        inputs=[prompt, preset, custom_target, custom_draft, drafter, k, dynamic_k, temperature, top_p, seed, max_new_tokens, exact],
        outputs=[status, speedup, chart, ar_output, spec_output, ar_stats, spec_stats, summary],
        api_name="race", concurrency_id="race", concurrency_limit=CONCURRENCY + MAX_QUEUE + 4,
        preprocess=False, show_progress="hidden",
    )
    stop_button.click(stop, None, None, queue=False, api_name="stop")
    quiet = dict(queue=False, api_visibility="private", show_progress="hidden")
    preset.change(choose_preset, preset, [drafter, custom_row, preset_notes], **quiet)
    custom_draft.change(custom_draft_typed, [preset, custom_draft, drafter], drafter, **quiet)
    timer = gr.Timer(2.0)
    demo.load(
        on_load, None, [preset, drafter, custom_row, preset_notes, offline_notice, custom_target, custom_draft], **quiet,
    ).then(preparation_status, preset, [preparing, timer], **quiet)
    timer.tick(preparation_status, preset, [preparing, timer], **quiet)

demo.queue(default_concurrency_limit=CONCURRENCY, max_size=4 * (CONCURRENCY + MAX_QUEUE))


def _preload() -> None:
    """Ask whether the Hub answers, then load the quick pair and the default one (preparing it on
    first use, minutes), so visitors do not wait; progress goes to the terminal, one line a phase."""
    check_hub()
    if not PRELOAD:
        return
    show = TerminalProgress(library_output.terminal(), "[app] ")
    for pair in dict.fromkeys((QUICK_PRESET, DEFAULT_PRESET)):
        for key in _keys(pair):
            try:
                warm_up(registry.get(key, show))
                show.close()
                log.info("Ready: %s", pair.label)
            except Exception as error:  # the first race reports it properly
                show.close()
                log.warning("Could not load %s: %s", pair.label, str(error).splitlines()[0] if str(error) else type(error).__name__)


def _quiet_logs() -> None:
    """The server's own lines on the terminal, and not every HTTP request a library makes."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=library_output.terminal())
    for noisy in ("httpx", "httpcore", "urllib3", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> None:
    global ALLOW_LOCAL_MODELS
    parser = argparse.ArgumentParser(description="Race autoregressive against speculative decoding in the browser.")
    parser.add_argument("--host", default=HOST, help=f"address to listen on (default {HOST}; env SPEC_HOST)")
    parser.add_argument("--port", type=int, default=PORT, help=f"port (default {PORT}; env SPEC_PORT)")
    parser.add_argument("--share", action="store_true", help="also serve on a public gradio.live link")
    args = parser.parse_args(argv)
    if args.share and not os.environ.get("SPEC_ALLOW_LOCAL_MODELS", "").strip():
        ALLOW_LOCAL_MODELS = False  # a public link: visitors' custom pairs take Hub ids only
    # The server's log goes to the terminal even while a conversion captures what libraries print.
    _quiet_logs()
    threading.Thread(target=_preload, name="preload", daemon=True).start()
    try:
        demo.launch(server_name=args.host, server_port=args.port, share=args.share, **LAUNCH_OPTIONS)
    except OSError as error:
        if "port" not in str(error).lower():
            raise
        print(f"Port {args.port} on {args.host} is in use (or not allowed): choose another with --port N "
              "or SPEC_PORT=N.", file=library_output.terminal())
        sys.exit(1)


if __name__ == "__main__":
    main()
