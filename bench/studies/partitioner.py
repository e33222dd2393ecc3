"""`python -m bench.studies.partitioner`: OpenVINO's two TBB partitioners, quiet and beside bursts of other work.

    python -m bench.studies.partitioner --busy-ms 17 --period-ms 250 --rounds 6

A step of a 2-thread parallel op waits for the slower thread, so a browser (or any process) that
takes one core for a few milliseconds stalls the whole call. The CPU plugin splits its parallel
loops evenly between its threads by default (`TBB_PARTITIONER` STATIC); AUTO splits them finer
and lets an idle thread take over a busy one's share. This compiles the page's default target twice, once
with each, and times one-token steps and width-5 calls on each in turn, alone and while a child
process burns `--busy-ms` of CPU every `--period-ms` (17 ms every 250 ms is about what Chromium
spends drawing a race's updates). Reports the median and mean seconds of each.
"""
from __future__ import annotations

import multiprocessing
import statistics
import time

from bench.tools import Parser
from spec.models.runtime import compile_model

PARTITIONERS = ("STATIC", "AUTO")
WIDTHS = (1, 5)
CONTEXT = 120  # tokens in the cache each timed call extends (and is rolled back to)


def burn(busy_ms: float, period_ms: float, stop) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        while time.perf_counter() - began < busy_ms / 1000:
            pass
        time.sleep(max(0.0, period_ms - busy_ms) / 1000)


def timed_calls(cache, width: int, calls: int) -> list[float]:
    tokens = [(7 * i + 3) % 1000 + 1 for i in range(width)]
    cache.forward(tokens)  # the call after another width re-prepares the model: not timed
    cache.trim(CONTEXT)
    seconds = []
    for _ in range(calls):
        began = time.perf_counter()
        cache.forward(tokens)
        seconds.append(time.perf_counter() - began)
        cache.trim(CONTEXT)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.studies.partitioner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy-ms", type=float, default=17.0)
    parser.add_argument("--period-ms", type=float, default=250.0)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of 15 calls per width, partitioner and load")
    args = parser.parse_args(argv)

    from spec.models.resolve import resolve_model
    from spec.serving.presets import pair_keys

    key = pair_keys(None, None)[0]  # the page's default target, as the page prepares it
    xml = resolve_model(key.ref, key.weight_format).path / "openvino_model.xml"
    caches = {}
    for name in PARTITIONERS:
        cache = compile_model(xml, settings={"TBB_PARTITIONER": name}).new_cache()
        cache.forward(list(range(1, CONTEXT + 1)), keep=1)
        caches[name] = cache
    seconds = {(name, load, width): [] for name in PARTITIONERS for load in ("quiet", "bursts") for width in WIDTHS}
    for turn in range(args.rounds):
        for load in ("quiet", "bursts"):
            stop = multiprocessing.Event()
            burner = None
            if load == "bursts":
                burner = multiprocessing.Process(target=burn, args=(args.busy_ms, args.period_ms, stop))
                burner.start()
                time.sleep(0.2)
            for name in PARTITIONERS if turn % 2 == 0 else PARTITIONERS[::-1]:
                for width in WIDTHS:
                    seconds[(name, load, width)] += timed_calls(caches[name], width, 15)
            if burner is not None:
                stop.set()
                burner.join()
    for (name, load, width), values in seconds.items():
        print(f"{name:6} {load:6} width {width}: median {statistics.median(values) * 1000:.1f} ms, "
              f"mean {statistics.mean(values) * 1000:.1f} ms ({len(values)} calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
