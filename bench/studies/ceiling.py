"""`python -m bench.studies.ceiling RESULTS.json`: how fast copying could decode at best, on the answers a
benchmark run recorded.

Prompt lookup drafts by copying earlier text: the prompt, the answer so far, other answers. From
our autoregressive answers in a run's records, this works out per prompt the decode speed-up of
three copying drafters, each granted perfect foresight of how long its copy will hold (the best
verify width every round: a dynamic program over bench.studies.calls' pinned cost curve, width changes
included):
- ours: copying from where our lookup's match points (spec.decoding.drafters: the context's
  longest-reaching match, else the other answers);
- suffix: from the best earlier occurrence of the context's last token (what any lookup keyed on
  the context's suffix chooses among);
- anywhere: from the best earlier span, wherever it is (no drafter that copies does better).
A ceiling never falls below the one before it. Nothing is timed: these are bounds, set beside the
speed-ups the run measured for prompt lookup, not measurements. Whole-run ceilings put the prefill
back: the autoregressive run's own time to first token, then its decode time divided by the ceiling.
"""
from __future__ import annotations

import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from bench.studies.calls import SWITCH
from bench.tools import Parser

OURS, SUFFIX, ANYWHERE = "ours", "suffix", "anywhere"
RULES = (OURS, SUFFIX, ANYWHERE)
WIDEST = 32  # drafts a verify call checks at most (LookupK's widest choice)
WIDTHS = (1, 2, 3, 5, 9, 17, 33)  # a plain step, and the verify widths LookupK chooses from


def copy_runs(prompt: Sequence[int], answer: Sequence[int], others: Sequence[Sequence[int]] = (), rule: str = ANYWHERE) -> list[int]:
    """runs[i]: how many of answer[i:] (up to WIDEST) the rule's copy gets right, the context being
    the prompt and answer[:i], and `others` the other answers it may copy from too. runs[0] = 0:
    the prefill makes the first token."""
    from spec.decoding.drafters import PromptLookupDrafter
    from spec.decoding.history import SEPARATOR

    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    answer = np.asarray(answer, dtype=np.int64)
    history = [np.asarray(other, dtype=np.int64) for other in others if len(other)]
    corpus = np.concatenate([np.append(h, SEPARATOR) for h in history]) if history else None
    runs = [0] * len(answer)
    for i in range(1, len(answer)):
        context = np.concatenate([np.asarray(prompt, dtype=np.int64), answer[:i]])
        if rule == OURS:
            match = PromptLookupDrafter(history=corpus).match(context)  # fresh: no copy of its own to resume
            if match is not None:
                runs[i] = _agree(corpus if match.in_history else context, match.start, answer, i)
            continue
        for source in (context, *history):
            starts = np.flatnonzero(source == answer[i])
            if rule == SUFFIX:
                starts = starts[starts >= 1]
                starts = starts[source[starts - 1] == context[-1]]
            for start in starts:
                runs[i] = max(runs[i], _agree(source, int(start), answer, i))
    return runs


def _agree(source: np.ndarray, start: int, answer: np.ndarray, i: int) -> int:
    """How many tokens from source[start] on equal answer[i] on (up to WIDEST)."""
    n = min(WIDEST, len(source) - start, len(answer) - i)
    same = source[start : start + n] == answer[i : i + n]
    return n if same.all() else int(np.argmin(same))


def best_decode_speedup(runs: Sequence[int], curve: Callable[[int], float], switch: float = SWITCH, widths: Sequence[int] = WIDTHS) -> float:
    """The decode speed-up over one-token steps of the cheapest schedule of target calls, knowing
    every copy's length in advance: a call of width w at answer position i keeps min(runs[i], w - 1)
    drafts and adds the target's own token, costs curve(w) one-token steps, and `switch` more right
    after a call of another width (the first call after the prompt's always pays it, plain decoding's too)."""
    n = len(runs)
    if n < 2:
        return 1.0
    # cheapest[i][w]: steps to finish from position i when the last call had width w (None: the prompt's)
    cheapest: list[dict] = [dict() for _ in range(n + 1)]
    cheapest[n] = {last: 0.0 for last in (None, *widths)}
    for i in range(n - 1, 0, -1):
        for last in (None, *widths):
            cheapest[i][last] = min(
                curve(w) + (switch if w != last else 0.0) + cheapest[min(n, i + min(runs[i], w - 1) + 1)][w] for w in widths
            )
    return (n - 1 + switch) / cheapest[1][None]


def ceilings(report: dict) -> list[dict]:
    """Per prompt set and N of a benchmark report: the measured decode speed-up of our prompt lookup
    (dynamic K, greedy) and the ceilings of each rule, per prompt."""
    from transformers import AutoTokenizer

    from bench.plan import AR, LOOKUP
    from bench.records import read_records
    from bench.report import per_prompt_speedups
    from bench.run import FULL, QUICK, build_parser, model_keys, read_prompt_sets
    from spec.config import F32
    from spec.decoding.engine import encode_prompt
    from spec.decoding.policy import PRIOR_WIDTH_COST, PRIOR_WIDTH_COST_F32, prior_width_cost
    from spec.models.embedded import DEFAULT_REF
    from spec.models.resolve import resolve_model

    args = build_parser().parse_args(shlex.split(report["command"])[3:])  # after "python -m bench"
    limit = (QUICK if args.quick else FULL)["prompts_per_set"]
    texts = {s.name: dict(s.prompts) for s in read_prompt_sets(args.prompts or [], limit)} if args.prompts else {}
    target = model_keys(args, args.target or DEFAULT_REF, [])[0]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(target.ref, target.weight_format).path)
    points = PRIOR_WIDTH_COST_F32 if report.get("precision") == F32 else PRIOR_WIDTH_COST
    curve = lambda width: prior_width_cost(width, points)  # noqa: E731

    settings, records = report["settings"], read_records(report["records"])
    rows = []
    for ar in settings:
        if ar["engine"] != "ours" or ar["mode"] != AR or ar["sampled"] or ar["prompt_set"] not in texts:
            continue
        lookup = next((s for s in settings if s["engine"] == "ours" and s["drafter"] == LOOKUP and s["dynamic"]
                       and not s["sampled"] and s["prompt_set"] == ar["prompt_set"] and s["max_new_tokens"] == ar["max_new_tokens"]), None)
        measured = {decode: per_prompt_speedups(records, lookup["index"], ar["index"], decode) if lookup else {}
                    for decode in (True, False)}
        answers = {r.prompt: r for r in records if r.setting == ar["index"] and r.repeat == 0}
        earlier: list[list[int]] = []  # the answers to the prompts before, as the run's lookup may search them
        per_prompt = []
        for prompt_id, text in texts[ar["prompt_set"]].items():
            if prompt_id not in answers:
                continue
            record = answers[prompt_id]
            prompt, answer = encode_prompt(tokenizer, text), record.tokens
            row = {"prompt": prompt_id, "tokens": len(answer), "measured": measured[True].get(prompt_id),
                   "measured_whole_run": measured[False].get(prompt_id)}
            seconds, prefill = record.seconds, record.ttft_seconds
            for rule in RULES:
                row[rule] = best_decode_speedup(copy_runs(prompt, answer, earlier, rule), curve)
                row[f"{rule}_whole_run"] = seconds / (prefill + (seconds - prefill) / row[rule])
            per_prompt.append(row)
            earlier.append(answer)
        rows.append({"prompt_set": ar["prompt_set"], "max_new_tokens": ar["max_new_tokens"], "prompts": per_prompt})
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| prompts | N | answers | speed-up | measured: prompt lookup | ceiling: ours | ceiling: suffix | ceiling: anywhere |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for view, suffix in (("decode", ""), ("whole run", "_whole_run")):
            cells = []
            for key in ("measured", *RULES):
                values = [p[key + suffix] for p in row["prompts"] if p[key + suffix] is not None]
                cells.append(f"{statistics.median(values):.2f}× ({min(values):.2f}-{max(values):.2f}×)" if values else "—")
            lines.append(f"| {row['prompt_set']} | {row['max_new_tokens']} | {len(row['prompts'])} | {view} | " + " | ".join(cells) + " |")
    lines += ["", "Medians per prompt (range), over our autoregressive decoding. Measured: the run's prompt lookup (dynamic K). "
              "Ceilings: with perfect foresight of each copy's length, under the pinned cost curve; whole run: the "
              "autoregressive run's prefill put back (python -m bench.studies.ceiling)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.ceiling", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a benchmark's JSON (bench/results/NAME.json)")
    parser.add_argument("--json", type=Path, help="also write the per-prompt figures here")
    args = parser.parse_args(argv)
    try:
        rows = ceilings(json.loads(args.results.read_text()))
    except (OSError, ValueError, KeyError) as error:
        print(f"error: cannot read {args.results} as a benchmark's results: {error}", file=sys.stderr)
        return 2
    if not rows:
        print(f"error: {args.results} has no greedy autoregressive run of ours to take answers from", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
