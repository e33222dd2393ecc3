"""What the open issues still need measured on a CPU class the project has not run on (AVX2 only,
AMX), in one command: run it on such a machine, 2 cores if you can, and attach its summary to the
issues. Nothing else heavy should run meanwhile (a browser, a build, a test suite). `./run.sh test
tests/test_cpu_check.py` first sets up .venv with everything the checks use.

    python -m bench.tools.cpu_check                 # every check: 45 minutes on 2 cores of an AVX-512 EPYC, longer on AVX2
    python -m bench.tools.cpu_check --only 41       # one issue's checks (38, 39, 41)
    python -m bench.tools.cpu_check --list          # the commands it would run

Each check is one of the project's own tools run as docs/ runs it, on the page's default pair:
  38  the benchmark on open questions (N=128, greedy and sampled, f32 exactness) and code edits
      (N=160), held to this CPU class's goals (bench.report.goals); the page's examples, none below 1.0x
  39  a first start from an empty models folder (`bench.tools.first_start`, the app, then
      `prepare --offline`): racing within 2 minutes, in a 4 GB memory cgroup where it runs as root
  41  the served race against the engine alone (`bench.tools.served --examples 6 --repeats 6
      --browser`: fewer repeats settled nothing on a shared host), and a workshop's 40 visitors
      (`bench.tools.workshop --wait-ready`)
The image's size (issue 39) does not depend on the CPU and is not checked here (bench.tools.image).
Each tool's figures and log go to --out (default test-artifacts/cpu-check-<class>-<date>/), and
summary.md there names this CPU and its class beside every figure, target by target: met, missed,
or not checked and why. Exits 0 when every check ran (met or not), 1 when one could not run.
"""
from __future__ import annotations

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.tools import Parser, run_tool

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"  # Debian's, as bench.tools.served drives it
PROMPTS = Path("bench") / "prompts"  # the tools run in the repository: its paths read the same on every machine
FIRST_START_SECONDS = 120.0  # issue 39: the default pair races within 2 minutes of an empty models folder
FIRST_START_GB = 4.0  # ... and the whole preparation within 4 GB


@dataclass(frozen=True)
class Verdict:
    """One target of one check: what was measured, and whether it met the target (None: not judged)."""

    target: str
    measured: str
    met: bool | None


@dataclass(frozen=True)
class Check:
    """One tool run: the issue it answers, its command, and how its figures are judged."""

    issue: int
    name: str  # its files in the output folder: <name>.json, <name>.log
    command: Callable[[Path], list[str]]  # given the output folder
    judge: Callable[[dict], list[Verdict]]  # given the figures the tool wrote
    minutes: int  # as it took on 2 cores of an AVX-512 EPYC (the Zen 5, 2026-11-27 and 29)
    stdout_json: bool = False  # the tool prints its figures as its last line rather than writing --json-out


def _bench(name: str, *options: str) -> Callable[[Path], list[str]]:
    return lambda out: [sys.executable, "-m", "bench", *options, "--k", "dynamic", "--no-peers", "--repeats", "2",
                        "--name", name, "--out", str(out)]


def judge_bench(report: dict) -> list[Verdict]:
    """The benchmark's own targets that issue 38 asks about: the default pair's speed-ups, the hybrid
    against its better drafter, a draft token's cost, f32 exactness (judged by the run's CPU class)."""
    asked = ("the default pair", "hybrid ≥", "at f32")
    return [Verdict(f"{t['target']} ({t['configuration']})", t.get("shown") or f"{t['value']:.2f}", t["met"])
            for t in report.get("targets", [])
            if t["target"].startswith(asked) or " token, all in, ≤ " in t["target"]]


def judge_examples(figures: dict) -> list[Verdict]:
    """Issue 38: none of the page's examples below 1.0x."""
    examples = figures.get("examples") or {}
    if not examples:
        return [Verdict("every page example ≥ 1.0× (median of its races)", "no example raced", False)]
    worst = min(examples, key=lambda label: examples[label]["speedup"])
    speedup = examples[worst]["speedup"]
    return [Verdict("every page example ≥ 1.0× (median of its races)", f"lowest {speedup:.2f}× on “{worst}”", speedup >= 1.0)]


def judge_first_start(figures: dict) -> list[Verdict]:
    """Issue 39: ready to race (the app: its first verdict) within 2 minutes, the preparation within 4 GB."""
    what = figures.get("what", "app.py")
    seconds = figures.get("verdict_seconds", figures.get("seconds"))
    timed = "the first race's verdict" if "verdict_seconds" in figures else "done"
    verdicts = [Verdict(f"{what} from an empty models folder: {timed} within {FIRST_START_SECONDS:.0f} s",
                        "did not finish" if seconds is None else f"{seconds:.1f} s", seconds is not None and seconds <= FIRST_START_SECONDS)]
    memory = f"peak {figures.get('peak_pss_gib')} GiB PSS, {figures.get('peak_anonymous_gib')} GiB anonymous"
    cgroup = figures.get("cgroup")
    if cgroup:
        verdicts.append(Verdict(f"{what} within a {FIRST_START_GB:.0f} GB memory cgroup: finished, nothing killed",
                                f"{memory}; OOM kills {cgroup.get('oom_kills')}", seconds is not None and cgroup.get("oom_kills") == 0))
    else:
        verdicts.append(Verdict(f"{what} within {FIRST_START_GB:.0f} GB", f"{memory} (no cgroup: run as root to check it in a "
                                f"{FIRST_START_GB:.0f} GB one; without a limit the app spends spare memory on speed)", None))
    return verdicts


def judge_own_targets(figures: dict) -> list[Verdict]:
    """The targets a tool checks itself (bench.tools.served, bench.tools.workshop)."""
    targets = figures.get("targets") or []
    if not targets:
        return [Verdict("the tool's targets", "none reported", False)]
    return [Verdict(t["target"], str(t.get("measured")) + _interval(t), t.get("met")) for t in targets]


def _interval(target: dict) -> str:
    """The interval a tool gave beside its median, and whether it settles the target: one that
    holds the target inside it is neither met nor missed by that run."""
    if not target.get("interval"):
        return ""
    low, high = target["interval"]
    unsettled = "; not settled: the target lies inside it, more repeats would tell" if target.get("settled") is False else ""
    return f" (90% interval {low}-{high}{unsettled})"


def judge_served(figures: dict) -> list[Verdict]:
    """bench.tools.served's own targets; where no browser watched, that half is named, not judged."""
    verdicts = judge_own_targets(figures)
    if not (figures.get("settings") or {}).get("browser", True):
        verdicts.append(Verdict("browser: served / alone >= 0.92 (each lane, median over examples)",
                                f"not run: no Chromium at {CHROMIUM}, or no playwright", None))
    return verdicts


def checks(memory_limit: bool, browser: bool = True) -> list[Check]:
    """Every check, in the order run; `memory_limit`: first starts in a 4 GB cgroup (needs root);
    `browser`: the served race watched by Chromium too."""
    limit = ["--memory-limit", f"{FIRST_START_GB:g}"] if memory_limit else []
    module = [sys.executable, "-m"]
    return [
        Check(38, "open-questions-128", _bench("open-questions-128", "--prompts", str(PROMPTS / "open-questions.json"),
                                               "--max-new-tokens", "128"), judge_bench, 11),
        Check(38, "code-edits-160", _bench("code-edits-160", "--prompts", str(PROMPTS / "code-editing.json"), "--max-new-tokens", "160",
                                           "--no-sampled", "--no-exactness"), judge_bench, 4),
        # --fresh: as a first start races them, whatever earlier races on this machine kept (spec.decoding.kept_pairs)
        Check(38, "page-examples", lambda out: [*module, "bench.tools.examples", "--fresh", "--json-out", str(out / "page-examples.json")],
              judge_examples, 2),
        Check(39, "first-start-app", lambda out: [*module, "bench.tools.first_start", *limit], judge_first_start, 2, stdout_json=True),
        Check(39, "first-start-prepare", lambda out: [*module, "bench.tools.first_start", "--prepare", *limit], judge_first_start, 1,
              stdout_json=True),
        # Six repeats: on the Zen 5, two settled none of the four targets and six settled two (docs/benchmarks.md).
        Check(41, "served", lambda out: [*module, "bench.tools.served", "--examples", "6", "--repeats", "6",
                                         *(["--browser"] if browser else []), "--json-out", str(out / "served.json")], judge_served, 22),
        Check(41, "workshop", lambda out: [*module, "bench.tools.workshop", "--wait-ready", "--json-out", str(out / "workshop.json")],
              judge_own_targets, 2),
    ]


def run_check(check: Check, out: Path) -> tuple[list[Verdict], float, bool]:
    """Run one check's tool, its output in <name>.log: its verdicts, its seconds, and whether it wrote
    figures at all (a run that did not: one verdict, missed, saying why)."""
    log, figures_file = REPO / out / f"{check.name}.log", REPO / out / f"{check.name}.json"
    started = time.monotonic()
    with log.open("w") as output:
        process = subprocess.run(check.command(out), cwd=REPO, stdout=subprocess.PIPE if check.stdout_json else output,
                                 stderr=output, text=True, check=False)
    seconds = time.monotonic() - started
    if check.stdout_json:
        lines = [line for line in (process.stdout or "").splitlines() if line.strip()]
        with log.open("a") as output:
            output.write("\n".join(lines) + "\n")
        if lines and lines[-1].startswith("{"):
            figures_file.write_text(lines[-1] + "\n")
    if not figures_file.exists():
        return [Verdict(f"{check.name} ran", f"exit {process.returncode}, no figures: see {log}", False)], seconds, False
    return check.judge(json.loads(figures_file.read_text())), seconds, True


def summary(machine: str, cpu_class: str, results: list[tuple[Check, list[Verdict], float]], header: str) -> str:
    """The Markdown the issues take: this CPU named once above and every check's targets."""
    lines = [f"# Checks on {machine} ({cpu_class} class)", "", header, ""]
    for issue in sorted({check.issue for check, _, _ in results}):
        lines += [f"## Issue {issue}", "", "| check | target | measured | |", "| --- | --- | --- | --- |"]
        for check, verdicts, seconds in results:
            if check.issue != issue:
                continue
            for verdict in verdicts:
                shown = {True: "**met**", False: "**missed**", None: "not judged"}[verdict.met]
                lines.append(f"| {check.name} ({seconds / 60:.0f} min) | {verdict.target} | {verdict.measured} | {shown} |")
        lines.append("")
    return "\n".join(lines)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def main(argv: list[str] | None = None) -> int:
    from bench.tools.served_app import machine
    from spec.models.runtime import cpu_class

    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", type=int, nargs="+", choices=(38, 39, 41), help="only these issues' checks")
    parser.add_argument("--list", action="store_true", help="print the commands and stop")
    parser.add_argument("--out", type=Path, help="where figures, logs and summary.md go (default test-artifacts/cpu-check-<class>-<date>)")
    args = parser.parse_args(argv)
    here, kind = machine(), cpu_class()
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    browser = Path(CHROMIUM).exists() and importlib.util.find_spec("playwright") is not None
    chosen = [check for check in checks(root, browser) if not args.only or check.issue in args.only]
    slug = kind.lower().replace(" + ", "-").replace(" ", "-")
    out = (args.out or REPO / "test-artifacts" / f"cpu-check-{slug}-{datetime.date.today().isoformat()}").resolve()
    out = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    if args.list:
        for check in chosen:
            print(f"issue {check.issue}, about {check.minutes} min on an AVX-512 EPYC: {' '.join(check.command(out))}")
        return 0
    (REPO / out).mkdir(parents=True, exist_ok=True)
    print(f"{here} ({kind} class): {len(chosen)} checks, about {sum(c.minutes for c in chosen)} min on an AVX-512 EPYC; "
          f"figures and logs in {out}", flush=True)
    if not browser and any(check.issue == 41 for check in chosen):
        print(f"no Chromium at {CHROMIUM}, or no playwright: the served race is measured through /race only "
              "(apt-get install chromium; ./run.sh test installs playwright)", flush=True)
    if not root and any(check.issue == 39 for check in chosen):
        print("not root: the first starts run without the 4 GB memory cgroup; their memory is reported, not judged", flush=True)
    results, failed = [], []
    for check in chosen:
        print(f"[{datetime.datetime.now():%H:%M}] issue {check.issue}: {check.name}", flush=True)
        verdicts, seconds, ran = run_check(check, out)
        failed += [] if ran else [check.name]
        results.append((check, verdicts, seconds))
        for verdict in verdicts:
            print(f"    {'met' if verdict.met else 'MISSED' if verdict.met is False else 'not judged'}: {verdict.target}: {verdict.measured}",
                  flush=True)
    import openvino

    header = (f"`python -m bench.tools.cpu_check{' --only ' + ' '.join(map(str, args.only)) if args.only else ''}` at {_commit()}, "
              f"{datetime.datetime.now():%Y-%m-%d %H:%M}, OpenVINO {openvino.get_version()}; each tool's figures and log beside this file.")
    text = summary(here, kind, results, header)
    (REPO / out / "summary.md").write_text(text + "\n")
    print("\n" + text)
    return 1 if failed else 0


if __name__ == "__main__":
    run_tool(main)
