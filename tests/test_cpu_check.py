"""bench.tools.cpu_check: each check's figures, as the project's tools write them, judged against the
open issues' targets; a tool that writes no figures is a check that could not run, and says so."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.tools import cpu_check
from bench.tools.cpu_check import Check, Verdict

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def _figures(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def test_the_tools_own_targets_are_taken_as_they_judged_them():
    served = cpu_check.judge_own_targets(_figures("served-avx512-own-stream.json"))
    assert len(served) == 4 and all(v.met for v in served) and any(">= 0.92" in v.target for v in served)
    before = cpu_check.judge_own_targets(_figures("served-avx512-one-output.json"))
    assert any(v.met is False for v in before), "the run before the page's stream missed checks, and must show it"
    workshop = cpu_check.judge_own_targets(_figures("workshop-avx512-own-stream.json"))
    assert workshop and all(v.met for v in workshop)
    assert cpu_check.judge_own_targets({}) == [Verdict("the tool's targets", "none reported", False)]


def test_a_median_whose_interval_holds_the_target_is_said_to_be_unsettled():
    verdicts = cpu_check.judge_served(_figures("served-zen5-repeats-6-2026-11-29/served.json"))
    unsettled = {v.target.split(" (")[-1] for v in verdicts if "not settled" in v.measured}
    assert all(v.met for v in verdicts) and len(verdicts) == 4
    assert unsettled == {"autoregressive, median over examples)"}, "the run settled the speculative lane only"
    assert "90% interval 0.959-1.011)" in next(v.measured for v in verdicts if "speculative" in v.target)


def test_a_served_run_without_a_browser_names_what_it_did_not_judge():
    figures = _figures("served-avx512-race-2x2.json")
    assert figures["settings"]["browser"] is False
    verdicts = cpu_check.judge_served(figures)
    assert verdicts[-1].met is None and "no Chromium" in verdicts[-1].measured
    assert all(v.met is not None for v in verdicts[:-1]) and len(verdicts) == 3
    assert len(cpu_check.judge_served(_figures("served-avx512-own-stream.json"))) == 4
    listed = [" ".join(check.command(Path("out"))) for check in cpu_check.checks(False, browser=False) if check.name == "served"]
    assert listed and "--browser" not in listed[0]


def test_a_benchmark_run_is_judged_by_the_goals_issue_38_asks_about():
    verdicts = cpu_check.judge_bench(_figures("avx512-open-128.json"))
    targets = [v.target for v in verdicts]
    assert any(t.startswith("the default pair (hybrid) ≥ 1.35×") for t in targets)
    assert any(" token, all in, ≤ 0.3 of a target step" in t for t in targets)
    assert any(t.startswith("hybrid ≥ 0.95 × the better of its drafters") for t in targets)
    assert not any(t.startswith("a decoding step") for t in targets), "the roofline is not issue 38's"
    assert all(v.met in (True, False) for v in verdicts)


def test_a_first_start_is_judged_on_its_two_minutes_and_its_memory():
    runs = _figures("first-start-4gb-avx512.json")["runs"]
    in_cgroup = next(r for r in runs if r["what"] == "app.py" and r.get("cgroup") and r["verdict_seconds"] <= 120)
    assert [v.met for v in cpu_check.judge_first_start(in_cgroup)] == [True, True]
    slow = next(r for r in runs if r["what"] == "app.py" and r.get("verdict_seconds", 0) > 120)
    assert cpu_check.judge_first_start(slow)[0].met is False
    prepare = next(r for r in runs if r["what"] == "prepare --offline" and not r.get("cgroup"))
    timed, memory = cpu_check.judge_first_start(prepare)
    assert timed.met is True and memory.met is None and "run as root" in memory.measured
    killed = {"what": "app.py", "memory_limit_gb": 4.0, "cgroup": {"oom_kills": 1}}
    assert [v.met for v in cpu_check.judge_first_start(killed)] == [False, False]


def test_the_page_examples_must_none_lose():
    figures = {"examples": {"a": {"speedup": 1.4}, "b": {"speedup": 0.97}}}
    (verdict,) = cpu_check.judge_examples(figures)
    assert verdict.met is False and "0.97× on “b”" in verdict.measured
    assert cpu_check.judge_examples({"examples": {"a": {"speedup": 1.0}}})[0].met is True
    assert cpu_check.judge_examples({})[0].met is False


def test_a_check_runs_its_tool_and_one_that_writes_nothing_could_not_run(tmp_path):
    writes = Check(41, "writes", lambda out: [sys.executable, "-c", "import json, sys; print('working'); "
                                               "print(json.dumps({'targets': [{'target': 't', 'measured': 1, 'met': True}]}))"],
                   cpu_check.judge_own_targets, 1, stdout_json=True)
    verdicts, _, ran = cpu_check.run_check(writes, tmp_path)
    assert ran and verdicts == [Verdict("t", "1", True)] and "working" in (tmp_path / "writes.log").read_text()
    fails = Check(41, "fails", lambda out: [sys.executable, "-c", "import sys; sys.exit('no app')"], cpu_check.judge_own_targets, 1)
    (verdict,), _, ran = cpu_check.run_check(fails, tmp_path)
    assert not ran and verdict.met is False and "exit 1" in verdict.measured and "no app" in (tmp_path / "fails.log").read_text()


def test_the_summary_names_the_cpu_and_every_target(tmp_path, capsys):
    check = Check(39, "first-start-app", lambda out: [], cpu_check.judge_first_start, 3)
    text = cpu_check.summary("Some CPU, 2 cores", "AVX2", [(check, [Verdict("t1", "1 s", True), Verdict("t2", "x", None)], 60.0)], "hdr")
    assert text.startswith("# Checks on Some CPU, 2 cores (AVX2 class)") and "## Issue 39" in text
    assert "| first-start-app (1 min) | t1 | 1 s | **met** |" in text and "| t2 | x | not judged |" in text
    assert cpu_check.main(["--list", "--only", "41", "--out", str(tmp_path)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and "bench.tools.served" in listed[0] and "bench.tools.workshop" in listed[1]
