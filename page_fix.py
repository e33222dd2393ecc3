"""One fix to Gradio's page, served in place of Gradio's own file: a status tracker's animation
loop that outlives its tracker.

Gradio's StatusTracker counts a pending event's seconds in a requestAnimationFrame loop that stops
only when its status changes. The page's loading screen has one, and removes it while its status
is still pending, so that loop runs on, a frame at a time, for as long as the page is open: the
browser runs its frame pipeline at the display's rate with nothing new to show. A browser sharing
the cores with the race it shows takes that CPU from the race. The fix stops the loop once the
tracker's element has left the page; the file is otherwise Gradio's, and a Gradio whose file does
not hold the loop as written below is served unchanged. The bug, written up for Gradio:
docs/upstream.md.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import gradio
from starlette.middleware import Middleware

ASSETS = Path(gradio.__file__).parent / "templates" / "frontend" / "assets"
TRACKER = re.compile(r"/assets/(statustracker-[\w-]+\.js)$")
# In Gradio 6's built file: the loop (`ze`, going on while `W`) and the tracker's element (`U`, bound
# with bind:this, null once the tracker is destroyed).
LOOP, ELEMENT = "W&&ze()", "e=>U=e,()=>U"
STOPPING = "W&&U?.isConnected&&ze()"


@lru_cache(maxsize=4)
def patched(name: str) -> bytes | None:
    """Gradio's asset `name` with the loop stopped once the tracker leaves the page; None where
    the file does not hold the loop and the element exactly once (another Gradio: left alone)."""
    try:
        text = (ASSETS / name).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    if text.count(LOOP) != 1 or text.count(ELEMENT) != 1:
        return None
    return text.replace(LOOP, STOPPING).encode()


class StopLeakedLoops:
    """ASGI middleware: serves the status tracker's file patched; every other request passes on."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            match = TRACKER.search(scope.get("path", ""))
            body = patched(match.group(1)) if match else None
            if body is not None:
                headers = [(b"content-type", b"text/javascript; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                           (b"cache-control", b"no-cache")]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
                return
        await self.app(scope, receive, send)


MIDDLEWARE = [Middleware(StopLeakedLoops)]  # for Gradio's launch(app_kwargs=dict(middleware=...))
