"""The page's examples raced on a pair as the page races them (spec.serving.race.run_race), twice each:
what each example shows, measured, for the table in docs/benchmarks.md.

    python -m bench.tools.examples                       # the default pair (Qwen2.5-Coder-1.5B, prompt lookup)
    python -m bench.tools.examples --preset "Qwen2.5-Coder-1.5B + SmolLM2-135M draft (offline, across tokenizers)"

Prints a Markdown table (decode speed-up, what Leviathan's formula predicted from the race's own
measurements, tokens per target call, whether the greedy texts were identical, and what the
speculative lane's schedule chose, per race: plain steps, and the seconds a draft model spent
catching up, its first reading of the prompt included: 0 where it never drafted), one row per example.
Then each lane on its own: the autoregressive lane's step and the speculative lane's decode seconds.
A shared host's speed drifts by tenths over a run, moving the memory-bound step most: comparing
two versions of the engine, the speculative lane's seconds on the same greedy texts say more than
the speed-up, whose baseline moves with the host. Like the page, the races start from what earlier
races kept in the models folder (spec.decoding.kept_pairs) and keep what they learn; --fresh starts
from nothing, as a server's very first start does.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from bench.tools import Parser, output_file, run_tool

REPO = Path(__file__).resolve().parents[2]


# Seconds to wait for the page's scheduler to time what loading left for later, before racing anyway.
TIMING_WAIT = 900.0


def timed_first(registry, wait: float = TIMING_WAIT, say=print) -> None:
    """Wait while the page's scheduler (started by importing app) times what loading left for later:
    it does so while no race of its own runs, and these races run here, not through it. Raced
    meanwhile, the two would share the cores, the races would be slowed, and the curve be timed on
    fewer cores than the machine has (spec.models.calibration then keeps none of it)."""
    if not registry.untimed():
        return
    say("Waiting while the page's scheduler times the models' calls on this CPU (once per machine)...", flush=True)
    deadline = time.monotonic() + wait
    while registry.untimed() and time.monotonic() < deadline:
        time.sleep(0.5)
    if registry.untimed():
        say(f"Still timing after {wait:.0f} s: racing anyway, beside it.", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", help="model pair as the page lists it (default: the page's default pair)")
    parser.add_argument("--drafter", help="drafter (default: the pair's default)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json-out", type=output_file, help="also write each example's speed-ups here, naming this CPU")
    parser.add_argument("--fresh", action="store_true",
                        help="start from nothing learned, as a server's first start does (default: as the page, from what its "
                             "races kept in the models folder, and keeping what these learn)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")

    os.environ.setdefault("SPEC_APP_PRELOAD", "0")
    sys.path.insert(0, str(REPO))
    import app  # the page's examples, presets and registry; importing starts no server, only its scheduler's worker
    from spec.config import GenerationConfig, named_as
    from spec.decoding.target_memory import LearnedState
    from spec.serving.loading import warm_up
    from spec.serving.race import run_race
    from spec.serving.verdict import explain

    pair = app.PRESET_BY_LABEL.get(args.preset or app.DEFAULT_PRESET.label)
    if pair is None:
        parser.error(f"no pair {args.preset!r}; the page lists: {', '.join(app.PRESET_BY_LABEL)}")
    drafter = args.drafter or pair.drafters[0]
    if drafter not in pair.drafters:
        parser.error(f"--drafter {drafter!r}: {pair.label} drafts with {', '.join(pair.drafters)}")
    try:
        config = GenerationConfig(max_new_tokens=args.max_new_tokens, num_assistant_tokens=args.k, dynamic_k=True).validate()
    except ValueError as error:
        parser.error(named_as(error, {"max_new_tokens": "--max-new-tokens", "num_assistant_tokens (K)": "--k"}))
    target_ref, draft_ref = pair.models(drafter)
    target_key, draft_key = pair.keys(target_ref, draft_ref)
    target = warm_up(app.registry.get(target_key))
    draft = warm_up(app.registry.get(draft_key)) if draft_key else None
    timed_first(app.registry)
    learned = LearnedState() if args.fresh else app.scheduler.learned
    print(f"{pair.label}, {drafter}, greedy, {args.max_new_tokens} new tokens, K={args.k}, dynamic K, "
          f"{pair.precision} precision; median of {args.runs} races; "
          f"{'nothing learned at the start' if args.fresh else 'from what earlier races kept'}\n")
    print("| example | decode speed-up | formula predicted | tokens per target call | greedy texts "
          "| plain steps | draft model's catch-up s | autoregressive step ms | speculative decode s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    total = 0.0  # the speculative lane's decode seconds, every race
    measured = {}  # label -> what --json-out keeps
    for label, prompt in app.EXAMPLES:
        speedups, predicted, per_call, identical, chose, steps, decodes = [], [], [], [], [], [], []
        for _ in range(args.runs):
            *_, last = run_race(prompt, target, draft, drafter, config, threading.Event(), learned=learned)
            learned.keep()
            why = explain(last.autoregressive.stats, last.speculative.stats, args.k)
            speedups.append(why.speedup)
            predicted.append(why.predicted or float("nan"))
            per_call.append(why.tokens_per_call)
            identical.append(last.verdict.identical)
            lane = last.speculative.stats
            chose.append((lane.plain_steps, lane.draft_catch_up_seconds))
            steps.append(last.autoregressive.stats.step_seconds or float("nan"))
            decodes.append(lane.seconds - (lane.ttft_seconds or 0.0))
        total += sum(decodes)
        measured[label] = {"speedup": statistics.median(speedups), "speedups": speedups, "identical": identical,
                           "tokens_per_call": statistics.median(per_call)}
        same = "identical" if all(identical) else f"differ in {identical.count(False)} of {len(identical)}"
        print(f"| {label} | {statistics.median(speedups):.2f}× | {statistics.median(predicted):.2f}× | "
              f"{statistics.median(per_call):.2f} | {same} | {' / '.join(str(c[0]) for c in chose)} | "
              f"{' / '.join(f'{c[1]:.2f}' for c in chose)} | {' / '.join(f'{1000 * s:.1f}' for s in steps)} | "
              f"{' / '.join(f'{d:.2f}' for d in decodes)} |", flush=True)
    print(f"\nThe speculative lane's decode seconds over every race: {total:.2f}")
    if args.json_out:
        from bench.tools.served_app import machine
        from spec.models.runtime import cpu_class

        args.json_out.write_text(json.dumps({"cpu": machine(), "cpu_class": cpu_class(), "pair": pair.label, "drafter": drafter,
                                             "max_new_tokens": args.max_new_tokens, "runs": args.runs, "examples": measured}, indent=1))
    return 0


if __name__ == "__main__":
    run_tool(main)
