"""The run as a picture: speed-up against K per drafter, and tokens/s per method beside the peers."""
from __future__ import annotations

from collections import defaultdict

from bench.plan import AR, GENAI, HYBRID, OURS, SPEC, BenchPlan
from bench.report.goals import DYNAMIC_FLOOR


def plot(report: dict, plan: BenchPlan, path) -> None:
    """Speed-up vs K per drafter, and tokens/s per method beside the peers (greedy, largest N)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, summaries = plan.settings, report["summaries"]
    n_max, n_sweep = max(x.max_new_tokens for x in s), min(x.max_new_tokens for x in s)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [1, 1.3]})

    ks = sorted({x.k for x in s if x.engine == OURS and x.mode == SPEC and not x.dynamic})
    positions = {k: j for j, k in enumerate(ks)}
    dynamic_at = len(ks)
    curves = defaultdict(list)
    for i, x in enumerate(s):
        if (x.engine == OURS and x.mode == SPEC and not x.sampled and not x.exactness and x.max_new_tokens == n_sweep
                and not (x.dynamic and x.drafter == HYBRID)):
            name = f"{x.how} · {x.prompt_set}"
            at = dynamic_at if x.dynamic else positions[x.k]
            curves[name].append((at, summaries[i].get("speedup"), summaries[i].get("predicted_speedup_measured_verify")))
    for name, points in curves.items():
        points = sorted(p for p in points if p[1] is not None)
        fixed = [p for p in points if p[0] != dynamic_at]
        (line,) = left.plot([p[0] for p in fixed], [p[1] for p in fixed], marker="o", label=name)
        for p in points:
            if p[0] == dynamic_at:
                left.plot([p[0]], [p[1]], marker="*", markersize=12, color=line.get_color())
        predicted = [p for p in fixed if p[2] is not None]
        if predicted:
            left.plot([p[0] for p in predicted], [p[2] for p in predicted], linestyle="--", color=line.get_color(), alpha=0.6)
    left.axhline(1.0, color="grey", linewidth=1)
    left.axhline(DYNAMIC_FLOOR, color="grey", linewidth=1, linestyle=":")
    left.set_xticks(list(positions.values()) + [dynamic_at], [str(k) for k in ks] + ["dynamic"])
    left.set_xlabel("K (tokens drafted per target call)")
    left.set_ylabel("speed-up over our autoregressive")
    left.set_title(f"Speed-up vs K (greedy, N={n_sweep})\ndashed: predicted from α, c and the verify cost", fontsize=10)
    left.legend(fontsize=8)

    bars = []
    for i, x in enumerate(s):
        if x.sampled or x.exactness or summaries[i]["tokens_per_second"] is None:
            continue
        at_max = x.max_new_tokens == n_max and (x.mode == AR or x.dynamic)
        at_sweep = x.max_new_tokens == n_sweep and (x.mode == AR or (not x.dynamic and x.k == report.get("peer_k")))
        if not (at_max or at_sweep):
            continue
        low, high = summaries[i].get("tokens_per_second_range", [None, None])
        bars.append((f"N={x.max_new_tokens} · {x.prompt_set} · {x.engine} · {x.method}", summaries[i]["tokens_per_second"], low, high, x.engine))
    bars.sort(key=lambda b: (b[0].split(" · ")[0], b[0].split(" · ")[1], b[4] != OURS, b[0]))
    colours = {OURS: "tab:blue", GENAI: "tab:orange"}
    y = range(len(bars))
    right.barh(list(y), [b[1] for b in bars], color=[colours.get(b[4], "tab:green") for b in bars],
               xerr=[[b[1] - (b[2] or b[1]) for b in bars], [(b[3] or b[1]) - b[1] for b in bars]], capsize=2)
    right.set_yticks(list(y), [b[0] for b in bars], fontsize=7)
    right.invert_yaxis()
    right.set_xlabel("tokens/s (median over repeats; bars: min–max)")
    right.set_title("Tokens/s (greedy): ours blue, openvino-genai orange, optimum-intel green", fontsize=10)
    machine = report["machine"]
    fig.suptitle(f"{report['name']}: {report['models']['target']['label']} on {machine['cpu']} ({machine['cores']} cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

