"""A draft call while drafting against a bare one (PYTHONPATH=. python bare-call-ratio.py, from the
repository; under emulated AVX2: python -m bench.tools.cpu_class AVX2 -- python bare-call-ratio.py).

The default pair, the draft-model drafter alone on each page example (64 new tokens, one
LearnedState), then the pair record's draft call beside a bare one-token call timed by
spec.decoding.drafters.time_bare_call. bare-call-ratio.txt came from this script's first version,
which also timed a 16-token read (time_bare_calls, since cut to the call alone).
"""
from spec import LearnedState, generate, load_model
from spec.decoding.drafters import time_bare_call
from spec.serving.examples import EXAMPLES
from spec.serving.presets import PRESETS, pair_keys

target_key, draft_key = pair_keys(PRESETS[0].target, PRESETS[0].draft, presets=PRESETS)
target, draft = load_model(target_key), load_model(draft_key)
learned = LearnedState()
for label, prompt in EXAMPLES:
    generate(prompt, target, draft=draft, drafter="draft-model", learned=learned, max_new_tokens=64)  # drafts every round
    record = learned.pair(target, draft, "draft-model")
    cache = draft.model.new_cache()
    bare = time_bare_call(cache)
    cache.release()
    print(f"{label[:20]:20s} record call {record.call_seconds * 1e3:6.1f} ms | bare call {bare * 1e3:6.1f} ms")
