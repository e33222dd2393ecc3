# ruff: noqa: E401, E402, E501, E701, E702, I001, F401
import collections, json
events = json.load(open("/tmp/served-zen5-profile/trace.json"))
events = events["traceEvents"] if isinstance(events, dict) else events
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
main = [e for e in events if names.get((e["pid"], e["tid"])) == "CrRendererMain"]
tasks = sorted((e for e in main if e.get("name") == "ThreadControllerImpl::RunTask"), key=lambda e: e["ts"])
t0 = tasks[0]["ts"]
print(collections.Counter((e["name"], e.get("ph")) for e in events if e.get("cat", "").find("animation") >= 0 or e["name"].startswith("Animation")).most_common(10))
anim = [e for e in events if e.get("name") == "Animation" and e.get("ph") in ("b", "n", "e")]
for e in anim[:30]:
    print(round((e["ts"] - t0) / 1e6, 3), e["ph"], json.dumps(e.get("args", {}))[:200])
raf = [e for e in main if e.get("name") == "FireAnimationFrame"]
print("rAF per second", [sum(1 for e in raf if int((e["ts"]-t0)/1e6) == i) for i in range(14)])
fc = [e for e in main if e.get("name") == "FunctionCall" and e["ts"] - t0 < 1.2e6]
inraf = []
for r in raf:
    if r["ts"] - t0 < 1.2e6:
        inraf += [e for e in fc if r["ts"] <= e["ts"] <= r["ts"] + r.get("dur", 0)]
print(collections.Counter((e["args"]["data"].get("url", "")[-35:], e["args"]["data"].get("functionName"), e["args"]["data"].get("lineNumber"), e["args"]["data"].get("columnNumber")) for e in inraf).most_common(8))
