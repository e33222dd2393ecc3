# ruff: noqa: E501 -- a record of a measurement, kept as it ran
"""The four served runs' medians, and how the speculative lane raced in each channel: its plain steps,
the races it drafted throughout (at most one plain step), its drafted tokens and decode speed.
Run from the repository: python bench/results/served-ab-emulated-avx2-zen5-2026-11-29/analyse.py"""
import json
import statistics as st
from pathlib import Path

HERE = Path(__file__).parent
for tag in ("before-1", "after-1", "after-2", "before-2"):
    d = json.loads((HERE / f"{tag}.json").read_text())
    m = d["medians"]
    print(f"{tag}: race AR {m['race']['autoregressive']:.3f} SP {m['race']['speculative']:.3f} | "
          f"browser AR {m['browser']['autoregressive']:.3f} SP {m['browser']['speculative']:.3f}")
    for ch in ("alone", "race", "browser"):
        runs = [r for ex in d["calls"].values() for r in ex[ch]["speculative"]]
        plain, drafted = [r["plain_steps"] for r in runs], [r["draft_tokens"] for r in runs]
        sp = [v for ex in d["runs"].values() for v in ex[ch]["speculative"]]
        ar = [v for ex in d["runs"].values() for v in ex[ch]["autoregressive"]]
        print(f"  {ch}: plain steps median {st.median(plain)}, at most 1 in {sum(p <= 1 for p in plain)}/{len(plain)}, "
              f"drafted median {st.median(drafted)}, tokens/s median {st.median(sp):.1f} (autoregressive {st.median(ar):.1f})")
