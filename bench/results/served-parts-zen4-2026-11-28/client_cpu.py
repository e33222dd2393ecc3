"""CPU this client process spends while receiving a served race through /race_live, and the AR ratio proxy."""

import resource
import time
from pathlib import Path

from gradio_client import Client

from bench.tools.served_app import free_port, numbers_of, page, start_app, stop_app, wait_for_line

port = free_port()
log = Path(f"/tmp/exp/app-{port}.log")
app = start_app(port, log, {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0"})
try:
    import re

    wait_for_line(log, re.escape("Ready: " + page().preset), app, 900)
    p = page()
    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    for label, prompt in p.examples[:6]:
        c0, w0 = time.process_time(), time.monotonic()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        job = client.submit(**p.inputs(prompt, 128), api_name="/race_live")
        job.result(timeout=600)
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        n = numbers_of(job.outputs()[-1])
        print(
            f"{label[:24]:24s} wall {time.monotonic() - w0:5.1f}s client cpu {time.process_time() - c0:5.2f}s "
            f"ctxsw vol {ru1.ru_nvcsw - ru0.ru_nvcsw} invol {ru1.ru_nivcsw - ru0.ru_nivcsw} outputs {len(job.outputs())} "
            f"AR {n['autoregressive']['decode_tokens_per_second']:.2f} SP {n['speculative']['decode_tokens_per_second']:.2f}",
            flush=True,
        )
finally:
    stop_app(app)
