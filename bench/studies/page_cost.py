"""`python -m bench.studies.page_cost`: what a browser spends to show a race, and on what.

    python -m bench.studies.page_cost                        # starts app.py; 3 replays of the first example
    python -m bench.studies.page_cost --races 5 --trace /tmp/race-trace.json --live
    python -m bench.studies.page_cost --url http://127.0.0.1:7860/ --example 2

Opens the page in Debian's headless Chromium (as bench.tools.served does) and races one of the
page's examples: a replay of a recorded race by default (the page gets the very updates a live
race sends, at the race's recorded pace, while no computation runs beside it), or live (--live:
"Race it live"). Reports:
  - Chromium's CPU seconds per race, by process (browser, renderer, GPU, utility), and over the
    same wall time with the page idle;
  - one more race, instrumented: a Chrome DevTools performance trace (main thread's time by task:
    scripting, style, layout, paint, compositing, ...), the JavaScript CPU profiler (self time by
    function and script), the page's DOM mutations (per element id), and the stream of updates the
    server sent (its messages a second and their bytes, read from the queue's own event stream).
The instrumented race is not counted in the CPU figures: the instruments cost CPU themselves.
"""
from __future__ import annotations

import collections
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from bench.tools import Parser
from bench.tools.served_app import SetupError, free_port, machine, page, race_live, start_app, stop_app, wait_for_line

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "toplevel", "blink",
                    "cc", "gpu", "viz", "disabled-by-default-devtools.timeline.frame", "loading", "netlog"]
# Counts the page's DOM mutations by the nearest element with an id (the Gradio component).
MUTATIONS = """
(() => {
  const counts = window.__mutations = { records: 0, added: 0, removed: 0, attributes: 0, text: 0, by: {} };
  const start = () => new MutationObserver((records) => {
    for (const r of records) {
      counts.records++;
      let el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      const what = el ? el.tagName.toLowerCase() + (el.classList.length ? "." + [...el.classList].join(".") : "") : "?";
      while (el && !el.id) el = el.parentElement;
      const key = (el ? el.id : "?") + " " + what + ":" + r.type + (r.attributeName ? "(" + r.attributeName + ")" : "");
      counts.by[key] = (counts.by[key] || 0) + 1;
      if (r.type === "childList") { counts.added += r.addedNodes.length; counts.removed += r.removedNodes.length; }
      else if (r.type === "attributes") counts.attributes++;
      else counts.text++;
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
"""


def chromium_processes() -> dict[str, float]:
    """CPU seconds so far of the Chromium processes this process started, by kind."""
    import psutil

    seconds = collections.Counter()
    for child in psutil.Process().children(recursive=True):
        try:
            if "chrom" not in child.name() and "headless" not in child.name():
                continue
            kind = next((arg.split("=", 1)[1] for arg in child.cmdline() if arg.startswith("--type=")), "browser")
            if kind == "utility":
                kind = next((arg.split("=", 1)[1].split(".")[-1] for arg in child.cmdline()
                             if arg.startswith("--utility-sub-type=")), kind)
            times = child.cpu_times()
            seconds[kind] += times.user + times.system
        except psutil.Error:
            pass
    return dict(seconds)


def _minus(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {kind: round(after[kind] - before.get(kind, 0.0), 3) for kind in after}


def race_once(view, prompt: str, live: bool, timeout: float) -> float:
    """Race `prompt` on the page (a replay, or live); returns the race's wall seconds, click to end."""
    view.locator("#prompt textarea").fill(prompt)
    began = time.monotonic()
    if live:
        race_live(view, timeout)
    else:
        view.click("#run")
    # A race runs from its first tokens (a pane gets its caret) until both panes are done; the
    # status line alone cannot say it (a replay's stays on "recorded pace").
    view.wait_for_selector(".pane.running", timeout=timeout * 1000)
    view.wait_for_function("() => !document.querySelector('.pane.running')", polling=1000, timeout=timeout * 1000)
    time.sleep(1.0)  # the last update's numbers and chart
    return time.monotonic() - began


# --- The stream of updates, as the server sends it ---------------------------------------------


def record_stream(url: str, inputs: dict, out: list) -> None:
    """Join the event the page's Race button runs (with /race's inputs) as the page does, and keep
    every message of the queue's event stream: (seconds since the first, bytes, the message's JSON)."""
    import httpx
    from gradio_client import Client

    client = Client(url, verbose=False)
    endpoint = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/race"]
    data = [inputs[p["parameter_name"]] for p in endpoint["parameters"]]
    session = f"pagecost{int(time.time())}"
    run = next(c["id"] for c in client.config["components"] if c.get("props", {}).get("elem_id") == "run")
    fn_index = next(i for i, d in enumerate(client.config["dependencies"]) if [run, "click"] in d.get("targets", []))
    with httpx.Client(base_url=url, timeout=600) as http:
        http.post("gradio_api/queue/join", json=dict(data=data, fn_index=fn_index, session_hash=session, event_data=None,
                                                     trigger_id=None)).raise_for_status()
        t0 = None
        with http.stream("GET", "gradio_api/queue/data", params=dict(session_hash=session)) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                now = time.monotonic()
                t0 = t0 or now
                message = json.loads(line[5:])
                out.append((now - t0, len(line.encode()) + 2, message))
                if message.get("msg") in ("process_completed", "close_stream", "unexpected_error"):
                    break


def stream_summary(messages: list) -> dict:
    generating = [(t, size, m) for t, size, m in messages if m.get("msg") == "process_generating"]
    if not generating:
        return {"messages": len(messages)}
    span = generating[-1][0] - generating[0][0]
    sizes = [size for _, size, _ in generating]
    outputs = collections.Counter()
    for _, _, m in generating:
        data = (m.get("output") or {}).get("data") or []
        for i, value in enumerate(data):
            if value not in (None, [], {}) and not (isinstance(value, dict) and value.get("__type__") == "update" and len(value) == 1):
                outputs[i] += 1
    return {"messages": len(generating), "seconds": round(span, 2), "per_second": round(len(generating) / span, 2) if span else None,
            "bytes_median": statistics.median(sizes), "bytes_max": max(sizes), "bytes_total": sum(sizes),
            "outputs_changed": dict(sorted(outputs.items())), "example": generating[len(generating) // 2][2]}


# --- The trace: where the renderer's time goes -------------------------------------------------

# Trace event names grouped as DevTools' summary groups them.
GROUPS = {
    "scripting": ("FunctionCall", "EvaluateScript", "v8.compile", "v8.run", "V8.Execute", "EventDispatch", "TimerFire",
                  "FireAnimationFrame", "RunMicrotasks", "v8.callFunction", "MajorGC", "MinorGC", "V8.GC_SCAVENGER",
                  "BlinkGC.AtomicPhase", "v8.evaluateModule", "CompileScript", "V8.ScavengeTask", "XHRReadyStateChange",
                  "v8.produceModuleCache", "ParseHTML", "V8.GCScavenger"),
    "style": ("UpdateLayoutTree", "RecalculateStyles", "ScheduleStyleRecalculation", "ParseAuthorStyleSheet"),
    "layout": ("Layout", "UpdateLayerTree", "IntersectionObserverController::computeIntersections"),
    "paint": ("Paint", "PaintImage", "PrePaint", "RasterTask", "Decode Image", "PaintSetup"),
    "compositing": ("Layerize", "CompositeLayers", "Commit", "UpdateLayer", "ActivateLayerTree", "DrawFrame",
                    "BeginMainThreadFrame", "ProxyMain::BeginMainFrame::commit"),
}


def trace_summary(events: list[dict]) -> dict:
    """Self CPU time (thread time where the trace has it) per event name and per thread."""
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("thread_name", "process_name"):
            names[(e["name"], e["pid"], e.get("tid") if e["name"] == "thread_name" else None)] = e["args"]["name"]
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            by_thread[(e["pid"], e["tid"])].append(e)
    threads, self_times = {}, collections.defaultdict(collections.Counter)
    for (pid, tid), evs in by_thread.items():
        label = f"{names.get(('process_name', pid, None), pid)}/{names.get(('thread_name', pid, tid), tid)}"
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack, top_cpu = [], 0.0
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            cost = e.get("tdur", e["dur"]) / 1e6
            if not stack:
                top_cpu += cost
            else:
                self_times[label][stack[-1]["name"]] -= cost
            self_times[label][e["name"]] += cost
            stack.append(e)
        threads[label] = top_cpu
    main = max((label for label in threads if "CrRendererMain" in label), key=lambda label: threads[label], default=None)
    groups = collections.Counter()
    if main:
        for name, seconds in self_times[main].items():
            group = next((g for g, members in GROUPS.items() if name in members), "other")
            groups[group] += seconds
    return {
        "threads_cpu_seconds": {label: round(s, 3) for label, s in sorted(threads.items(), key=lambda kv: -kv[1]) if s >= 0.005},
        "main_thread": main,
        "main_groups": {g: round(s, 3) for g, s in groups.most_common()},
        "main_self_by_event": {n: round(s, 3) for n, s in self_times[main].most_common(25)} if main else {},
        "other_threads_self_by_event": {label: {n: round(s, 3) for n, s in counter.most_common(8)}
                                        for label, counter in self_times.items() if label != main and threads.get(label, 0) >= 0.02},
    }


def profile_summary(profile: dict) -> dict:
    """The JavaScript CPU profile's self time, by function and by script."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    deltas = profile.get("timeDeltas") or []
    self_us = collections.Counter()
    for sample, delta in zip(profile.get("samples", [])[1:], deltas[1:]):
        self_us[sample] += delta
    by_function, by_script = collections.Counter(), collections.Counter()
    for node_id, us in self_us.items():
        frame = nodes[node_id]["callFrame"]
        script = frame.get("url", "").rsplit("/", 1)[-1] or "(native)"
        by_function[f"{frame.get('functionName') or '(anonymous)'} {script}:{frame.get('lineNumber', -1) + 1}"] += us / 1e6
        by_script[script] += us / 1e6
    return {"by_function": {k: round(v, 3) for k, v in by_function.most_common(30)},
            "by_script": {k: round(v, 3) for k, v in by_script.most_common(12)}}


def _events(trace) -> list[dict]:
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def instrumented_race(browser, url: str, prompt: str, live: bool, timeout: float, trace_path: Path | None,
                      inputs: dict) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.add_init_script(MUTATIONS)
    view = context.new_page()
    try:
        view.goto(url, timeout=timeout * 1000)
        view.wait_for_selector("#run", timeout=timeout * 1000)
        time.sleep(2)
        cdp = context.new_cdp_session(view)
        cdp.send("Profiler.enable")
        cdp.send("Profiler.setSamplingInterval", {"interval": 250})
        view.evaluate("() => { const m = window.__mutations; m.records = m.added = m.removed = m.attributes = m.text = 0; m.by = {}; }")
        browser.start_tracing(page=view, categories=TRACE_CATEGORIES)
        cdp.send("Profiler.start")
        wall = race_once(view, prompt, live, timeout)
        profile = cdp.send("Profiler.stop")["profile"]
        trace = json.loads(browser.stop_tracing())
        mutations = view.evaluate("() => window.__mutations")
        browser.start_tracing(page=view, categories=TRACE_CATEGORIES)  # the page idle as long, for a baseline
        time.sleep(wall)
        idle = trace_summary(_events(json.loads(browser.stop_tracing())))
    finally:
        context.close()
    stream: list = []
    record_stream(url, inputs, stream)  # the same race again, as the queue's event stream: the messages the page got
    events = _events(trace)
    if trace_path:
        trace_path.write_text(json.dumps(trace))
    by = collections.Counter(mutations.pop("by"))
    summary = stream_summary(stream)
    n = summary.get("messages") or 1
    return {"wall_seconds": round(wall, 1), "updates": summary, "mutations": {**mutations, "per_update": round(mutations["records"] / n, 1),
            "by_element": dict(by.most_common(30))}, "trace": trace_summary(events), "idle_trace": idle, "js_profile": profile_summary(profile)}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running app, its pair loaded (default: start app.py on a free port, preheat off)")
    parser.add_argument("--example", type=int, default=0, help="which of the page's examples (default 0)")
    parser.add_argument("--races", type=int, default=3, help="races whose Chromium CPU is counted (default 3)")
    parser.add_argument("--live", action="store_true", help="race live (\"Race it live\") rather than replay")
    parser.add_argument("--no-instrumented", action="store_true", help="skip the traced and profiled race")
    parser.add_argument("--trace", type=Path, help="also write the instrumented race's trace here (chrome://tracing, Perfetto)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--app-env", action="append", default=[], metavar="NAME=VALUE", help="for the app it starts")
    parser.add_argument("--json-out", type=Path, help="also write the JSON result here")
    args = parser.parse_args(argv)
    server = None
    result: dict = {"cpu": machine(), "live": args.live}
    try:
        env = {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0", **dict(a.split("=", 1) for a in args.app_env)}
        the_page = page(env)
        label, prompt = the_page.examples[args.example]
        result["example"] = label
        if args.url:
            url = args.url
        else:
            port = free_port()
            log = Path(os.environ.get("TMPDIR", "/tmp")) / f"page-cost-app-{port}.log"
            server = start_app(port, log, env, timeout=args.timeout)
            wait_for_line(log, "Ready: " + re.escape(the_page.preset), server, args.timeout, fail="Could not load")
            url = f"http://127.0.0.1:{port}/"
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                view = browser.new_page(viewport={"width": 1280, "height": 720})
                view.goto(url, timeout=args.timeout * 1000)
                view.wait_for_selector("#run", timeout=args.timeout * 1000)
                time.sleep(2)
                race_once(view, prompt, args.live, args.timeout)  # the first: a recording to replay, the page warm
                races = []
                for _ in range(args.races):
                    before = chromium_processes()
                    wall = race_once(view, prompt, args.live, args.timeout)
                    spent = _minus(chromium_processes(), before)
                    before = chromium_processes()
                    time.sleep(wall)
                    idle = _minus(chromium_processes(), before)
                    races.append({"wall_seconds": round(wall, 1), "chromium": spent, "total": round(sum(spent.values()), 3),
                                  "idle_same_time": round(sum(idle.values()), 3)})
                    print(f"  race: {wall:.1f} s, Chromium {sum(spent.values()):.2f} CPU s {spent}; idle as long: "
                          f"{sum(idle.values()):.2f}", flush=True)
                result["races"] = races
                result["chromium_cpu_per_race_median"] = statistics.median(r["total"] for r in races) if races else None
                view.close()
                if not args.no_instrumented:
                    d = the_page.defaults
                    inputs = dict(prompt=prompt, preset_label=the_page.preset, custom_target="", custom_draft="",
                                  drafter=the_page.drafter, k=d["k"], dynamic_k=d["dynamic_k"], temperature=d["temperature"],
                                  top_p=d["top_p"], seed=d["seed"], max_new_tokens=d["max_new_tokens"], exact=False)
                    result["instrumented"] = instrumented_race(browser, url, prompt, args.live, args.timeout, args.trace, inputs)
            finally:
                browser.close()
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stop_app(server)
    print(json.dumps(result, indent=1))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
