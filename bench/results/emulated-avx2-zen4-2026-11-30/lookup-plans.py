"""One-off (2026-11-30, docs/benchmarks.md, "Twelve served repeats, and a curve timed on one core"): the page's first
three examples raced as `bench.tools.examples --fresh` races them, twice each, printing the target's call costs
before each race and every timing of a call of 4 (prompt lookup's rounds of 3), to see why lookup sat out the
docstrings example. Run from the repository root:

    PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python -m bench.tools.cpu_class AVX2 -- \\
        .venv/bin/python bench/results/emulated-avx2-zen4-2026-11-30/lookup-plans.py
"""
import os
import sys
import threading

os.environ.setdefault("SPEC_APP_PRELOAD", "0")
sys.path.insert(0, os.getcwd())
import app  # noqa: E402
import spec.serving.race as race_mod  # noqa: E402
from spec.config import GenerationConfig  # noqa: E402
from spec.decoding.policy import costs as costs_mod  # noqa: E402
from spec.decoding.target_memory import LearnedState  # noqa: E402
from spec.serving.loading import warm_up  # noqa: E402
from spec.serving.verdict import explain  # noqa: E402

real_observe = costs_mod.CallCosts.observe


def observe(self, width, seconds, last_width):
    before = self.seconds.get(width)
    real_observe(self, width, seconds, last_width)
    if width == 4:
        print(f"     w4 observed {1000 * seconds:.0f} ms after width {last_width}: "
              f"{before and round(1000 * before)} -> {round(1000 * self.seconds.get(width, 0))}")


costs_mod.CallCosts.observe = observe
pair = app.DEFAULT_PRESET
drafter = pair.drafters[0]
config = GenerationConfig(max_new_tokens=128, num_assistant_tokens=4, dynamic_k=True).validate()
target_key, draft_key = pair.keys(*pair.models(drafter))
target = warm_up(app.registry.get(target_key))
draft = warm_up(app.registry.get(draft_key)) if draft_key else None
learned = LearnedState()
for label, prompt in app.EXAMPLES[:3]:
    for r in range(2):
        costs = learned.about(target).call_costs
        print("   costs before:", {w: round(1000 * s) for w, s in sorted(costs.seconds.items())}, "kept", sorted(costs.kept),
              "switch", costs.switch and round(1000 * costs.switch), flush=True)
        *_, last = race_mod.run_race(prompt, target, draft, drafter, config, threading.Event(), learned=learned)
        learned.keep()
        why = explain(last.autoregressive.stats, last.speculative.stats, 4)
        print(label[:30], r, f"{why.speedup:.2f}x plain {last.speculative.stats.plain_steps}", flush=True)
