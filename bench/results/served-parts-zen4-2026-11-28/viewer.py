"""In one process: AR lane of a race recorded with and without a niced viewer watching (watch()), against alone."""

import os
import statistics
import threading

from bench.tools.served import Engine
from bench.tools.served_app import page
from spec.config import GenerationConfig
from spec.serving.phases import Viewing
from spec.serving.playback import watch
from spec.serving.race import run_race
from spec.serving.recording import Recording

p = page()
eng = Engine(p)
d = p.defaults
cfg = GenerationConfig(
    max_new_tokens=128,
    temperature=d["temperature"],
    top_p=d["top_p"],
    seed=d["seed"],
    num_assistant_tokens=d["k"],
    dynamic_k=d["dynamic_k"],
).validate()
target, draft = eng._model(p.target), (eng._model(p.draft) if p.draft else None)
NICE = int(os.environ.get("NICE", "10"))


def race(prompt, viewer):
    rec = Recording(None)
    views = [0]

    def view():
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, NICE)
        for v in watch(rec, Viewing.LIVE, lambda r: (0, None), threading.Event()):
            views[0] += 1

    vt = threading.Thread(target=view) if viewer else None
    box = {}

    def go():
        for u in run_race(prompt, target, draft, p.drafter, cfg, threading.Event(), learned=eng.learned):
            rec.record(u)
            box["u"] = u

    t = threading.Thread(target=go)
    t.start()
    vt and vt.start()
    t.join()
    vt and vt.join()
    return box["u"], views[0]


res = {"alone": [], "race": [], "viewed": []}
conds = os.environ.get("CONDS", "alone,race,viewed").split(",")
for rep in range(int(os.environ.get("REPS", "2"))):
    for label, prompt in p.examples[:6]:
        line = []
        for c in conds:
            if c == "alone":
                v = eng.run(prompt, "autoregressive", 128)["decode_tokens_per_second"]
            else:
                u, n = race(prompt, c == "viewed")
                v = u.autoregressive.stats.as_dict()["decode_tokens_per_second"]
            res[c].append(v)
            line.append(f"{c} {v:.2f}")
        print(label[:16], " ".join(line), flush=True)
base = res[conds[0]]
for c in conds:
    print(c, "median ratio to", conds[0], round(statistics.median(a / b for a, b in zip(res[c], base)), 3))
