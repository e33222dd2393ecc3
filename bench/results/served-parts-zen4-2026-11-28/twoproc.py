"""Two plain engine processes (this one and a child), same settings, alternating AR runs: does the process alone move the speed?"""

import json
import os
import statistics
import subprocess
import sys

from bench.tools.served import Engine
from bench.tools.served_app import page

CHILD = """
import json, os, sys
from bench.tools.served import Engine
from bench.tools.served_app import page
p = page(); e = Engine(p)
if os.environ.get("QUICK"):  # the app's quick pair loaded too, as the app loads it
    from spec.serving.presets import pair_keys
    from spec.models.embedded import QUICK_REF
    for k in pair_keys(QUICK_REF, None, "CPU"):
        if k: e._model(k)
e._model(p.target)
print("ready", flush=True)
for line in sys.stdin:
    print(json.dumps(e.run(json.loads(line), "autoregressive", 128)["decode_tokens_per_second"]), flush=True)
"""
p = page()
eng = Engine(p)
eng._model(p.target)
allr = []
for round_ in range(int(os.environ.get("ROUNDS", "2"))):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    while child.stdout.readline().strip() != "ready":
        pass
    ratios = []
    for rep in range(2):
        for label, prompt in p.examples[:6]:
            child.stdin.write(json.dumps(prompt) + "\n")
            child.stdin.flush()
            other = json.loads(child.stdout.readline())
            here = eng.run(prompt, "autoregressive", 128)["decode_tokens_per_second"]
            ratios.append(other / here)
            print(f"round {round_} {label[:16]:16s} child {other:.2f} here {here:.2f} ratio {ratios[-1]:.3f}", flush=True)
    print(f"round {round_}: median child/here {statistics.median(ratios):.3f}", flush=True)
    allr += ratios
    child.kill()
    child.wait()
print("all: median child/here", round(statistics.median(allr), 3))
