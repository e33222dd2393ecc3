"""The presenter's room view: which address a room can scan, how many have the page open, and the
QR code that says it."""
from __future__ import annotations

import pytest

import render
from spec.serving.audience import Audience, is_loopback, page_url, public_address, short_link


@pytest.mark.parametrize("space_host, share_url, page, want", [
    ("owner-demo.hf.space", "https://abc.gradio.live", "http://10.0.0.5:7860", "https://owner-demo.hf.space"),
    (None, "https://abc.gradio.live/", "http://10.0.0.5:7860", "https://abc.gradio.live"),
    ("", None, "http://192.168.1.20:7860/", "http://192.168.1.20:7860"),
    (None, None, "http://workshop.example.org", "http://workshop.example.org"),
    (None, None, "http://127.0.0.1:7860", None),
    (None, None, "http://localhost:7860", None),
    (None, None, "http://[::1]:7860", None),
    (None, None, "http://0.0.0.0:7860", None),
    (None, None, None, None),
])
def test_the_address_a_room_can_open(space_host, share_url, page, want):
    assert public_address(space_host, share_url, page) == want


def test_the_page_address_comes_from_the_request_a_proxy_first():
    assert page_url({"host": "10.0.0.5:7860"}) == "http://10.0.0.5:7860"
    assert page_url({"host": "internal:7860", "x-forwarded-host": "demo.example.org", "x-forwarded-proto": "https"}) \
        == "https://demo.example.org"
    assert page_url({}) is None
    assert is_loopback("http://127.0.0.2:80") and not is_loopback("http://10.1.2.3")
    assert short_link("https://abc.gradio.live/") == "abc.gradio.live"


def test_the_audience_counts_open_pages_once_each():
    audience = Audience()
    assert audience.arrive("a") == 1 and audience.arrive("b") == 2 and audience.arrive("a") == 2
    assert audience.leave("a") == 1 and audience.leave("a") == 1 and len(audience) == 1
    assert audience.arrive("") == 1, "a request without a session is not a viewer"


def test_the_room_view_shows_a_qr_code_the_link_and_the_count():
    shown = render.room("https://owner-demo.hf.space", 12)
    assert '<svg viewBox="0 0' in shown and 'class="room-qr"' in shown
    assert ">owner-demo.hf.space<" in shown and "12 people have this page open" in shown
    assert 'href="https://owner-demo.hf.space"' in shown
    assert "1 person has" in render.room("https://x.hf.space", 1)
    assert render.room("https://a.hf.space", 1) != render.room("https://b.hf.space", 1), "the code encodes the address"
    hostile = render.room('http://x"><script>alert(1)</script>', 1)
    assert "<script>" not in hostile, "an address from a request header is escaped"
    alone = render.room(None, 1)
    assert "svg" not in alone and "--share" in alone and "served on this machine only" in alone
