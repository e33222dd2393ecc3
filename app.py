"""The Space: autoregressive decoding and speculative sampling race side by side, token by token.

`python app.py` serves on 127.0.0.1:7860; `--share` gives a public link; `--host` / `--port`
choose where it listens (on a Hugging Face Space, SPACE_ID is set and it listens on 0.0.0.0).
The engine's serving side (`spec.serving`) computes each distinct race once, records it and plays
it to every visitor who asks for it; this file only renders what it yields.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import threading
from pathlib import Path
from typing import Iterator

import gradio as gr

import outputs
import render
from bad_requests import MIDDLEWARE as ANSWERED, quiet_input_checks
from page_fix import MIDDLEWARE
from page_stream import PageStreams
from spec.config import F32
from spec.decoding.plugins import PLUGINS
from spec.errors import ModelError
from spec.models import hub, library_output, torch_free
from spec.models.conversion_cache import models_dir
from spec.models.embedded import QUICK_REF
from spec.models.registry import ModelRegistry
from spec.models.visitors import VisitorModels
from spec.progress import TerminalProgress
from spec.serving import warmup
from spec.serving.audience import Audience, page_url, public_address
from spec.serving.examples import EXAMPLES
from spec.serving.hub_status import HubStatus
from spec.serving.limits import Limits
from spec.serving.phases import RacePhase
from spec.serving.playback import watch
from spec.serving.presets import CUSTOM, PRESETS, Preset, operator_pair, pair_keys
from spec.serving.recording import RaceRequest
from spec.serving.requests import choose_pair, flag, generation_config, offered_drafters, readable
from spec.serving.scheduler import Busy, Scheduler
from spec.serving.sessions import Sessions
from spec.serving.settings import ServerSettings
from spec.serving.store import RecordingStore

# --- Settings (environment variables, spec/serving/settings.py; flags override host and port) ---

S = ServerSettings.from_env()
ALLOW_LOCAL_MODELS = S.local_models_allowed(S.host, share=False)  # main() decides again from --host and --share
LIMITS = Limits(max_prompt_tokens=S.max_prompt_tokens, max_race_seconds=S.max_race_seconds or None)
# The controls' ranges, which the API shares (Gradio's own checks are off, so that out-of-range
# input gets a sentence, not a traceback in the server log), and their starting values.
RANGES = dict(k=(1, 16), temperature=(0.0, 2.0), top_p=(0.05, 1.0), max_new_tokens=(1, S.max_new_tokens))
DEFAULTS = dict(max_new_tokens=128, k=4, dynamic_k=True, temperature=0.0, top_p=1.0, seed=0)

if S.target:  # SPEC_APP_TARGET / SPEC_APP_DRAFT put a pair of your own first in the list
    PRESETS = (operator_pair(S.target, S.draft, S.weight_format, S.precision), *PRESETS)
PRESET_BY_LABEL, DEFAULT_PRESET = {preset.label: preset for preset in PRESETS}, PRESETS[0]
# While the default pair is prepared for its first use (minutes), the page races on this one.
QUICK_PRESET = next((p for p in PRESETS if p.target == QUICK_REF), DEFAULT_PRESET)
# The drafters the page offers, in the order shown; a pair offers those in its Preset.drafters.
DRAFTER_CHOICES = [(plugin.label, name) for name, plugin in PLUGINS.items()]

# Visitors' models (a custom pair on a shared server) are weighed and bounded; the operator's never.
visitor_models = VisitorModels(S.visitor_limits(), protected={ref for p in PRESETS for ref in (p.target, p.draft) if ref})
registry = ModelRegistry(int(S.memory_budget_gb * 2**30), visitor_models, curves_later=True)  # one for every visitor: models load once
sessions = Sessions()  # each visitor's Stop
page_streams = PageStreams()  # each page's race updates between the first and the last, outside Gradio's queue
audience = Audience()  # the browser sessions with the page open, for the presenter's room view
# Finished races and what they learned of each pair are kept beside the models: a restarted server replays them and drafts as they learned to.
store = RecordingStore(S.stored_races, int(S.stored_mb * 2**20), models_dir() / "recordings")
scheduler = Scheduler(registry, LIMITS, S.concurrency, S.max_queue, store, models_dir())  # one computation per distinct race
hub_status = HubStatus()  # whether the Hub answers, asked once
_watches = itertools.count(1)  # each watch of a race resets the page's panes once

# --- A short description --------------------------------------------------------------------

LEAD = ("**Autoregressive** decoding writes one token per pass of the target model; **speculative** "
        "decoding lets a drafter guess K tokens that the target checks in *one* pass. Pick an example and press Race.")

# --- Handlers ----------------------------------------------------------------------------------


def _request(prompt, preset_label, custom_target, custom_draft, drafter, k, dynamic_k, temperature, top_p, seed,
             max_new_tokens, exact) -> tuple[Preset, RaceRequest]:
    pair = choose_pair(PRESET_BY_LABEL, preset_label, drafter, {v: n for n, v in DRAFTER_CHOICES},
                       hub_status.reachable is not False, hub.cached)
    target_ref, draft_ref = pair.models(drafter, str(custom_target or ""), str(custom_draft or ""))
    if flag(exact, "Exact"):
        pair = dataclasses.replace(pair, precision=F32)
    config = generation_config(prompt, max_new_tokens, k, dynamic_k, temperature, top_p, seed, RANGES)
    hub_only = pair.label == CUSTOM and not ALLOW_LOCAL_MODELS  # a visitor's model: never a server path
    target, draft = pair_keys(target_ref, draft_ref, S.device, precision=pair.precision, hub_only=hub_only, presets=PRESETS)
    return pair, RaceRequest(prompt, target, draft, drafter, config)


def race(prompt: str, preset_label: str, custom_target: str, custom_draft: str, drafter: str, k: float,
         dynamic_k: bool, temperature: float, top_p: float, seed: float | None, max_new_tokens: float, exact: bool,
         request: gr.Request, *, fresh: bool = False, shown=outputs.api, streamed: bool = False) -> Iterator[tuple]:
    """The race the visitor asks for, as it was computed (a replay), is being computed (joined) or will be once
    its turn comes (live); yields the API's outputs (outputs.api), or the page's if `streamed` (outputs.PageFeed)."""
    shown = outputs.page if streamed else shown
    session = getattr(request, "session_hash", None) or ""
    with sessions.track(session) as cancel:
        pair = None
        try:
            pair, wanted = _request(prompt, preset_label, custom_target, custom_draft, drafter, k, dynamic_k,
                                    temperature, top_p, seed, max_new_tokens, exact)
            # One place in line per visitor: a race this session still waits for is replaced by this one.
            recording, how = scheduler.submit(wanted, fresh, session or None, cancel)
        except Busy as full:
            yield shown(render.busy(full.running, full.waiting))
            return
        except (ValueError, ModelError) as error:
            message = readable(str(error), pair, ALLOW_LOCAL_MODELS)
            yield shown(render.failure(message))
            raise gr.Error(message, print_exception=False) from None
        try:
            with outputs.routing(shown, page_streams if streamed else None, cancel) as route:
                watch_id, first, raced = next(_watches), True, render.raced_on(pair, wanted)
                for view in watch(recording, how, scheduler.place, cancel, S.update_seconds):
                    if view.phase == RacePhase.FAILED:
                        view.error = readable(view.error or "", pair, ALLOW_LOCAL_MODELS)
                    update = render.outputs(view, wanted.config, drafter, pair.precision == F32, LIMITS.max_race_seconds,
                                            first, watch_id, raced)
                    if (routed := route(update, view.phase.ended)) is not None:
                        yield routed
                    first = first and view.phase in (RacePhase.WAITING, RacePhase.LOADING)  # the panes reset with the first tokens
            if view.phase == RacePhase.FAILED:
                raise gr.Error(view.error, print_exception=False)
        finally:
            scheduler.leave(recording)


race_live = outputs.variant(race, "The same race, computed afresh (not a replay); its inputs are race's, named the same in the API.", fresh=True)


def stop(request: gr.Request) -> None:
    """Stop watching every race of this browser session; a race nobody else watches stops too."""
    sessions.stop(getattr(request, "session_hash", None) or "")


def room_view(request: gr.Request) -> str:
    """The page's public address as a QR code for a room to scan (the Space's host, the --share
    link, or the address this browser used if it is not this machine's own), and how many watch."""
    page = page_url(getattr(request, "headers", None) or {})
    return render.room(public_address(os.environ.get("SPACE_HOST"), demo.share_url, page), len(audience))


def arrive(request: gr.Request) -> tuple[gr.Column, str | dict, gr.Timer]:
    """A page opened: count it in; with `?present` in its address it opens on the room view."""
    audience.arrive(getattr(request, "session_hash", None) or "")
    present = "present" in (getattr(request, "query_params", None) or {})
    return gr.Column(visible=present), room_view(request) if present else gr.skip(), gr.Timer(active=present)


def show_room(request: gr.Request) -> tuple[gr.Column, str, gr.Timer]:
    """The room view, its count kept fresh while it shows."""
    return gr.Column(visible=True), room_view(request), gr.Timer(active=True)


def leave(request: gr.Request) -> None:
    """A tab closed: count it out."""
    audience.leave(getattr(request, "session_hash", None) or "")


def on_load() -> tuple:
    """On page load: the pairs that can run here (the others named once, small, at the foot of the
    page), the default pair, or the quick one while the default is still being prepared."""
    reachable = hub_status.check(ALLOW_LOCAL_MODELS)
    unavailable = {p.label: reason for p in PRESETS if (reason := p.unavailable(reachable, hub.cached))}
    notice = gr.Markdown(render.unavailable(unavailable), visible=bool(unavailable))
    preparing = warmup.preparation(registry, DEFAULT_PRESET.own_keys(S.device))[0] is not None
    label = QUICK_PRESET.label if preparing else DEFAULT_PRESET.label
    placeholder = "owner/name or /path/to/model" if ALLOW_LOCAL_MODELS else "owner/name (a Hugging Face model id)"
    return (gr.Dropdown(choices=[p.label for p in PRESETS if p.label not in unavailable], value=label),
            *choose_preset(label), notice, gr.Textbox(placeholder=placeholder), gr.Textbox(placeholder=placeholder))


def preparation_status(chosen: str) -> tuple[gr.HTML, gr.Timer]:
    """A line above the prompt while the default pair is prepared, saying where it stands; once it
    is ready, a pointer to it for a visitor still on the quick pair. The timer stops then."""
    message, ready = warmup.preparation(registry, DEFAULT_PRESET.own_keys(S.device))
    if message is not None:
        return gr.HTML(render.preparing(DEFAULT_PRESET.label, message, QUICK_PRESET.label), visible=True), gr.Timer(active=True)
    return gr.HTML(render.prepared(DEFAULT_PRESET.label), visible=ready and chosen == QUICK_PRESET.label), gr.Timer(active=False)


def drafter_choices(pair: Preset, custom_draft: str = "", current: str | None = None) -> gr.Radio:
    """The drafters `pair` offers; a custom pair offers the draft model only once one is typed."""
    offered, chosen = offered_drafters(pair, DRAFTER_CHOICES, custom_draft, current)
    return gr.Radio(choices=offered, value=chosen)


def choose_preset(label: str) -> tuple[gr.Radio, gr.Row, str]:
    """The pair's drafters, its notes, and (for a custom pair) the two model boxes."""
    pair = PRESET_BY_LABEL.get(label, DEFAULT_PRESET)
    unreachable = hub.hub_name() if hub_status.reachable is False else None
    return drafter_choices(pair), gr.Row(visible=pair.label == CUSTOM), render.pair_notes(pair, ALLOW_LOCAL_MODELS, unreachable)


def custom_draft_typed(label: str, draft: str, current: str, had_draft: bool) -> tuple[gr.Radio, bool]:
    """A draft typed into an empty box selects the pair's default (hybrid): lookup was the only choice, not the visitor's."""
    return drafter_choices(PRESET_BY_LABEL.get(label, DEFAULT_PRESET), draft, current if had_draft else None), bool((draft or "").strip())


# --- Layout -----------------------------------------------------------------------------------

# System fonts: the page must not wait on a font server that an offline workshop cannot reach.
THEME = gr.themes.Soft(font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "sans-serif"], font_mono=["ui-monospace", "monospace"])
HERE = Path(__file__).parent
# Each watching visitor holds a worker thread while the race plays: room for a workshop. page_fix.py: an idle page draws no frames.
LAUNCH_OPTIONS = dict(css=(HERE / "app.css").read_text(), theme=THEME, show_error=False, max_threads=120,
                      app_kwargs=dict(middleware=[*MIDDLEWARE, *ANSWERED, page_streams.middleware()]))

with gr.Blocks(title="Speculative sampling race on OpenVINO") as demo:
    gr.Markdown("# Autoregressive vs speculative decoding, on OpenVINO\n" + LEAD, elem_id="intro")
    preparing = gr.HTML(visible=False, elem_id="preparing")
    with gr.Row(equal_height=False, elem_id="top"):
        with gr.Column(scale=5, min_width=320, elem_id="ask"):
            prompt = gr.Textbox(value=EXAMPLES[0][1], label="Prompt", lines=12, max_lines=12, elem_id="prompt",
                                placeholder="Paste some code and ask to rename, document, fix or convert it, or ask a question.")
            with gr.Row(elem_id="actions"):
                run = gr.Button("Race ▶", variant="primary", elem_id="run", scale=0, min_width=110)
                stop_button = gr.Button("Stop ■", variant="stop", elem_id="stop", scale=0, min_width=100)
                live_button = gr.Button("Race it live ↻", elem_id="race-live", scale=0, min_width=140, visible=False)
                status = gr.HTML(render.status(), elem_id="status", scale=1, min_width=160)
        with gr.Column(scale=4, min_width=320, elem_id="result"):
            speedup = gr.HTML(render.speedup(None), elem_id="speedup")
            gr.HTML(render.race_chart(), elem_id="race-chart")
    gr.Examples(examples=[[text] for _, text in EXAMPLES], inputs=[prompt], example_labels=[label for label, _ in EXAMPLES],
                label="Examples for the coding model: prompt lookup shines when the answer copies the prompt", elem_id="examples")
    with gr.Row(equal_height=False, elem_id="panes"):
        with gr.Column(min_width=300):
            gr.HTML('<div class="pane-title">Autoregressive</div><div class="legend">one target call per token</div>')
            gr.HTML(render.pane("ar", "The plain decoding appears here."), elem_id="ar-output")
            ar_stats = gr.HTML(render.stats(None, False), elem_id="ar-stats")
        with gr.Column(min_width=300):
            gr.HTML('<div class="pane-title">Speculative</div>' + render.LEGEND)
            gr.HTML(render.pane("sp", "The speculative decoding appears here."), elem_id="spec-output")
            spec_stats = gr.HTML(render.stats(None, True), elem_id="spec-stats")
    summary = gr.HTML(render.summary("Pick an example (or type a prompt) and press Race."), elem_id="summary")
    # The race's live part: each update's new tokens and chart points, drawn by the browser (app.js).
    feed = gr.HTML("", html_template="<span hidden></span>", js_on_load=(HERE / "app.js").read_text(), elem_id="feed")
    with gr.Row(elem_id="controls"):
        preset = gr.Dropdown(choices=[p.label for p in PRESETS], value=DEFAULT_PRESET.label,
                             label="Model pair (target + draft)", scale=3, min_width=240)
        drafter = gr.Radio(choices=[c for c in DRAFTER_CHOICES if c[1] in DEFAULT_PRESET.drafters],
                           value=DEFAULT_PRESET.drafters[0], label="Drafter", scale=2, min_width=200)
        max_new_tokens = gr.Slider(*RANGES["max_new_tokens"], value=DEFAULTS["max_new_tokens"], step=1,
                                   label="Max new tokens", scale=2, min_width=200, elem_id="max-new-tokens")
        exact = gr.Checkbox(value=False, label=render.EXACT_LABEL, info=render.EXACT_INFO, scale=2, min_width=200, elem_id="exact")
    preset_notes = gr.Markdown(DEFAULT_PRESET.notes)
    with gr.Row(visible=False) as custom_row:
        custom_target = gr.Textbox("", label="Target model", placeholder="owner/name")  # "": optional in the API
        custom_draft = gr.Textbox("", label="Draft model (optional: leave it empty to draft by lookup alone)", placeholder="owner/name")
    with gr.Accordion("Advanced: K, sampling, seed", open=False):
        with gr.Row():
            k = gr.Slider(*RANGES["k"], value=DEFAULTS["k"], step=1, label="K: tokens each target call verifies")
            dynamic_k = gr.Checkbox(value=DEFAULTS["dynamic_k"], label="Dynamic K (adapt K to acceptance; plain steps when drafting does not pay)")
        with gr.Row():
            temperature = gr.Slider(*RANGES["temperature"], value=DEFAULTS["temperature"], step=0.05, label="Temperature (0 = greedy)")
            top_p = gr.Slider(*RANGES["top_p"], value=DEFAULTS["top_p"], step=0.05, label="Top-p")
            seed = gr.Number(value=DEFAULTS["seed"], precision=0, label="Seed (empty = random)")
    with gr.Accordion("What is this, and how is it measured?", open=False, elem_id="about"):
        gr.Markdown(render.about(S.max_prompt_tokens, S.max_race_seconds, S.concurrency), elem_classes="measurement")
        numbers = gr.JSON(label="This race's numbers (what the /race API returns last)", elem_id="numbers")
    offline_notice = gr.Markdown(visible=False, elem_id="hub-notice", elem_classes="operator-note")
    room_open = gr.Button("Show QR for the room", size="sm", elem_id="room-open")
    with gr.Column(visible=False, elem_id="room-view") as room:  # the presenter's screen; also at ?present
        room_close = gr.Button("Close ✕", size="sm", elem_id="room-close")
        room_html = gr.HTML(elem_id="room")
    room_timer = gr.Timer(5.0, active=False)  # the watching count, while the room view shows

    # Watching a race is cheap (the scheduler computes each distinct race once, on its own threads),
    # so every visitor's watch runs at once; the scheduler keeps the line. Preprocessing is off: the
    # race checks its inputs itself, for page and API alike. Stop and the preset switch skip the queue.
    race_inputs = [prompt, preset, custom_target, custom_draft, drafter, k, dynamic_k, temperature, top_p, seed, max_new_tokens, exact]
    # The API answers with an output per element; the page takes one, whose markup app.js sets (each
    # output is a component Gradio re-renders, with its status tracker, on every update).
    race_outputs = [status, speedup, feed, ar_stats, spec_stats, summary, numbers, live_button]
    shown = [feed, numbers, live_button]
    heavy = dict(concurrency_id="race", concurrency_limit=100, preprocess=False, show_progress="hidden")
    on_page = dict(api_visibility="private", **heavy)  # named: else they take race's name, and the API's /race another
    run.click(outputs.variant(race, streamed=True), race_inputs, shown, api_name="race_page", **on_page)
    live_button.click(outputs.variant(race, fresh=True, streamed=True), race_inputs, shown, api_name="race_live_page", **on_page)
    api = gr.Button(visible=False)  # /race and /race_live's trigger: no visitor presses it
    # The API's outputs go as they are (outputs.api): Gradio's postprocessing of each, a thread hop, costs the race's cores.
    api.click(race, race_inputs, race_outputs, api_name="race", postprocess=False, **heavy)
    api.click(race_live, race_inputs, race_outputs, api_name="race_live", postprocess=False, **heavy)
    stop_button.click(stop, None, None, queue=False, api_name="stop")
    quiet = dict(queue=False, api_visibility="private", show_progress="hidden", preprocess=False)  # each handler checks its own inputs
    preset.change(choose_preset, preset, [drafter, custom_row, preset_notes], **quiet)
    custom_draft.change(custom_draft_typed, [preset, custom_draft, drafter, had := gr.State(False)], [drafter, had], **quiet)
    timer = gr.Timer(2.0)
    demo.load(on_load, None, [preset, drafter, custom_row, preset_notes, offline_notice, custom_target, custom_draft],
              **quiet).then(preparation_status, preset, [preparing, timer], **quiet)
    timer.tick(preparation_status, preset, [preparing, timer], **quiet)
    demo.load(arrive, None, [room, room_html, room_timer], **quiet)
    demo.unload(leave)
    room_open.click(show_room, None, [room, room_html, room_timer], **quiet)
    room_close.click(lambda: (gr.Column(visible=False), gr.Timer(active=False)), None, [room, room_timer], **quiet)
    room_timer.tick(room_view, None, room_html, **quiet)

demo.queue(default_concurrency_limit=S.concurrency, max_size=400)
warmup.poll_less(demo._queue)  # not every millisecond: the race needs the cores
quiet_input_checks(demo)  # bad_requests.py: a sentence for the client, no traceback in the log


def example_requests() -> list[RaceRequest]:
    """The page's examples as a visitor's click sends them: the default pair and the controls' starting values."""
    drafter = DEFAULT_PRESET.drafters[0]
    return [_request(text, DEFAULT_PRESET.label, "", "", drafter, DEFAULTS["k"], DEFAULTS["dynamic_k"], DEFAULTS["temperature"],
                     DEFAULTS["top_p"], DEFAULTS["seed"], DEFAULTS["max_new_tokens"], False)[1] for _, text in EXAMPLES]


def _preload() -> None:
    """Ask whether the Hub answers (beside: a silent network costs up to its timeout), load the quick
    pair and the default one, then race the page's examples so that a click is a replay."""
    threading.Thread(target=hub_status.check, args=(ALLOW_LOCAL_MODELS,), name="hub-check", daemon=True).start()
    if S.preload:
        ready = warmup.preload_presets(registry, (QUICK_PRESET, DEFAULT_PRESET), S.device,
                                       TerminalProgress(library_output.terminal(), "[app] "))
        if S.preheat and DEFAULT_PRESET.label in ready:
            warmup.preheat(scheduler, example_requests)


def main(argv: list[str] | None = None) -> None:
    global ALLOW_LOCAL_MODELS
    args = S.flags(argv)
    ALLOW_LOCAL_MODELS = S.local_models_allowed(args.host, args.share)  # others can open the page: Hub ids only
    library_output.log_to_terminal()  # the server's own lines, even while a conversion captures library output; not every request
    torch_free.hide_torch()  # the server never computes with torch: a checkpoint is exported in a child that has it
    threading.Thread(target=_preload, name="preload", daemon=True).start()
    warmup.serve_below_races()  # the web server and every viewer yield the cores to the race they show
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
