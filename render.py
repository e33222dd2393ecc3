"""The page's HTML: the speed-up and why, the race chart, both panes, their statistics and the
race's summary, from what a visitor's view of a race holds (spec.serving.playback). `outputs`
gathers one view's changes as a PageUpdate, which app.py hands to Gradio.

Model text is always escaped: it never becomes markup.
"""
from __future__ import annotations

import html
import json
from typing import NamedTuple

import segno

from spec.config import AUTOREGRESSIVE, F32, SPECULATIVE, GenerationConfig
from spec.decoding.metrics import Stats
from spec.decoding.plugins import PLUGINS
from spec.serving.audience import short_link
from spec.serving.lanes import Lane
from spec.serving.numbers import view_numbers
from spec.serving.phases import RacePhase, Viewing
from spec.serving.playback import View, replay_label
from spec.serving.presets import CUSTOM, Preset
from spec.serving.recording import RaceRequest
from spec.serving.verdict import CANCELLED, MIN_TOKENS_FOR_VERDICT, OUT_OF_TIME, REPLACED, Explanation, Verdict, explain

KIND_LABELS = {  # the speculative pane's colours: (legend label, what it means)
    "accepted": ("accepted draft", "a token the draft model proposed and the target kept"),
    "lookup": ("accepted lookup", "a token copied from the prompt (prompt lookup) that the target kept"),
    "correction": ("correction", "the target's own token where it rejected a draft"),
    "bonus": ("bonus", "the target's extra token after it kept every draft"),
    "target": ("target step", "a plain target step, made without a draft"),
}
LEGEND = '<div class="legend">' + "".join(
    f'<span title="{html.escape(meaning)}"><span class="tok tok-{kind}"></span>{html.escape(label)}</span>'
    for kind, (label, meaning) in KIND_LABELS.items()
) + "</div>"

# What the page says about the two texts, in one place: the intro, the Exact checkbox and the
# verdict use these. At the default precision greedy texts can part ways at a near-tie (rolled-back
# drafts, masked in the cache, change the rounding), so the default run is not promised identical
# texts; Exact (f32) is.
EXACT_LABEL = "Exact (f32)"
DEFAULT_PRECISION_WORDS = "the fast default precision (activations rounded to 8 bits)"
SAME_TEXT_PROMISE = (
    f"Greedy, both follow the target model's choices. At {DEFAULT_PRECISION_WORDS}, once drafts have been "
    "rolled back a near-tie can round differently than in one-token steps, so the texts may part "
    f"ways after a while; tick <b>{EXACT_LABEL}</b> for texts identical token for token (its verify calls cost more)."
)
EXACT_INFO = f"greedy texts identical token for token; slower than {DEFAULT_PRECISION_WORDS}"
DIFFER_AT_DEFAULT = (
    f"At {DEFAULT_PRECISION_WORDS}, once drafts have been rolled back a near-tie can round differently than in "
    f"one-token steps. Tick <i>{EXACT_LABEL}</i> for texts identical token for token (its verify calls cost more)."
)

AR_COLOUR, SPEC_COLOUR = "#64748b", "#16a34a"  # the race chart's lines (autoregressive, speculative)


# --- The result: the speed-up, why, and the race chart ---------------------------------------------


def speedup(ex: Explanation | None, result: Verdict | None = None, how: str = "") -> str:
    """The large speed-up figure and the line that says why, live (`ex` None before a race)."""
    if ex is None or ex.speedup is None:
        figure, caption = "–", (
            "Press Race: the speed-up of speculative over autoregressive decoding appears here as they run."
            if ex is None else "Measuring: the first tokens are on their way…"
        )
        return _speedup_block("idle", figure, caption, "")
    ratio = ex.speedup
    if not ex.settled:
        figure = f"~{ratio:.1f}×"
        if result is None:
            caption = (f"Decoding speed-up so far, on {ex.tokens} tokens: too few to call a winner yet "
                       f"(a verdict needs {MIN_TOKENS_FOR_VERDICT}).")
        else:
            caption = (f"Measured on only {ex.tokens} tokens: too few to call a winner, as timing noise "
                       f"dominates. Race {MIN_TOKENS_FOR_VERDICT} tokens or more for a verdict.")
        kind = "unsettled"
    else:
        figure = f"{ratio:.2f}×"
        faster = "faster" if ratio >= 1 else "slower"
        if result is None:
            caption = f"Speculative decodes {faster} so far ({ex.tokens} tokens)."
        elif ratio >= 1:
            caption = f"Speculative{how} decodes <b>{ratio:.2f}× faster</b> than autoregressive."
        else:
            caption = f"Speculative{how} is <b>{1 / ratio:.2f}× slower</b> than autoregressive on this prompt."
        kind = "faster" if ratio >= 1 else "slower"
    if result is not None and result.stopped:
        caption += " (Stopped early: the figure covers the tokens made until then.)"
    return _speedup_block(kind, figure, caption, why(ex))


def _speedup_block(kind: str, figure: str, caption: str, reason: str) -> str:
    return (f'<div class="speedup speedup-{kind}"><div class="speedup-figure">{figure}</div>'
            f'<div class="speedup-text"><div class="speedup-caption">{caption}</div>{reason}</div></div>')


def why(ex: Explanation) -> str:
    """One line: tokens per target call, acceptance, a verify call's cost against a step, and the
    speed-up Leviathan et al.'s formula predicts from them, beside the measured one."""
    if ex.verify_seconds is None:
        if ex.tokens_per_call and ex.step_seconds is not None and ex.speedup is not None and ex.tokens > 8:
            return ('<div class="why"><b>Why:</b> no draft was verified yet: dynamic K takes plain steps while '
                    "drafting does not pay for this prompt, so both methods make one token per target call.</div>")
        return ""
    parts = [f"<b>{ex.tokens_per_call:.1f} tokens per target call</b> (autoregressive: 1)"]
    if ex.alpha is not None:
        parts.append(f"the target keeps a draft, once those before it are kept, with probability α = {ex.alpha:.2f}")
    if ex.verify_cost is not None:
        parts.append(f"a verify call costs <b>{ex.verify_cost:.2f} steps</b> ({_ms(ex.verify_seconds)} vs "
                     f"{_ms(ex.step_seconds)} ms, both measured in this race)")
    line = "; ".join(parts)
    if ex.predicted is not None:
        measured = f", measured {ex.speedup:.2f}×" if ex.speedup is not None else ""
        line += (f' → <span title="Leviathan et al. (2023): tokens per round (1 − α^(K+1)) / (1 − α), over the '
                 f'cost of drafting plus one verify call, in steps">Leviathan et al.\'s formula predicts '
                 f"<b>{ex.predicted:.2f}×</b></span>{measured}.")
    if ex.verify_cost is not None and ex.verify_cost >= DEAR_VERIFY and (ex.verify_width or 0) <= NARROW:
        line += (" On this CPU checking several tokens in one call is far from free (its vector units make a"
                 " call of a few tokens cost more steps than a CPU with AMX), so rounds are kept narrow and must keep"
                 " more drafts to win.")
    return f'<div class="why"><b>Why:</b> {line}{compiled(ex.compiled_with)}</div>'


# A verify call of at most NARROW tokens dearer than DEAR_VERIFY steps: the CPU, not the drafts,
# limits the speed-up (a long copy checked 17 tokens wide may cost that anywhere).
DEAR_VERIFY, NARROW = 1.5, 6


def compiled(settings: tuple[str | None, str | None]) -> str:
    """A sentence on the compile settings each method ran with, as timing on this CPU chose them."""
    ar, sp = settings
    if ar is None or sp is None:
        return ""
    if ar == sp:
        return f' <span class="compiled">Both compiled as timing on this CPU chose: {html.escape(ar)}.</span>'
    return (f' <span class="compiled">Each compiled as is fastest for it on this CPU: autoregressive {html.escape(ar)},'
            f" speculative {html.escape(sp)}.</span>")


def _ms(seconds: float) -> str:
    """Milliseconds with the digits a comparison needs: 1.8 vs 2.4, 73 vs 95."""
    return f"{seconds * 1000:.1f}" if seconds < 0.01 else f"{seconds * 1000:.0f}"


def race_chart() -> str:
    """The race chart's frame: the browser (app.js) draws tokens against compute time in it from
    the few numbers each update carries, instead of the server rebuilding an SVG."""
    key = (f'<div class="chart-key"><span><i style="background:{AR_COLOUR}"></i>autoregressive</span>'
           f'<span><i style="background:{SPEC_COLOUR}"></i>speculative</span>'
           '<span class="chart-note">steeper is faster; both clocks count compute only</span></div>')
    svg = ('<svg viewBox="0 0 380 190" role="img" aria-label="Tokens produced against compute time" class="race-svg" '
           f'data-ar="{AR_COLOUR}" data-sp="{SPEC_COLOUR}"></svg>')
    return f'<div class="race-chart">{svg}{key}</div>'


# --- The panes and their numbers ---------------------------------------------------------------


def pane(lane: str, placeholder: str) -> str:
    """An empty pane; the browser (app.js) appends each update's new tokens to it."""
    return f'<div class="pane" data-lane="{lane}"><span class="placeholder">{html.escape(placeholder)}</span></div>'


def cell(label: str, value: str, title: str = "") -> str:
    return f'<div class="stat" title="{html.escape(title)}"><b>{value}</b><span>{label}</span></div>'


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def stats(lane: Lane | None, speculative: bool, k: int = 4) -> str:
    s = lane.stats if lane is not None else Stats()
    decode = s.decode_tokens_per_second
    cells = [
        cell("decode tokens/s", f"{decode:.1f}" if decode else "–",
             "tokens after the first ÷ compute time after the first token: decoding speed, prompt reading left out"),
        cell("time to first token", seconds(s.ttft_seconds), "reading the prompt (prefill), which gives the first token"),
        cell("compute time", seconds(s.seconds if s.ttft_seconds is not None else None), "time this method spent computing"),
        cell("new tokens", str(s.new_tokens)),
        cell("target calls", str(s.target_calls), "forward passes of the target model, prefill included"),
    ]
    if not speculative:
        return f'<div class="stats">{"".join(cells)}</div>'
    cells += [
        cell("tokens per target call", f"{s.tokens_per_target_call:.2f}", "autoregressive decoding makes exactly 1"),
        cell("drafts kept", f"{s.acceptance_rate:.0%}" if s.drafted else "–",
             f"{s.accepted} of {s.drafted} verified draft tokens kept (free guesses included)"),
    ]
    if s.accepted_lookup and s.accepted > s.accepted_lookup:  # the hybrid: say what each source gave
        cells.append(cell("kept from lookup / draft", f"{s.accepted_lookup} / {s.accepted - s.accepted_lookup}",
                          "accepted tokens copied from the prompt (prompt lookup) / proposed by the draft model"))
    return f'<div class="stats">{"".join(cells)}</div>{histogram(s, k)}'


def histogram(s: Stats, k: int) -> str:
    """Target calls by how many drafts they kept, each bar saying what it is; plain steps apart."""
    counts = s.accepted_histogram
    if not counts and not s.plain_steps:
        return ""
    top = max([*counts, s.plain_steps, 1])
    varied = len(counts) > k + 1  # dynamic K verified more than K drafts in some calls: K differed by call
    rows = []
    for n, count in enumerate(counts):
        if varied and n and not count:
            continue  # with K varying, only the counts that happened
        if n == 0:
            kind, meaning = "none", "Every draft rejected: the call still adds 1 token, the target's correction."
        elif n >= k and not varied:
            kind, meaning = "all", f"All {k} drafts kept, plus the target's bonus token: {n + 1} tokens from one call."
        else:
            kind, meaning = "kept", f"{n} drafts kept, then the target's own token: {n + 1} tokens from one call."
        label = f"{n} kept" if varied else f"{n} of {k} kept"
        rows.append(_bar(label, count, top, kind, meaning, f"→ {n + 1} token{'s' if n else ''} each"))
    if s.plain_steps:
        rows.append(_bar(
            "no draft", s.plain_steps, top, "plain",
            "Plain target steps: dynamic K measured that drafting would not pay here, so it skipped it (1 token each).",
            "plain steps, 1 token each",
        ))
    checks = "K drafts (dynamic K chose K call by call)" if varied else f"K = {k} drafts"
    caption = (f"Each verify call checks {checks} and keeps the ones the target agrees with, plus one token "
               "of its own. <span class=\"key-none\">Orange</span>: none kept. <span class=\"key-plain\">Grey</span>: "
               "plain steps, where dynamic K judged drafting not worth it.")
    return (f'<div class="hist"><div class="hist-title">Target calls by drafts kept</div>'
            f'<div class="hist-caption">{caption}</div>{"".join(rows)}</div>')


def _bar(label: str, count: int, top: int, kind: str, meaning: str, note: str) -> str:
    return (f'<div class="bar-row" title="{html.escape(meaning)}"><span class="bar-label">{html.escape(label)}</span>'
            f'<span class="bar-track"><span class="bar bar-{kind}" style="width:{100 * count / top:.0f}%"></span></span>'
            f'<span class="bar-count">{count} <small>{html.escape(note)}</small></span></div>')


# --- Where the race stands, and its summary ----------------------------------------------------


def status(message: str = "", kind: str = "info") -> str:
    """The line next to Race: waiting, busy, loading, racing, stopped, or what went wrong."""
    return f'<div class="status status-{kind}" role="status">{message}</div>'


def summary(message: str, kind: str = "info") -> str:
    return f'<div class="summary summary-{kind}">{message}</div>'


def verdict(result: Verdict, ar: Lane, sp: Lane, config: GenerationConfig, precision_is_exact: bool, raced: str = "") -> str:
    """The summary under the panes: what raced (`raced`, markup), how fast each decoded, and whether the texts agree."""
    if ar.stats.new_tokens == 0 and sp.stats.new_tokens == 0:
        speed = "No tokens were generated, so there is no speed to compare."
    else:
        speed = (f"Decoding: speculative {sp.stats.decode_tokens_per_second:.1f} vs autoregressive "
                 f"{ar.stats.decode_tokens_per_second:.1f} tokens/s; time to first token {seconds(sp.stats.ttft_seconds)} "
                 f"vs {seconds(ar.stats.ttft_seconds)} (reading the prompt: the same work for both, left out of the speed-up; "
                 "speculative reads it first and pays the start's one-off costs).")
    if result.stopped == CANCELLED:
        speed = "Stopped. " + speed
    elif result.stopped == OUT_OF_TIME:
        speed = "Stopped: the race reached this server's time limit. " + speed
    if result.identical is None:
        same = (f"Sampling at temperature {config.temperature:g}: the texts may differ, but both follow the "
                "target model's distribution.")
    elif result.identical:
        same = f"Greedy: the two texts are <b>identical</b>, token for token ({min(len(ar.token_ids), len(sp.token_ids))} tokens). ✓"
    else:
        same = f"Greedy: the texts <b>differ</b> from token {result.first_difference + 1} on."
        if not precision_is_exact:
            same += " " + DIFFER_AT_DEFAULT
    return summary(f"{raced}{speed}<br>{same}", "done")


def raced_on(pair: Preset, request: RaceRequest) -> str:
    """What raced, as the summary names it: the pair (a custom one by its models), the drafter, and Exact if ticked."""
    models = (request.target.ref, request.draft.ref if request.draft else None)
    name = pair.label if pair.label != CUSTOM else " + ".join(ref for ref in models if ref)
    words = PLUGINS[request.drafter].words if request.drafter in PLUGINS else "a draft model"
    return f"{name}, speculative with {words}" + (f", {EXACT_LABEL}" if pair.precision == F32 else "")


def _raced(raced: str) -> str:
    return f'<span class="raced">{html.escape(raced)}.</span> ' if raced else ""


LANES = {AUTOREGRESSIVE: "ar", SPECULATIVE: "sp"}  # the feed's short names, as app.js reads them


def feed(view: View, first: bool, watch_id: int, max_new_tokens: int) -> str:
    """What the browser adds to the panes and the chart: this view's new tokens and points; on a
    watch's first view, a reset; at the end, every token again (an update the browser skipped
    cannot leave a pane short)."""
    ended = view.phase.ended
    lanes = {}
    for mode, lane in ((AUTOREGRESSIVE, view.autoregressive), (SPECULATIVE, view.speculative)):
        frames = view.new.get(mode, [])
        pieces = lane.pieces if ended else [piece for frame in frames for piece in frame.pieces]
        points = lane.trace if ended else [(frame.stats.seconds, frame.stats.new_tokens) for frame in frames]
        lanes[LANES[mode]] = {
            "pieces": pieces, "points": [[round(t, 4), n] for t, n in points], "done": lane.finished or ended,
        }
    update = {"watch": watch_id, "reset": first, "full": ended, "max": max_new_tokens, "lanes": lanes}
    return json.dumps(update, separators=(",", ":"))


def _watching(view: View) -> str:
    return f" · {view.watching} watching" if view.watching > 1 else ""


def _status(view: View, time_limit: float | None) -> str:
    if view.phase == RacePhase.WAITING and not view.ahead:
        return status(f"⏳ starting…{_watching(view)}", "waiting")  # next in line: no place to report
    if view.phase == RacePhase.WAITING:
        wait = f", about {_duration(view.wait_seconds)}" if view.wait_seconds else ""
        return status(f"⏳ waiting: {view.ahead} ahead{wait}{_watching(view)}", "waiting")
    if view.phase == RacePhase.LOADING:
        lines = "".join(f"<br>{html.escape(role)}: {html.escape(message)}" for role, message in view.loading.items())
        return status(f"Loading models (only a pair's first use waits){lines}", "loading")
    if view.how == Viewing.REPLAY:
        label = html.escape(replay_label(view))
        return status(f"▶ {label[:1].upper()}{label[1:]}: shown at its recorded pace{_watching(view)}", "replay")
    if view.phase == RacePhase.RACING:
        joined = "Joined a race already under way: shown from its start" if view.how == Viewing.JOINED else "Racing live…"
        return status(f"{joined}{_watching(view)}", "racing")
    result = view.verdict
    if result is not None and result.stopped == OUT_OF_TIME:
        limit = f" of {time_limit:.0f} s" if time_limit else ""
        return status(f"Stopped at this server's time limit{limit} per race.", "info")
    if result is not None and result.stopped:
        return status("Stopped.", "info")
    return status("", "info")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class PageUpdate(NamedTuple):
    """What one update changes on the page, a field per component; None leaves that one as it is."""

    status: str  # the line next to Race: waiting, loading, racing, stopped, or what went wrong
    speedup: str | None = None  # the speed-up figure and why
    feed: str | None = None  # the panes' and the chart's new tokens and points, for app.js (see `feed`)
    ar_stats: str | None = None  # the autoregressive lane's numbers
    spec_stats: str | None = None  # the speculative lane's numbers and histogram
    summary: str | None = None  # the line under the panes
    numbers: dict | None = None  # the race as JSON (spec.serving.numbers): what the /race API returns last
    race_it_live: bool | None = None  # whether the "Race it live" button shows


def outputs(view: View, config: GenerationConfig, drafter: str, precision_is_exact: bool, time_limit: float | None,
            first: bool = False, watch_id: int = 0, raced: str = "") -> PageUpdate:
    """What one view of a race changes on the page. While a race waits or loads, the previous race
    stays on screen; a failure says its sentence next to Race. `raced` (`raced_on`) names the pair in
    the summary: the dropdown may show another by then."""
    live_button = view.how == Viewing.REPLAY  # the "race it live" button shows beside a replay
    if view.phase == RacePhase.FAILED:
        return PageUpdate(status(html.escape(view.error or ""), "error"), numbers=view_numbers(view), race_it_live=live_button)
    ar, sp = view.autoregressive, view.speculative
    nothing_shown = not ar.trace and not sp.trace
    if view.phase in (RacePhase.WAITING, RacePhase.LOADING) or (nothing_shown and not view.phase.ended):  # racing, no step shown yet
        return PageUpdate(_status(view, time_limit), race_it_live=live_button)
    if nothing_shown:  # stopped while it waited or loaded: the last race stays on screen
        replaced = view.verdict is not None and view.verdict.stopped == REPLACED
        message = ("Replaced by your newer request: each visitor has one race waiting in line." if replaced
                   else "Stopped before the race began.")
        return PageUpdate(status(message, "info"), numbers=view_numbers(view), race_it_live=live_button)
    how = " with " + (PLUGINS[drafter].words if drafter in PLUGINS else "a draft model")
    ex = explain(ar.stats, sp.stats, config.num_assistant_tokens)
    ended = view.phase.ended
    if not ended:
        message = summary(f"{_raced(raced)}Racing… autoregressive {ar.stats.new_tokens} tokens, speculative {sp.stats.new_tokens} tokens "
                          f"(after {ar.seconds:.2f} s and {sp.seconds:.2f} s of compute).")
    else:
        message = verdict(view.verdict, ar, sp, config, precision_is_exact, _raced(raced))
    if not (ended or view.details):  # new tokens only; the numbers beside them follow at a slower rate
        return PageUpdate(_status(view, time_limit), feed=feed(view, first, watch_id, config.max_new_tokens),
                          race_it_live=live_button if first else None)
    return PageUpdate(
        _status(view, time_limit), speedup(ex, view.verdict if ended else None, how), feed(view, first, watch_id, config.max_new_tokens),
        stats(ar, False), stats(sp, True, config.num_assistant_tokens), message, view_numbers(view) if ended else None,
        live_button,
    )


# The elements (their elem_id in app.py) whose markup app.js sets from the page's one output.
PAGE_IDS = {"status": "status", "speedup": "speedup", "ar_stats": "ar-stats", "spec_stats": "spec-stats", "summary": "summary"}


def on_page(update: PageUpdate, stream: str | None = None) -> str:
    """An update as the page's one output, for app.js: the markup of each element it changes, by
    id, and the feed. Gradio then renders one component per message rather than one per element.
    `stream`: the token of the page's own stream (page_stream), which the updates that follow take."""
    markup = {PAGE_IDS[name]: getattr(update, name) for name in PAGE_IDS if getattr(update, name) is not None}
    token = f',"stream":{json.dumps(stream)}' if stream else ""
    return f'{{"html":{json.dumps(markup, separators=(",", ":"))},"feed":{update.feed or "null"}{token}}}'


def failure(message: str) -> PageUpdate:
    """A race that could not start: its sentence next to Race; the previous race stays on screen."""
    return PageUpdate(status(html.escape(message), "error"))


def busy(running: int, waiting: int) -> PageUpdate:
    """A full line, said calmly: not an error."""
    return PageUpdate(status(f"The server is busy ({running} racing, {waiting} waiting): try again in a minute.", "busy"))


def preparing(label: str, message: str, instead: str) -> str:
    """The line above the prompt while the default pair is prepared for its first use."""
    return (f'<div class="preparing">⏳ <b>{html.escape(label)}</b> is being prepared on this server for its first '
            f'use (a few minutes, once): {html.escape(message)}. Until then, races run on {html.escape(instead)}.</div>')


def pair_notes(pair: Preset, allow_local_models: bool, unreachable_hub: str | None) -> str:
    """The notes under the pair's dropdown; for the custom pair, what this server takes (`unreachable_hub`:
    the Hub's name when it does not answer)."""
    notes = pair.notes
    if pair.label == CUSTOM and not allow_local_models:
        notes += " This server takes Hugging Face model ids (owner/name) only."
    if pair.label == CUSTOM and unreachable_hub:
        notes += f" ⚠️ {unreachable_hub} is unreachable from this server: only models already cached here will load."
    return notes


def unavailable(reasons: dict[str, str]) -> str:
    """The line at the foot of the page naming the pairs this server cannot run (label -> why)."""
    return f"Not available on this server: {', '.join(reasons)} ({next(iter(reasons.values()), '')})."


def prepared(label: str) -> str:
    return f'<div class="preparing done">✓ <b>{html.escape(label)}</b> is ready: pick it under <i>Model pair</i>.</div>'


def about(max_prompt_tokens: int, max_race_seconds: float, concurrency: int) -> str:
    """The page's "What is this, and how is it measured?" (Markdown), with this server's limits."""
    return f"""
The drafter is **prompt lookup**, which copies spans of the prompt (edits, fixes, rewrites), a small
**draft model** (even one with another tokenizer), or the **hybrid**, which picks the better of the two
each round. {SAME_TEXT_PROMISE}

**How the race is measured.** Both methods run on this machine taking turns: whichever has used
less compute time goes next, so they never compete for the CPU. Each method's clock runs only
while it computes. Decode tokens/s counts the tokens after the first over the compute time after the
first token (reading the prompt is the same work for both; the speculative lane goes first, so a
first call's one-off costs, such as a new prompt length's, fall on it); the speed-up is their ratio, called once
both made {MIN_TOKENS_FOR_VERDICT} tokens. Models load before the clocks start.

**Many visitors, one race.** Each distinct race (pair, prompt, settings, seed) is computed once: asking
for one that is running joins it; one that ran here before is replayed at its recorded pace, labelled
as a replay, with a button to race it live. Nothing a viewer does slows the race. Prompts of up to
{max_prompt_tokens:,} tokens; a race stops after {max_race_seconds:.0f} s;
{'one race' if concurrency == 1 else f'{concurrency} races'} computed at a time.
"""


# --- The room: the page's address as a QR code, for a presenter's screen ------------------------------


def room(address: str | None, watching: int) -> str:
    """The presenter's view: the page's public address as a large QR code with the short link under
    it, and how many have the page open; without a public address, how to get one."""
    people = f"{watching} {'person has' if watching == 1 else 'people have'} this page open"
    if address is None:
        return ('<div class="room room-none"><p class="room-title">This page is served on this machine only.</p>'
                "<p>For a room to join, start it with <code>./run.sh app --share</code> (a public link) or "
                "<code>--host 0.0.0.0</code> (your network), or deploy it as a Space, then open this view again.</p>"
                f'<p class="room-count">{people}</p></div>')
    qr = segno.make(address, error="m").svg_inline(border=2, omitsize=True, dark="#000", light="#fff", svgclass="room-qr")
    link = html.escape(address, quote=True)
    return (f'<div class="room"><a class="room-code" href="{link}" target="_blank" rel="noopener" '
            f'aria-label="QR code for {link}">{qr}</a><p class="room-link">{html.escape(short_link(address))}</p>'
            f'<p class="room-count">Scan to race on your phone · {people}</p></div>')
