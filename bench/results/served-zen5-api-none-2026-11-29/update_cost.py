# ruff: noqa: E501 -- a record of a measurement, kept as it ran
"""What Gradio's server spends on one update of an API race (/race, /race_live), in this process:
the outputs as they went before 83ec522 (gr.skip() for each unchanged field, postprocessed) against
after (None, not postprocessed). A mid-race update carries the status and the feed; a full one all eight.
Run from the repository root: PYTHONPATH=. .venv/bin/python bench/results/served-zen5-api-none-2026-11-29/update_cost.py"""

import asyncio
import time

import gradio as gr
from gradio.state_holder import SessionState

import app
import outputs
import render

demo = app.demo
fn = next(f for f in demo.fns.values() if f.api_name == "race_live")
mid = render.PageUpdate(render.status("Racing", "info"), feed='{"lanes":{"ar":{"pieces":[["x","plain"]]}}}')
full = render.PageUpdate(render.status("Racing", "info"), "s" * 300, '{"lanes":{}}', "a" * 800, "p" * 1500, "m" * 200, {"a": 1.0, "b": [1, 2]}, False)


def skipped(update):  # outputs.api before 83ec522
    *html, live = (gr.skip() if value is None else value for value in update)
    return (*html, live if update.race_it_live is None else gr.Button(visible=update.race_it_live))


async def main():
    state = SessionState(demo)
    for label, shape, postprocess in (("before: gr.skip(), postprocessed", skipped, True), ("after: None, not postprocessed", outputs.api, False)):
        fn.postprocess = postprocess
        for name, update in (("mid-race", mid), ("full", full)):
            await demo.postprocess_data(fn, list(shape(update)), state)
            n, start = 300, time.perf_counter()
            for _ in range(n):
                await demo.postprocess_data(fn, list(shape(update)), state)
            print(f"{label:36s} {name:8s} update: {(time.perf_counter() - start) / n * 1e3:.3f} ms")


asyncio.run(main())
