"""A soak test of the Space: N clients race through its queue for M minutes; nothing may be lost and
the server's memory must stay bounded.

    python -m bench.tools.soak                        # starts app.py on a free port, 8 clients, 10 minutes
    python -m bench.tools.soak --url http://127.0.0.1:7860/ --pid 1234 --clients 8 --minutes 10

Each client sends races back to back (the examples' prompts, in turn) and waits for each to end.
Every request must come back as a finished race or as "busy" (a full line); an exception, a
timeout or a race that ends without its verdict counts as lost. The server's resident memory is
sampled every few seconds. Prints one JSON object; exits 1 if anything was lost.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from bench.tools import Parser, output_file, run_tool
from bench.tools.served_app import SetupError, check_pid, check_url, free_port as _free_port, is_busy, numbers_of, start_app, stop_app

REPO = Path(__file__).resolve().parents[2]
QUICK_LABEL = "SmolLM2-135M-Instruct (quick, offline)"


def _start_app(port: int, log: Path) -> subprocess.Popen:
    """app.py on `port`, its output in `log`; returns once it answers."""
    # No preload: the first race loads the pair under test, and nothing else competes for the CPU.
    try:
        return start_app(port, log, {"SPEC_APP_PRELOAD": "0"})
    except SetupError as error:
        raise SystemExit(str(error)) from None


def _prompts() -> list[str]:
    sys.path.insert(0, str(REPO))
    from app import EXAMPLES  # importing builds the page but starts no server

    return [prompt for _, prompt in EXAMPLES]


def _outcome(outputs) -> str:
    """finished, busy or no verdict, from /race's last update (status ... numbers, race-it-live)."""
    if is_busy(outputs):
        return "busy"
    numbers = numbers_of(outputs)
    return "finished" if numbers and numbers.get("verdict") is not None else "no verdict"


def soak(url: str, pid: int, clients: int, minutes: float, preset: str, drafter: str, max_new_tokens: int,
         sample_seconds: float) -> dict:
    import psutil
    from gradio_client import Client

    process = psutil.Process(pid)
    prompts = _prompts()
    # One race first, not counted: the pair loads, and memory is measured from there.
    Client(url, verbose=False).predict(
        prompt=prompts[0], preset_label=preset, custom_target="", custom_draft="", drafter=drafter, k=4,
        dynamic_k=True, temperature=0.0, top_p=1.0, seed=0, max_new_tokens=max_new_tokens, exact=False, api_name="/race",
    )
    outcomes: Counter = Counter()
    lost: list[str] = []
    seconds: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + minutes * 60
    rss = [process.memory_info().rss]

    def client(number: int) -> None:
        c = Client(url, verbose=False)
        i = number
        while time.monotonic() < stop_at:
            prompt = prompts[i % len(prompts)]
            i += 1
            started = time.monotonic()
            try:
                outputs = c.predict(
                    prompt=prompt, preset_label=preset, custom_target="", custom_draft="", drafter=drafter,
                    k=4, dynamic_k=True, temperature=0.0, top_p=1.0, seed=0, max_new_tokens=max_new_tokens, exact=False,
                    api_name="/race",
                )
                outcome = _outcome(outputs)
            except Exception as error:  # anything but a verdict or "busy" is a lost request
                outcome = "error"
                with lock:
                    lost.append(f"client {number}: {type(error).__name__}: {str(error)[:200]}")
            with lock:
                outcomes[outcome] += 1
                if outcome == "finished":
                    seconds.append(time.monotonic() - started)
                if outcome == "no verdict":
                    lost.append(f"client {number}: a race ended without its verdict: {re.sub('<[^>]+>', ' ', str(outputs[0] or ''))[:200]}")

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        time.sleep(sample_seconds)
        rss.append(process.memory_info().rss)
    for thread in threads:
        thread.join()
    rss.append(process.memory_info().rss)
    mib = [value / 2**20 for value in rss]
    return {
        "clients": clients, "minutes": minutes, "preset": preset, "drafter": drafter, "max_new_tokens": max_new_tokens,
        "requests": sum(outcomes.values()), "outcomes": dict(outcomes), "lost": lost,
        "race_seconds": {"median": sorted(seconds)[len(seconds) // 2] if seconds else None,
                         "max": max(seconds) if seconds else None},
        "rss_mib": {"after_first_race": round(mib[0]), "max": round(max(mib)), "end": round(mib[-1]),
                    "samples": len(mib), "first_quarter_max": round(max(mib[: max(1, len(mib) // 4)])),
                    "last_quarter_max": round(max(mib[-max(1, len(mib) // 4):]))},
    }


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running app (default: start app.py on a free port)")
    parser.add_argument("--pid", type=int, help="the running app's process id, for its memory (with --url)")
    parser.add_argument("--clients", type=int, default=8, help="default 8")
    parser.add_argument("--minutes", type=float, default=10.0, help="default 10")
    parser.add_argument("--preset", default=QUICK_LABEL, help=f"model pair as the page lists it (default: {QUICK_LABEL})")
    parser.add_argument("--drafter", default="prompt-lookup", help="hybrid, draft-model or prompt-lookup, as the pair offers (default prompt-lookup)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="default 64")
    parser.add_argument("--sample-seconds", type=float, default=5.0, help="how often to sample the server's memory")
    parser.add_argument("--json", type=output_file, help="also write the result here")
    args = parser.parse_args(argv)
    if bool(args.url) != bool(args.pid):
        parser.error("--url and --pid go together (or give neither, to start the app)")
    if min(args.clients, args.max_new_tokens) < 1 or args.minutes <= 0 or args.sample_seconds <= 0:
        parser.error("--clients and --max-new-tokens must be at least 1, --minutes and --sample-seconds positive")
    if args.url:
        try:
            args.url, args.pid = check_url(args.url), check_pid(args.pid)
        except SetupError as error:
            parser.error(str(error))
    server = log = None
    if args.url is None:
        port = _free_port()
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"soak-app-{port}.log"
        server = _start_app(port, log)
        args.url, args.pid = f"http://127.0.0.1:{port}/", server.pid
    try:
        result = soak(args.url, args.pid, args.clients, args.minutes, args.preset, args.drafter, args.max_new_tokens,
                      args.sample_seconds)
    finally:
        stop_app(server)
    if log is not None and not result["lost"]:
        log.unlink(missing_ok=True)  # kept where something went wrong, to read why
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["lost"] else 0


if __name__ == "__main__":
    run_tool(main)
