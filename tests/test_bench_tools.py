"""What every bench.tools tool shares: an output it cannot write refused before its work, and
Ctrl-C or a missing file as one line, not a traceback."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.tools import output_file, run_tool
from bench.tools.served_app import SetupError, check_pid, stop_app


def test_an_output_with_nowhere_to_go_is_refused_when_the_options_are_read(tmp_path):
    assert output_file(str(tmp_path / "figures.json")) == tmp_path / "figures.json"
    with pytest.raises(argparse.ArgumentTypeError, match="no folder"):
        output_file(str(tmp_path / "missing" / "figures.json"))
    if os.geteuid() != 0:  # root writes anywhere
        (tmp_path / "locked").mkdir(mode=0o555)
        with pytest.raises(argparse.ArgumentTypeError, match="cannot write"):
            output_file(str(tmp_path / "locked" / "figures.json"))


@pytest.mark.parametrize("raised, code, said", [
    (KeyboardInterrupt(), 130, "interrupted"),
    (FileNotFoundError(2, "No such file or directory", "/nonexistent-cmd"), 1, "error: No such file or directory: /nonexistent-cmd"),
])
def test_a_tool_stopped_by_ctrl_c_or_a_missing_file_says_one_line(raised, code, said, capsys):
    def main() -> int:
        raise raised

    with pytest.raises(SystemExit) as exited:
        run_tool(main)
    err = capsys.readouterr().err
    assert exited.value.code == code and err.strip() == said


def test_a_process_that_is_not_there_is_named():
    with pytest.raises(SetupError, match="no process"):
        check_pid(2**22 + 12345)  # above Linux's pid_max
    assert check_pid(os.getpid()) == os.getpid()


def test_stopping_the_app_ends_what_it_left_running():
    """The app's own children (a conversion's worker) share its session: they go with it."""
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    leader = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        started = psutil.Process(leader.pid)
        for _ in range(200):
            if started.children():
                break
            time.sleep(0.05)
        child = started.children()[0]
        stop_app(leader)
        child.wait(timeout=10)
    finally:
        with contextlib.suppress(OSError):
            os.killpg(leader.pid, signal.SIGKILL)


def test_every_bench_command_refuses_a_bad_option_in_one_line():
    """`python -m bench`, its tools and its studies parse with bench.tools.Parser: one line, no usage dump."""
    bench = Path(__file__).resolve().parents[1] / "bench"
    plain = [str(path.relative_to(bench.parent)) for path in sorted(bench.rglob("*.py"))
             if "argparse.ArgumentParser(" in path.read_text()]
    assert plain == [], f"use bench.tools.Parser in {plain}"
    done = subprocess.run([sys.executable, "-m", "bench", "--bogus"], cwd=bench.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip() == "error: unrecognized arguments: --bogus (see --help)"


def test_the_examples_race_only_once_the_pages_scheduler_has_timed_the_models():
    """Importing app starts the page's scheduler, which times what loading left for later while no
    race of its own runs; the examples' races run beside it, so they wait for it, not for ever."""
    from bench.tools.examples import timed_first

    class Registry:
        def __init__(self, answers):
            self.answers = answers

        def untimed(self):
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    said = []
    timing = Registry([["target"], ["target"], []])
    timed_first(timing, wait=30, say=lambda message, **_: said.append(message))
    assert timing.answers == [[]] and said == [said[0]] and "times the models' calls" in said[0]
    said.clear()
    timed_first(Registry([[]]), say=lambda message, **_: said.append(message))
    assert said == []
    stuck = Registry([["target"]])
    timed_first(stuck, wait=0.2, say=lambda message, **_: said.append(message))
    assert len(said) == 2 and "racing anyway" in said[1]
