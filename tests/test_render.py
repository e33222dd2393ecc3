"""The page's HTML, from what the race yields: model text is escaped, never markup; every number
and bar says what it is; a speed-up on too few tokens is not a verdict."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import render
from spec.config import AUTOREGRESSIVE, F32, HYBRID, PROMPT_LOOKUP, SPECULATIVE, GenerationConfig, ModelKey
from spec.decoding.metrics import Stats
from spec.serving.lanes import Lane
from spec.serving.phases import RacePhase, Viewing
from spec.serving.playback import View
from spec.serving.presets import CUSTOM, PRESETS, Preset
from spec.serving.recording import Frame, RaceRequest, Recording
from spec.serving.verdict import MIN_TOKENS_FOR_VERDICT, explain, verdict

APP_JS = (Path(__file__).resolve().parents[1] / "app.js").read_text()


def text_of(pane_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", pane_html))


def _view(pieces: list[tuple[str, str]], phase: RacePhase = RacePhase.RACING, how: Viewing = Viewing.LIVE) -> View:
    """A view whose speculative lane just showed `pieces` in one step (the autoregressive lane one token)."""
    stats = Stats(new_tokens=len(pieces), seconds=0.5, ttft_seconds=0.1)
    frames = {AUTOREGRESSIVE: [Frame(0.1, AUTOREGRESSIVE, (("x", "target"),), (1,), Stats(new_tokens=1, seconds=0.1), False)],
              SPECULATIVE: [Frame(0.5, SPECULATIVE, tuple(pieces), tuple(range(len(pieces))), stats, False)]}
    lanes = {}
    for mode, shown in frames.items():
        lane = Lane(mode, iter(()))
        for frame in shown:
            lane.pieces += frame.pieces
            lane.stats = frame.stats
            lane.trace.append((frame.stats.seconds, frame.stats.new_tokens))
        lanes[mode] = lane
    return View(phase, how, Recording(None), lanes[AUTOREGRESSIVE], lanes[SPECULATIVE], frames)


def test_model_text_reaches_the_page_as_text_never_markup():
    pieces = [("<b>x</b>", "accepted"), (" & <script>", "bonus")]
    update = json.loads(render.feed(_view(pieces), True, 7, 64))
    assert update["lanes"]["sp"]["pieces"] == [list(piece) for piece in pieces] and update["reset"] and update["watch"] == 7
    # The browser puts each piece in as a text node; innerHTML is written only with the chart's own
    # numbers and render's own markup (render.on_page), in which model text never appears.
    assert "span.textContent = text" in APP_JS
    assert all("text" not in line for line in APP_JS.splitlines() if "innerHTML" in line)


def test_an_update_carries_only_what_is_new_and_the_last_one_everything():
    view = _view([("a", "lookup")])
    racing = json.loads(render.feed(view, False, 1, 64))
    assert racing["lanes"]["ar"]["pieces"] == [["x", "target"]] and not racing["full"]
    view.new = {AUTOREGRESSIVE: [], SPECULATIVE: []}
    view.phase = RacePhase.DONE
    final = json.loads(render.feed(view, False, 1, 64))
    assert final["full"] and final["lanes"]["sp"]["pieces"] == [["a", "lookup"]], "a skipped update cannot leave a pane short"
    assert final["lanes"]["sp"]["points"] == [[0.5, 1]]


def test_every_histogram_bar_says_what_it_is_and_none_kept_is_not_green():
    stats = Stats(accepted_histogram=[5, 2, 0, 1, 3], plain_steps=4)
    hist = render.histogram(stats, k=4)
    rows = re.findall(r'<div class="bar-row" title="([^"]+)"><span class="bar-label">([^<]+)</span>'
                      r'<span class="bar-track"><span class="bar bar-(\w+)"', hist)
    assert [label for _, label, _ in rows] == ["0 of 4 kept", "1 of 4 kept", "2 of 4 kept", "3 of 4 kept", "4 of 4 kept", "no draft"]
    kinds = {label: kind for _, label, kind in rows}
    assert kinds["0 of 4 kept"] == "none" and kinds["1 of 4 kept"] == "kept" and kinds["no draft"] == "plain"
    titles = {label: html.unescape(title) for title, label, _ in rows}
    assert "rejected" in titles["0 of 4 kept"] and "bonus" in titles["4 of 4 kept"]
    assert "dynamic K" in titles["no draft"] and "dynamic K" in hist  # the plain steps are explained on the page too


def test_when_dynamic_k_varied_the_width_no_bar_claims_k_drafts():
    """Prompt lookup's dynamic K verifies up to 4K drafts: no "8 of 4 kept", only what happened."""
    stats = Stats(accepted_histogram=[10, 2, 1, 0, 2, 0, 0, 0, 1])
    hist = render.histogram(stats, k=4)
    labels = re.findall(r'<span class="bar-label">([^<]+)</span>', hist)
    assert labels == ["0 kept", "1 kept", "2 kept", "4 kept", "8 kept"]
    assert " of 4" not in hist and "K = 4" not in hist and "bar-all" not in hist


def _lanes(ar_tokens: int, sp_tokens: int, sp_speed: float = 20.0) -> tuple[Lane, Lane]:
    ar = Lane(AUTOREGRESSIVE, iter(()), stats=Stats(new_tokens=ar_tokens, seconds=1 + (ar_tokens - 1) / 10, ttft_seconds=1.0,
                                                    plain_steps=ar_tokens - 1, target_seconds=(ar_tokens - 1) / 10))
    sp = Lane(SPECULATIVE, iter(()), stats=Stats(new_tokens=sp_tokens, seconds=1 + (sp_tokens - 1) / sp_speed, ttft_seconds=1.0))
    ar.trace, sp.trace = [(ar.seconds, ar_tokens)], [(sp.seconds, sp_tokens)]
    return ar, sp


def test_a_speedup_on_too_few_tokens_is_uncertain_not_a_winner():
    ar, sp = _lanes(20, 20)
    short = render.speedup(explain(ar.stats, sp.stats, 4), verdict(ar, sp, GenerationConfig()))
    assert "~2.0×" in short and "too few" in short and "faster" not in text_of(short)
    ar, sp = _lanes(MIN_TOKENS_FOR_VERDICT, MIN_TOKENS_FOR_VERDICT)
    long = render.speedup(explain(ar.stats, sp.stats, 4), verdict(ar, sp, GenerationConfig()))
    assert "2.00×" in long and "faster" in text_of(long) and "too few" not in long


def test_the_race_chart_is_drawn_by_the_browser_in_the_lanes_colours():
    chart = render.race_chart()
    assert "<svg" in chart and render.AR_COLOUR in chart and render.SPEC_COLOUR in chart
    assert "polyline" in APP_JS and "compute time" in APP_JS


def test_waiting_and_busy_are_status_lines_that_leave_the_last_race_on_screen():
    config = GenerationConfig()
    view = _view([])
    view.phase, view.ahead, view.wait_seconds = RacePhase.WAITING, 2, 75.0
    waiting = render.outputs(view, config, PROMPT_LOOKUP, False, 120)
    assert "waiting: 2 ahead, about 75 s" in waiting[0] and waiting[1:-1] == (None,) * 6
    starting = View(RacePhase.RACING, Viewing.LIVE, Recording(None), Lane(AUTOREGRESSIVE, iter(())), Lane(SPECULATIVE, iter(())))
    racing = render.outputs(starting, config, PROMPT_LOOKUP, False, 120)  # racing, no step shown yet
    assert "Racing" in racing[0] and "Stopped" not in racing[0] and racing[1:-1] == (None,) * 6
    busy = render.busy(1, 16)
    assert "try again in a minute" in busy[0] and "error" not in busy[0] and busy[1:] == (None,) * 7
    failed = render.failure("The prompt is <too> long.")
    assert "status-error" in failed[0] and "&lt;too&gt;" in failed[0] and failed[1:] == (None,) * 7


def test_the_hybrid_tells_lookup_from_draft_in_colour_and_stats():
    update = json.loads(render.feed(_view([("a", "lookup"), ("b", "accepted"), ("c", "bonus")]), False, 1, 64))
    assert [kind for _, kind in update["lanes"]["sp"]["pieces"]] == ["lookup", "accepted", "bonus"]
    assert "tok-${kind}" in APP_JS and "tok-lookup" in render.LEGEND and "tok-accepted" in render.LEGEND
    lane = Lane(SPECULATIVE, iter(()))
    lane.stats = Stats(new_tokens=3, drafted=4, accepted=3, accepted_lookup=2, target_calls=2)
    assert "2 / 1" in render.stats(lane, speculative=True) and "kept from lookup / draft" in render.stats(lane, True)
    lane.stats = Stats(new_tokens=3, drafted=4, accepted=3, accepted_lookup=0, target_calls=2)  # a draft model alone
    assert "kept from lookup" not in render.stats(lane, True)


def test_between_detail_refreshes_an_update_carries_only_the_new_tokens():
    config = GenerationConfig()
    view = _view([("a", "lookup")])
    view.details = False
    light = render.outputs(view, config, PROMPT_LOOKUP, False, 120)
    assert light[2] and light[1] is None and light[3:7] == (None,) * 4, "speed-up, stats and summary wait for their turn"
    view.details = True
    full = render.outputs(view, config, PROMPT_LOOKUP, False, 120)
    assert all(part is not None for part in full[1:6])
    view.details, view.phase = False, RacePhase.DONE
    view.verdict = verdict(view.autoregressive, view.speculative, config)
    assert all(part is not None for part in render.outputs(view, config, PROMPT_LOOKUP, False, 120)[1:7]), "the end is complete"


def test_the_page_gets_one_output_carrying_each_changed_element_by_its_id():
    view, config = _view([("a", "lookup")]), GenerationConfig(max_new_tokens=64)
    view.details = True
    update = render.outputs(view, config, PROMPT_LOOKUP, False, 120, True, 3)
    shown = json.loads(render.on_page(update))
    assert shown["feed"] == json.loads(update.feed)
    assert shown["html"] == {"status": update.status, "speedup": update.speedup, "ar-stats": update.ar_stats,
                             "spec-stats": update.spec_stats, "summary": update.summary}
    light = json.loads(render.on_page(render.busy(1, 2)))
    assert light["feed"] is None and list(light["html"]) == ["status"], "an element an update leaves alone is not sent"
    layout = (Path(__file__).resolve().parents[1] / "app.py").read_text()
    assert all(f'elem_id="{id_}"' in layout for id_ in render.PAGE_IDS.values()), "app.js sets elements by these ids"


def test_the_summary_names_what_raced_though_the_dropdown_may_show_another_pair_by_then():
    preset, config = PRESETS[0], GenerationConfig()
    lookup = RaceRequest("p", ModelKey(preset.target), None, PROMPT_LOOKUP, config)
    assert render.raced_on(preset, lookup) == f"{preset.label}, speculative with prompt lookup"
    custom = Preset(CUSTOM, None, None, "", precision=F32)
    mine = RaceRequest("p", ModelKey("me/<target>"), ModelKey("me/draft"), HYBRID, config)
    named = render.raced_on(custom, mine)
    assert named == f"me/<target> + me/draft, speculative with the hybrid drafter, {render.EXACT_LABEL}"
    view = _view([("a", "lookup")])
    assert html.escape(named) in render.outputs(view, config, HYBRID, True, 120, raced=named).summary, "while it races"
    view.phase = RacePhase.DONE
    view.verdict = verdict(view.autoregressive, view.speculative, config)
    done = render.outputs(view, config, HYBRID, True, 120, raced=named).summary
    assert html.escape(named) in done and "<target>" not in done, "at the end, escaped"
