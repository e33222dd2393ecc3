# ruff: noqa: E401, E402, E501, E701, E702, I001, F401
"""Where headless Chromium's CPU goes during a served race: per process type, and the renderer's
main-thread work (CDP Performance metrics). Run from the repository root."""
import json, re, sys, time
from pathlib import Path
import psutil
sys.path.insert(0, ".")
sys.path.insert(0, "bench/results/served-zen5-repeats-6-2026-11-29")
from bench.tools.served_app import race_live
from served_page import served_page
from spec.serving.examples import EXAMPLES

def chromium_cpu() -> dict:
    out = {}
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            if "chrom" not in (p.info["name"] or ""):
                continue
            kind = next((a.split("=", 1)[1] for a in p.info["cmdline"] if a.startswith("--type=")), "browser")
            if kind == "utility":
                kind = next((a.split("=", 1)[1] for a in p.info["cmdline"] if a.startswith("--utility-sub-type=")), "utility")
            t = p.cpu_times()
            out[kind] = out.get(kind, 0.0) + t.user + t.system
        except psutil.Error:
            pass
    return out

METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "LayoutCount", "RecalcStyleCount")

def metrics(cdp) -> dict:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] in METRICS}

def diff(a, b):
    return {k: round(b.get(k, 0) - a.get(k, 0), 3) for k in sorted(set(a) | set(b))}

with served_page() as browser:
    cdp = browser.page.context.new_cdp_session(browser.page)
    cdp.send("Performance.enable")
    rows = []
    for label, prompt in EXAMPLES[:int(sys.argv[1]) if len(sys.argv) > 1 else 3]:
        c0, m0, t0 = chromium_cpu(), metrics(cdp), time.monotonic()
        time.sleep(8)
        idle = dict(seconds=round(time.monotonic() - t0, 1), cpu=diff(c0, chromium_cpu()), page=diff(m0, metrics(cdp)))
        browser.page.locator("#prompt textarea").fill(prompt)
        c0, m0, t0 = chromium_cpu(), metrics(cdp), time.monotonic()
        race_live(browser.page, 600)
        browser.page.wait_for_function("() => !document.querySelector('#status').innerText.includes('Racing')", polling=1000, timeout=600_000)
        raced = dict(seconds=round(time.monotonic() - t0, 1), cpu=diff(c0, chromium_cpu()), page=diff(m0, metrics(cdp)))
        rows.append(dict(example=label, idle=idle, race=raced))
        print(json.dumps(rows[-1]), flush=True)
