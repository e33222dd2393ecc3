"""What serving costs a race: each lane's decode speed served through the Space, against the same
generation run alone through the CLI.

    python -m bench.tools.served                    # starts app.py (preload on, preheat off); the first 3 examples, 3 repeats
    python -m bench.tools.served --browser          # also with headless Chromium on the page, rendering the race
    python -m bench.tools.served --url http://127.0.0.1:7860/ --examples 6 --repeats 5

For each of the page's first --examples examples, the same generation (same prompt, the default
pair and drafter, the page's K, dynamic K and greedy settings, --max-new-tokens, the pair's
precision) runs:
  alone     the engine the CLI runs (`python -m spec run`), once per lane (autoregressive, then
            speculative with the page's drafter), while the app idles: in this process, models
            loaded once and warmed up as the race warms them (--alone engine, the default), or
            `python -m spec run --json` in a process of its own (--alone cli);
  /race     a fresh live race through the /race_live endpoint (gradio_client, no browser);
  browser   (--browser) Debian's Chromium, headless, on the page: it types the prompt and presses
            Race (then "Race it live", if Race gave a replay), so that the page renders the race;
            its numbers come after it, from /race: a replay of that very race.
Each lane's decode tokens/s (decode_tokens_per_second) comes from the engine's statistics (the
keys of the CLI's JSON) and from the race's numbers. Alone and served runs alternate, so drift hits both. Reported per
example and lane: served / alone, the median over --repeats, then the median over examples, against
the targets (>= 0.95 through /race, >= 0.92 with the browser, as issue 41 sets them), each median with
its 90% bootstrap interval (bench.tools.interval): a target inside it is not settled by the run. Prints a table and one JSON line,
both naming this CPU and the pairs' records the app and the lane alone started from (learned.json:
two runs compare only from the same). Where the cores went during each served race is measured
too: CPU seconds of the app's computing threads (the race's and OpenVINO's), of its serving threads (the web server's
and each viewer's, which run at a lower priority) and of Chromium (only for an app it started).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.tools import Parser, output_file, run_tool
from bench.tools.interval import median_interval
from bench.tools.served_app import (
    REPO,
    CpuSpent,
    Page,
    SetupError,
    app_env,
    check_url,
    examples_from,
    free_port,
    machine,
    numbers_of,
    page,
    race_live,
    start_app,
    stop_app,
    wait_for_line,
)
from spec.config import ModelKey

LANES = ("autoregressive", "speculative")
TARGETS = {"race": 0.95, "browser": 0.92}  # served / alone, median over examples, each lane
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


class Engine:
    """The engine in this process, as the CLI runs it but with its models loaded once and warmed up
    as the race warms them (a model's first call pays one-off costs the race never counts)."""

    def __init__(self, page: Page):
        from spec.decoding.kept_pairs import beside_models
        from spec.decoding.target_memory import LearnedState
        from spec.models.registry import ModelRegistry

        # learned: as the app's scheduler keeps it, from the same record its races kept in the models
        # folder at the start (never written here: the app's races keep it)
        self.page, self.registry, self.learned = page, ModelRegistry(), LearnedState(beside_models())

    def _model(self, key: ModelKey):
        from spec.serving.loading import warm_up

        return warm_up(self.registry.get(key))

    def run(self, prompt: str, mode: str, max_new_tokens: int) -> float:
        """Decode tokens/s of one lane run alone."""
        import threading

        from spec.config import GenerationConfig
        from spec.decoding.engine import stream

        d, page = self.page.defaults, self.page
        config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=d["temperature"], top_p=d["top_p"], seed=d["seed"],
                                  num_assistant_tokens=d["k"], dynamic_k=d["dynamic_k"]).validate()
        draft = self._model(page.draft) if mode == "speculative" and page.draft else None
        drafter = page.drafter if mode == "speculative" else None
        step = None
        try:
            for step in stream(prompt, self._model(page.target), config, draft=draft, drafter=drafter, cancel=threading.Event(),
                               learned=self.learned):
                pass
        except Exception as error:  # a model that does not load, a prompt too long: one sentence
            raise SetupError(f"the {mode} run alone failed: {type(error).__name__}: {str(error)[:300]}") from None
        return step.stats.as_dict()


def alone(page: Page, prompt: str, mode: str, max_new_tokens: int, timeout: float) -> dict:
    """The statistics of one lane run alone through `python -m spec run --json` in its own process
    (models loaded afresh and not warmed up)."""
    d, draft = page.defaults, page.draft if mode == "speculative" else None
    command = [sys.executable, "-m", "spec", "run", "--json", "--quiet", "--target", page.target.ref, "--mode", mode,
               "--max-new-tokens", str(max_new_tokens), "--temperature", str(d["temperature"]),
               "--top-p", str(d["top_p"]), *_formats(page.target, draft), "--prompt", prompt]
    if d["seed"] is not None:
        command += ["--seed", str(d["seed"])]
    if mode == "speculative":  # K and dynamic K apply to drafts only: the command line refuses them without a drafter
        command += ["--k", str(d["k"])] + ([] if d["dynamic_k"] else ["--no-dynamic-k"])
        command += ["--draft", draft.ref, "--drafter", page.drafter] if draft else ["--prompt-lookup"]
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SetupError(f"python -m spec run ({mode}) took more than {timeout:.0f} s") from None
    if done.returncode != 0:
        raise SetupError(f"python -m spec run ({mode}) failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _formats(target: ModelKey, draft: ModelKey | None) -> list[str]:
    """The options under which `python -m spec run` loads `target` and `draft` as the page does: the
    precision, and --weight-format only where the command line's own pair_keys would choose another
    (given, it sets the draft's too)."""
    from spec.serving.presets import pair_keys  # imported late: --help stays fast

    own = pair_keys(target.ref, draft and draft.ref, target.device, precision=target.precision)
    return ["--precision", target.precision] + ([] if own == (target, draft) else ["--weight-format", target.weight_format])


def _lanes(numbers: dict | None, what: str) -> dict[str, dict]:
    if not numbers or numbers.get("verdict") is None:
        raise SetupError(f"{what} ended without its verdict ({numbers and (numbers.get('error') or numbers.get('phase'))})")
    return {lane: numbers[lane] for lane in LANES}


# What a lane's statistics (spec.decoding.metrics.Stats) say of where its time went: served and
# alone, the same greedy generation makes the same calls unless its schedule decided otherwise.
CALLS = ("target_calls", "plain_steps", "draft_tokens", "accepted", "target_seconds", "verify_seconds", "draft_seconds", "seconds")


def _calls(stats: dict) -> dict[str, float]:
    return {name: stats[name] for name in CALLS if name in stats}


def served(client, page: Page, prompt: str, max_new_tokens: int, timeout: float) -> dict[str, dict]:
    """The statistics of each lane of a fresh live race through /race_live (no browser)."""
    job = client.submit(**page.inputs(prompt, max_new_tokens), api_name="/race_live")
    try:
        job.result(timeout=timeout)
    except Exception as error:
        job.cancel()
        raise SetupError(f"/race_live did not finish: {type(error).__name__}: {str(error)[:200]}") from None
    numbers = numbers_of(job.outputs()[-1])
    if numbers and numbers.get("how") != "live":
        raise SetupError(f"/race_live answered with a {numbers.get('how')} race, not a live one")
    return _lanes(numbers, "/race_live")


class Browser:
    """Headless Chromium on the page, racing as a visitor does: type the prompt, press Race."""

    def __init__(self, url: str, timeout: float):
        from playwright.sync_api import sync_playwright

        self.url, self.timeout = url, timeout
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            self.page = self._browser.new_page()
            self.page.goto(url, timeout=timeout * 1000)
            self.page.wait_for_selector("#run", timeout=timeout * 1000)
            time.sleep(2)  # the page's load handler sets the pair list and the drafter
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for closing in (getattr(self, "_browser", None), self._playwright):
            try:
                closing and (closing.close() if closing is not self._playwright else closing.stop())
            except Exception:
                pass

    def race(self, client, page: Page, prompt: str, max_new_tokens: int) -> dict[str, dict]:
        """The statistics of each lane of a live race the page itself started and renders."""
        self.page.locator("#prompt textarea").fill(prompt)
        slider = self.page.locator("#max-new-tokens input[type=number]")
        slider.fill(str(max_new_tokens))
        slider.press("Enter")
        clicked = race_live(self.page, self.timeout)
        # Wait for the verdict without polling from here (each poll is work on the page), then ask
        # /race for the same race: a replay, whose numbers are the page's race's. (A second viewer
        # joining the race for its numbers would be serving work no visitor's page causes.)
        self.page.wait_for_function("() => !document.querySelector('#status').innerText.includes('Racing')",
                                    polling=1000, timeout=self.timeout * 1000)
        job = client.submit(**page.inputs(prompt, max_new_tokens), api_name="/race")
        job.result(timeout=self.timeout)
        numbers = numbers_of(job.outputs()[-1])
        if not numbers or numbers.get("how") != "replay" or (numbers.get("ran_at") or 0) < clicked - 2:
            raise SetupError("the replay asked for after the browser's race was not that race")
        return _lanes(numbers, "the browser's race")


def measure(url: str, page: Page, examples: list[tuple[str, str]], repeats: int, max_new_tokens: int, timeout: float,
            browser: Browser | None, engine: Engine | None, say=print, app_pid: int | None = None) -> dict:
    """Alone and served runs, interleaved; each example's per-lane ratios and the medians over examples."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    channels = ["race"] + (["browser"] if browser else [])
    runs = {label: {"alone": {lane: [] for lane in LANES}, **{c: {lane: [] for lane in LANES} for c in channels}}
            for label, _ in examples}
    calls = {label: {c: {lane: [] for lane in LANES} for c in ("alone", *channels)} for label, _ in examples}
    cpu = {c: {"computing": [], "serving": [], "chromium": []} for c in channels}  # CPU seconds per served race

    def record(label, channel, lanes):
        for lane, stats in lanes.items():
            runs[label][channel][lane].append(stats["decode_tokens_per_second"])
            calls[label][channel][lane].append(_calls(stats))

    def counted(channel, race):
        with CpuSpent(app_pid, browser=browser is not None) as spent:
            lanes = race()
        for part in cpu[channel]:
            if getattr(spent, part) is not None:
                cpu[channel][part].append(getattr(spent, part))
        return lanes

    def run_alone(label, prompt):
        record(label, "alone", {lane: engine.run(prompt, lane, max_new_tokens) if engine
                                else alone(page, prompt, lane, max_new_tokens, timeout) for lane in LANES})

    def run_served(label, prompt):
        record(label, "race", counted("race", lambda: served(client, page, prompt, max_new_tokens, timeout)))
        if browser:
            record(label, "browser", counted("browser", lambda: browser.race(client, page, prompt, max_new_tokens)))

    for repeat in range(repeats):
        for i, (label, prompt) in enumerate(examples):
            order = (run_alone, run_served) if (repeat + i) % 2 == 0 else (run_served, run_alone)
            for step in order:
                step(label, prompt)
            say(f"  repeat {repeat + 1}/{repeats}, {label}: " +
                ", ".join(f"{channel} " + "/".join(f"{runs[label][channel][lane][-1]:.1f}" for lane in LANES)
                          for channel in ("alone", *channels)) + " decode tokens/s (autoregressive/speculative)")
    per_example = {}
    for label, measured in runs.items():
        per_example[label] = {channel: {lane: _ratio(measured[channel][lane], measured["alone"][lane]) for lane in LANES}
                              for channel in channels}
        per_example[label]["tokens_per_second"] = {channel: {lane: statistics.median(measured[channel][lane]) for lane in LANES}
                                                   for channel in ("alone", *channels)}
    medians = {channel: {lane: statistics.median(per_example[label][channel][lane] for label in per_example) for lane in LANES}
               for channel in channels}
    targets = []
    for channel in channels:
        for lane in LANES:
            # How far that median could move by chance on this host: a target inside it is not settled by this run.
            low, high = median_interval({label: _ratios(measured[channel][lane], measured["alone"][lane])
                                         for label, measured in runs.items()})
            targets.append(dict(target=f"{channel}: served / alone >= {TARGETS[channel]} ({lane}, median over examples)",
                                measured=round(medians[channel][lane], 3), met=medians[channel][lane] >= TARGETS[channel],
                                interval=[round(low, 3), round(high, 3)], settled=not low <= TARGETS[channel] <= high))
    cpu_seconds = {c: {part: statistics.median(values) for part, values in parts.items() if values} for c, parts in cpu.items()}
    return {"per_example": per_example, "medians": medians, "targets": targets, "cpu_seconds_per_race": cpu_seconds,
            "runs": runs, "calls": calls, "cpu_runs": cpu}


def _ratios(served: list[float], alone: list[float]) -> list[float]:
    """Served / alone for each repeat, its runs side by side."""
    return [s / a for s, a in zip(served, alone) if a]


def _ratio(served: list[float], alone: list[float]) -> float:
    """The median over repeats of served / alone, each repeat's runs side by side."""
    return statistics.median(_ratios(served, alone))


def report(result: dict, channels: list[str]) -> str:
    lines = ["", "| example | lane | alone tokens/s | " + " | ".join(f"{c} tokens/s | {c} / alone" for c in channels) + " |",
             "| --- | --- | --- | " + " | ".join("--- | ---" for _ in channels) + " |"]
    for label, row in result["per_example"].items():
        for lane in LANES:
            tps = row["tokens_per_second"]
            lines.append(f"| {label} | {lane} | {tps['alone'][lane]:.1f} | " +
                         " | ".join(f"{tps[c][lane]:.1f} | {row[c][lane]:.3f}" for c in channels) + " |")
    for channel, parts in result.get("cpu_seconds_per_race", {}).items():
        if parts:
            lines.append(f"CPU seconds per served race ({channel}, median): " +
                         ", ".join(f"{part} {seconds:.2f}" for part, seconds in parts.items()))
    lines += calls_table(result.get("calls", {}), channels)
    lines += ["", "Targets:"]
    lines += [f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['measured']:.3f} (90% interval {t['interval'][0]:.3f}-"
              f"{t['interval'][1]:.3f}{'' if t['settled'] else ': the target lies inside it, more --repeats would tell'})"
              for t in result["targets"]]
    return "\n".join(lines)


def calls_table(calls: dict, channels: list[str]) -> list[str]:
    """Where each lane's compute went, alone and served (medians over every run of every example):
    the same calls served with slower seconds point at the serving, other calls at the schedule."""
    if not calls:
        return []
    lines = ["", "| lane | run | target calls | plain steps | draft tokens | target ms a call | draft ms a draft token | other ms a token |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for lane in LANES:
        for channel in ("alone", *channels):
            every = [run for label in calls for run in calls[label][channel][lane]]
            if not every or any(name not in run for run in every for name in CALLS):
                continue

            def median(value, every=every) -> float:
                return statistics.median(value(run) for run in every)

            lines.append(f"| {lane} | {channel} | {median(lambda r: r['target_calls']):.0f} | {median(lambda r: r['plain_steps']):.0f} | "
                         f"{median(lambda r: r['draft_tokens']):.0f} | "
                         f"{median(lambda r: 1e3 * r['target_seconds'] / max(1, r['target_calls'] - 1)):.1f} | "
                         f"{median(lambda r: 1e3 * r['draft_seconds'] / r['draft_tokens'] if r['draft_tokens'] else 0.0):.1f} | "
                         f"{median(lambda r: 1e3 * (r['seconds'] - r['target_seconds'] - r['draft_seconds']) / max(1, r['target_calls'])):.1f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0], epilog="Usage examples are in the module docstring: "
                    "python -c 'import bench.tools.served; help(bench.tools.served)'")
    parser.add_argument("--url", help="a running app, its pair loaded (default: start app.py on a free port, preheat off)")
    parser.add_argument("--examples", type=int, default=3, help="how many of the page's examples, from the first (default 3)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each, interleaved; the median is reported (default 3)")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="default 128, as a click")
    parser.add_argument("--browser", action="store_true", help="also race from headless Chromium on the page")
    parser.add_argument("--alone", choices=("engine", "cli"), default="engine", help="run alone in this process, models "
                        "loaded once and warmed up as the race warms them (engine, the default), or as `python -m spec run "
                        "--json` in a process of its own each time (cli: models loaded afresh, not warmed up)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds any one run may take (default 600)")
    parser.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds to wait for the app's pair to load (default 1800)")
    parser.add_argument("--examples-from", type=Path, help="a JSON list of [label, prompt] instead of the page's examples")
    parser.add_argument("--app-env", action="append", metavar="NAME=VALUE", help="an environment variable for the app it starts (repeatable)")
    parser.add_argument("--json-out", type=output_file, help="also write the JSON result (with every run) here")
    args = parser.parse_args(argv)
    if args.examples < 1 or args.repeats < 1 or args.max_new_tokens < 1 or args.timeout <= 0:
        parser.error("--examples, --repeats and --max-new-tokens must be at least 1, and --timeout positive")
    if args.browser and not Path(CHROMIUM).exists():
        parser.error(f"--browser needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    server = browser = None
    try:
        env = {"SPEC_APP_PRELOAD": "1", **app_env(args.app_env), "SPEC_APP_PREHEAT": "0"}  # preheating would compete
        url = check_url(args.url) if args.url else None
        the_page = page(env)
        from spec.decoding.kept_pairs import beside_models, describe

        started_from = describe(beside_models())  # both the app and the lane alone start from it
        examples = (examples_from(args.examples_from) if args.examples_from else the_page.examples)[: args.examples]
        if args.url:
            note = f"the app at {url} (its pair assumed loaded)"
        else:
            port = free_port()
            log = Path(os.environ.get("TMPDIR", "/tmp")) / f"served-app-{port}.log"
            began = time.monotonic()
            server = start_app(port, log, env)
            url = f"http://127.0.0.1:{port}/"
            if env["SPEC_APP_PRELOAD"] == "1":
                import re

                wait_for_line(log, "Ready: " + re.escape(the_page.preset), server, args.ready_timeout, fail="Could not load")
            note = f"app.py on {url} (log {log}), preheat off, pair loaded after {time.monotonic() - began:.0f} s"
        note += f"; at the start, {started_from} of this machine's models folder"
        print(f"{note}\non {machine()}\n{the_page.preset}, {the_page.drafter}, K={the_page.defaults['k']}, "
              f"{'dynamic K' if the_page.defaults['dynamic_k'] else 'fixed K'}, {args.max_new_tokens} new tokens, "
              f"{the_page.target.precision} precision; {len(examples)} examples x {args.repeats} repeats", flush=True)
        if args.browser:
            browser = Browser(url, args.timeout)
        engine = Engine(the_page) if args.alone == "engine" else None
        result = measure(url, the_page, examples, args.repeats, args.max_new_tokens, args.timeout, browser, engine,
                         say=lambda line: print(line, flush=True), app_pid=server.pid if server else None)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if browser:
            browser.close()
        stop_app(server)
    channels = ["race"] + (["browser"] if args.browser else [])
    result["settings"] = dict(url=url, pair=the_page.preset, drafter=the_page.drafter, examples=[label for label, _ in examples],
                              repeats=args.repeats, max_new_tokens=args.max_new_tokens, browser=args.browser, alone=args.alone,
                              note=note, cpu=machine())
    print(report(result, channels))
    print(json.dumps({key: value for key, value in result.items() if key not in ("runs", "cpu_runs")}))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run_tool(main)
