"""The page's race updates outside Gradio's queue, as server-sent events.

A race's first update and its last reach the page as Gradio outputs (the feed, the numbers, the
"Race it live" button); the ones between, four a second, go through a stream of their own that
app.js reads with an EventSource. Gradio's client handles every message of an event's stream for
every component on the page (it pushes each component a fresh loading status), and a browser on the
server's own machine shares the cores with the race it shows: that per-message work was a good part
of what the page cost the race. A stream belongs to one watch of one race, is named by an unguessable token
that the first update carries, is read once, and ends with the race. The page closing it while the
race runs stops that watch, as closing the tab does.
"""
from __future__ import annotations

import asyncio
import collections
import re
import secrets
import threading
from typing import AsyncIterator

from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect
from starlette.responses import PlainTextResponse, StreamingResponse

ROUTE = re.compile(r"/race_stream/([\w-]{16,64})$")  # under whatever path the page is served at
_KEEP_ALIVE = 15.0  # seconds between comments on a quiet stream (a race waiting its turn), so no proxy drops it
_MOST_PENDING = 1000  # updates kept for a page that has not connected yet; the last update re-lays everything anyway


class PageStream:
    """One watch's updates, from the thread that watches the race to the page's event stream."""

    def __init__(self, token: str, cancel: threading.Event):
        self.token = token
        self._cancel = cancel  # set when the page leaves before the race ends
        self._pending: collections.deque[str] = collections.deque(maxlen=_MOST_PENDING)
        self._lock = threading.Lock()
        self._closed = False
        self._delivered = False  # whether the page read every update up to the watch's end
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None  # the reader's, once it reads

    def send(self, update: str) -> None:
        """Queue an update (render.on_page's JSON) for the page."""
        with self._lock:
            self._pending.append(update)
        self._notify()

    def close(self) -> None:
        """The watch ended: the page's stream ends once it has what was sent."""
        with self._lock:
            self._closed = True
        self._notify()

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None:
            loop, event = wake
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the reader's loop is gone: nobody to wake
                pass

    async def events(self) -> AsyncIterator[str]:
        """The stream's text: each update as one event, until the watch ends."""
        event = asyncio.Event()
        self._wake = (asyncio.get_running_loop(), event)
        try:
            yield "retry: 3600000\n\n"  # an EventSource reconnects by itself: not to a stream read once
            while True:
                with self._lock:
                    updates, closed = list(self._pending), self._closed
                    self._pending.clear()
                    event.clear()
                for update in updates:
                    yield f"data: {update}\n\n"
                if closed:
                    self._delivered = True
                    return
                try:
                    await asyncio.wait_for(event.wait(), _KEEP_ALIVE)
                except TimeoutError:
                    yield ": still there\n\n"
        finally:
            self._wake = None

    def left(self) -> None:
        """The page stopped reading: unless it had everything, its watch stops (a closed tab, a new race)."""
        if not self._delivered:
            self._cancel.set()


class PageStreams:
    """Every open watch's stream, by token; served by `middleware`."""

    def __init__(self):
        self._streams: dict[str, PageStream] = {}
        self._lock = threading.Lock()

    def open(self, cancel: threading.Event) -> PageStream:
        """A stream for one watch; `cancel` is set if its page leaves before the watch ends."""
        stream = PageStream(secrets.token_urlsafe(18), cancel)
        with self._lock:
            self._streams[stream.token] = stream
        return stream

    def close(self, stream: PageStream) -> None:
        """The watch ended: its stream ends, and can no longer be asked for."""
        with self._lock:
            self._streams.pop(stream.token, None)
        stream.close()

    def take(self, token: str) -> PageStream | None:
        """The stream named `token`, once: a second reader gets nothing."""
        with self._lock:
            return self._streams.pop(token, None)

    def middleware(self) -> Middleware:
        """For Gradio's launch(app_kwargs=dict(middleware=[...])): serves GET .../race_stream/<token>."""
        return Middleware(self._serving)

    def _serving(self, app):
        """ASGI middleware: a page's stream for a GET of its path; every other request passes on."""
        streams = self

        async def serve(scope, receive, send):
            if scope["type"] == "http" and scope.get("method") == "GET":
                match = ROUTE.search(scope.get("path", ""))
                if match:
                    stream = streams.take(match.group(1))
                    if stream is None:
                        response = PlainTextResponse("No such race stream (it ended, or was read already).", status_code=404)
                        await response(scope, receive, send)
                        return
                    events = stream.events()
                    response = StreamingResponse(events, media_type="text/event-stream",
                                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
                    try:
                        await response(scope, receive, send)
                    except (ClientDisconnect, OSError):  # the page went away: nothing to report
                        pass
                    finally:
                        await events.aclose()
                        stream.left()
                    return
            await app(scope, receive, send)
        return serve
