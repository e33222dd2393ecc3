"""A child process started as app.main starts the app (nothing served) running the engine alone, against a plain engine process."""

import json
import os
import statistics
import subprocess
import sys

from bench.tools.served import Engine
from bench.tools.served_app import page

CHILD = r"""
import json, os, queue, sys, threading, time
os.environ.update(SPEC_APP_PRELOAD="1", SPEC_APP_PREHEAT="0")
sys.argv = ["app.py"]
import app
from spec.models import library_output, torch_free
from spec.serving import warmup
from bench.tools.served import Engine
from bench.tools.served_app import page, free_port
jobs, results = queue.Queue(), queue.Queue()
def runner():
    while True:
        f = jobs.get(); results.put(f())
threading.Thread(target=runner, daemon=True).start()
p = page()
steps = os.environ.get("APPSTEPS", "log,torch,preload,nice,launch").split(",")
if "log" in steps: library_output.log_to_terminal()
if "torch" in steps: torch_free.hide_torch()
if "preload" in steps: threading.Thread(target=app._preload, name="preload", daemon=True).start()
if "nice" in steps: warmup.serve_below_races()
if "launch" in steps: app.demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, **app.LAUNCH_OPTIONS)
eng = Engine(p); eng.registry = app.registry
if "preload" in steps:
    while not {p.target, p.draft} <= set(app.registry.loaded()):
        time.sleep(1)
    time.sleep(3)
jobs.put(lambda: eng._model(p.target)); results.get()
print("ready", flush=True)
for line in sys.stdin:
    prompt = json.loads(line)
    jobs.put(lambda: eng.run(prompt, "autoregressive", 128)["decode_tokens_per_second"])
    print(json.dumps(results.get()), flush=True)
"""
p = page()
eng = Engine(p)
eng._model(p.target)
ratios = []
child = subprocess.Popen(
    [sys.executable, "-c", CHILD],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
    env={**os.environ, "PYTHONWARNINGS": "ignore"},
)
while (line := child.stdout.readline().strip()) != "ready":
    if child.poll() is not None:
        sys.exit("child died")
for rep in range(2):
    for label, prompt in p.examples[:6]:
        here = eng.run(prompt, "autoregressive", 128)["decode_tokens_per_second"]
        child.stdin.write(json.dumps(prompt) + "\n")
        child.stdin.flush()
        other = json.loads(child.stdout.readline())
        ratios.append(other / here)
        print(f"{label[:16]:16s} app-process {other:.2f} plain {here:.2f} ratio {ratios[-1]:.3f}", flush=True)
print(os.environ.get("APPSTEPS", "all steps"), "median app-process/plain", round(statistics.median(ratios), 3), flush=True)
child.kill()
child.wait()
