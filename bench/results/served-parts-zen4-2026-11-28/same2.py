# ruff: noqa: E402, B023 -- a record of a measurement: the app reads its settings from the environment at import
"""As same.py, but the app started as app.main starts it (log_to_terminal, hide_torch, preload, nice, launch)."""

import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

os.environ.update(SPEC_APP_PRELOAD="1", SPEC_APP_PREHEAT="0")
sys.argv = ["app.py"]
import app
from bench.tools.served import Engine
from bench.tools.served_app import free_port, page
from spec.models import library_output, torch_free
from spec.serving import warmup

jobs, results = queue.Queue(), queue.Queue()


def runner():
    while True:
        f = jobs.get()
        results.put(f())


threading.Thread(target=runner, daemon=True).start()  # before the nice: as the scheduler's workers
p = page()
if os.environ.get("STEPS", "1") == "1":
    library_output.log_to_terminal()
    torch_free.hide_torch()
threading.Thread(target=app._preload, name="preload", daemon=True).start()
if os.environ.get("NICE", "1") == "1":
    warmup.serve_below_races()
port = free_port()
app.demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, **app.LAUNCH_OPTIONS)
while not {p.target, p.draft} <= set(app.registry.loaded()):
    time.sleep(1)
time.sleep(5)
eng = Engine(p)
eng.registry = app.registry
CLIENT = """
import json, sys
from gradio_client import Client
from bench.tools.served_app import page, numbers_of
p = page(); c = Client(sys.argv[1], verbose=False)
job = c.submit(**p.inputs(sys.argv[2], 128), api_name="/race_live"); job.result(timeout=600)
print(json.dumps(numbers_of(job.outputs()[-1])["autoregressive"]))
"""
ratios = []
for rep in range(2):
    for label, prompt in p.examples[:6]:
        out = subprocess.run(
            [sys.executable, "-c", CLIENT, f"http://127.0.0.1:{port}/", prompt], capture_output=True, text=True, cwd=os.getcwd()
        )
        served = json.loads(out.stdout.strip().splitlines()[-1])["decode_tokens_per_second"]
        jobs.put(lambda: eng.run(prompt, "autoregressive", 128))
        alone = results.get()["decode_tokens_per_second"]
        ratios.append(served / alone)
        print(f"{label[:16]:16s} served {served:.2f} alone {alone:.2f} ratio {ratios[-1]:.3f}", flush=True)
print("median served/alone, same process, app.main's steps:", round(statistics.median(ratios), 3))
os._exit(0)
