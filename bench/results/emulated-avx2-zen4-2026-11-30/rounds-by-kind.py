"""One-off (2026-11-30, docs/benchmarks.md, "The hybrid under emulated AVX2 on the Zen 4"): the page's examples raced
as `bench.tools.examples --fresh` races them, the speculative lane's steps classed and summed: plain steps, lookup
rounds (by K), the draft model's rounds with and without a catch-up (its reading of the prompt among them). Run from
the repository root:

    PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python -m bench.tools.cpu_class AVX2 -- \\
        .venv/bin/python bench/results/emulated-avx2-zen4-2026-11-30/rounds-by-kind.py 2
"""
import collections
import os
import sys
import threading

os.environ.setdefault("SPEC_APP_PRELOAD", "0")
sys.path.insert(0, os.getcwd())
import app  # noqa: E402
import spec.serving.race as race_mod  # noqa: E402
from spec.config import GenerationConfig  # noqa: E402
from spec.decoding.target_memory import LearnedState  # noqa: E402
from spec.serving.loading import warm_up  # noqa: E402
from spec.serving.verdict import explain  # noqa: E402

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
real_stream = race_mod.stream
record = []


def spying(prompt, target, config, draft=None, drafter=None, **kw):
    steps = real_stream(prompt, target, config, draft=draft, drafter=drafter, **kw)
    if drafter is None:
        return steps
    log = []
    record.append(log)

    def logged():
        for step in steps:
            log.append(step)
            yield step
    return logged()


race_mod.stream = spying
pair = app.DEFAULT_PRESET
drafter = pair.drafters[0]
config = GenerationConfig(max_new_tokens=128, num_assistant_tokens=4, dynamic_k=True).validate()
target_key, draft_key = pair.keys(*pair.models(drafter))
target = warm_up(app.registry.get(target_key))
draft = warm_up(app.registry.get(draft_key)) if draft_key else None
learned = LearnedState()
for label, prompt in app.EXAMPLES:
    for r in range(runs):
        record.clear()
        *_, last = race_mod.run_race(prompt, target, draft, drafter, config, threading.Event(), learned=learned)
        learned.keep()
        why = explain(last.autoregressive.stats, last.speculative.stats, 4)
        ar = last.autoregressive.stats
        classes = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])  # rounds, tokens, seconds, catch-up seconds
        for before, after in zip(record[0], record[0][1:]):
            def grew(name, before=before.stats, after=after.stats):
                return getattr(after, name) - getattr(before, name)
            if grew("plain_steps"):
                key = "plain"
            elif grew("draft_seconds") > 0.003:
                key = "model" + ("+read" if grew("draft_catch_up_seconds") > 0 else "")
            else:
                key = f"lookup k={grew('drafted')}"
            kind = classes[key]
            kind[0] += 1
            kind[1] += grew("new_tokens")
            kind[2] += grew("seconds")
            kind[3] += grew("draft_catch_up_seconds")
        print(f"{label[:28]:28s} r{r} speed-up {why.speedup:.2f}x  AR "
              f"{1000 * (ar.seconds - ar.ttft_seconds) / (ar.new_tokens - 1):.1f} ms/token")
        for key in sorted(classes):
            n, tokens, seconds, catch_up = classes[key]
            print(f"    {key:14s} n {n:3d} tokens {tokens:3d}  {1000 * seconds / max(1, tokens):6.1f} ms/token  "
                  f"total {seconds:5.2f} s  catch-up {catch_up:.2f}")
