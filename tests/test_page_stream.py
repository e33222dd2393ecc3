"""The page's own stream of race updates (page_stream.py): read once, in order, to the watch's end;
a page leaving early stops its watch, a page that read everything does not."""
from __future__ import annotations

import threading
import time

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from page_stream import PageStreams


@pytest.fixture
def served():
    streams = PageStreams()
    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("the page"))], middleware=[streams.middleware()])
    with TestClient(app) as client:
        yield streams, client


def events(text: str) -> list[str]:
    return [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]


def test_a_stream_brings_every_update_in_order_and_ends_with_the_watch(served):
    streams, client = served
    cancel = threading.Event()
    stream = streams.open(cancel)
    stream.send('{"n":1}')  # sent before the page connects: kept for it

    def watch():
        time.sleep(0.2)
        for n in (2, 3):
            stream.send(f'{{"n":{n}}}')
            time.sleep(0.05)
        streams.close(stream)

    threading.Thread(target=watch).start()
    with client.stream("GET", f"/some/path/race_stream/{stream.token}") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = "".join(response.iter_text())
    assert events(body) == ['{"n":1}', '{"n":2}', '{"n":3}']
    assert not cancel.is_set(), "a page that read the whole watch must not stop it"
    assert client.get("/").text == "the page", "other requests pass through"


def test_a_stream_is_read_once_and_unknown_tokens_get_a_sentence(served):
    streams, client = served
    stream = streams.open(threading.Event())
    streams.close(stream)
    with client.stream("GET", f"/race_stream/{stream.token}") as response:
        assert events("".join(response.iter_text())) == []
    again = client.get(f"/race_stream/{stream.token}")
    assert again.status_code == 404 and "No such race stream" in again.text
    assert client.get("/race_stream/" + "x" * 24).status_code == 404


def test_a_page_leaving_before_the_watch_ends_stops_it(served):
    streams, client = served
    cancel = threading.Event()
    stream = streams.open(cancel)
    stream.send('{"n":1}')
    with client.stream("GET", f"/race_stream/{stream.token}") as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                break  # the page goes away after its first update
    deadline = time.monotonic() + 5
    while not cancel.is_set() and time.monotonic() < deadline:
        stream.send('{"n":2}')  # the server learns the page left when it next writes to it
        time.sleep(0.05)
    assert cancel.is_set(), "the watch of a page that left runs on"
    streams.close(stream)


def test_a_watch_sends_its_first_and_last_updates_through_gradio_and_the_rest_down_its_stream():
    import json

    import outputs
    import render

    streams = PageStreams()
    feed = outputs.PageFeed(streams.open(threading.Event()))
    updates = [render.PageUpdate(render.status(f"update {n}", "live")) for n in range(4)]
    routed = [feed.route(update, last=n == 3) for n, update in enumerate(updates)]
    first, last = json.loads(routed[0][0]), json.loads(routed[3][0])
    assert first["stream"] == feed.stream.token and "stream" not in last, "the first names the stream, the last does not"
    assert routed[1] is None and routed[2] is None, "the updates between go down the stream"
    assert [json.loads(update)["html"]["status"] for update in feed.stream._pending] == [
        json.loads(render.on_page(update))["html"]["status"] for update in updates[1:3]]
    over_at_once = outputs.PageFeed(streams.open(threading.Event())).route(updates[0], last=True)
    assert "stream" not in json.loads(over_at_once[0]), "a watch over at once names no stream"
