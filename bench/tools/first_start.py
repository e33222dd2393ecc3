"""A new user's first start: the app (or `python -m spec prepare --offline`) from an empty models
folder, the virtual environment and the part wheels already installed. Reported: seconds until the
default pair is ready and until the first race's verdict, and the memory the process tree held.

    python -m bench.tools.first_start                      # app.py with an empty SPEC_MODELS_DIR, then one race
    python -m bench.tools.first_start --prepare            # python -m spec prepare --offline instead
    python -m bench.tools.first_start --convert-only       # ... --convert-only: the image's models stage
    python -m bench.tools.first_start --memory-limit 4     # inside a 4 GB memory cgroup (Linux, root)

Memory is the process tree's (its conversions' children included), sampled every 0.2 s from
/proc/PID/smaps_rollup: PSS, and the anonymous part of it, which is what the machine must find; the
rest is files mapped from disk (libraries, the models' weights), which the kernel drops and reads
again under pressure. `--memory-limit GB` shows what that means for a machine with only that much:
the command runs in a memory cgroup of GB * 10**9 bytes (page cache included, as the kernel
charges it) after the page cache is emptied, and the report says whether it finished and how often
the kernel had to reclaim. The folder is deleted afterwards (about 4.5 GB). Prints one JSON line
naming this CPU; figures: docs/benchmarks.md, "From an empty models folder".
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.tools import Parser, run_tool
from bench.tools.served_app import REPO, SetupError, free_port, machine, numbers_of, page, stop_app, wait_for_line

_CGROUP_V1, _CGROUP_V2 = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
FAILED = r"Could not load"  # the app's log line when a pair could not be prepared


class TreeMemory:
    """The peak PSS and anonymous memory (bytes) of a process session, sampled on a thread."""

    def __init__(self, session: int, every: float = 0.2):
        self.session, self.every = session, every
        self.peak_pss = self.peak_anonymous = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            pss = anonymous = 0
            for pid in _session_pids(self.session):
                try:
                    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                        name, _, value = line.partition(":")
                        if name == "Pss":
                            pss += int(value.split()[0]) * 1024
                        elif name == "Anonymous":
                            anonymous += int(value.split()[0]) * 1024
                except (OSError, ValueError, IndexError):  # gone meanwhile
                    continue
            self.peak_pss, self.peak_anonymous = max(self.peak_pss, pss), max(self.peak_anonymous, anonymous)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _session_pids(session: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == session:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


class MemoryCgroup:
    """A memory cgroup limited to `limit` bytes (cgroup v1 or v2), for a child to join as it starts."""

    def __init__(self, limit: int):
        name = f"spec-first-start-{os.getpid()}"
        controllers = _CGROUP_V2 / "cgroup.controllers"
        if (_CGROUP_V1 / "memory.limit_in_bytes").exists():
            self.path, self.v1 = _CGROUP_V1 / name, True
        elif controllers.exists() and "memory" in controllers.read_text().split():
            self.path, self.v1 = _CGROUP_V2 / name, False
        else:
            raise SetupError("--memory-limit needs a memory cgroup (cgroup v1's memory controller or v2's), and there is none here")
        try:
            self.path.mkdir()
            (self.path / ("memory.limit_in_bytes" if self.v1 else "memory.max")).write_text(str(limit))
            if not self.v1 and (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")
        except OSError as error:
            raise SetupError(f"could not make a memory cgroup at {self.path} ({error.strerror}): run as root") from None
        self.limit = limit

    def join(self) -> None:
        """Put the calling process in it (run in the child, before it executes the command)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def report(self) -> dict:
        def read(name: str) -> str:
            return (self.path / name).read_text()

        if self.v1:
            oom = dict(line.split() for line in read("memory.oom_control").splitlines())
            return {"limit_bytes": self.limit, "peak_bytes": int(read("memory.max_usage_in_bytes")),
                    "limit_reached": int(read("memory.failcnt")), "oom_kills": int(oom.get("oom_kill", 0))}
        events = dict(line.split() for line in read("memory.events").splitlines())
        peak = int(read("memory.peak")) if (self.path / "memory.peak").exists() else None
        return {"limit_bytes": self.limit, "peak_bytes": peak, "limit_reached": int(events.get("max", 0)),
                "oom_kills": int(events.get("oom_kill", 0))}

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def _empty_page_cache() -> None:
    """So that no file the command reads is already in memory, charged to someone else."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3")
    except OSError as error:
        raise SetupError(f"could not empty the page cache ({error.strerror}): run as root") from None


def run(prepare: bool, limit_gb: float | None, timeout: float, convert_only: bool = False) -> dict:
    """One first start; returns its figures."""
    cgroup = MemoryCgroup(int(limit_gb * 10**9)) if limit_gb else None
    port = free_port()
    prepare = prepare or convert_only
    argv = ([sys.executable, "-m", "spec", "prepare", "--offline"] + ["--convert-only"] * convert_only if prepare
            else [sys.executable, "app.py", "--port", str(port)])
    log = REPO / "test-artifacts" / "first-start.log"
    log.parent.mkdir(exist_ok=True)
    click = page() if not prepare else None
    figures: dict = {"cpu": machine(), "what": " ".join(argv[3:]) if prepare else "app.py", "memory_limit_gb": limit_gb}
    process, folder = None, Path(tempfile.mkdtemp(prefix="spec-first-start-"))
    try:  # from here on, the folder is removed whatever happens
        env = {**os.environ, "SPEC_MODELS_DIR": str(folder), "SPEC_APP_PREHEAT": "0"}
        if cgroup:
            _empty_page_cache()
        started = time.monotonic()
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=cgroup.join if cgroup else None)
        with TreeMemory(process.pid) as memory:
            if prepare:
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    raise SetupError(f"prepare did not finish within {timeout:g} s; see {log}") from None
                if process.returncode != 0:
                    raise SetupError(f"prepare exited with {process.returncode}; see {log}")
                figures["seconds"] = round(time.monotonic() - started, 1)
            else:
                wait_for_line(log, "Ready: " + re.escape(click.preset), process, timeout, fail=FAILED, every=0.2)
                figures["ready_seconds"] = round(time.monotonic() - started, 1)
                figures.update(_race(port, click, timeout))
                figures["verdict_seconds"] = round(time.monotonic() - started, 1)
        figures["peak_pss_gib"] = round(memory.peak_pss / 2**30, 2)
        figures["peak_anonymous_gib"] = round(memory.peak_anonymous / 2**30, 2)
        if cgroup:
            figures["cgroup"] = cgroup.report()
    finally:
        stop_app(process)
        if cgroup:
            cgroup.remove()
        shutil.rmtree(folder, ignore_errors=True)
    return figures


def _race(port: int, click, timeout: float) -> dict:
    """The page's first example raced live through /race_live, as a click sends it."""
    from gradio_client import Client

    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    result = client.submit(**click.inputs(click.examples[0][1]), api_name="/race_live").result(timeout=timeout)
    numbers = numbers_of(result) or {}
    verdict = numbers.get("verdict") or {}
    if numbers.get("error") or not verdict:
        raise SetupError(f"the first race gave no verdict: {numbers.get('error') or 'no numbers'}")
    return {"speedup": round(verdict["speedup"], 2), "identical": verdict.get("identical")}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="time `python -m spec prepare --offline` instead of the app")
    parser.add_argument("--convert-only", action="store_true",
                        help="time `python -m spec prepare --offline --convert-only`, the image's models stage")
    parser.add_argument("--memory-limit", type=float, metavar="GB", help="run inside a memory cgroup of this many GB (10**9 bytes)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait (default 900); the started "
                        "command's output goes to test-artifacts/first-start.log")
    args = parser.parse_args(argv)
    if (args.memory_limit is not None and args.memory_limit <= 0) or args.timeout <= 0:
        parser.error("--memory-limit and --timeout must be positive")
    try:
        figures = run(args.prepare, args.memory_limit, args.timeout, args.convert_only)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    run_tool(main)
