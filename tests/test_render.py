"""The page's HTML, from what the race yields: model text is escaped, never markup."""
from __future__ import annotations

import html
import re

import render
from spec.config import AUTOREGRESSIVE, SPECULATIVE
from spec.generation import Step
from spec.metrics import Stats
from spec.race import Lane


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
