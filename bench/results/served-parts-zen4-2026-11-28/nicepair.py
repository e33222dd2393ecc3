"""Two apps at once, their server threads at nice 10 (as shipped) and at nice 0, raced in turn beside the engine alone."""

import re
import statistics
from pathlib import Path

from gradio_client import Client

from bench.tools.served import Engine
from bench.tools.served_app import free_port, numbers_of, page, start_app, stop_app, wait_for_line

p = page()
eng = Engine(p)
eng._model(p.target)
apps, clients = {}, {}
try:
    for nice in ("10", "0"):
        port = free_port()
        log = Path(f"/tmp/exp/app-{port}.log")
        apps[nice] = start_app(port, log, {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0", "EXP_NICE": nice})
        wait_for_line(log, re.escape("Ready: " + p.preset), apps[nice], 900)
        clients[nice] = Client(f"http://127.0.0.1:{port}/", verbose=False)
    r = {"10": [], "0": []}
    for rep in range(2):
        for i, (label, prompt) in enumerate(p.examples[:6]):
            order = ("10", "0") if (rep + i) % 2 == 0 else ("0", "10")
            got = {}
            for nice in order:
                job = clients[nice].submit(**p.inputs(prompt, 128), api_name="/race_live")
                job.result(timeout=600)
                got[nice] = numbers_of(job.outputs()[-1])["autoregressive"]["decode_tokens_per_second"]
            alone = eng.run(prompt, "autoregressive", 128)["decode_tokens_per_second"]
            for nice in r:
                r[nice].append(got[nice] / alone)
            print(
                f"{label[:16]:16s} order {order} nice10 {got['10']:.2f} nice0 {got['0']:.2f} alone {alone:.2f} "
                f"ratios {got['10'] / alone:.3f} {got['0'] / alone:.3f} nice0/nice10 {got['0'] / got['10']:.3f}",
                flush=True,
            )
    for nice, v in r.items():
        print(f"server threads at nice {nice}: median served/alone {statistics.median(v):.3f}")
    print(f"median nice0/nice10 {statistics.median(a / b for a, b in zip(r['0'], r['10'])):.3f}")
finally:
    for a in apps.values():
        stop_app(a)
