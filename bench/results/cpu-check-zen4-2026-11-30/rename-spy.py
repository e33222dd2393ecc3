"""One-off (2026-11-30, docs/benchmarks.md, "Issues 38, 39 and 41 on the Zen 4 at 9d09b57"): one code-edit
prompt, prompt lookup against the hybrid in turns, in one process with one history and one learned state
as a benchmark worker keeps them. Each token is printed by its kind's first letter: t(arget),
a(ccepted from the draft model), l(ookup), b(onus), c(orrection); a space between target calls.

    PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python bench/results/cpu-check-zen4-2026-11-30/rename-spy.py rename-variable 3
"""
import json
import sys
import time

from spec.config import HYBRID, PROMPT_LOOKUP, GenerationConfig
from spec.decoding.engine import stream
from spec.decoding.history import AnswerHistory
from spec.decoding.target_memory import LearnedState
from spec.models.registry import load_model
from spec.serving.presets import pair_keys

name = sys.argv[1] if len(sys.argv) > 1 else "rename-variable"
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
prompts = json.load(open("bench/prompts/code-editing.json"))["prompts"]
text = next(p["text"] for p in prompts if p["id"] == name)
target_key, draft_key = pair_keys(None, "embedded:Qwen2.5-Coder-0.5B-Instruct")
target, draft = load_model(target_key), load_model(draft_key)
history, learned = AnswerHistory(), LearnedState()
config = GenerationConfig(max_new_tokens=160, temperature=0.0, num_assistant_tokens=4, dynamic_k=True)


def run(drafter: str, prompt: str):
    return stream(prompt, target, config, draft=draft if drafter == HYBRID else None, drafter=drafter,
                  history=history, learned=learned)


other = next(p["text"] for p in prompts if p["id"] != name)
for drafter in (PROMPT_LOOKUP, HYBRID):  # warm-up on another prompt
    for _ in run(drafter, other):
        pass
for r in range(repeats):
    for drafter in (PROMPT_LOOKUP, HYBRID) if r % 2 == 0 else (HYBRID, PROMPT_LOOKUP):
        started, calls, last = time.perf_counter(), [], None
        for step in run(drafter, text):
            calls.append("".join(kind[0] for kind in step.kinds))
            last = step
        seconds, st = time.perf_counter() - started, last.stats
        print(f"{drafter:14s} r{r} {seconds:6.2f}s tokens {len(''.join(calls))} calls {st.target_calls} "
              f"plain {st.plain_steps} drafted {st.drafted} accepted {st.accepted}")
        print("   ", " ".join(calls))
