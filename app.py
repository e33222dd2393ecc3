"""The Space: autoregressive decoding and speculative sampling race side by side, token by token.

`python app.py` serves on 127.0.0.1:7860; `--share` gives a public link; `--host` / `--port`
choose where it listens (on a Hugging Face Space, SPACE_ID is set and it listens on 0.0.0.0).
The engine (`spec.race`) runs the race and yields its steps; this file only renders them.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import threading
import time
from pathlib import Path
from typing import Iterator

import gradio as gr

import render
from spec import hub
from spec import library_output
from spec.config import DRAFT_MODEL, F32, PROMPT_LOOKUP, GenerationConfig, ModelKey
from spec.embedded import QUICK_REF
from spec.errors import ModelError
from spec.presets import CUSTOM, PRESETS, Preset
from spec.progress import TerminalProgress
from spec.race import RACING, race as run_race, warm_up
from spec.registry import ModelRegistry
from spec.sessions import Sessions

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
_hub: dict[str, bool | None] = {"reachable": None}  # None until the start-up check has answered

DRAFTER_CHOICES = [("Draft model", DRAFT_MODEL), ("Prompt lookup", PROMPT_LOOKUP)]

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


# --- Handlers ----------------------------------------------------------------------------------


def _config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed) -> GenerationConfig:
    """The engine's settings from the page's controls; the usual slips become sentences first."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type some text, or pick one of the examples.")
    if seed is not None and (seed < 0 or seed != int(seed)):
        raise ValueError("The seed must be a whole number, 0 or more (or empty for a random one).")
    return GenerationConfig(
        max_new_tokens=int(max_new_tokens), temperature=float(temperature), top_p=float(top_p),
        seed=None if seed is None else int(seed), num_assistant_tokens=int(k), dynamic_k=bool(dynamic_k),
    ).validate()


def race(
    prompt: str, preset_label: str, custom_target: str, custom_draft: str, drafter: str, k: float, dynamic_k: bool,
    temperature: float, top_p: float, seed: float | None, max_new_tokens: float, exact: bool, request: gr.Request,
) -> Iterator[tuple[str, str, str, str, str]]:
    """Run both methods on the prompt, alternating steps; yields (ar pane, spec pane, ar stats, spec stats, summary)."""
    with sessions.track(getattr(request, "session_hash", None) or "") as cancel:
        try:
            pair = PRESET_BY_LABEL.get(preset_label)
            if pair is None:
                raise ValueError(f"Unknown model pair {preset_label!r}: pick one from the list.")
            target_ref, draft_ref = pair.models(drafter, custom_target, custom_draft)
            if exact:
                pair = dataclasses.replace(pair, precision=F32)
            config = _config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed)
            keys = [None if ref is None else ModelKey(ref, pair.weight_format, pair.precision, DEVICE) for ref in (target_ref, draft_ref)]
            last_shown = 0.0
            for update in run_race(prompt, keys[0], keys[1], drafter, config, registry, cancel):
                if update.phase != RACING or time.monotonic() - last_shown >= UPDATE_SECONDS:
                    yield render.outputs(update, config, pair, drafter)
                    last_shown = time.monotonic()
            return
        except (ValueError, ModelError) as error:
            message = str(error)
        except Exception as error:
            if _out_of_memory(error):
                message = "The server ran out of memory: try a smaller model pair or fewer new tokens, or come back later."
            else:
                # The prompt stays out of the log; the traceback names only code.
                log.exception("race failed (%s)", type(error).__name__)
                message = "Something went wrong on the server; it has been logged. Please try again."
        # The message stays on the page under the panes as well as in the pop-up.
        yield render.failure(message)
        raise gr.Error(message, print_exception=False)


def _out_of_memory(error: BaseException) -> bool:
    """Python's MemoryError, or OpenVINO failing to allocate (it raises a RuntimeError)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and ("bad_alloc" in text or "allocate" in text))


def stop(request: gr.Request) -> None:
    """Stop every race of this browser session; each pane ends at its next step."""
    sessions.stop(getattr(request, "session_hash", None) or "")


def check_hub() -> bool:
    _hub["reachable"] = reachable = hub.reachable()
    if not reachable:
        log.info("The Hugging Face Hub is unreachable: only the embedded model and local folders will work.")
    return reachable


def _keys(pair: Preset) -> list[ModelKey]:
    return [ModelKey(ref, pair.weight_format, pair.precision, DEVICE) for ref in (pair.target, pair.draft) if ref]


def _preparing_default() -> bool:
    """Whether the default pair is being prepared (installed, converted or compiled) right now."""
    return any(registry.progress(key) is not None for key in _keys(DEFAULT_PRESET))


def first_preset():
    """On page load: the default pair, or the quick one while the default is still being prepared."""
    return choose_preset(QUICK_PRESET.label if _preparing_default() else DEFAULT_PRESET.label, select=True)


def preparation_status(chosen: str):
    """A line above the prompt while the default pair is prepared, saying where it stands; once it
    is ready, a pointer to it for a visitor still on the quick pair. The timer stops then."""
    progress = [registry.progress(key) for key in _keys(DEFAULT_PRESET)]
    latest = next((p for p in progress if p is not None), None)
    if latest is not None:
        return gr.HTML(render.preparing(DEFAULT_PRESET.label, latest[0], QUICK_PRESET.label), visible=True), gr.Timer(active=True)
    ready = set(_keys(DEFAULT_PRESET)) <= set(registry.loaded())
    return gr.HTML(render.prepared(DEFAULT_PRESET.label), visible=ready and chosen == QUICK_PRESET.label), gr.Timer(active=False)


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


def choose_preset(label: str, select: bool = False):
    """Show the pair's notes, its drafters and (for a custom pair) the two model boxes; with
    `select`, also make it the dropdown's choice."""
    pair = PRESET_BY_LABEL.get(label, DEFAULT_PRESET)
    notes = pair.notes
    if (pair.needs_hub or pair.label == CUSTOM) and _hub["reachable"] is False:
        notes += ("\n\n⚠️ The Hugging Face Hub is unreachable from this server, so models that are not "
                  "cached here cannot be downloaded. The embedded model and local folders work offline.")
    outputs = (
        gr.Radio(choices=[c for c in DRAFTER_CHOICES if c[1] in pair.drafters], value=pair.drafters[0]),
        gr.Row(visible=pair.label == CUSTOM),
        notes,
    )
    return (gr.Dropdown(value=pair.label), *outputs) if select else outputs


# --- Layout -----------------------------------------------------------------------------------

# System fonts: the page must not wait on a font server that an offline workshop cannot reach.
THEME = gr.themes.Soft(
    font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"],
)
LAUNCH_OPTIONS = dict(css=(Path(__file__).parent / "app.css").read_text(), theme=THEME, show_error=False)

with gr.Blocks(title="Speculative sampling race on OpenVINO") as demo:
    gr.Markdown(DESCRIPTION)
    offline_notice = gr.Markdown(visible=False, elem_id="hub-notice")
    preparing = gr.HTML(visible=False, elem_id="preparing")
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
        preset = gr.Dropdown(choices=[p.label for p in PRESETS], value=DEFAULT_PRESET.label, label="Model pair (target + draft)", scale=3)
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
        exact = gr.Checkbox(value=False, label="Exact (f32): greedy texts identical token for token; slower verify calls than the CPU's default precision")
    with gr.Row(equal_height=False):
        with gr.Column():
            gr.HTML('<div class="pane-title">Autoregressive</div><div class="legend">one target call per token</div>')
            ar_output = gr.HTML(render.pane(None, "The plain decoding appears here."), elem_id="ar-output")
            ar_stats = gr.HTML(render.stats(None, False), elem_id="ar-stats")
        with gr.Column():
            gr.HTML('<div class="pane-title">Speculative</div>' + render.LEGEND)
            spec_output = gr.HTML(render.pane(None, "The speculative decoding appears here."), elem_id="spec-output")
            spec_stats = gr.HTML(render.stats(None, True), elem_id="spec-stats")
    summary = gr.HTML(render.summary("Type a prompt (or pick an example) and press Race."), elem_id="summary")
    gr.Markdown(MEASUREMENT, elem_classes="measurement")

    # The race is the only heavy event; Stop and the preset switch are cheap and skip the queue.
    race_event = gr.on(
        triggers=[run.click], fn=race,
        inputs=[prompt, preset, custom_target, custom_draft, drafter, k, dynamic_k, temperature, top_p, seed, max_new_tokens, exact],
        outputs=[ar_output, spec_output, ar_stats, spec_stats, summary],
        api_name="race", concurrency_id="race", concurrency_limit=CONCURRENCY, show_progress="minimal", show_progress_on=[summary],
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
    timer = gr.Timer(2.0)
    demo.load(first_preset, None, [preset, drafter, custom_row, preset_notes], queue=False, api_visibility="private").then(
        preparation_status, preset, [preparing, timer], queue=False, api_visibility="private"
    )
    timer.tick(preparation_status, preset, [preparing, timer], queue=False, api_visibility="private")

demo.queue(default_concurrency_limit=CONCURRENCY, max_size=MAX_QUEUE)


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
                log.info("Ready: %s", key.ref)
            except Exception as error:  # the first race reports it properly
                show.close()
                log.warning("Could not load %s: %s", key.ref, str(error).splitlines()[0] if str(error) else type(error).__name__)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Race autoregressive against speculative decoding in the browser.")
    parser.add_argument("--host", default=HOST, help=f"address to listen on (default {HOST}; env SPEC_HOST)")
    parser.add_argument("--port", type=int, default=PORT, help=f"port (default {PORT}; env SPEC_PORT)")
    parser.add_argument("--share", action="store_true", help="also serve on a public gradio.live link")
    args = parser.parse_args(argv)
    # The server's log goes to the terminal even while a conversion captures what libraries print.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=library_output.terminal())
    threading.Thread(target=_preload, name="preload", daemon=True).start()
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, **LAUNCH_OPTIONS)


if __name__ == "__main__":
    main()
