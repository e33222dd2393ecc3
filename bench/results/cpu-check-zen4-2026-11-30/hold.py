"""One-off (2026-11-30, docs/benchmarks.md, "Issues 38, 39 and 41 on the Zen 4 at 9d09b57"): the hybrid as
it is, against one that keeps the draft model out while the prompt is unread, for the first HOLD rounds
(`rounds`) or until lookup has found no match HOLD rounds in a row (`misses`). One process, the two in
turns, each with its own learned state and history; five code edits (160 tokens) and three open
questions (128), greedy.

    PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python bench/results/cpu-check-zen4-2026-11-30/hold.py 2 3 misses
    PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python bench/results/cpu-check-zen4-2026-11-30/hold.py 4 3 rounds
"""
import json
import statistics
import sys
import time

from spec.config import DRAFT_MODEL, HYBRID, GenerationConfig
from spec.decoding.engine import stream
from spec.decoding.history import AnswerHistory
from spec.decoding.policy import hybrid_k as hk
from spec.decoding.policy.lookup_k import lookup_state
from spec.decoding.target_memory import LearnedState
from spec.models.registry import load_model
from spec.serving.presets import pair_keys

HOLD = int(sys.argv[1]) if len(sys.argv) > 1 else 2
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
MODE = sys.argv[3] if len(sys.argv) > 3 else "misses"
ON = {"hold": False}
_next, _rates = hk.HybridK.next_round, hk.HybridK.rates


def next_round(self, context):
    key = lookup_state(self.lookup, context)[0]
    counted = MODE == "rounds" or key == 0  # rounds: every round counts; misses: rounds without a match, in a row
    self._misses = getattr(self, "_misses", 0) + 1 if counted else 0
    return _next(self, context)


def rates(self, key, available):
    r = _rates(self, key, available)
    if ON["hold"] and self._prices_prompt() and getattr(self, "_misses", 0) < HOLD:
        r = {plan: rate for plan, rate in r.items() if plan.source != DRAFT_MODEL} or r
    return r


hk.HybridK.next_round, hk.HybridK.rates = next_round, rates
code = json.load(open("bench/prompts/code-editing.json"))["prompts"]
opens = json.load(open("bench/prompts/open-questions.json"))["prompts"]
prompts = [(p["id"], p["text"], 160) for p in code] + [(p["id"], p["text"], 128) for p in opens[:3]]
tk, dk = pair_keys(None, "embedded:Qwen2.5-Coder-0.5B-Instruct")
target, draft = load_model(tk), load_model(dk)
state = {v: (AnswerHistory(), LearnedState()) for v in ("base", "hold")}


def run(variant, text, n):
    ON["hold"] = variant == "hold"
    history, learned = state[variant]
    config = GenerationConfig(max_new_tokens=n, temperature=0.0, num_assistant_tokens=4, dynamic_k=True)
    started, last, kinds = time.perf_counter(), None, []
    for step in stream(text, target, config, draft=draft, drafter=HYBRID, history=history, learned=learned):
        last = step
        kinds.append("".join(k[0] for k in step.kinds))
    return time.perf_counter() - started, last.stats, " ".join(kinds)


for variant in ("base", "hold"):  # warm-up, each its own state
    run(variant, "Write a Python function that reverses a string.", 64)
totals = {"base": {}, "hold": {}}
for r in range(REPEATS):
    for pid, text, n in prompts:
        for variant in (("base", "hold") if r % 2 == 0 else ("hold", "base")):
            s, st, kinds = run(variant, text, n)
            totals[variant].setdefault(pid, []).append(s)
            print(f"r{r} {pid:20s} {variant:5s} {s:6.2f}s calls {st.target_calls:3d} {kinds[:70]}", flush=True)
print("median seconds, hold / base:")
for pid, _, _ in prompts:
    b, h = statistics.median(totals["base"][pid]), statistics.median(totals["hold"][pid])
    print(f"  {pid:20s} base {b:6.2f} hold {h:6.2f} ratio {h / b:.3f}")
for name, ids in (("code", [p["id"] for p in code]), ("open", [p["id"] for p in opens[:3]])):
    hold, base = (sum(statistics.median(totals[v][i]) for i in ids) for v in ("hold", "base"))
    print(f"sum {name}:", hold / base)
