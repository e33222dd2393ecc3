"""Run a command with OpenVINO seeing a smaller CPU class than this one: an AVX-512 or AMX machine
stands in for an AVX2-only CPU (or an AMX one for an AVX-512 CPU).

    python -m bench.tools.cpu_class AVX2 -- python -m bench --quick   # the benchmark on AVX2 kernels
    python -m bench.tools.cpu_class AVX2 --check                      # what OpenVINO sees, and exit

oneDNN's ONEDNN_MAX_CPU_ISA caps oneDNN alone: OpenVINO's own kernels still pick their code from the
CPU, and on an AVX-512 EPYC the two disagree and the compressed matrix multiplications fail
(docs/cpu-classes.md). This tool changes what the CPU itself answers instead. In a copy of the
OpenVINO package (kept in ~/.cache/spec/cpu-class/, one per OpenVINO version) every `cpuid`
instruction of libopenvino and of the CPU plugin becomes an instruction that traps; a small library
preloaded into the command (cpuid_mask.c, compiled here with the system's C compiler) runs the real
CPUID there and clears the extensions the class lacks (AVX-512, VNNI, BF16, AMX). Every kernel
OpenVINO picks is then the one it picks on that class, run at full speed on this machine's cores.

What it cannot emulate: the smaller CPU's cores, caches and memory. A Zen 5 running AVX2 code is
not a Zen 3, so a step's seconds are this machine's; what a class changes is which kernels run,
hence the shape of the cost curve (a verify call's cost in steps), which the benchmark's ratios
follow. Every figure of an emulated run names itself so (SPEC_CPU_CLASS; spec.models.calibration
.cpu_name), and its calibration is kept apart from the real CPU's. Linux on x86-64 only.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import openvino as ov

from bench.tools import Parser, run_tool

CLASSES = ("AVX2", "AVX2_VNNI", "AVX512")
_PATCHED = ("libopenvino.so.*", "libopenvino_intel_cpu_plugin.so")  # the libraries that ask CPUID what to run
_TRAP = b"\x06\x90"  # PUSH ES (invalid in 64-bit code, SIGILL), then NOP: never emitted by a compiler
_CPUID = b"\x0f\xa2"
_SOURCE = Path(__file__).with_name("cpuid_mask.c")


def cache_root() -> Path:
    """Where the patched copy and the compiled library are kept."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spec" / "cpu-class" / ov.get_version().replace("/", "_")


def cpuid_offsets(library: Path) -> list[int]:
    """File offsets of every `cpuid` instruction in `library`, as objdump decodes its code (two bytes
    0f a2 found elsewhere, inside data or another instruction, are left alone)."""
    sections = subprocess.run(["objdump", "-h", "-w", str(library)], capture_output=True, text=True, check=True).stdout
    code = []  # (start address, end address, file offset) of each section holding code
    for line in sections.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[0].isdigit() and "CODE" in line:
            size, address, offset = int(fields[2], 16), int(fields[3], 16), int(fields[5], 16)
            code.append((address, address + size, offset))
    listing = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                             check=True).stdout
    offsets = []
    for match in re.finditer(r"^\s*([0-9a-f]+):\s+cpuid\s*$", listing, re.MULTILINE):
        address = int(match.group(1), 16)
        start, _, offset = next(section for section in code if section[0] <= address < section[1])
        offsets.append(address - start + offset)
    return offsets


def patched_package() -> Path:
    """A folder whose `openvino` package is this one with every CPUID of _PATCHED trapping (made once)."""
    root = cache_root()
    package = root / "site" / "openvino"
    done = root / "site" / ".patched"
    if done.exists():
        return package.parent
    shutil.rmtree(root / "site", ignore_errors=True)
    shutil.copytree(Path(ov.__file__).parent, package, symlinks=True)
    for pattern in _PATCHED:
        for library in (package / "libs").glob(pattern):
            if not library.is_symlink():
                print(f"{library.name}: {trap_cpuid(library)} cpuid instructions now trap", file=sys.stderr)
    done.write_text("")
    return package.parent


def trap_cpuid(binary: Path) -> int:
    """Rewrite every `cpuid` of `binary` (a library or a program) as _TRAP; how many there were."""
    data = bytearray(binary.read_bytes())
    offsets = cpuid_offsets(binary)
    for offset in offsets:
        if data[offset:offset + 2] != _CPUID:
            raise RuntimeError(f"{binary.name}: no cpuid at file offset {offset:#x}; objdump and the file disagree")
        data[offset:offset + 2] = _TRAP
    binary.write_bytes(bytes(data))
    return len(offsets)


def mask_library() -> Path:
    """cpuid_mask.c compiled into a preloadable library (again whenever the source changes)."""
    library = cache_root() / "cpuid_mask.so"
    if not library.exists() or library.stat().st_mtime < _SOURCE.stat().st_mtime:
        library.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", str(library), str(_SOURCE)], check=True)
    return library


def environment(cpu_class: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (os.environ) with what makes a child process's OpenVINO see `cpu_class`."""
    if cpu_class not in CLASSES:
        raise ValueError(f"unknown CPU class {cpu_class!r}: choose one of {', '.join(CLASSES)}")
    env = dict(os.environ if base is None else base)
    site, library = patched_package(), mask_library()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    env["LD_PRELOAD"] = " ".join(filter(None, [str(library), env.get("LD_PRELOAD", "")]))
    env["SPEC_CPU_CLASS"] = cpu_class
    env.pop("PYTHONFAULTHANDLER", None)  # faulthandler would take SIGILL from the mask's handler
    return env


_CHECK = """
import openvino as ov
core = ov.Core()
print("package:", ov.__file__)
print("capabilities:", " ".join(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")))
print("inference precision:", core.get_property("CPU", "INFERENCE_PRECISION_HINT"))
"""


def main() -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0], usage="%(prog)s CLASS [--check] [-- COMMAND ...]")
    parser.add_argument("cpu_class", choices=CLASSES)
    parser.add_argument("--check", action="store_true", help="print what OpenVINO sees under the class, and exit")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]  # after --: the command to run
    if args.check or not command:
        command = [sys.executable, "-c", _CHECK]
    try:
        env = environment(args.cpu_class)
    except (OSError, subprocess.CalledProcessError, RuntimeError) as error:
        print(f"cannot emulate {args.cpu_class} here: {error}", file=sys.stderr)
        return 2
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    run_tool(main)
