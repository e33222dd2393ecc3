"""A workshop arriving at the Space: N visitors over a minute, most clicking the page's examples,
some typing prompts of their own; how long each waits to see an answer, and how each ends.

    python -m bench.tools.workshop --wait-ready                # starts app.py (preload and preheat on), 40 visitors over 60 s
    python -m bench.tools.workshop --no-preheat --wait-ready   # the same without preheating: examples race live first
    python -m bench.tools.workshop --url http://127.0.0.1:7860/ --pid 1234 --visitors 40 --seconds 60

Visitors arrive at uniformly random times (--seed). An example visitor (--examples-share, 0.8)
sends exactly what a click on a random example sends; a custom visitor sends one of the short
coding prompts below, each visitor a different one. Each is its own gradio_client session on
/race. Per visitor: seconds from the click until the answer starts on screen (the first update
whose feed carries text), seconds until the verdict, and how it ended: live, joined or replay (as
the race's numbers say), busy (the server's calm "try again in a minute"), failed (the server's
error sentence), or lost (an exception, a timeout, or a race that ended without its verdict). The
server's resident memory is sampled every second. Prints a table, the targets, and one JSON line;
exits 1 if anything was lost, 2 on a bad option or an app that cannot be reached.
"""
from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.tools import Parser, output_file, run_tool
from bench.tools.served_app import (
    MemorySampler,
    Page,
    SetupError,
    app_env,
    check_pid,
    check_url,
    examples_from,
    free_port,
    has_text,
    is_busy,
    numbers_of,
    page,
    percentile,
    start_app,
    stop_app,
    wait_for_line,
)

# Prompts of the visitors' own: short, distinct coding questions (no two visitors send the same one).
CUSTOM_PROMPTS = [
    "Write a Python function that reverses the words in a sentence.",
    "How do I read a CSV file with pandas and keep only two columns?",
    "Write a SQL query that counts orders per customer, largest first.",
    "Explain what a Python generator is, with a three-line example.",
    "Write a bash one-liner that finds the ten largest files in a folder.",
    "Convert this loop to a list comprehension: for x in xs: if x > 0: out.append(x * 2)",
    "Write a JavaScript function that debounces another function.",
    "What does `git rebase -i` do? Answer in two sentences.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a regular expression that matches an ISO date like 2024-05-17.",
    "How do I merge two dictionaries in Python 3.9 and later?",
    "Write a Rust function that returns the largest element of a slice.",
    "Write a Python dataclass for a 2D point with a method for the distance to another point.",
    "What is the difference between `==` and `is` in Python?",
    "Write a C function that counts the set bits in an unsigned int.",
    "Write a Python function that flattens a nested list of lists.",
]
OUTCOMES = ("live", "joined", "replay", "busy", "failed", "lost")
FIRST_ANSWER_P95 = 5.0  # seconds: an example visitor's answer begins within this, at p95


@dataclass
class Visitor:
    number: int
    kind: str  # "example" or "custom"
    label: str  # the example's label, or the custom prompt itself
    prompt: str
    arrival: float  # seconds after the start
    outcome: str = "lost"
    first_answer: float | None = None  # seconds from the click until text is on screen
    verdict: float | None = None  # seconds from the click until the verdict
    note: str = ""


def plan(visitors: int, seconds: float, examples_share: float, seed: int, examples: list[tuple[str, str]]) -> list[Visitor]:
    """Who arrives when, and with what: reproducible from `seed`."""
    rng = random.Random(seed)
    n_examples = round(visitors * examples_share)
    kinds = ["example"] * n_examples + ["custom"] * (visitors - n_examples)
    rng.shuffle(kinds)
    arrivals = sorted(rng.uniform(0, seconds) for _ in range(visitors))
    customs = rng.sample(CUSTOM_PROMPTS, len(CUSTOM_PROMPTS))
    plan, c = [], 0
    for number, (kind, arrival) in enumerate(zip(kinds, arrivals), 1):
        if kind == "example":
            label, prompt = rng.choice(examples)
        else:  # beyond the list, a suffix keeps every custom prompt distinct
            prompt = customs[c % len(customs)] + ("" if c < len(customs) else f" (variant {c // len(customs) + 1})")
            label, c = prompt, c + 1
        plan.append(Visitor(number, kind, label, prompt, round(arrival, 2)))
    return plan


def watch(job, started: float, timeout: float, visitor: Visitor) -> None:
    """Follow one /race job to its end, filling in `visitor`: when the text began, when the verdict came, how it ended."""
    from gradio_client.exceptions import AppError

    seen, deadline = 0, started + timeout
    while True:
        done = job.done()
        updates = job.outputs()
        now = time.monotonic()
        for update in updates[seen:]:
            if visitor.first_answer is None and has_text(update):
                visitor.first_answer = round(now - started, 3)
        seen = len(updates)
        if done:
            break
        if now > deadline:
            job.cancel()
            visitor.outcome, visitor.note = "lost", f"no verdict within {timeout:.0f} s"
            return
        time.sleep(0.05)
    try:
        job.result(timeout=10)
    except AppError as error:  # gr.Error: the server's sentence
        visitor.outcome, visitor.note = "failed", str(error)[:200]
        return
    except Exception as error:
        visitor.outcome, visitor.note = "lost", f"{type(error).__name__}: {str(error)[:200]}"
        return
    last = updates[-1] if updates else None
    numbers = numbers_of(last) if last else None
    if last is None:
        visitor.outcome, visitor.note = "lost", "no update at all"
    elif is_busy(last):
        visitor.outcome = "busy"
    elif numbers and numbers.get("phase") == "failed":
        visitor.outcome, visitor.note = "failed", str(numbers.get("error"))[:200]
    elif numbers and numbers.get("verdict") is not None and numbers.get("how") in ("live", "joined", "replay"):
        visitor.outcome, visitor.verdict = numbers["how"], round(now - started, 3)
    else:
        visitor.outcome, visitor.note = "lost", f"ended without a verdict (phase {numbers and numbers.get('phase')})"


def workshop(url: str, page: Page, visitors: list[Visitor], max_new_tokens: int, timeout: float,
             memory: MemorySampler) -> dict:
    """Send every visitor at its time, wait for all; returns the summary (visitors filled in)."""
    from gradio_client import Client

    clients: dict[int, object] = {}
    ready = threading.Barrier(len(visitors) + 1)
    start: list[float] = []
    go = threading.Event()  # set once start[0] is the workshop's time zero

    def visit(visitor: Visitor) -> None:
        try:  # a visitor's page is open before the workshop starts: each its own session
            clients[visitor.number] = Client(url, verbose=False)
        except Exception as error:
            visitor.note = f"could not connect: {type(error).__name__}: {str(error)[:200]}"
        try:
            ready.wait(timeout=120)
        except threading.BrokenBarrierError:
            pass
        if visitor.number not in clients or not go.wait(timeout=120):
            visitor.note = visitor.note or "never started"
            return
        time.sleep(max(0.0, start[0] + visitor.arrival - time.monotonic()))
        clicked = time.monotonic()
        try:
            job = clients[visitor.number].submit(**page.inputs(visitor.prompt, max_new_tokens), api_name="/race")
            watch(job, clicked, timeout, visitor)
        except Exception as error:
            visitor.outcome, visitor.note = "lost", f"{type(error).__name__}: {str(error)[:200]}"

    threads = [threading.Thread(target=visit, args=(v,), daemon=True, name=f"visitor-{v.number}") for v in visitors]
    for thread in threads:
        thread.start()
    try:
        ready.wait(timeout=120)
    except threading.BrokenBarrierError:
        pass
    rss_at_start = memory.sample()
    start.append(time.monotonic())
    go.set()
    deadline = start[0] + max(v.arrival for v in visitors) + timeout + 30
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    for thread, visitor in zip(threads, visitors):
        if thread.is_alive():
            visitor.outcome, visitor.note = "lost", "still waiting when the workshop ended"
    return summarize(visitors, memory.samples, rss_at_start, time.monotonic() - start[0])


def _stats(values: list[float]) -> dict:
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95), "max": max(values) if values else None}


def summarize(visitors: list[Visitor], rss: list[float], rss_at_start: float | None, seconds: float) -> dict:
    by_kind = {}
    for kind in ("example", "custom"):
        group = [v for v in visitors if v.kind == kind]
        by_kind[kind] = {
            "visitors": len(group),
            "outcomes": {o: sum(v.outcome == o for v in group) for o in OUTCOMES if any(v.outcome == o for v in group)},
            "first_answer_seconds": _stats([v.first_answer for v in group if v.first_answer is not None]),
            "verdict_seconds": _stats([v.verdict for v in group if v.verdict is not None]),
        }
    return {
        "visitors": len(visitors), "seconds": round(seconds, 1),
        "outcomes": {o: sum(v.outcome == o for v in visitors) for o in OUTCOMES},
        **by_kind,
        "verdict_seconds": _stats([v.verdict for v in visitors if v.verdict is not None]),
        "busy": sum(v.outcome == "busy" for v in visitors),
        "lost": sum(v.outcome == "lost" for v in visitors),
        "lost_notes": [f"visitor {v.number}: {v.note}" for v in visitors if v.outcome == "lost"],
        "rss_mib": {"at_start": round(rss_at_start) if rss_at_start else None, "peak": round(max(rss)) if rss else None,
                    "end": round(rss[-1]) if rss else None, "samples": len(rss)},
    }


def targets(result: dict, memory_growth_mib: float) -> list[tuple[str, bool | None, str]]:
    """(target, met (None: not measured), what was measured)."""
    ex, cu, rss = result["example"], result["custom"], result["rss_mib"]
    p95 = ex["first_answer_seconds"]["p95"]
    ex_bad = {o: n for o, n in ex["outcomes"].items() if o not in ("live", "joined", "replay")}
    cu_bad = {o: n for o, n in cu["outcomes"].items() if o not in ("live", "joined", "replay", "busy")}
    growth = rss["peak"] - rss["at_start"] if rss["peak"] is not None and rss["at_start"] is not None else None
    return [
        (f"example visitors' answer begins within {FIRST_ANSWER_P95:.0f} s at p95",
         None if p95 is None else p95 <= FIRST_ANSWER_P95, f"p95 {_s(p95)}"),
        ("no example visitor turned away (busy, failed or lost)", not ex_bad, ", ".join(f"{n} {o}" for o, n in ex_bad.items()) or "none"),
        ("every custom visitor ends with a verdict or an honest busy", not cu_bad,
         ", ".join(f"{n} {o}" for o, n in cu_bad.items()) or f"{cu['visitors']} of {cu['visitors']}"),
        ("nothing lost", result["lost"] == 0, f"{result['lost']} lost"),
        (f"memory bounded: peak RSS at most {memory_growth_mib:.0f} MiB above its level at the start", None if growth is None
         else growth <= memory_growth_mib, "not sampled (no --pid)" if growth is None else f"{rss['at_start']} -> peak {rss['peak']} MiB"),
    ]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def report(visitors: list[Visitor], result: dict, goals) -> str:
    lines = ["", f"{'#':>3} {'arrives':>8}  {'kind':7} {'outcome':7} {'answer':>8} {'verdict':>8}  prompt / note"]
    for v in visitors:
        what = v.label if len(v.label) <= 60 else v.label[:57] + "..."
        lines.append(f"{v.number:>3} {v.arrival:>7.1f}s  {v.kind:7} {v.outcome:7} {_s(v.first_answer):>8} {_s(v.verdict):>8}  "
                     f"{what}{'  [' + v.note + ']' if v.note else ''}")
    lines.append("")
    for kind in ("example", "custom"):
        group = result[kind]
        fa, vd = group["first_answer_seconds"], group["verdict_seconds"]
        lines.append(f"{kind} visitors: {group['visitors']}, {group['outcomes']}; answer begins p50 {_s(fa['p50'])}, "
                     f"p95 {_s(fa['p95'])}, max {_s(fa['max'])}; verdict p50 {_s(vd['p50'])}, p95 {_s(vd['p95'])}, max {_s(vd['max'])}")
    rss = result["rss_mib"]
    lines.append(f"busy {result['busy']}, lost {result['lost']}; server RSS {rss['at_start']} MiB at the start, "
                 f"peak {rss['peak']} MiB, end {rss['end']} MiB ({rss['samples']} samples)")
    lines += ["", "Targets:"]
    lines += [f"  [{'met' if met else 'not measured' if met is None else 'MISSED'}] {goal}: {measured}" for goal, met, measured in goals]
    return "\n".join(lines)


def wait_preheated(url: str, page: Page, examples: list[tuple[str, str]], timeout: float) -> float:
    """Until each of `examples` (the page's, as a click sends them) comes back as a replay:
    preheating finished; seconds waited. A probe that finds its example still racing or waiting
    watches it to its end, then asks again."""
    from gradio_client import Client

    client, began = Client(url, verbose=False), time.monotonic()
    deadline = began + timeout
    while True:
        pending = [label for label, prompt in examples if not _is_replay(client, page.inputs(prompt), deadline)]
        if not pending:
            return time.monotonic() - began
        if time.monotonic() > deadline:
            raise SetupError(f"preheating had not finished after {timeout:.0f} s (still racing: {', '.join(pending)})")
        time.sleep(1)


def _is_replay(client, inputs: dict, deadline: float) -> bool:
    from gradio_client.exceptions import AppError

    job = client.submit(**inputs, api_name="/race")
    while time.monotonic() < deadline:
        updates = job.outputs()
        if any("recorded pace" in str(update[0] or "") for update in updates):
            job.cancel()  # a replay: no need to watch it
            return True
        if job.done():
            try:
                job.result(timeout=10)
            except AppError as error:  # it would never become a replay
                raise SetupError(f"an example fails on this server, so it is never preheated: {str(error)[:200]}") from None
            except Exception:
                pass
            return False
        time.sleep(0.1)
    job.cancel()
    return False


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0], epilog="Usage examples are in the module docstring: "
                                     "python -c 'import bench.tools.workshop; help(bench.tools.workshop)'")
    parser.add_argument("--url", help="a running app (default: start app.py on a free port)")
    parser.add_argument("--pid", type=int, help="the running app's process id, for its memory (with --url)")
    parser.add_argument("--visitors", type=int, default=40, help="how many visitors arrive (default 40)")
    parser.add_argument("--seconds", type=float, default=60.0, help="over how many seconds they arrive (default 60)")
    parser.add_argument("--examples-share", type=float, default=0.8, help="share of visitors who click an example (default 0.8)")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="what each race asks for (default 128, as a click)")
    parser.add_argument("--seed", type=int, default=0, help="arrival times and choices (default 0)")
    parser.add_argument("--no-preheat", action="store_true", help="start the app with SPEC_APP_PREHEAT=0")
    parser.add_argument("--wait-ready", action="store_true", help="before the first visitor: wait until the default pair is "
                        "loaded (the app's 'Ready' line) and, unless --no-preheat, until every example is answered as a replay")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a visitor waits for its verdict (default 900)")
    parser.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds --wait-ready waits (default 1800)")
    parser.add_argument("--memory-growth-mib", type=float, default=512.0, help="the memory target: peak RSS at most this far "
                        "above its level when the visitors start (default 512)")
    parser.add_argument("--examples-from", type=Path, help="a JSON list of [label, prompt] to click instead of the page's examples")
    parser.add_argument("--app-env", action="append", metavar="NAME=VALUE", help="an environment variable for the app it starts (repeatable)")
    parser.add_argument("--json-out", type=output_file, help="also write the JSON summary (with every visitor) here")
    args = parser.parse_args(argv)
    if args.visitors < 1 or args.seconds < 0 or not 0 <= args.examples_share <= 1 or args.max_new_tokens < 1 or args.timeout <= 0:
        parser.error("--visitors and --max-new-tokens must be at least 1, --seconds not negative, --timeout positive, "
                     "and --examples-share between 0 and 1")
    if args.pid and not args.url:
        parser.error("--pid goes with --url (without --url, the app this starts is measured)")
    server = None
    try:
        env = {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0" if args.no_preheat else "1", **app_env(args.app_env)}
        url, pid = (check_url(args.url), args.pid and check_pid(args.pid)) if args.url else (None, None)
        the_page = page(env)
        preheated = list(the_page.examples)  # what the server races at start-up: the page's own examples
        if args.examples_from:
            the_page.examples = examples_from(args.examples_from)
        notes = []
        if not args.url:
            port = free_port()
            log = Path(os.environ.get("TMPDIR", "/tmp")) / f"workshop-app-{port}.log"
            began = time.monotonic()
            server = start_app(port, log, env)
            url, pid = f"http://127.0.0.1:{port}/", server.pid
            notes.append(f"app.py started on {url} (log {log}), preheat {'off' if args.no_preheat else 'on'}")
            if args.wait_ready and env["SPEC_APP_PRELOAD"] == "1":
                wait_for_line(log, "Ready: " + re.escape(the_page.preset), server, args.ready_timeout, fail=r"Could not load")
                notes.append(f"ready: the default pair loaded after {time.monotonic() - began:.0f} s (its 'Ready' line in the log)")
        if args.wait_ready and env["SPEC_APP_PREHEAT"] == "1":
            waited = wait_preheated(url, the_page, preheated, args.ready_timeout)
            notes.append(f"ready: preheating finished, every example answered as a replay, after {waited:.0f} s more")
        elif not args.wait_ready:
            notes.append("not waiting for the app to be ready (no --wait-ready): the first visitors may see models load")
        visitors = plan(args.visitors, args.seconds, args.examples_share, args.seed, the_page.examples)
        print("\n".join(notes), f"\n{len(visitors)} visitors over {args.seconds:.0f} s ...", sep="", flush=True)
        with MemorySampler(pid) as memory:
            result = workshop(url, the_page, visitors, args.max_new_tokens, args.timeout, memory)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stop_app(server)
    goals = targets(result, args.memory_growth_mib)
    result.update(settings=dict(url=url, visitors=args.visitors, seconds=args.seconds, examples_share=args.examples_share,
                                max_new_tokens=args.max_new_tokens, seed=args.seed, preheat=not args.no_preheat,
                                wait_ready=args.wait_ready, pair=the_page.preset, drafter=the_page.drafter),
                  ready="; ".join(notes), targets=[dict(target=g, met=m, measured=s) for g, m, s in goals])
    print(report(visitors, result, goals))
    print(json.dumps(result))
    if args.json_out:
        args.json_out.write_text(json.dumps({**result, "per_visitor": [asdict(v) for v in visitors]}, indent=2) + "\n")
    return 1 if result["lost"] else 0


if __name__ == "__main__":
    run_tool(main)
