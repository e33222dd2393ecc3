# ruff: noqa: E401, E402, E501, E701, E702, I001, F401
"""A devtools timeline trace of one served race in headless Chromium, summed by event name."""
import collections, json, sys, time
from pathlib import Path
sys.path.insert(0, ".")
sys.path.insert(0, "bench/results/served-zen5-repeats-6-2026-11-29")
from bench.tools.served_app import race_live
from served_page import served_page
from spec.serving.examples import EXAMPLES

with served_page() as browser:
    label, prompt = EXAMPLES[int(sys.argv[1]) if len(sys.argv) > 1 else 1]
    browser.page.locator("#prompt textarea").fill(prompt)
    browser._browser.start_tracing(page=browser.page, path="/tmp/served-zen5-profile/trace.json",
                                   categories=["devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "blink", "cc", "gpu", "toplevel"])
    race_live(browser.page, 600)
    browser.page.wait_for_function("() => !document.querySelector('#status').innerText.includes('Racing')", polling=1000, timeout=600_000)
    browser._browser.stop_tracing()
events = json.load(open("/tmp/served-zen5-profile/trace.json"))
events = events["traceEvents"] if isinstance(events, dict) else events
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
total = collections.Counter()
count = collections.Counter()
for e in events:
    if e.get("ph") == "X" and "dur" in e:
        key = (names.get((e["pid"], e["tid"]), str(e["tid"])), e["name"])
        total[key] += e["dur"] / 1e6
        count[key] += 1
for (thread, name), seconds in total.most_common(45):
    print(f"{seconds:7.3f} s {count[(thread, name)]:6d}  {thread:28s} {name}")
