"""What a draft token costs, in target steps: the draft's bare forward pass, and all in as the
engine drafts (catching up, sampling, rolling back), per way of building the draft.

    python -m bench.studies.draft_cost                                   # the default pair, INT8 and INT4 drafts, whole and restricted heads
    python -m bench.studies.draft_cost --draft-weight-format int4 --vocabulary 16384 32768

One process, one model of each kind loaded once; every configuration is timed in each repeat,
round-robin, and the medians over repeats are printed as a Markdown table with the CPU's name.
"Bare" is a 1-token draft call among 1-token draft calls; "beside the target" the same call when
target calls come in between, as in speculative decoding; "all in" is a draft-model generation's
draft seconds per drafted token (its catch-up of the prompt excluded), from the engine's own
statistics, over the prompts given.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from bench.tools import Parser

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"


def main(argv: list[str] | None = None) -> int:
    from spec.config import DRAFT_VOCABULARY

    parser = Parser(prog="python -m bench.studies.draft_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", help="target reference (default: embedded:Qwen2.5-Coder-1.5B-Instruct)")
    parser.add_argument("--draft", help="draft reference (default: embedded:Qwen2.5-Coder-0.5B-Instruct)")
    parser.add_argument("--draft-weight-format", nargs="+", default=["int8", "int4"], choices=("int8", "int4"))
    parser.add_argument("--vocabulary", nargs="+", type=int, default=[0, DRAFT_VOCABULARY],
                        help="tokens the draft's head scores (0: the whole vocabulary)")
    parser.add_argument("--prompts", type=Path, default=PROMPTS / "open-questions.json")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4, help="drafts per round (fixed K: every round drafts K)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=24, help="timed calls per bare measurement")
    args = parser.parse_args(argv)
    for row in measure(args):
        print(row, flush=True)
    return 0


def measure(args: argparse.Namespace):
    import json

    from bench.run import _machine
    from spec.config import GenerationConfig, ModelKey
    from spec.decoding.engine import LearnedState, encode_prompt, generate
    from spec.models.embedded import DEFAULT_REF, DRAFT_REF
    from spec.models.registry import load_model
    from spec.serving.loading import warm_up

    target = warm_up(load_model(ModelKey(args.target or DEFAULT_REF)))
    configs = [(fmt, vocab or None) for fmt in args.draft_weight_format for vocab in args.vocabulary]
    drafts = {c: warm_up(load_model(ModelKey(args.draft or DRAFT_REF, c[0], vocabulary=c[1]))) for c in configs}
    prompts = [p["text"] for p in json.loads(args.prompts.read_text())["prompts"]]
    context = encode_prompt(target.tokenizer, prompts[0])
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    config = GenerationConfig(max_new_tokens=args.max_new_tokens, num_assistant_tokens=args.k, dynamic_k=False)
    learned = LearnedState()  # the target's calls and each pair's vocabulary, kept from one generation to the next
    for repeat in range(args.repeats):
        add("step", _steps(target, context, args.calls))
        for c, draft in drafts.items():
            add(f"bare {c}", _steps(draft, context, args.calls))
            add(f"beside {c}", _beside(target, draft, context, args.calls, args.k))
            drafted = seconds = 0.0
            for prompt in prompts:
                stats = generate(prompt, target, config, draft=draft, learned=learned).stats
                drafted += stats.draft_tokens
                seconds += stats.draft_seconds - stats.draft_catch_up_seconds
            add(f"all in {c}", seconds / max(drafted, 1))
        print(f"[draft_cost] repeat {repeat + 1} of {args.repeats} done", file=sys.stderr, flush=True)

    step = statistics.median(samples["step"])
    from spec.models.calibration import cpu_name

    flags = " ".join(f for f in ("amx_tile", "avx512_bf16", "avx512_vnni", "avx2") if f" {f}" in Path("/proc/cpuinfo").read_text())
    flags = f"{flags}; OpenVINO sees {cpu_name().split(', ', 1)[-1]}"
    yield f"Draft token costs on {_machine()['cpu']} ({flags}): a target step of {target.ref} takes {step * 1e3:.1f} ms " \
          f"(median of {args.repeats} repeats; fixed K={args.k}, {args.max_new_tokens} new tokens, {len(prompts)} prompts)\n"
    yield "| draft | head | bare (ms) | beside the target (ms) | all in (ms) | all in ÷ target step |"
    yield "| --- | --- | --- | --- | --- | --- |"
    for c in configs:
        bare, beside, all_in = (statistics.median(samples[f"{kind} {c}"]) for kind in ("bare", "beside", "all in"))
        head = "whole" if c[1] is None else f"{c[1]:,} tokens"
        yield f"| {c[0]} | {head} | {bare * 1e3:.1f} | {beside * 1e3:.1f} | {all_in * 1e3:.1f} | {all_in / step:.2f} |"


def _steps(model, context: list[int], calls: int) -> float:
    """Median seconds of a 1-token call among 1-token calls, after `context`."""
    cache = model.model.new_cache()
    try:
        cache.forward(context, keep=1)
        times = []
        for i in range(calls + 3):
            started = time.perf_counter()
            cache.forward([context[i % len(context)]], keep=1)
            times.append(time.perf_counter() - started)
        return statistics.median(times[3:])
    finally:
        cache.release()


def _beside(target, draft, context: list[int], calls: int, k: int) -> float:
    """Median seconds of a 1-token draft call when a verify call of the target comes every k of them."""
    caches = target.model.new_cache(), draft.model.new_cache()
    try:
        for cache in caches:
            cache.forward(context, keep=1)
        times = []
        for i in range(calls + 3):
            started = time.perf_counter()
            caches[1].forward([context[i % len(context)]], keep=1)
            times.append(time.perf_counter() - started)
            if i % k == k - 1:
                caches[0].forward(context[:k + 1], keep=k + 1)
                caches[0].trim(caches[0].length - (k + 1))
        return statistics.median(times[3:])
    finally:
        for cache in caches:
            cache.release()


if __name__ == "__main__":
    sys.exit(main())
