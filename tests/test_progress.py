"""Long work reports one line per phase with a rough time left; library noise goes to a log."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time

from spec.progress import Phase, TerminalProgress, duration, phase, phase_of


def test_time_left_comes_from_the_fraction_done_or_the_expected_duration():
    reports = []
    p = Phase(lambda m, f: reports.append(m), "Exporting x", expected_seconds=120)
    p.started -= 30  # 30 s in, nothing counted: the expected duration says 90 s are left
    p.update()
    assert reports[-1] == "Exporting x — about 90 s left"
    p.update(0.25, "tensor 5 of 20")  # a quarter done in 30 s: 90 s left, by extrapolation
    assert reports[-1] == "Exporting x — tensor 5 of 20, 25%, about 90 s left"
    p.started -= 210  # 240 s in: past the expected duration
    p.update(0.01)  # too little done to extrapolate from
    assert reports[-1] == "Exporting x — 1%, taking longer than the 2 min expected"
    p.update(0.5)  # half done in 240 s: as long again
    assert reports[-1] == "Exporting x — 50%, about 4 min left"
    assert [duration(s) for s in (2, 44, 96, 4000)] == ["5 s", "45 s", "95 s", "1 h 7 min"]


def test_a_phase_ticks_while_its_work_cannot_count_and_ends_with_its_duration():
    reports = []
    with phase(lambda m, f: reports.append((m, f)), "Compiling", expected_seconds=10, tick_seconds=0.05):
        time.sleep(0.3)
    assert len(reports) >= 4 and all(phase_of(m) == "Compiling" for m, _ in reports)
    assert reports[-1] == ("Compiling — done in 1 s", 1.0)  # to the second: a log reads as a timeline


def test_a_terminal_gets_one_line_per_phase():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    show = TerminalProgress(tty, "[spec] ")
    for message in ("A — 10%", "A — 50%", "A — done in 5 s", "B — about 5 s left", "B — done in 5 s"):
        show(message, None)
    show.close()
    lines = [line.split("\r\033[K")[-1] for line in tty.getvalue().split("\n") if line]
    assert lines == ["[spec] A — done in 5 s", "[spec] B — done in 5 s"]

    log = io.StringIO()  # not a terminal: a phase's first and last lines only
    show = TerminalProgress(log)
    for message in ("A — 10%", "A — 50%", "A — done in 5 s", "B — about 5 s left", "B — 90%", "B — done in 5 s"):
        show(message, None)
    assert log.getvalue().splitlines() == ["A — 10%", "A — done in 5 s", "B — about 5 s left", "B — done in 5 s"]


def test_two_phases_at_once_keep_to_their_first_and_last_lines():
    """A pair's models convert side by side: their ticks interleave, the terminal does not flicker between them."""
    messages = ("A — 10%", "B — about 5 s left", "A — 20%", "B — 50%", "A — 30%", "B — done in 5 s", "A — 40%", "A — done in 9 s")
    log = io.StringIO()
    show = TerminalProgress(log)
    for message in messages:
        show(message, None)
    assert log.getvalue().splitlines() == ["A — 10%", "B — about 5 s left", "B — done in 5 s", "A — done in 9 s"]

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    show = TerminalProgress(tty)
    for message in messages:
        show(message, None)
    show.close()
    lines = [line.split("\r\033[K")[-1] for line in tty.getvalue().split("\n") if line]
    assert lines == ["A — 10%", "B — done in 5 s", "A — done in 9 s"]
    assert "A — 20%" not in tty.getvalue() and "B — 50%" in tty.getvalue()  # the line on screen is B's: only it is rewritten


def test_what_libraries_print_goes_to_the_log_and_the_terminal_stream_stays(tmp_path):
    code = f"""
import os, sys, warnings
from pathlib import Path
from spec.models import library_output
term = library_output.terminal()
with library_output.captured(Path({str(tmp_path / "x.log")!r})):
    print("table from python")
    os.write(1, b"bytes from C++\\n")
    warnings.warn("a TracerWarning")
    term.write("progress line\\n")
print("after")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(__file__)), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "after\n" and done.stderr == "progress line\n"
    log = (tmp_path / "x.log").read_text()
    assert "table from python" in log and "bytes from C++" in log and "TracerWarning" in log
