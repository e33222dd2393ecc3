"""The Space's Docker image, built and run as a Space runs it: its size, and the seconds to build it,
to serve the page, and to race the page's first example through /race (first answer, verdict),
then the same after `docker restart`.

    python -m bench.tools.image                         # build from a clone of HEAD, run, race, restart, race
    python -m bench.tools.image --no-build              # the image built before (spec-space:latest)
    python -m bench.tools.image --build-arg PREPARE_MODELS=0

Docker must work here: docker/base.sh starts dockerd and, where no image registry answers, makes
the stand-in for python:3.11-slim. The image is built with `docker build --network host` from a
clone of the committed HEAD, as a Space builds the pushed repository. Where PyTorch's CPU index
does not answer, a mirror of it holding this machine's CPU torch wheel is served on 127.0.0.1 for
the build (the TORCH_INDEX build argument). The container runs as a Space runs it:
`docker run -p 7881:7860 --cpus 2 --memory 16g --user 1000`. Reported: the image's size beside
its base's and the models stage's (what a single-stage build kept: the part wheels the models were
prepared from), and seconds: the build, from `docker run` (or restart) until the page answers, and
from the click until the first answer and the verdict. The build's output and the container's go to
test-artifacts/image-build.log and image-container.log. Minutes, so not in CI; figures: docs/image.md.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench.tools import Parser, run_tool
from bench.tools.served_app import REPO, SetupError, free_port, page, wait_until
from bench.tools.workshop import Visitor, watch

TAG = "spec-space"
CONTAINER = "spec-space-bench"
PORT = 7881  # the host's side of the Space's 7860
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
LOGS = REPO / "test-artifacts"


def answers(url: str, timeout: float = 5) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
        return True
    except urllib.error.HTTPError:
        return True  # it answers, if not to this
    except OSError:
        return False


def docker(*args: str, log: Path | None = None, check: bool = True, stderr: bool = False) -> str:
    """Run `docker args`; its output (with `stderr`, both streams), or (with `log`) its output appended to that file."""
    if log is None:
        done = subprocess.run(["docker", *args], capture_output=True, text=True)
        output = done.stdout + (done.stderr if stderr else "")
    else:
        with log.open("a") as sink:
            done = subprocess.run(["docker", *args], stdout=sink, stderr=subprocess.STDOUT, text=True)
        output = ""
    if check and done.returncode != 0:
        raise SetupError(f"docker {' '.join(args[:2])} failed (exit {done.returncode}): "
                         f"{(done.stderr or '').strip()[-300:] or f'see {log}'}")
    return output


@contextlib.contextmanager
def torch_index(wheel: Path | None):
    """The TORCH_INDEX build argument: PyTorch's CPU index where it answers, else a mirror of it on
    127.0.0.1 that holds `wheel` (default: the CPU torch wheel in /opt/wheels), served while the build runs."""
    if answers(CPU_INDEX + "/torch/"):
        yield CPU_INDEX
        return
    wheel = wheel or next(Path("/opt/wheels").glob("torch-*+cpu-*.whl"), None)
    if wheel is None or not wheel.is_file():
        raise SetupError(f"{CPU_INDEX} does not answer and no CPU torch wheel was given (--torch-wheel)")
    with tempfile.TemporaryDirectory() as mirror:
        (Path(mirror) / "torch").mkdir()
        (Path(mirror) / "torch" / wheel.name).symlink_to(wheel.resolve())
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", mirror, str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: answers(url + "/torch/"), 30, "the torch wheel's mirror did not start")
            print(f"{CPU_INDEX} does not answer: the build takes {wheel.name} from a mirror of it at {url}")
            yield url
        finally:
            server.terminate()
            server.wait(timeout=10)


def build(build_args: list[str], wheel: Path | None, log: Path) -> float:
    """Build TAG (and TAG:models, the stage the models are prepared in) from a clone of HEAD; seconds taken."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp, torch_index(wheel) as index:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", "--detach", commit], cwd=clone, check=True)
        arguments = ["--network", "host", "--build-arg", f"TORCH_INDEX={index}"]
        for argument in build_args:
            arguments += ["--build-arg", argument]
        print(f"building {TAG} from {commit[:7]} (log: {log})")
        began = time.monotonic()
        docker("build", *arguments, "-t", TAG, str(clone), log=log)
        seconds = time.monotonic() - began
        docker("build", *arguments, "--target", "models", "-t", f"{TAG}:models", str(clone), log=log)  # from the cache
    return seconds


def size(tag: str) -> float | None:
    """The image's size in GB, None where there is no such image."""
    out = docker("image", "inspect", "-f", "{{.Size}}", tag, check=False).strip()
    return round(int(out) / 1e9, 2) if out.isdigit() else None


def race(url: str, prompt: str, timeout: float) -> dict:
    """The page's first example as a click sends it, through /race: seconds from the click to the
    first answer on screen and to the verdict, and how it ran (live, joined or replay)."""
    from gradio_client import Client

    inputs = page().inputs(prompt)
    client = Client(url, verbose=False)
    visitor = Visitor(1, "example", "first example", prompt, 0.0)
    clicked = time.monotonic()
    watch(client.submit(**inputs, api_name="/race"), clicked, timeout, visitor)
    if visitor.verdict is None:
        raise SetupError(f"the race ended without a verdict: {visitor.outcome} {visitor.note}")
    return dict(first_answer=visitor.first_answer, verdict=visitor.verdict, how=visitor.outcome)


def serve_and_race(start: list[str], timeout: float) -> dict:
    """Start the container with `start` (docker run, or docker start after a stop), wait for the
    page, race the first example."""
    url = f"http://127.0.0.1:{PORT}/"
    load = os.getloadavg()[0]  # other work on this machine slows all of it: say how much there was
    began = time.monotonic()
    docker(*start)
    page_up = wait_until(lambda: answers(url, 2) and time.monotonic(), timeout, f"the page did not answer at {url}") - began
    result = dict(page_up=round(page_up, 1), **race(url, page().examples[0][1], timeout), load_before=round(load, 1))
    result["memory"] = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", CONTAINER).strip()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-build", action="store_true", help=f"use the {TAG} image built before")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE", help="passed to docker build")
    parser.add_argument("--torch-wheel", type=Path, help="the CPU torch wheel to serve where PyTorch's index does not answer")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the page, or for a verdict (default 900)")
    parser.add_argument("--keep", action="store_true", help=f"leave the container {CONTAINER} running at the end")
    args = parser.parse_args(argv)
    LOGS.mkdir(exist_ok=True)
    try:
        subprocess.run([str(REPO / "docker" / "base.sh")], check=True)
        from spec.models.runtime import cpu_model

        report = dict(date=datetime.date.today().isoformat(), cpu=cpu_model(), nproc=os.cpu_count())
        if not args.no_build:
            log = LOGS / "image-build.log"
            log.write_text("")
            report["build_seconds"] = round(build(args.build_arg, args.torch_wheel, log))
            report["build_load15"] = round(os.getloadavg()[2], 1)  # the machine's load over the build's last 15 minutes
        report["size_gb"] = dict(image=size(TAG), models_stage=size(f"{TAG}:models"), base=size("python:3.11-slim"))
        docker("rm", "-f", CONTAINER, check=False)
        run = ["run", "-d", "--name", CONTAINER, "-p", f"{PORT}:7860", "--cpus", "2", "--memory", "16g", "--user", "1000", TAG]
        print(f"running it as a Space does: docker {' '.join(run)}")
        report["first_start"] = serve_and_race(run, args.timeout)
        report["uid"] = docker("exec", CONTAINER, "id", "-u").strip()
        print(f"first start: {report['first_start']}; restarting it")
        docker("stop", CONTAINER)  # docker restart, with the start timed alone
        report["after_restart"] = serve_and_race(["start", CONTAINER], args.timeout)
    except (SetupError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        (LOGS / "image-container.log").write_text(docker("logs", CONTAINER, check=False, stderr=True))
        if not args.keep:
            docker("rm", "-f", CONTAINER, check=False)
    print(summary(report))
    print(json.dumps(report))
    return 0


def summary(report: dict) -> str:
    sizes = report["size_gb"]
    lines = [f"{report['date']}, {report['cpu']} ({report['nproc']} cores)",
             f"image {sizes['image']} GB (base {sizes['base']} GB; the models stage, with the part wheels, {sizes['models_stage']} GB)"
             + (f", built in {report['build_seconds']} s (load average {report['build_load15']})" if "build_seconds" in report else "")
             + f"; runs as UID {report['uid']}",
             "| start | load average before | page up (s) | first answer (s from click) | verdict (s from click) | how | memory |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in ("first_start", "after_restart"):
        r = report[name]
        lines.append(f"| {name.replace('_', ' ')} | {r['load_before']} | {r['page_up']} | {r['first_answer']} | {r['verdict']} | "
                     f"{r['how']} | {r['memory']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    run_tool(main)
