"""What a race's updates become in Gradio, and the race handler's variants as Gradio reads them.

The API (/race, /race_live) answers with an output per element of the page, as clients read it.
The page itself takes one output, the feed, whose markup and tokens its JavaScript (app.js) sets:
Gradio handles every output of an update (a component's props, its status tracker), so one output
an update costs the browser watching a race less than eight; and only a watch's first and last
updates go through Gradio at all (PageFeed), the others through a stream of the page's own.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from typing import Callable, Iterator

import gradio as gr

import render
from page_stream import PageStream, PageStreams


def api(update: render.PageUpdate) -> tuple:
    """render's PageUpdate as the API's outputs, a field per component of app.py's `race_outputs`,
    in the same order: None where the update leaves a field as it is. Not gr.skip(): Gradio rebuilds
    a component for each skipped output, about 2 ms an update of a race's thirty, on the cores the
    race runs on (app.py sends these outputs as they are, without Gradio's postprocessing)."""
    *html, live = update
    return (*html, None if live is None else gr.Button(visible=live))


def page(update: render.PageUpdate, stream: str | None = None) -> tuple:
    """The page's outputs (app.py's `shown`): the feed carrying the markup app.js sets, the numbers,
    the button; `stream` names the page's own stream for the updates that follow. A field the update
    leaves as it is stays as it is on the page (gr.skip(): None would empty it)."""
    numbers, live = (gr.skip() if value is None else value for value in api(update)[6:])
    return render.on_page(update, stream), numbers, live


class PageFeed:
    """Where one watch's updates go on the page: the first and the last as Gradio outputs, the first
    naming the watch's stream (page_stream), and every one between down that stream, so that Gradio's
    client handles two messages a race rather than four a second."""

    def __init__(self, stream: PageStream):
        self.stream = stream
        self._announced = False

    def route(self, update: render.PageUpdate, last: bool) -> tuple | None:
        """The page's outputs for Gradio to send, or None where the update went down the stream."""
        if self._announced and not last and update.numbers is None:
            self.stream.send(render.on_page(update))
            return None
        announce, self._announced = not (self._announced or last), True  # a watch over at once needs no stream
        return page(update, self.stream.token if announce else None)


@contextlib.contextmanager
def routing(shown: Callable[[render.PageUpdate], tuple], streams: PageStreams | None,
            cancel: threading.Event) -> Iterator[Callable[[render.PageUpdate, bool], tuple | None]]:
    """route(update, last) for one watch: each update as `shown` makes it (the API), or, given the
    page's streams, through a PageFeed whose stream ends with the watch."""
    if streams is None:
        yield lambda update, last: shown(update)
        return
    feed = PageFeed(streams.open(cancel))
    try:
        yield feed.route
    finally:
        streams.close(feed.stream)


def variant(handler: Callable[..., Iterator[tuple]], doc: str | None = None, **fixed) -> Callable[..., Iterator[tuple]]:
    """`handler` with the keywords in `fixed` set, its signature the handler's without them: Gradio
    reads it for the API's parameters and for where the request goes."""
    @functools.wraps(handler)
    def fixed_handler(*args, **kwargs) -> Iterator[tuple]:
        yield from handler(*args, **kwargs, **fixed)
    signature = inspect.signature(handler)
    fixed_handler.__signature__ = signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in fixed])
    fixed_handler.__annotations__ = {name: kind for name, kind in handler.__annotations__.items() if name not in fixed}
    fixed_handler.__doc__ = doc or handler.__doc__
    del fixed_handler.__wrapped__  # Gradio follows it to the handler's own parameters, `fixed` among them
    return fixed_handler
