"""Exporting a checkpoint in a child process with a memory limit, one conversion at a time: a
visitor's, and the operator's where the process keeps torch out (spec.models.torch_free).

The child (`python -m spec.models.export_process`) runs spec.models.export and writes what the
libraries print into the conversion's log. The parent watches the memory the child has allocated
and touched (its anonymous resident pages: not the files it maps, which the kernel can drop, nor
the address space the libraries reserve, many times what they use) and kills it past its limit.
A limit the kernel enforces (RLIMIT_DATA) fails allocations instead, and some native code spins
for ever on a failed one (OpenBLAS's start-up, under SciPy's import), holding the conversion slot.
Running out of memory, or crashing, ends the child, not the server: the visitor who asked reads
one sentence, and the server races on. Whoever waits for the conversion sees its progress; one
that nobody waits for any more is killed.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from spec.errors import Cancelled, ModelError
from spec.progress import ProgressFn, phase

REPO_ROOT = Path(__file__).resolve().parents[2]
POLL_SECONDS = 0.1  # how soon a child over its memory, one that ended, or one nobody waits for is noticed
WAITING = "Waiting for another model's conversion to finish (this server converts one at a time)"
_one_at_a_time = threading.Lock()  # a conversion takes every core and much memory: visitors' go one by one

StopFn = Callable[[], bool]
Exporter = Callable[[Path, Path, str, str, Path, float], None]  # (checkpoint, out, weight format, name, log, expected seconds)


def exporter(memory_limit: int, report: ProgressFn, stopped: StopFn | None = None) -> Exporter:
    """An exporter for spec.models.conversion_cache that runs each export in a child process
    allowed `memory_limit` bytes, after any other such export has finished."""

    def export(checkpoint: Path, out: Path, weight_format: str, name: str, log: Path, expected_seconds: float) -> None:
        _wait_for_turn(report, stopped)
        try:
            with phase(report, f"Exporting {name} to OpenVINO {weight_format.upper()}", expected_seconds):
                run_child(checkpoint, out, weight_format, name, log, memory_limit, stopped)
        finally:
            _one_at_a_time.release()

    return export


def _wait_for_turn(report: ProgressFn, stopped: StopFn | None) -> None:
    """Take the one conversion slot, saying so while another conversion holds it."""
    if _one_at_a_time.acquire(blocking=False):
        return
    report(WAITING, None)
    while not _one_at_a_time.acquire(timeout=POLL_SECONDS):
        if stopped is not None and stopped():
            raise Cancelled("nobody waits for this conversion any more")


def run_child(checkpoint: Path, out: Path, weight_format: str, name: str, log: Path, memory_limit: int,
              stopped: StopFn | None = None) -> None:
    """Export in a child process killed past `memory_limit` bytes; a failure there is a ModelError
    naming `name`, never a traceback here."""
    log.parent.mkdir(parents=True, exist_ok=True)
    result = out.with_name(out.name + ".result.json")
    result.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    with open(log, "ab") as sink:
        child = subprocess.Popen(_child_argv(checkpoint, out, weight_format, name, result), env=env,
                                 stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    over_memory = False
    try:
        while True:
            try:
                code = child.wait(timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                if stopped is not None and stopped():
                    raise Cancelled("nobody waits for this conversion any more") from None
                if _allocated(child.pid) > memory_limit:
                    over_memory = True
                    os.killpg(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # its own session: the child and anything it started
            child.wait()
    outcome = _read(result)
    result.unlink(missing_ok=True)
    if code == 0 and outcome.get("ok"):
        return
    gigabytes = f"{memory_limit / 10**9:.1f} GB"
    if over_memory or outcome.get("error") == "memory" or code == -signal.SIGKILL:  # SIGKILL: ours, or the kernel's OOM killer
        raise ModelError(f"Converting {name} needed more than the {gigabytes} of memory this server gives a conversion: "
                         "pick a smaller model.")
    if outcome.get("error") == "model":
        raise ModelError(str(outcome.get("message")))
    if outcome.get("error") == "disk":  # spec.models.conversion_cache says so, as for an export here
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    raise ModelError(f"Converting {name} crashed ({how}) in its own process, and the server is fine: try another model.")


def _child_argv(checkpoint: Path, out: Path, weight_format: str, name: str, result: Path) -> list[str]:
    return [sys.executable, "-m", "spec.models.export_process", str(checkpoint), str(out), weight_format, name, str(result)]


def _allocated(pid: int) -> int:
    """Bytes process `pid` has allocated and touched: its anonymous resident memory (Linux's RssAnon)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):  # gone already, or no /proc: the resident set as psutil sees it
        pass
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


def _read(result: Path) -> dict:
    try:
        outcome = json.loads(result.read_text())
        return outcome if isinstance(outcome, dict) else {}
    except (OSError, ValueError):
        return {}


def _out_of_memory(error: BaseException | None) -> bool:
    """Whether `error`, or what caused it, is an allocation that failed (Python's, torch's or OpenVINO's)."""
    while error is not None:
        text = str(error).lower()
        if isinstance(error, MemoryError) or "bad_alloc" in text or "can't allocate memory" in text or "cannot allocate memory" in text:
            return True
        error = error.__cause__ or error.__context__
    return False


def main(argv: list[str]) -> int:
    """The child: export, and leave the outcome in the result file."""
    checkpoint, out, weight_format, name, result = argv
    try:
        from spec.models.export import export_ir

        export_ir(Path(checkpoint), Path(out), weight_format, name)
        outcome, code = {"ok": True}, 0
    except BaseException as error:  # noqa: BLE001 -- every failure becomes the outcome the server reads
        if _out_of_memory(error):
            outcome, code = {"error": "memory"}, 3
        elif isinstance(error, OSError) and error.errno == errno.ENOSPC:
            outcome, code = {"error": "disk"}, 4
        elif isinstance(error, ModelError):
            outcome, code = {"error": "model", "message": str(error)}, 2
        else:
            outcome, code = {"error": "crash", "message": f"{type(error).__name__}: {str(error)[:300]}"}, 1
        import traceback

        traceback.print_exc()  # into the conversion's log, for the operator
    Path(result).write_text(json.dumps(outcome))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
