# ruff: noqa: E501, E741 -- a record of a measurement, kept as it ran
"""Run-queue waits (schedstat) of the threads that compute, served against alone; and the host's steal."""

import os
import re
import time
from pathlib import Path

from gradio_client import Client

from bench.tools.served import Engine
from bench.tools.served_app import free_port, numbers_of, page, start_app, stop_app, wait_for_line


def threads(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            run, wait, n = map(int, open(f"/proc/{pid}/task/{t}/schedstat").read().split())
            nice = int(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[16])
            sw = dict(l.split(":") for l in open(f"/proc/{pid}/task/{t}/status").read().splitlines() if "ctxt" in l)
            out[t] = (nice, run / 1e9, wait / 1e9, int(sw["nonvoluntary_ctxt_switches"]))
        except OSError:
            pass
    return out


def steal():
    f = open("/proc/stat").readline().split()[1:]
    return int(f[7]) / os.sysconf("SC_CLK_TCK"), sum(map(int, f)) / os.sysconf("SC_CLK_TCK")


def delta(a, b):
    top = min(v[0] for v in b.values())
    comp = [
        (b[t][1] - a.get(t, (0, 0, 0, 0))[1], b[t][2] - a.get(t, (0, 0, 0, 0))[2], b[t][3] - a.get(t, (0, 0, 0, 0))[3])
        for t in b
        if b[t][0] == top
    ]
    other = [(b[t][1] - a.get(t, (0, 0, 0, 0))[1], b[t][2] - a.get(t, (0, 0, 0, 0))[2]) for t in b if b[t][0] != top]
    return sum(c[0] for c in comp), sum(c[1] for c in comp), sum(c[2] for c in comp), sum(o[0] for o in other)


p = page()
eng = Engine(p)
port = free_port()
log = Path(f"/tmp/sched-app-{port}.log")
app = start_app(port, log, {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0", "EXP_POLICY": os.environ.get("EXP_POLICY", "")})
try:
    wait_for_line(log, re.escape("Ready: " + p.preset), app, 900)
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    for label, prompt in p.examples[:6] * int(os.environ.get("REPEATS", "2")):
        a, s0 = threads(app.pid), steal()
        t0 = time.monotonic()
        job = client.submit(**p.inputs(prompt, 128), api_name="/race_live")
        job.result(timeout=600)
        b, s1 = threads(app.pid), steal()
        wall = time.monotonic() - t0
        n = numbers_of(job.outputs()[-1])
        run, wait, invol, other = delta(a, b)
        print(
            f"served {label[:14]:14s} AR {n['autoregressive']['decode_tokens_per_second']:.2f} wall {wall:.1f} compute-run {run:.1f}s rq-wait {wait:.2f}s invol {invol} other-threads-run {other:.2f}s steal {s1[0] - s0[0]:.2f}s",
            flush=True,
        )
        me = os.getpid()
        a, s0 = threads(me), steal()
        t0 = time.monotonic()
        st = eng.run(prompt, "autoregressive", 128)
        b, s1 = threads(me), steal()
        wall = time.monotonic() - t0
        run, wait, invol, other = delta(a, b)
        print(
            f"alone  {label[:14]:14s} AR {st['decode_tokens_per_second']:.2f} wall {wall:.1f} compute-run {run:.1f}s rq-wait {wait:.2f}s invol {invol} other-threads-run {other:.2f}s steal {s1[0] - s0[0]:.2f}s",
            flush=True,
        )
finally:
    stop_app(app)
