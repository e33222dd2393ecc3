"""The warm-up behind kept-record-2026-11-27: nine races of the default pair on prompts that are not the
page's examples (open-coding and grounded), each race's record kept in SPEC_MODELS_DIR/learned.json as
the page's scheduler keeps it. A one-off measurement script, run from the repository's root:

    python bench/results/kept-record-2026-11-27/warm_up.py
"""
import json
import os
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
os.environ.setdefault("SPEC_APP_PRELOAD", "0")
sys.path.insert(0, str(REPO))
import app  # noqa: E402 -- the page's pair, registry and scheduler; importing starts no server
from spec.config import GenerationConfig  # noqa: E402
from spec.serving.loading import warm_up  # noqa: E402
from spec.serving.race import run_race  # noqa: E402

pair = app.DEFAULT_PRESET
drafter = pair.drafters[0]
target_key, draft_key = pair.keys(*pair.models(drafter))
target, draft = warm_up(app.registry.get(target_key)), warm_up(app.registry.get(draft_key))
config = GenerationConfig(max_new_tokens=128, num_assistant_tokens=4, dynamic_k=True)
learned = app.scheduler.learned
print("kept in", learned.kept_in, flush=True)
for name in ("open-coding", "grounded"):
    for prompt in json.loads((REPO / "bench" / "prompts" / f"{name}.json").read_text())["prompts"]:
        *_, last = run_race(prompt["text"], target, draft, drafter, config, threading.Event(), learned=learned)
        learned.keep()
        print(prompt["id"], round(last.verdict.speedup, 2), flush=True)
print(learned.pair(target, draft, drafter))
