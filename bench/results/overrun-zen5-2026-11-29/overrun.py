# ruff: noqa: E401, E402, E501, I001 -- a record of a measurement, kept as it ran
"""One-off: the hybrid's draft-model rounds, priced against what they took and kept (emulated AVX2)."""
import sys, threading, collections
from spec.decoding.policy import hybrid_k
from spec.config import DRAFT_MODEL
rows = collections.defaultdict(list)
current = ["?"]
orig_next, orig_obs = hybrid_k.HybridK.next_round, hybrid_k.HybridK.observe_round
def next_round(self, context):
    plan = orig_next(self, context)
    self._x_priced = None
    if plan.source == DRAFT_MODEL and self.memory.call_seconds is not None and self._promises.get(plan):
        r = self.rates(*self._match)
        kept = self._promises[plan] * self.memory.yielded
        self._x_priced = (kept / r[plan], kept, self._prices_prompt() or not self._read_prompt)
    return plan
def observe_round(self, result):
    plan, priced = self._plan, getattr(self, "_x_priced", None)
    orig_obs(self, result)
    if plan.source == DRAFT_MODEL and priced:
        drafted, accepted, ds, vs, cs, calls = result
        rows[current[0]].append((plan.k, priced[0], vs + ds + cs, cs, priced[1], accepted + 1, priced[2]))
hybrid_k.HybridK.next_round, hybrid_k.HybridK.observe_round = next_round, observe_round

from spec.config import GenerationConfig
from spec.decoding.engine import LearnedState, stream
from spec.models.embedded import DRAFT_REF
from spec.models.registry import load_model
from spec.serving.examples import EXAMPLES
from spec.serving.loading import warm_up
from spec.serving.presets import pair_keys
t, d = pair_keys(None, DRAFT_REF)
target, draft = warm_up(load_model(t)), warm_up(load_model(d))
config = GenerationConfig(max_new_tokens=128, num_assistant_tokens=4, dynamic_k=True).validate()
learned = LearnedState()
for rep in range(int(sys.argv[2])):
    for i in map(int, sys.argv[1].split(",")):
        label, prompt = EXAMPLES[i]
        current[0] = f"{label[:18]} #{rep}"
        *_, step = stream(prompt, target, config, draft=draft, drafter="hybrid", cancel=threading.Event(), learned=learned)
        s = step.stats
        r = rows[current[0]]
        if r:
            P, A, C = sum(x[1] for x in r), sum(x[2] for x in r), sum(x[3] for x in r)
            K, G = sum(x[4] for x in r), sum(x[5] for x in r)
            print(f"{current[0]}: {s.new_tokens} tok, {s.decode_tokens_per_second:.1f} tok/s, plain {s.plain_steps}; model rounds {len(r)}: "
                  f"priced {P:.2f} s for {K:.1f} tok ({1000*P/K:.1f} ms/tok), took {A:.2f} s (catch-ups {C:.2f}) for {G} tok ({1000*A/G:.1f} ms/tok); "
                  f"seconds x{A/P:.2f}, tokens x{G/K:.2f}; first round read {r[0][6]}", flush=True)
        else:
            print(f"{current[0]}: {s.new_tokens} tok, {s.decode_tokens_per_second:.1f} tok/s, plain {s.plain_steps}; no model rounds", flush=True)
