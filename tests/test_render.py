"""The page's HTML, from what the race yields: model text is escaped, never markup; every number
and bar says what it is; a speed-up on too few tokens is not a verdict."""
from __future__ import annotations

import html
import re

import render
from spec.config import AUTOREGRESSIVE, PROMPT_LOOKUP, SPECULATIVE, GenerationConfig
from spec.decoding.generation import Step
from spec.decoding.metrics import Stats
from spec.serving.race import BUSY, MIN_TOKENS_FOR_VERDICT, WAITING, Lane, RaceUpdate, explain, verdict


def text_of(pane_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", pane_html))


def test_model_text_is_escaped_never_markup():
    step = Step([1, 2], ["accepted", "bonus"], [("<b>x</b>", "accepted"), (" & <script>", "bonus")], "", Stats(), True)
    for mode in (AUTOREGRESSIVE, SPECULATIVE):
        lane = Lane(mode, iter([step]))
        lane.advance()
        pane = render.pane(lane)
        assert "<b>" not in pane and "<script>" not in pane
        assert text_of(pane) == "<b>x</b> & <script>"
        assert ('<span class="tok tok-accepted">&lt;b&gt;' in pane) == (mode == SPECULATIVE)


def test_every_histogram_bar_says_what_it_is_and_none_kept_is_not_green():
    stats = Stats(accepted_histogram=[5, 2, 0, 1, 3], plain_steps=4)
    hist = render.histogram(stats, k=4)
    rows = re.findall(r'<div class="bar-row" title="([^"]+)"><span class="bar-label">([^<]+)</span><span class="bar-track"><span class="bar bar-(\w+)"', hist)
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


def test_the_race_chart_draws_both_lanes():
    ar, sp = _lanes(30, 30)
    chart = render.race_chart(ar, sp, 64)
    assert chart.count("<polyline") == 2 and "<svg" in chart and "compute time" in chart


def test_waiting_and_busy_are_status_lines_that_leave_the_last_race_on_screen():
    config = GenerationConfig()
    waiting = render.outputs(RaceUpdate(WAITING, ahead=2), config, PROMPT_LOOKUP, False, 120)
    assert "waiting: 2 ahead" in waiting[0] and waiting[1:] == (None,) * 7
    busy = render.outputs(RaceUpdate(BUSY, waiting=(1, 16)), config, PROMPT_LOOKUP, False, 120)
    assert "try again in a minute" in busy[0] and "error" not in busy[0] and busy[1:] == (None,) * 7
    failed = render.failure("The prompt is <too> long.")
    assert "status-error" in failed[0] and "&lt;too&gt;" in failed[0] and failed[1:] == (None,) * 7


def test_the_hybrid_tells_lookup_from_draft_in_colour_and_stats():
    step = Step([1, 2, 3], ["lookup", "accepted", "bonus"], [("a", "lookup"), ("b", "accepted"), ("c", "bonus")], "", Stats(), True)
    lane = Lane(SPECULATIVE, iter([step]), stats=Stats(new_tokens=3, drafted=4, accepted=3, accepted_lookup=2, target_calls=2))
    lane.advance()
    pane = render.pane(lane)
    assert '<span class="tok tok-lookup">a</span>' in pane and '<span class="tok tok-accepted">b</span>' in pane
    assert "tok-lookup" in render.LEGEND and "tok-accepted" in render.LEGEND
    lane.stats = Stats(new_tokens=3, drafted=4, accepted=3, accepted_lookup=2, target_calls=2)
    assert "2 / 1" in render.stats(lane, speculative=True) and "kept from lookup / draft" in render.stats(lane, True)
    lane.stats = Stats(new_tokens=3, drafted=4, accepted=3, accepted_lookup=0, target_calls=2)  # a draft model alone
    assert "kept from lookup" not in render.stats(lane, True)
