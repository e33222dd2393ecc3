"""bench.tools.cpu_class: OpenVINO sees a smaller CPU class, and every figure says it was emulated.

Needs a C compiler and objdump (binutils) on Linux x86-64; skipped elsewhere, saying why."""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys

import pytest

from bench.tools import cpu_class

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64" or not (shutil.which("cc") and shutil.which("objdump")),
    reason="emulating a CPU class needs Linux on x86-64, a C compiler (cc) and objdump")

_PROBE = r"""
#include <cpuid.h>
#include <stdio.h>
int main(void) {
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    printf("%u %u %u ", b, c, d);
    __cpuid_count(7, 1, a, b, c, d);
    printf("%u\n", a);
    return 0;
}
"""
_AVX512_VNNI, _AMX_TILE, _AVX_VNNI = 1 << 11, 1 << 24, 1 << 4
_AVX512_EBX = sum(1 << bit for bit in (16, 17, 21, 26, 27, 28, 30, 31))  # AVX512F, DQ, IFMA, PF, ER, CD, BW, VL


def _probe(tmp_path):
    source, program = tmp_path / "probe.c", tmp_path / "probe"
    source.write_text(_PROBE)
    subprocess.run(["cc", "-O0", "-o", str(program), str(source)], check=True)
    native = [int(x) for x in subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout.split()]
    return program, native


def _run_as(program, name: str) -> list[int]:
    env = {"LD_PRELOAD": str(cpu_class.mask_library()), "SPEC_CPU_CLASS": name}
    return [int(x) for x in subprocess.run([str(program)], capture_output=True, text=True, env=env, check=True).stdout.split()]


def test_a_patched_cpuid_answers_without_the_hidden_extensions(tmp_path):
    program, (ebx, ecx, edx, eax1) = _probe(tmp_path)
    assert cpu_class.trap_cpuid(program) >= 1
    alone = subprocess.run([str(program)], capture_output=True)
    assert alone.returncode != 0  # the trap traps: without the mask the program dies of SIGILL
    b, c, d, a1 = _run_as(program, "AVX2")
    assert b == ebx & ~_AVX512_EBX  # AVX-512 hidden, AVX2 (bit 5) and the rest as the CPU says
    assert c & _AVX512_VNNI == 0 and d & _AMX_TILE == 0 and a1 & _AVX_VNNI == 0
    b, c, d, a1 = _run_as(program, "AVX2_VNNI")
    assert b == ebx & ~_AVX512_EBX and a1 & _AVX_VNNI == eax1 & _AVX_VNNI  # AVX-VNNI as the CPU has it
    b, c, d, a1 = _run_as(program, "AVX512")
    assert (b, c) == (ebx, ecx) and d == edx & ~_AMX_TILE  # only AMX hidden


def test_only_a_run_with_the_mask_preloaded_is_named_emulated(monkeypatch, tmp_path):
    from spec.models import calibration, draft_format
    from spec.models.registry import compiled_blobs_dir
    from spec.serving import recording

    own, blobs = calibration.cpu_name(), compiled_blobs_dir()
    monkeypatch.setenv("SPEC_CPU_CLASS", "AVX2")
    assert calibration.cpu_name() == own and compiled_blobs_dir() == blobs  # the variable alone changes nothing
    monkeypatch.setenv("LD_PRELOAD", "/somewhere/cpuid_mask.so")
    assert "AVX2 (emulated by bench.tools.cpu_class" in calibration.cpu_name()
    # What it measures and compiles is kept apart from the CPU's own, and a replay it records says so.
    assert compiled_blobs_dir() == blobs / "emulated-avx2"
    assert draft_format._models_file() == "draft-format-emulated-avx2.json"
    recording.cpu_name.cache_clear()
    try:
        assert recording.cpu_name().endswith("emulating AVX2")
    finally:
        recording.cpu_name.cache_clear()


def test_openvino_sees_an_avx2_cpu():
    seen = subprocess.run([sys.executable, "-m", "bench.tools.cpu_class", "AVX2", "--check"], capture_output=True, text=True,
                          timeout=600)
    assert seen.returncode == 0, seen.stderr[-2000:]
    capabilities = next(line for line in seen.stdout.splitlines() if line.startswith("capabilities:"))
    assert "FP32" in capabilities and "BF16" not in capabilities and "float32" in seen.stdout
    assert "cpu-class" in next(line for line in seen.stdout.splitlines() if line.startswith("package:"))
