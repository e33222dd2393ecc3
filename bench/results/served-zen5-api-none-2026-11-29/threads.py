# ruff: noqa: E501, E702, E741 -- a record of a measurement, kept as it ran
"""Each thread of a served race and of the lanes alone: CPU run, run-queue wait, context switches (/proc/<pid>/task/*/schedstat and status).
Run from the repository root: PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python bench/results/served-zen5-api-none-2026-11-29/threads.py"""
import os
import re
import time
from pathlib import Path

from gradio_client import Client

from bench.tools.served import Engine
from bench.tools.served_app import free_port, numbers_of, page, start_app, stop_app, wait_for_line


def snap(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            run, wait, n = map(int, open(f"/proc/{pid}/task/{t}/schedstat").read().split())
            comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
            nice = int(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[16])
            sw = dict(l.split(":") for l in open(f"/proc/{pid}/task/{t}/status").read().splitlines() if "ctxt" in l)
            out[t] = (comm, nice, run / 1e9, wait / 1e9, int(sw["nonvoluntary_ctxt_switches"]), int(sw["voluntary_ctxt_switches"]))
        except OSError:
            pass
    return out

def show(tag, a, b, wall):
    print(f"--- {tag} wall {wall:.1f}s")
    for t in b:
        z = a.get(t, (0, 0, 0, 0, 0, 0))
        d = [b[t][i] - z[i] for i in (2, 3, 4, 5)]
        if d[0] > 0.01 or d[1] > 0.005:
            print(f"  {t:>7} {b[t][0]:18s} nice {b[t][1]:3d} run {d[0]:6.2f}s wait {d[1]:5.3f}s invol {d[2]:5d} vol {d[3]:6d}")

p = page()
eng = Engine(p)
port = free_port()
log = Path(f"/tmp/threads-app-{port}.log")
app = start_app(port, log, {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0"})
try:
    wait_for_line(log, re.escape("Ready: " + p.preset), app, 900)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    for label, prompt in p.examples[3:5] * 2:
        a = snap(app.pid); t0 = time.monotonic()
        job = client.submit(**p.inputs(prompt, 128), api_name="/race_live"); job.result(timeout=600)
        wall = time.monotonic() - t0
        n = numbers_of(job.outputs()[-1])
        show(f"served {label[:20]} AR {n['autoregressive']['decode_tokens_per_second']:.2f} SP {n['speculative']['decode_tokens_per_second']:.2f}", a, snap(app.pid), wall)
        for lane in ("autoregressive", "speculative"):
            a = snap(os.getpid()); t0 = time.monotonic()
            st = eng.run(prompt, lane, 128)
            show(f"alone {lane} {label[:20]} {st['decode_tokens_per_second']:.2f}", a, snap(os.getpid()), time.monotonic() - t0)
finally:
    stop_app(app)
