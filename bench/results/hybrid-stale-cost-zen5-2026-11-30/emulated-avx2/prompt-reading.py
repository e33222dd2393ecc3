"""The 0.5B draft reading prompts of several lengths, whole and in power-of-two chunks, one call per
prompt on a fresh cache (PYTHONPATH=. python -m bench.tools.cpu_class AVX2 -- python prompt-reading.py;
without the first part, the CPU's own kernels; with the argument `target`, the 1.5B). Prints
(tokens, milliseconds) per prompt. Its output on the Zen 5, 2026-11-30, is in docs/benchmarks.md."""
import sys
import time

from spec import load_model
from spec.models.embedded import DEFAULT_REF, DRAFT_REF

model = load_model(DEFAULT_REF if "target" in sys.argv else DRAFT_REF).model


def read(lengths, chunks=None):
    out = []
    for length in lengths:
        cache = model.new_cache()
        started = time.perf_counter()
        done = 0
        for size in chunks(length) if chunks else [length]:
            cache.forward(list(range(done + 1, done + size + 1)), keep=1)
            done += size
        out.append((length, round((time.perf_counter() - started) * 1000, 1)))
        cache.release()
    return out


def powers_of_two(length):
    sizes = []
    for size in (64, 32, 16, 8, 4, 2, 1):
        while length >= size:
            sizes.append(size)
            length -= size
    return sizes


print("whole:", read([48, 48, 49, 87, 87, 140, 140, 141, 48]))
print("pow2 chunks:", read([48, 48, 49, 87, 87, 140, 140, 141, 47], powers_of_two))
print("whole again:", read([50, 50, 91, 91, 143, 143]))
