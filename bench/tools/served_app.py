"""The Space as the load scripts drive it: started on a free port, read for its page settings,
asked for races as a click asks, and stopped.

Shared by bench.tools.soak, bench.tools.workshop and bench.tools.served.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from spec.config import ModelKey

REPO = Path(__file__).resolve().parents[2]
BUSY_WORDS = ("try again in a minute", "busy")


class SetupError(Exception):
    """The app did not answer, exited or never got ready, or an option is wrong: one sentence for the user."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(port: int, log: Path, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.Popen:
    """app.py on `port` with `env` added to this environment, its output in `log`; returns once it
    answers HTTP (models may still be loading: see wait_for_line)."""
    process = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port)], cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})}, start_new_session=True,  # Ctrl-C in our terminal reaches us, not it
    )
    try:
        wait_until(lambda: _answers(port, process, log), timeout, f"app.py did not answer on port {port} within {timeout:.0f} s; see {log}")
    except BaseException:
        stop_app(process)
        raise
    return process


def _answers(port: int, process: subprocess.Popen, log: Path) -> bool:
    if process.poll() is not None:
        raise SetupError(f"app.py exited with {process.returncode}; see {log}")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
        return True
    except OSError:
        return False


def stop_app(process: subprocess.Popen | None) -> None:
    """Terminate what start_app started (and wait for it); kill it if it does not go."""
    if process is None:
        return
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    with contextlib.suppress(OSError):  # what it started and left (a conversion's worker): its own session, so its group
        os.killpg(process.pid, signal.SIGKILL)


def wait_until(predicate, timeout: float, message: str, every: float = 0.5):
    """predicate()'s first truthy value, polled until `timeout` seconds; SetupError(message) after."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SetupError(message)
        time.sleep(every)


def wait_for_line(log: Path, pattern: str, process: subprocess.Popen, timeout: float, fail: str | None = None,
                  every: float = 0.5) -> str:
    """The first line of the app's log matching `pattern` (a regex), read every `every` seconds;
    SetupError if the app exits, a line matches `fail`, or `timeout` passes."""
    def found():
        if process.poll() is not None:
            raise SetupError(f"app.py exited with {process.returncode}; see {log}")
        for line in log.read_text(errors="replace").splitlines():
            if re.search(pattern, line):
                return line
            if fail and re.search(fail, line):
                raise SetupError(f"the app said: {line.strip()[:300]} (see {log})")
        return None
    return wait_until(found, timeout, f"no line matching {pattern!r} in {log} within {timeout:.0f} s", every)


# --- Driving the page in a browser -------------------------------------------------------------

def page_status(view, words: tuple[str, ...], seconds: float) -> str:
    """The page's status line (#status) once it shows one of `words`; SetupError after `seconds`."""
    def shown() -> str | None:
        status = view.locator("#status").inner_text()
        return status if any(word in status for word in words) else None
    return wait_until(shown, seconds, f"the page's status did not show any of {words} within {seconds:.0f} s", every=0.05)


def race_live(view, seconds: float) -> float:
    """Press Race on the page (a Playwright page) and see the race computed live: where Race finds
    a recording and replays it, stop the replay and press "Race it live". Returns the time.time()
    of the click that started the live race."""
    clicked = time.time()
    view.click("#run")
    if "recorded pace" in page_status(view, ("Racing live", "recorded pace", "Joined"), seconds):
        view.click("#stop")
        time.sleep(1.5)  # a stopped replay still says "replay": let the stop land
        clicked = time.time()
        view.click("#race-live")
        page_status(view, ("Racing live",), seconds)
    return clicked


def check_url(url: str) -> str:
    """`url` with a trailing slash, once a Gradio app answers there; SetupError otherwise."""
    url = url if url.endswith("/") else url + "/"
    try:
        with urllib.request.urlopen(url + "config", timeout=10) as answer:
            config = json.loads(answer.read())
    except (OSError, ValueError) as error:
        raise SetupError(f"no Gradio app answers at {url} ({getattr(error, 'reason', error)})") from None
    if not isinstance(config, dict) or "components" not in config:
        raise SetupError(f"{url} answers, but not as a Gradio app: give the page's address")
    return url


def check_pid(pid: int) -> int:
    """`pid`, if such a process runs; SetupError otherwise."""
    import psutil

    if not psutil.pid_exists(pid):
        raise SetupError(f"no process {pid} runs here: give the app's process id (pgrep -f app.py)")
    return pid


@dataclass
class Page:
    """What the app's page sends on a click on an example: app.DEFAULTS, the default pair and drafter."""

    examples: list[tuple[str, str]]  # (label, prompt)
    preset: str  # the default pair's label
    drafter: str  # its default drafter
    defaults: dict  # k, dynamic_k, temperature, top_p, seed, max_new_tokens
    target: ModelKey  # the models a click loads (spec.serving.presets.pair_keys), for the runs alone
    draft: ModelKey | None  # None when the default drafter needs no draft model

    def inputs(self, prompt: str, max_new_tokens: int | None = None) -> dict:
        """/race's inputs for `prompt` as a click sends them (the page's starting values)."""
        d = self.defaults
        return dict(prompt=prompt, preset_label=self.preset, custom_target="", custom_draft="", drafter=self.drafter,
                    k=d["k"], dynamic_k=d["dynamic_k"], temperature=d["temperature"], top_p=d["top_p"], seed=d["seed"],
                    max_new_tokens=max_new_tokens or d["max_new_tokens"], exact=False)


_PAGE = """
import dataclasses, json, app
p, click = app.DEFAULT_PRESET, app.example_requests()[0]
print(json.dumps(dict(examples=app.EXAMPLES, preset=p.label, drafter=p.drafters[0], defaults=app.DEFAULTS,
                      target=dataclasses.asdict(click.target), draft=click.draft and dataclasses.asdict(click.draft))))
"""


def page(env: dict[str, str] | None = None) -> Page:
    """The page's settings as app.py computes them under this environment plus `env` (read in a
    subprocess: importing app builds the page and its scheduler)."""
    values = dict(_page_values(tuple(sorted({**os.environ, "SPEC_APP_PRELOAD": "0", **(env or {})}.items()))))
    values["examples"] = [tuple(e) for e in values["examples"]]
    values["target"], values["draft"] = (values[lane] and ModelKey(**values[lane]) for lane in ("target", "draft"))
    return Page(**values)


@functools.lru_cache(maxsize=4)
def _page_values(env: tuple) -> tuple:
    done = subprocess.run([sys.executable, "-c", _PAGE], cwd=REPO, capture_output=True, text=True, timeout=300, env=dict(env))
    if done.returncode != 0:
        raise SetupError(f"could not read the page's settings from app.py: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]).items())


def examples_from(path: Path) -> list[tuple[str, str]]:
    """Examples of one's own, a JSON list of [label, prompt], instead of the page's (tiny models need short prompts)."""
    try:
        examples = [(str(label), str(prompt)) for label, prompt in json.loads(Path(path).read_text())]
    except (OSError, ValueError, TypeError) as error:
        raise SetupError(f"{path} is not a JSON list of [label, prompt] pairs ({error})") from None
    if not examples:
        raise SetupError(f"{path} lists no examples")
    return examples


def app_env(pairs: list[str]) -> dict[str, str]:
    """NAME=VALUE strings (--app-env) as a dict; SetupError names a malformed one."""
    env = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SetupError(f"--app-env takes NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


# --- Where the cores went ------------------------------------------------------------------

CPU_FLAGS = ("amx_tile", "avx512_vnni", "avx512_bf16", "avx2")  # what decides what a call costs here


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """This CPU as the system names it, with its core count and the flags that change what a call
    costs ("AMD EPYC (family 26 model 2), 2 cores, avx512_vnni avx512_bf16 avx2, no amx_tile"): every figure is
    named with it."""
    from spec.models.runtime import cpu_flags, cpu_model, emulated_class

    name, flags = cpu_model(cpuinfo), cpu_flags(cpuinfo)
    found = [flag for flag in CPU_FLAGS if flag in flags]
    emulated = emulated_class()
    if emulated:  # bench.tools.cpu_class: the app it starts inherits the mask
        name = f"{name} emulating {emulated} (OpenVINO sees no {'AVX-512, ' if emulated == 'AVX2' else ''}AMX)"
    return f"{name}, {os.cpu_count()} cores, {' '.join(found) or 'none of ' + ' '.join(CPU_FLAGS)}" + \
        ("" if "amx_tile" in found else ", no amx_tile")


def thread_cpu(pid: int) -> dict[int, tuple[int, float]]:
    """Each thread of process `pid`: (its nice value, CPU seconds so far), from /proc (empty elsewhere)."""
    tick, threads = os.sysconf("SC_CLK_TCK"), {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
        threads[int(tid)] = (int(fields[16]), (int(fields[11]) + int(fields[12])) / tick)
    return threads


def chromium_cpu() -> float:
    """CPU seconds so far of the Chromium processes this process started (through Playwright)."""
    import psutil

    seconds = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            if "chrom" in child.name() or "headless" in child.name():
                times = child.cpu_times()
                seconds += times.user + times.system
        except psutil.Error:  # gone meanwhile
            pass
    return seconds


class CpuSpent:
    """CPU seconds spent during a `with` block: by the app's computing threads (those at its
    highest priority: the race and OpenVINO's), by its serving threads (the web server's and each
    viewer's, which app.py runs at a lower priority), and by Chromium. Without the app's pid, only
    Chromium's."""

    def __init__(self, app_pid: int | None, browser: bool = False):
        self.app_pid, self.browser = app_pid, browser
        self.computing = self.serving = self.chromium = None

    def __enter__(self) -> "CpuSpent":
        self._threads = thread_cpu(self.app_pid) if self.app_pid else {}
        self._chromium = chromium_cpu() if self.browser else 0.0
        return self

    def __exit__(self, *_) -> None:
        if self.app_pid:
            after = thread_cpu(self.app_pid)
            if after:
                top = min(nice for nice, _ in after.values())
                spent = {tid: (nice, seconds - self._threads.get(tid, (nice, 0.0))[1]) for tid, (nice, seconds) in after.items()}
                self.computing = sum(s for nice, s in spent.values() if nice == top)
                # Every thread at one priority (the system refused to lower any): no telling them apart.
                self.serving = sum(s for nice, s in spent.values() if nice != top) if len(spent) > 1 and any(
                    nice != top for nice, _ in spent.values()) else None
        if self.browser:
            self.chromium = chromium_cpu() - self._chromium


# --- Reading /race's updates -------------------------------------------------------------------
# Each update: (status, speed-up, feed, ar stats, spec stats, summary, numbers, race-it-live).

def is_busy(update) -> bool:
    status = str(update[0] or "")
    return any(word in status for word in BUSY_WORDS)


def has_text(update) -> bool:
    """The update's feed carries at least one piece of text: the answer is on screen."""
    try:
        feed = json.loads(update[2]) if isinstance(update[2], str) else update[2]
        return any(piece and piece[0] for lane in (feed or {}).get("lanes", {}).values() for piece in lane.get("pieces", ()))
    except (ValueError, TypeError, AttributeError):
        return False


def numbers_of(update) -> dict | None:
    value = update[6] if len(update) > 6 else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


class MemorySampler:
    """The resident memory of process `pid` (MiB), sampled every `every` seconds on a thread."""

    def __init__(self, pid: int | None, every: float = 1.0):
        import psutil

        self.process = psutil.Process(pid) if pid else None
        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> float | None:
        try:
            mib = self.process.memory_info().rss / 2**20 if self.process else None
        except Exception:  # the process is gone: nothing more to sample
            return None
        if mib is not None:
            self.samples.append(mib)
        return mib

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> "MemorySampler":
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of `values`, None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
