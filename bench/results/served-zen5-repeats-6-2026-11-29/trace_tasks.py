# ruff: noqa: E401, E402, E501, E701, E702, I001, F401
import collections, json
events = json.load(open("/tmp/served-zen5-profile/trace.json"))
events = events["traceEvents"] if isinstance(events, dict) else events
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
main = [e for e in events if e.get("ph") == "X" and names.get((e["pid"], e["tid"])) == "CrRendererMain"]
main.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
tasks = [e for e in main if e["name"] == "ThreadControllerImpl::RunTask"]
t0 = tasks[0]["ts"]
# classify each task by its most telling descendant
KINDS = ["ProxyMain::BeginMainFrame", "FunctionCall", "v8.callFunction", "TimerFire", "ResponseBodyLoader::OnStateChange", "Receive mojo message", "EventHandler::handleMouseMoveEvent", "EventDispatch", "ParseHTML", "MajorGC", "MinorGC", "V8.GC_SCAVENGER", "EvaluateScript"]
by = collections.Counter(); n = collections.Counter()
i = 0
for t in tasks:
    end = t["ts"] + t["dur"]
    inner = [e for e in main if t["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= end and e is not t]
    inner_names = {e["name"] for e in inner}
    kind = next((k for k in KINDS if k in inner_names), "other:" + ",".join(sorted(inner_names))[:60])
    by[kind] += t["dur"] / 1e6; n[kind] += 1
for k, s in by.most_common(25):
    print(f"{s:6.3f} s {n[k]:5d} {k}")
print("span", (tasks[-1]["ts"] - t0) / 1e6, "s")
print("--- inside BeginMainFrame")
frames = [e for e in main if e["name"] == "ProxyMain::BeginMainFrame"]
inside = collections.Counter(); cnt = collections.Counter()
for f in frames:
    end = f["ts"] + f["dur"]
    for e in main:
        if f["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= end and e is not f:
            inside[e["name"]] += e["dur"] / 1e6; cnt[e["name"]] += 1
for k, s in inside.most_common(30):
    print(f"{s:6.3f} s {cnt[k]:5d} {k}")
per_sec = collections.Counter(int((f["ts"] - t0) / 1e6) for f in frames)
print("frames per second:", [per_sec[i] for i in range(14)])
fc = [e for e in main if e["name"] == "FunctionCall"]
print("FunctionCall per second:", [sum(1 for e in fc if int((e["ts"]-t0)/1e6) == i) for i in range(14)])
print("FunctionCall args sample:", [e.get("args", {}).get("data", {}).get("functionName") for e in fc[:20]])
busy = collections.Counter()
for t in tasks:
    busy[int((t["ts"] - t0) / 1e6)] += t["dur"] / 1e6
print("main thread busy s per second:", [round(busy[i], 3) for i in range(14)])
allx = [e for e in events if e.get("ph") == "X" and e.get("name") == "ThreadControllerImpl::RunTask"]
byth = collections.Counter()
for e in allx:
    byth[(names.get((e["pid"], e["tid"]), "?"), int((e["ts"] - t0) / 1e6))] += e["dur"] / 1e6
for th in sorted({k[0] for k in byth}):
    print(th, [round(byth[(th, i)], 3) for i in range(14)])
first = [e for e in fc if e["ts"] - t0 < 1.5e6]
print(collections.Counter((e.get("args", {}).get("data", {}).get("url", "")[-40:], e.get("args", {}).get("data", {}).get("functionName")) for e in first).most_common(10))
