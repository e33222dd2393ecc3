"""What a race's updates become in Gradio, and the race handler's variants as Gradio reads them.

The API (/race, /race_live) answers with an output per element of the page, as clients read it.
The page itself takes one output, the feed, whose markup and tokens its JavaScript (app.js) sets:
Gradio handles every output of an update (a component's props, its status tracker), so one output
an update costs the browser watching a race less than eight.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, Iterator

import gradio as gr

import render


def api(update: render.PageUpdate) -> tuple:
    """render's PageUpdate as the API's outputs, a field per component of app.py's `race_outputs`,
    in the same order: None leaves a component as it is."""
    *html, live = (gr.skip() if value is None else value for value in update)
    return (*html, live if update.race_it_live is None else gr.Button(visible=update.race_it_live))


def page(update: render.PageUpdate) -> tuple:
    """The page's outputs (app.py's `shown`): the feed carrying the markup app.js sets, the numbers, the button."""
    return render.on_page(update), *api(update)[6:]


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
