"""`python -m bench.studies.calls`: what drafting did, call by call, with nothing timed.

Greedy decoding at f32 makes the same tokens whatever the machine's load, and so do the target
calls, once the schedule stops learning from timings: here every cost dynamic K would measure is
pinned to one curve (a call of width w costs `prior_width_cost(w)` one-token steps, a call right
after one of another width SWITCH steps more, a draft model's call DRAFT_CALL steps). What it
reports is then deterministic on a shared machine: target calls, tokens per call, the widths used,
whether each text equals autoregressive decoding's, and the decode speed-up the curve predicts
(prefill left out): a prediction from measured costs, not a measured speed-up.

`--engine DIR` runs another checkout's `spec` (e.g. `git archive main spec | tar -x -C DIR`) under
the same pinned costs, for a before/after. `--replay` runs prompt lookup against a stand-in target
that answers with the autoregressive tokens `--ar` recorded: under greedy decoding the real target
gives the same answers, so the calls are the same, in seconds and without the model (a way to try
a drafting rule; the real run is what checks the texts). `--ar-from RESULTS.json` takes those tokens
from a benchmark run's greedy autoregressive answers instead, and `--curve RESULTS.json` prices widths
on the curve that run timed (bench.studies.curve), for a CPU whose curve is not the prior's (or a
file {"steps": {width: steps}, "switch": steps}: every width a calibration times, which a benchmark
does not). `--draft REF --draft-call STEPS` drafts with another model (the default pair's 0.5B, loaded as the
page loads it but at f32) priced at another cost per call, and `--drafter draft-model` drafts with
it alone: what a CPU whose draft token costs more (the AVX2 EPYC's 0.5, docs/cpu-classes.md) would
make of the same rounds.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

from bench.records import read_records
from bench.studies.curve import measured_curve
from bench.tools import Parser

SWITCH = 0.15  # steps a call pays right after one of another width (the committed Qwen benchmark: 1→5 and 5→1, 0.15-0.16)
DRAFT_CALL = 0.15  # a SmolLM2-135M call ÷ a Qwen2.5-Coder-1.5B step (11.4 ms ÷ 77.6 ms, ENVIRONMENT.md)
TARGET, DRAFT = "embedded:Qwen2.5-Coder-1.5B-Instruct", "embedded:SmolLM2-135M-Instruct"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.calls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", required=True, help="a prompt-set JSON file, or humaneval[:FIRST-LAST]")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--drafter", nargs="+", default=["prompt-lookup"], choices=("prompt-lookup", "hybrid", "draft-model"))
    parser.add_argument("--draft", default=DRAFT, help=f"the draft model of the hybrid and draft-model drafters (default {DRAFT})")
    parser.add_argument("--draft-call", type=float, default=DRAFT_CALL, help=f"a draft model's call in target steps (default {DRAFT_CALL})")
    parser.add_argument("--k", type=int, default=4, help="K the schedule starts from")
    parser.add_argument("--engine", type=Path, help="a folder holding another version's spec/ to run instead")
    parser.add_argument("--ar", type=Path, help="JSON of autoregressive tokens to reuse (written when missing)")
    parser.add_argument("--out", type=Path, help="write the per-prompt records here as JSON")
    parser.add_argument("--replay", action="store_true", help="prompt lookup against the tokens --ar recorded, no model")
    parser.add_argument("--history", action="store_true",
                        help="with --replay: lookup also searches the answers to the prompts before (spec.decoding.history)")
    parser.add_argument("--ar-from", type=Path, help="the autoregressive tokens (as --ar holds them) of a benchmark's results JSON")
    parser.add_argument("--curve", type=Path, help="price widths on the cost curve a benchmark's results JSON timed, "
                                                   "or a {\"steps\": {width: steps}} file")
    args = parser.parse_args(argv)

    from spec.decoding.policy import PRIOR_WIDTH_COST, prior_width_cost  # the curve predictions use, whichever engine runs

    points, args.switch = PRIOR_WIDTH_COST, SWITCH
    try:
        if args.curve:
            points, args.switch = curve_from(json.loads(args.curve.read_text()))
        ar_from = answers_from_results(json.loads(args.ar_from.read_text())) if args.ar_from else {}
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    if args.engine:  # swap in the other engine before anything else of spec is imported
        for name in [m for m in sys.modules if m == "spec" or m.startswith("spec.")]:
            del sys.modules[name]
        sys.path.insert(0, str(args.engine.resolve()))
    prompt_set = _prompt_set(args.prompts)
    records = run(prompt_set, args, lambda width: prior_width_cost(width, points), ar_from)
    if args.out:
        args.out.write_text(json.dumps(records, indent=1))
    answers = f"greedy, the answers of {args.ar_from.name}" if args.ar_from else "greedy f32"
    curve = f"the curve {args.curve.name} timed" if args.curve else "the prior cost curve"
    print(table(records, prompt_set.name, args.max_new_tokens, f"{answers}, priced on {curve}"))
    return 0


def curve_from(data: dict) -> tuple[dict[int, float], float]:
    """(width -> steps, the switch in steps) from a benchmark's results JSON, or from a curve written
    as {"steps": {width: steps}, "switch": steps} (a calibration's widths, which a benchmark does not time)."""
    if "steps" in data:
        return {int(width): float(steps) for width, steps in data["steps"].items()}, float(data.get("switch", SWITCH))
    return measured_curve(data)


def _prompt_set(value: str):
    from bench.run import read_prompt_sets

    return read_prompt_sets([value], None)[0]


def answers_from_results(report: dict) -> dict[str, list[int]]:
    """A benchmark run's greedy autoregressive answers (its first repeat), keyed as --ar keys them."""
    answers = {}
    for setting in report["settings"]:
        if setting["engine"] == "ours" and setting["mode"] == "autoregressive" and not setting["sampled"]:
            for record in read_records(report["records"]):
                if record.setting == setting["index"] and record.repeat == 0:
                    answers[f"{setting['prompt_set']}/{record.prompt}/{setting['max_new_tokens']}"] = record.tokens
    if not answers:
        raise ValueError(f"benchmark {report.get('name', '?')!r} has no greedy autoregressive answers of ours")
    return answers


def run(prompt_set, args: argparse.Namespace, curve, ar_from: dict[str, list[int]] | None = None) -> list[dict]:
    from spec import GenerationConfig, ModelKey, load_model
    from spec.models.runtime import StatefulLM

    ar_cache = json.loads(args.ar.read_text()) if args.ar and args.ar.exists() else {}
    ar_cache.update(ar_from or {})
    if args.replay:
        return replay(prompt_set, args, curve, ar_cache)
    target = load_model(ModelKey(TARGET, precision="f32"))
    draft = load_model(_draft_key(args.draft)) if {"hybrid", "draft-model"} & set(args.drafter) else None
    _pin_costs(curve, args.switch, args.draft_call)
    calls: list[tuple[object, int]] = []
    forward = StatefulLM.forward

    def recording(self, token_ids, keep=None):
        calls.append((self._model, len(token_ids)))
        return forward(self, token_ids, keep=keep)

    StatefulLM.forward = recording
    records = []
    for prompt_id, text in prompt_set.prompts:
        config = GenerationConfig(max_new_tokens=args.max_new_tokens, num_assistant_tokens=args.k)
        key = f"{prompt_set.name}/{prompt_id}/{args.max_new_tokens}"
        if key not in ar_cache:
            ar_cache[key] = _decode(text, target, config)
            if args.ar:  # kept as it grows: an interrupted run still leaves what it decoded
                args.ar.write_text(json.dumps(ar_cache))
        want = ar_cache[key]
        for drafter in args.drafter:
            _forget_pairs(target)  # each prompt starts afresh: nothing learned carries over
            calls.clear()
            tokens = _decode(text, target, config, drafter, draft)
            widths = [n for model, n in calls if model is target.model][1:]  # the prefill left out
            draft_calls = sum(1 for model, _ in calls if draft is not None and model is draft.model)
            records.append(_record(prompt_id, drafter, tokens, want, widths, draft_calls, curve, args.switch, args.draft_call))
    StatefulLM.forward = forward
    return records


def _decode(text: str, target, config, drafter: str | None = None, draft=None) -> list[int]:
    """The tokens one generation makes, through whichever engine --engine put first: this one's
    `generate`, or an older one's streaming `generate(prompt, target, config, mode, drafter, draft)`."""
    import spec.decoding.engine as engine

    draft = draft if drafter not in (None, "prompt-lookup") else None
    if hasattr(engine, "stream"):
        return list(engine.generate(text, target, config, draft=draft, drafter=drafter).token_ids)
    mode = "autoregressive" if drafter is None else "speculative"
    return [t for step in engine.generate(text, target, config, mode, drafter or "draft-model", draft) for t in step.token_ids]


def _record(
    prompt_id: str, drafter: str, tokens: list[int], want: list[int], widths: list[int], draft_calls: int, curve, switch: float,
    draft_call: float = DRAFT_CALL,
) -> dict:
    cost = _cost(widths, curve, switch) + draft_call * draft_calls
    record = {
        "prompt": prompt_id, "drafter": drafter, "tokens": len(tokens), "identical": tokens == want,
        "target_calls": len(widths) + 1, "tokens_per_call": len(tokens) / (len(widths) + 1),
        "widths": dict(sorted(Counter(widths).items())), "draft_calls": draft_calls,
        "predicted_decode_speedup": (len(want) - 1 + switch) / cost if cost else None,
    }
    print(json.dumps(record), file=sys.stderr, flush=True)
    return record


def replay(prompt_set, args: argparse.Namespace, curve, ar_cache: dict) -> list[dict]:
    """Prompt lookup's calls against a target that answers with the recorded autoregressive tokens."""
    import numpy as np
    from transformers import AutoTokenizer

    import spec.decoding.speculative as speculative
    from spec import GenerationConfig
    from spec.decoding.drafters import PromptLookupDrafter
    from spec.decoding.engine import encode_prompt
    from spec.decoding.generation import Generation
    from spec.decoding.history import AnswerHistory
    from spec.decoding.sampling import Sampler
    from spec.models.resolve import resolve_model

    _pin_costs(curve, args.switch)
    history = AnswerHistory() if args.history else None
    folder = resolve_model(TARGET, "int8").path
    tokenizer = AutoTokenizer.from_pretrained(folder)
    eos = {tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")}
    records, learned = [], _target_memory()
    for prompt_id, text in prompt_set.prompts:
        key = f"{prompt_set.name}/{prompt_id}/{args.max_new_tokens}"
        if key not in ar_cache:
            raise ValueError(f"--replay needs the autoregressive tokens of {key} (--ar or --ar-from): run once without --replay")
        prompt_ids, want = encode_prompt(tokenizer, text), ar_cache[key]
        config = GenerationConfig(max_new_tokens=args.max_new_tokens, num_assistant_tokens=args.k)
        target = _ReplayTarget(prompt_ids + want + [next(iter(eos))], len(tokenizer))
        generation = Generation(tokenizer, prompt_ids, config, eos)
        sampler = Sampler(0.0, 0, 1.0, len(tokenizer), np.random.default_rng(0))
        ngram = getattr(config, "max_matching_ngram_size", None) or config.prompt_lookup_max_ngram  # an --engine before the rename
        drafter = PromptLookupDrafter(ngram, history=history.corpus(prompt_ids) if history else None)
        steps = list(_lookup_steps(speculative, target, drafter, sampler, generation, config, learned))
        tokens = [t for step in steps for t in step.token_ids]
        if history is not None:
            history.add(prompt_ids, want)
        records.append(_record(prompt_id, "prompt-lookup (replayed)", tokens, want, target.widths[1:], 0, curve, args.switch))
    return records


def _lookup_steps(speculative, target, drafter, sampler, generation, config, learned=None):
    """The loop's steps with prompt lookup's schedule, as the engine under test pairs them (`learned`:
    what the target's earlier generations learned, _target_memory)."""
    try:
        from spec.decoding.plugins import PLUGINS
    except ImportError:  # an engine from before the plug-ins (--engine): the loop picked the schedule
        return speculative.speculative(target, drafter, sampler, generation, config.num_assistant_tokens)
    schedule = PLUGINS["prompt-lookup"].schedule(drafter, config, None, learned)
    return speculative.speculative(target, drafter, schedule, sampler, generation, lookup_ngram=drafter.max_ngram_size)


def _target_memory():
    """What the replayed generations learn of the target, shared between them as the engine shares it
    between one target's generations (what lookup's rounds of each K kept: LookupYields); None for an
    engine whose plug-ins take only the call costs (--engine from before)."""
    try:
        from spec.decoding.policy import CallCosts, LookupYields  # noqa: F401 (only engines that have it)
        from spec.decoding.target_memory import TargetMemory
    except ImportError:
        return None
    return TargetMemory(CallCosts())  # its costs are pinned (_pin_costs)


class _ReplayTarget:
    """Stands in for the target under greedy decoding: after a context that follows the recorded
    answer, its next token is the answer's next token (any other context gets token 0)."""

    others_width = None  # no other generation shares it (the race's other lane does, in the engine)

    def __init__(self, answer: list[int], vocab: int):
        self.answer, self.vocab = answer, vocab
        self.context: list[int] = []
        self.widths: list[int] = []

    @property
    def length(self) -> int:
        return len(self.context)

    def reset(self) -> None:
        self.context = []

    def forward(self, token_ids, keep=None):
        import numpy as np

        self.widths.append(len(token_ids))
        start = len(self.context)
        self.context += [int(t) for t in token_ids]
        rows = range(start, len(self.context))[-(keep or len(token_ids)):]
        logits = np.zeros((len(rows), self.vocab), dtype=np.float32)
        for row, position in enumerate(rows):
            follows = self.context[: position + 1] == self.answer[: position + 1]
            logits[row, self.answer[position + 1] if follows and position + 1 < len(self.answer) else 0] = 1.0
        return logits

    def trim(self, length: int) -> None:
        del self.context[length:]


def _cost(widths: list[int], curve, switch: float = SWITCH) -> float:
    """One-token steps the calls after the prefill take under the pinned curve (a width change costs `switch`)."""
    total, last = 0.0, None
    for width in widths:
        total += curve(width) + (switch if width != last else 0.0)
        last = width
    return total


def _forget_pairs(target) -> None:
    """Clear what the target's pairs learned, where the engine under test (--engine) keeps it from one
    generation to the next by itself: this one's learns afresh unless it is handed a LearnedState."""
    try:
        import spec.decoding.target_memory as kept
    except ImportError:  # an engine from before decoding owned it: the loaded model carried it
        target.memories.clear()
        return
    if hasattr(kept, "target_memory"):  # an engine that kept it in a module of its own
        kept.target_memory(target).pairs.clear()


def _draft_key(ref: str):
    """The draft's registry key: as the page loads it with the default target, at f32 (an --engine
    from before pair_keys: at its default weights)."""
    from spec import ModelKey

    try:
        from spec.serving.presets import pair_keys
    except ImportError:
        return ModelKey(ref, precision="f32")
    return pair_keys(None, ref, precision="f32")[1]


def _pin_costs(curve, switch: float = SWITCH, draft_call: float = DRAFT_CALL) -> None:
    """Make the schedules plan from the curve instead of from timings (which vary with the load)."""
    try:  # where the engine picks a schedule for a drafter: each drafter's plug-in
        import spec.decoding.plugins.draft_model as draft_home
        import spec.decoding.plugins.hybrid as hybrid_home
        import spec.decoding.plugins.prompt_lookup as lookup_home
        from spec.decoding.policy import CallCosts
    except ImportError:  # an engine from before the plug-ins (--engine): the policy package, or the loop, picked it
        try:
            import spec.decoding.policy as chooser
        except ImportError:
            import spec.decoding.speculative as chooser
        hybrid_home = lookup_home = draft_home = chooser
        CallCosts = chooser.CallCosts

    def pinned(cls):
        class Pinned(cls):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.costs = CallCosts({w: curve(w) for w in range(1, 66)}, switch)

            def _observe_call(self, width, seconds):
                self._last_width = width

            def observe_round(self, *a, **kw):
                super().observe_round(*a, **kw)
                if hasattr(self, "memory") and self.memory.call_seconds is not None:  # timed as the engine times it: first round
                    self.memory.call_seconds = draft_call
                    if self.memory.catch_up_seconds is not None:
                        self.memory.catch_up_seconds = draft_call

        return Pinned

    lookup_home.LookupK = pinned(lookup_home.LookupK)
    hybrid_home.HybridK = pinned(hybrid_home.HybridK)
    if hasattr(draft_home, "DynamicK"):
        draft_home.DynamicK = pinned(draft_home.DynamicK)


def table(records: list[dict], name: str, n: int, how: str = "greedy f32, priced on the prior cost curve") -> str:
    """Markdown: per drafter, the medians and totals over the prompts."""
    lines = [f"### {name}, N={n}: {how} (deterministic counts; speed-up predicted from the cost curve)", "",
             "| drafter | prompts | identical to AR | tokens / target call (all) | median predicted decode speed-up | range | widths used |",
             "|---|---|---|---|---|---|---|"]
    for drafter in dict.fromkeys(r["drafter"] for r in records):
        rows = [r for r in records if r["drafter"] == drafter]
        speedups = [r["predicted_decode_speedup"] for r in rows if r["predicted_decode_speedup"]]
        widths = Counter()
        for r in rows:
            widths.update({int(w): c for w, c in r["widths"].items()})
        lines.append(
            f"| {drafter} | {len(rows)} | {sum(r['identical'] for r in rows)}/{len(rows)} | "
            f"{sum(r['tokens'] for r in rows) / sum(r['target_calls'] for r in rows):.2f} | "
            f"{statistics.median(speedups):.2f}× | {min(speedups):.2f}-{max(speedups):.2f}× | "
            + ", ".join(f"{w}:{c}" for w, c in sorted(widths.items())) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
