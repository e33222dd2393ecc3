"""One-off (2026-11-30, docs/benchmarks.md, "The hybrid under emulated AVX2 on the Zen 4"): per race of the page's
examples, the draft model's rounds as the hybrid priced them (tokens kept, seconds, the catch-ups' and the prompt's
reading's shares) against what they kept and took. Run from the repository root:

    PYTHONPATH=. SPEC_MODELS_DIR=models/cache .venv/bin/python -m bench.tools.cpu_class AVX2 -- \\
        .venv/bin/python bench/results/emulated-avx2-zen4-2026-11-30/priced-vs-taken.py 2
"""
import os
import sys
import threading

os.environ.setdefault("SPEC_APP_PRELOAD", "0")
sys.path.insert(0, os.getcwd())
import app  # noqa: E402
import spec.serving.race as race_mod  # noqa: E402
from spec.config import DRAFT_MODEL, GenerationConfig  # noqa: E402
from spec.decoding.policy import hybrid_k  # noqa: E402
from spec.decoding.target_memory import LearnedState  # noqa: E402
from spec.serving.loading import warm_up  # noqa: E402
from spec.serving.verdict import explain  # noqa: E402

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
log = []
H = hybrid_k.HybridK
real_rates, real_next, real_observe = H.rates, H.next_round, H.observe_round


def rates(self, key, available):
    """As HybridK.rates, keeping the parts its draft-model rounds are priced with beyond their calls."""
    out = real_rates(self, key, available)
    m, behind, read_share = self.memory, 0.0, 0.0
    if self._prices_prompt():
        left = max(1, self.budget - (self._context - self._prompt))
        read_share = m.read_seconds * (self._context - 1) / left
    elif self._unread > hybrid_k.READ_WITH_FIRST_STEP:
        catch_up = m.catch_up_seconds if m.catch_up_seconds is not None else m.call_seconds
        behind = catch_up / max(1.0, self.run_length if self.run_length is not None else hybrid_k._PRIOR_RUN)
    self._spy_parts = dict(behind=behind, read_share=read_share)
    return out


def next_round(self, context):
    self._spy_parts = None
    plan = real_next(self, context)
    rate = self.rates(*self._match).get(plan) if self._spy_parts is not None and plan.source == DRAFT_MODEL else None
    self._spy = (plan, rate, self._promises.get(plan) if rate else None, self.memory.yielded if rate else None,
                 dict(self._spy_parts or {}), self._read_prompt)
    return plan


def observe_round(self, result):
    plan, rate, promised, yielded, parts, read = self._spy
    if plan.source == DRAFT_MODEL:
        log.append(dict(rate=rate, promised=promised, yielded=yielded, kept=result.accepted + 1, first_read=not read,
                        seconds=result.verify_seconds + result.draft_seconds + result.catch_up_seconds,
                        catch_up=result.catch_up_seconds, parts=parts))
    real_observe(self, result)


H.rates, H.next_round, H.observe_round = rates, next_round, observe_round
pair = app.DEFAULT_PRESET
drafter = pair.drafters[0]
config = GenerationConfig(max_new_tokens=128, num_assistant_tokens=4, dynamic_k=True).validate()
target_key, draft_key = pair.keys(*pair.models(drafter))
target = warm_up(app.registry.get(target_key))
draft = warm_up(app.registry.get(draft_key)) if draft_key else None
learned = LearnedState()
for label, prompt in app.EXAMPLES:
    for r in range(runs):
        log.clear()
        *_, last = race_mod.run_race(prompt, target, draft, drafter, config, threading.Event(), learned=learned)
        learned.keep()
        why = explain(last.autoregressive.stats, last.speculative.stats, 4)
        ar = last.autoregressive.stats
        step = (ar.seconds - ar.ttft_seconds) / (ar.new_tokens - 1)
        rated = [x for x in log if x["rate"]]
        priced_kept = sum(x["promised"] * x["yielded"] for x in rated)
        kept = sum(x["kept"] for x in rated)
        priced_seconds = sum(x["promised"] * x["yielded"] / x["rate"] for x in rated)
        seconds = sum(x["seconds"] for x in rated)
        catch_ups = sum(x["catch_up"] for x in rated if not x["first_read"])
        catch_ups_priced = sum(x["parts"].get("behind", 0) for x in rated)
        reading = sum(x["catch_up"] for x in rated if x["first_read"])
        reading_priced = sum(x["parts"].get("read_share", 0) * x["promised"] * x["yielded"] for x in rated)
        print(f"{label[:24]:24s} r{r} {why.speedup:.2f}x AR {1000 * step:.1f} ms/tok | model rounds {len(log)} "
              f"(rated {len(rated)}): kept {kept} vs priced {priced_kept:.1f}; secs {seconds:.2f} vs priced "
              f"{priced_seconds:.2f}; ms/kept {1000 * seconds / max(kept, 1):.1f} vs priced "
              f"{1000 * priced_seconds / max(priced_kept, 1e-9):.1f}; catch-ups {catch_ups:.2f} vs {catch_ups_priced:.2f}; "
              f"reading {reading:.2f} vs {reading_priced:.2f}", flush=True)
