# ruff: noqa: E501, E741 -- a record of a measurement, kept as it ran
"""Does the race machinery itself (two lanes taking turns) slow the AR lane? No server at all."""

import statistics
import sys
import threading

from bench.tools.served import Engine
from bench.tools.served_app import page
from spec.config import GenerationConfig
from spec.serving.race import run_race

turn = float(sys.argv[1]) if len(sys.argv) > 1 else None
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 2
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
ratios = {"autoregressive": [], "speculative": []}
for label, prompt in p.examples[:6]:
    for r in range(repeats):
        alone = {m: eng.run(prompt, m, 128) for m in ("autoregressive", "speculative")}
        last = None
        for u in run_race(prompt, target, draft, p.drafter, cfg, threading.Event(), turn=turn, learned=eng.learned):
            last = u
        for m in ratios:
            a = alone[m]["decode_tokens_per_second"]
            s = getattr(last, m).stats.as_dict()
            ratios[m].append(s["decode_tokens_per_second"] / a)
            print(
                f"{label[:20]:20s} {m[:4]} alone {a:6.2f} race {s['decode_tokens_per_second']:6.2f} "
                f"ratio {ratios[m][-1]:.3f} target_s alone {alone[m]['target_seconds']:.2f} race {s['target_seconds']:.2f} calls {alone[m]['target_calls']}/{s['target_calls']}",
                flush=True,
            )
print("medians", {m: round(statistics.median(v), 3) for m, v in ratios.items()}, "turn", turn)
