# ruff: noqa
"""Per drafter and K, what the rounds in a rounds.log (trace/sitecustomize.py) kept against the
tokens their chosen rate promised at the verify seconds they took: python yields.py after-3x3-rounds.log"""
import re, collections, sys
files = sys.argv[1:] or ["rounds.log"]
stats = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])  # n, promised, kept, seconds
for fn in files:
    pend = {}
    for line in open(fn):
        f = line.split(); pid = f[0]
        if "plan=" in line:
            plan = re.search(r"plan=(\S+)", line).group(1)
            o = re.search(r"other=([\d.]+)@", line); d = re.search(r"draft=([\d.]+)@", line)
            src = plan.split(",")[2]
            rate = float(d.group(1)) if src == "draft-model" else float(o.group(1))
            pend[pid] = (plan, rate)
        elif "ROUND" in line and pid in pend:
            plan, rate = pend.pop(pid)
            acc = int(re.search(r"accepted=(\d+)", line).group(1)); v = float(re.search(r"verify_seconds=([\d.]+)", line).group(1))
            k, n, src = plan.split(",")
            s = stats[(src, int(k))]; s[0] += 1; s[1] += rate * v; s[2] += acc + 1; s[3] += v
for key in sorted(stats):
    n, prom, kept, sec = stats[key]
    print(f"{key[0]:14} k={key[1]:2} rounds {n:4} kept/promised(at actual verify s) {kept/max(prom,1e-9):.2f} tokens/verify-s {kept/sec:.1f}")
