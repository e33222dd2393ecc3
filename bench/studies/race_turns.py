"""`python -m bench.studies.race_turns [--example N] [--repeats R]`: what taking turns costs each of the
race's lanes, with no server: the page's example raced in this process (spec.serving.race.run_race)
against the same speculative generation alone, each with a learned state of its own, and against the
autoregressive one alone, in turns.

Where a served lane is slower than alone (bench.tools.served), this says whether the race itself
(the lanes taking turns on one compiled target) or the serving around it is the cause. Prints each
run's speculative calls and seconds, as bench.tools.served's calls table counts them, and the
draft's catching up (its first reading of the prompt included), which its decode time carries.
"""
from __future__ import annotations

import sys
import threading

from bench.tools import Parser


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.race_turns", description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", type=int, default=0, help="which of the page's examples (default 0: the first)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    args = parser.parse_args(argv)

    from spec.config import GenerationConfig
    from spec.decoding.engine import LearnedState, stream
    from spec.models.calibration import cpu_name
    from spec.models.embedded import DRAFT_REF
    from spec.models.registry import load_model
    from spec.serving.examples import EXAMPLES
    from spec.serving.loading import warm_up
    from spec.serving.presets import pair_keys
    from spec.serving.race import run_race

    target_key, draft_key = pair_keys(None, DRAFT_REF)
    target, draft = warm_up(load_model(target_key)), warm_up(load_model(draft_key))
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, num_assistant_tokens=4, dynamic_k=True).validate()
    label, prompt = EXAMPLES[args.example]
    print(f"{label!r}, the default pair, hybrid, K=4, dynamic K, greedy, on {cpu_name()}")
    raced, alone = LearnedState(), LearnedState()
    for _ in range(args.repeats):
        *_, last = run_race(prompt, target, draft, "hybrid", config, threading.Event(), learned=raced)
        _show("race", last.speculative.stats)
        _show("  (its autoregressive lane)", last.autoregressive.stats)
        *_, step = stream(prompt, target, config, draft=draft, drafter="hybrid", cancel=threading.Event(), learned=alone)
        _show("alone", step.stats)
        *_, step = stream(prompt, target, config, cancel=threading.Event())
        _show("  (the autoregressive lane alone)", step.stats)
    return 0


def _show(kind: str, s) -> None:
    print(f"{kind:6} target calls {s.target_calls:3}, plain steps {s.plain_steps:3}, draft tokens {s.draft_tokens:3}, "
          f"accepted {s.accepted:3}; verify {s.verify_seconds:.2f} s, target {s.target_seconds:.2f} s, "
          f"draft {s.draft_seconds:.2f} s (of which catching up {s.draft_catch_up_seconds:.2f} s); {s.new_tokens} tokens, "
          f"first after {s.ttft_seconds:.2f} s, {s.decode_tokens_per_second:.1f} decode tokens/s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
