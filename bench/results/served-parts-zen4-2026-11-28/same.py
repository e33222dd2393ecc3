# ruff: noqa: E402, B023 -- a record of a measurement: the app reads its settings from the environment at import
"""The app and the alone engine in ONE process, sharing the compiled models: served/alone without process differences."""

import json
import os
import statistics
import subprocess
import sys

os.environ.update(SPEC_APP_PRELOAD="0", SPEC_APP_PREHEAT="0")
sys.argv = ["app.py"]
import app
from bench.tools.served import Engine
from bench.tools.served_app import free_port, page

p = page()
eng = Engine(p)
eng.registry = app.registry
eng._model(p.target)
eng._model(p.draft)
port = free_port()
app.demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, **app.LAUNCH_OPTIONS)
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
        alone = eng.run(prompt, "autoregressive", 128)["decode_tokens_per_second"]
        ratios.append(served / alone)
        print(f"{label[:16]:16s} served {served:.2f} alone {alone:.2f} ratio {ratios[-1]:.3f}", flush=True)
print("median served/alone, same process:", round(statistics.median(ratios), 3))
os._exit(0)
