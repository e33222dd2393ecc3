# ruff: noqa: E401, E402, E501, I001 -- a record of a measurement, kept as it ran
"""One-off: the hybrid's choices in a race and alone (under emulated AVX2), with what it priced."""
import sys, threading, collections
from spec.decoding.policy import hybrid_k
from spec.config import DRAFT_MODEL
log = collections.defaultdict(list)
current = ["?"]
orig = hybrid_k.HybridK.next_round
def next_round(self, context):
    plan = orig(self, context)
    if self.memory.call_seconds is not None and self._match is not None:
        r = self.rates(*self._match)
        from spec.decoding.policy.schedule import Round
        plain = r.get(Round(0, 0))
        model = max((v for p, v in r.items() if p.source == DRAFT_MODEL), default=0)
        look = max((v for p, v in r.items() if p.source != DRAFT_MODEL and p.k > 0), default=0)
        log[current[0]].append((plan.source or "plain", plan.k, plain, model, look, self.costs.steady(1), self.costs.switch, self._last_width,
                                self.memory.alpha, self.memory.long_alpha, self.memory.yielded))
    return plan
hybrid_k.HybridK.next_round = next_round

from spec.config import GenerationConfig
from spec.decoding.engine import LearnedState, stream
from spec.models.embedded import DRAFT_REF
from spec.models.registry import load_model
from spec.serving.examples import EXAMPLES
from spec.serving.loading import warm_up
from spec.serving.presets import pair_keys
from spec.serving.race import run_race
t, d = pair_keys(None, DRAFT_REF)
target, draft = warm_up(load_model(t)), warm_up(load_model(d))
config = GenerationConfig(max_new_tokens=128, num_assistant_tokens=4, dynamic_k=True).validate()
label, prompt = EXAMPLES[int(sys.argv[1])]
raced, alone = LearnedState(), LearnedState()
for rep in range(int(sys.argv[2])):
    current[0] = f"race{rep}"
    *_, last = run_race(prompt, target, draft, "hybrid", config, threading.Event(), learned=raced)
    s = last.speculative.stats
    print(current[0], s.plain_steps, s.target_calls, f"{s.decode_tokens_per_second:.1f}", f"AR {last.autoregressive.stats.decode_tokens_per_second:.1f}")
    current[0] = f"alone{rep}"
    *_, step = stream(prompt, target, config, draft=draft, drafter="hybrid", cancel=threading.Event(), learned=alone)
    s = step.stats
    print(current[0], s.plain_steps, s.target_calls, f"{s.decode_tokens_per_second:.1f}")
for name, rows in log.items():
    srcs = collections.Counter(r[0] for r in rows)
    print(f"== {name}: {dict(srcs)}")
    for r in rows[:40]:
        src, k, plain, model, look, step, switch, lw, a, la, y = r
        print(f"  {src:14} k{k} plain {plain:6.1f} model {model:6.1f} look {look:6.1f} step {1000*step:5.1f}ms switch {1000*(switch or 0):5.1f} last {lw} a {a:.2f}/{la:.2f} y {y:.2f}")
