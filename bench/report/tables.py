"""The run as Markdown: its header, then a section per table (the paper's table, the K sweep, per
prompt, exactness, sampled, peers, targets, where the time goes, memory) and the notes."""
from __future__ import annotations

import re
from collections import defaultdict

from bench.plan import AR, OURS, SPEC, BenchPlan
from bench.records import read_records
from bench.report.goals import roofline_of
from bench.report.stats import baseline_of, ours_like, per_prompt_speedups


def markdown(report: dict, plan: BenchPlan) -> str:
    """The run as markdown tables: paper's table, K sweep, sampled, peers, targets, costs, memory."""
    lines = _header_lines(report)
    lines += _greedy_lines(report, plan)
    lines += _sweep_lines(report, plan)
    lines += _per_prompt_lines(plan, report)
    lines += _exactness_lines(report)
    lines += _sampled_lines(report, plan)
    lines += _peer_lines(report, plan)
    lines += _target_lines(report)
    costs = report.get("costs")
    if costs:
        lines += _cost_lines(costs, plan, report)
    lines += _memory_lines(report)
    if report["notes"]:
        lines += ["## Notes", ""] + [f"- {note}" for note in report["notes"]] + [""]
    return "\n".join(lines)


def _header_lines(report: dict) -> list[str]:
    """The run's title, command, machine, versions, models and how it measured."""
    lines = [f"# Benchmark `{report['name']}`", ""]
    lines += [f"`{report['command']}` · {report['created']}", ""]
    m = report["machine"]
    cpu = f"{m['cpu']}, {m['cpu_class']} class" if m.get("cpu_class") else m["cpu"]  # results before the class was recorded
    lines += [
        f"Machine: {cpu}, {m['cores']} cores / {m['threads']} threads, {m['memory_gib']:.0f} GiB; "
        f"load average at start {m['load_average']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".",
        "",
        f"Target: {report['models']['target']['label']} ({report['models']['target']['path_name']}). Precision: "
        f"`{report['precision']}` ({report['precision_note']}). Drafts: "
        + ("; ".join(f"**{d['label']}**: {d['description']}" for d in report["models"]["drafts"]) or "none (prompt lookup only)")
        + ".",
        "",
        f"Measured: {report['measurement']} The run took {report['wall_seconds'] / 60:.1f} min.",
        "",
    ]
    if report.get("compiled_with"):
        lines += ["Compiled with, as timing on this CPU chose (spec.models.tuning): "
                  + "; ".join(f"{method}: {name}" for method, name in report["compiled_with"].items()) + ".", ""]
    if report.get("curve"):
        lines += ["A target call of each width, in one-token steps, as calibrated on this CPU: "
                  + ", ".join(f"w{width} {cost:.2f}" for width, cost in report["curve"].items() if width != "1") + ".", ""]
    return lines


def _greedy_lines(report: dict, plan: BenchPlan) -> list[str]:
    """The paper's table: autoregressive against each dynamic method, greedy, at every N and prompt set."""
    s, summaries = plan.settings, report["summaries"]
    lines = ["## Autoregressive vs speculative (greedy)", ""]
    lines += ["| N | prompts | method | tokens/s | speed-up | median per prompt | decode speed-up | decode, median per prompt "
              "| α | tokens / target call | same tokens as AR |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({x.max_new_tokens for x in s}):
        for prompt_set in plan.prompt_sets:
            for i, x in enumerate(s):
                if (x.engine == OURS and not x.sampled and not x.exactness and x.max_new_tokens == n and x.prompt_set == prompt_set.name
                        and (x.mode == AR or x.dynamic)):
                    su = summaries[i]
                    speedups = ("1.00× (baseline) | — | — | —" if x.mode == AR else
                                " | ".join(_num(su.get(key), 2, "×") for key in
                                           ("speedup", "prompt_median_speedup", "decode_speedup", "prompt_median_decode_speedup")))
                    lines.append(
                        f"| {n} | {prompt_set.name} | {x.method} | {_num(su['tokens_per_second'])} | {speedups} | "
                        f"{_num(su.get('alpha'), 2)} | {_num(su.get('tokens_per_target_call'), 2)} | {su.get('same_tokens_as_ar') or '—'} |"
                    )
    lines.append("")
    lines += ["Speed-up: tokens/s summed over the prompt set against our autoregressive decoding's, prefill included; "
              "median per prompt: the same ratio prompt by prompt, then the median. Decode: the same after the first "
              "token (the prefill, which makes it, left out): what drafting changes.", ""]
    if report["precision"] != "f32":
        lines += ["Same tokens as AR: prompts whose greedy output equals our autoregressive one. At the device's default "
                  "precision (activations rounded to 8 bits on the fly) a (K+1)-token verify call and one-token decoding round "
                  "differently, so near-ties "
                  "can flip and outputs diverge from there; at `--precision f32` they match token for token "
                  "(tests/test_bench.py checks it).", ""]
    return lines


def _sweep_lines(report: dict, plan: BenchPlan) -> list[str]:
    """The K sweep: every greedy speculative setting at the smallest N, beside Leviathan's prediction."""
    s, summaries = plan.settings, report["summaries"]
    n_sweep = min(x.max_new_tokens for x in s)
    lines = [f"## K sweep (greedy, N={n_sweep})", ""]
    lines += [
        "| drafter | prompts | K | tokens/s | speed-up | α | tokens / target call | mean K | plain steps | predicted (Leviathan) "
        "| predicted (measured verify) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, x in enumerate(s):
        if x.engine == OURS and x.mode == SPEC and not x.sampled and not x.exactness and x.max_new_tokens == n_sweep:
            su = summaries[i]
            lines.append(
                f"| {x.how} | {x.prompt_set} | "
                f"{'dynamic (from ' + str(x.k) + ')' if x.dynamic else x.k} | {_num(su['tokens_per_second'])} | {_row_speedup(report, i)} | "
                f"{_num(su.get('alpha'), 2)} | {_num(su.get('tokens_per_target_call'), 2)} | {_num(su.get('mean_k'), 1)} | "
                f"{_num(_pct(su.get('plain_step_share')), 0, '%')} | {_num(su.get('predicted_speedup'), 2, '×')} | "
                f"{_num(su.get('predicted_speedup_measured_verify'), 2, '×')} |"
            )
    lines += ["", "α: kept drafts ÷ (kept drafts + rejections), Leviathan's per-token acceptance. Predicted: "
              "(1−α^(K+1)) / ((1−α)(Kc+1)) with c = the drafter's seconds per drafted target token (measured in the "
              "run: draft steps, re-encoding and catching up included) ÷ a 1-token target call; the second column "
              "puts the measured K+1-token target call in place of the 1 (see \"Where the time goes\"). Plain steps: "
              "target calls made without drafting (dynamic K chose a plain step).", ""]
    return lines


def _per_prompt_lines(plan: BenchPlan, report: dict) -> list[str]:
    """Speed-up over autoregressive, prompt by prompt, of each dynamic method at the largest N."""
    records = read_records(report["records"])
    n_max = max(x.max_new_tokens for x in plan.settings)
    lines = []
    for prompt_set in plan.prompt_sets:
        methods = [i for i, x in enumerate(plan.settings) if x.engine == OURS and x.mode == SPEC and not x.exactness
                   and not x.sampled and x.max_new_tokens == n_max and x.prompt_set == prompt_set.name]
        if not methods:
            continue
        columns = {i: per_prompt_speedups(records, i, baseline_of(plan, plan.settings[i])) for i in methods}
        lines += [f"### Per prompt: {prompt_set.name} (greedy, N={n_max}, speed-up over our autoregressive)", ""]
        lines += ["| prompt | " + " | ".join(plan.settings[i].method.removeprefix("speculative · ") for i in methods) + " |",
                  "|---|" + "---|" * len(methods)]
        for prompt_id, _ in prompt_set.prompts:
            lines.append(f"| {prompt_id} | " + " | ".join(_num(columns[i].get(prompt_id), 2, "×") for i in methods) + " |")
        lines.append("")
    return lines


def _exactness_lines(report: dict) -> list[str]:
    checks = report.get("exactness") or []
    if not checks:
        return []
    lines = ["## Exactness at f32", "", "Every method once more at `--precision f32`, greedy: its tokens against f32 "
             "autoregressive decoding's, prompt by prompt.", "", "| method | prompt set | identical |", "|---|---|---|"]
    groups = defaultdict(list)
    for check in checks:
        groups[(check["method"], check["prompt_set"])].append(check)
    for (method, prompt_set), group in groups.items():
        differ = [c["prompt"] for c in group if not c["identical"]]
        lines.append(f"| {method} | {prompt_set} | {len(group) - len(differ)}/{len(group)}"
                     + (f" (differ: {', '.join(differ)})" if differ else "") + " |")
    lines.append("")
    return lines


def _sampled_lines(report: dict, plan: BenchPlan) -> list[str]:
    """Every sampled setting of ours, at the largest N; nothing when the run sampled none."""
    s, summaries = plan.settings, report["summaries"]
    sampled = [i for i, x in enumerate(s) if x.engine == OURS and x.sampled and not x.exactness]
    if not sampled:
        return []
    n_max = max(x.max_new_tokens for x in s)
    lines = [f"## Sampled (temperature {report['sampling']['temperature']}, top-p {report['sampling']['top_p']}, N={n_max})", ""]
    lines += ["| prompts | method | tokens/s | speed-up | α | tokens / target call |", "|---|---|---|---|---|---|"]
    for i in sampled:
        su = summaries[i]
        lines.append(
            f"| {s[i].prompt_set} | {s[i].method} | {_num(su['tokens_per_second'])} | "
            f"{'1.00× (baseline)' if s[i].mode == AR else _row_speedup(report, i)} | {_num(su.get('alpha'), 2)} | "
            f"{_num(su.get('tokens_per_target_call'), 2)} |"
        )
    lines.append("")
    return lines


def _peer_lines(report: dict, plan: BenchPlan) -> list[str]:
    """The peers' settings against ours, and why any peer is missing; nothing when there were none."""
    s, summaries = plan.settings, report["summaries"]
    peers = [i for i, x in enumerate(s) if x.engine != OURS]
    if not (peers or report["peer_notes"]):
        return []
    lines = ["## Peers (greedy, same IR, same prompt token ids)", ""]
    if peers:
        lines += ["| engine | method | prompts | N | tokens/s | ours ÷ peer | ours ÷ peer, decode | accepted ÷ drafted (peer / ours) "
                  "| TTFT (s) | same tokens as our AR |", "|---|---|---|---|---|---|---|---|---|---|"]
        for i in peers:
            su = summaries[i]
            match = ours_like(plan, s[i])
            ours_rate = summaries[match].get("accepted_per_drafted") if match is not None else None
            accepted = "—" if s[i].mode == AR else f"{_num(su.get('accepted_per_drafted'), 2)} / {_num(ours_rate, 2)}"
            lines.append(
                f"| {s[i].engine} | {s[i].method} | {s[i].prompt_set} | {s[i].max_new_tokens} | {_num(su['tokens_per_second'])} | "
                f"{_num(report['peer_ratios'].get(str(i)), 2, '×')} | {_num(report.get('peer_decode_ratios', {}).get(str(i)), 2, '×')} | "
                f"{accepted} | {_num(su.get('ttft_seconds'), 3)} | {su.get('same_tokens_as_ar') or '—'} |"
            )
        lines.append("")
    lines += [f"- {note}" for note in report["peer_notes"]]
    lines.append("")
    return lines


def _target_lines(report: dict) -> list[str]:
    lines = ["## Targets", "", "| target | configuration | measured | needed | verdict |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        shown = t.get("shown") or _num(t["value"], 2, "×")
        needed = "" if t.get("shown") else f"≥ {t['needed']:.2f}×"
        lines.append(f"| {t['target']} | {t['configuration']} | {shown} | {needed} | {_verdict(t)} |")
    lines.append("")
    return lines


def _cost_lines(costs: dict, plan: BenchPlan, report: dict) -> list[str]:
    t1 = costs["target_1"]
    lines = ["## Where the time goes", "",
             f"Median of {report['cost_repeats']} repeats through `spec.models.runtime.StatefulLM`; each repeat starts from a "
             f"fresh cache holding a {costs['context_tokens']}-token prompt, precision `{report['precision']}`. A width is "
             "timed on its fourth call in a row, as the engine calls it (every verify call has the same width); "
             "the first call at a new width pays for OpenVINO re-preparing every layer, timed on its own below.", "",
             "| call | ms | × 1-token target call |", "|---|---|---|"]
    names = [("target_1", "target, 1 token")]
    names += sorted(((key, f"target, {key.split('_')[1]} tokens (verify K={int(key.split('_')[1]) - 1})")
                     for key in costs if re.fullmatch(r"target_\d+", key) and key != "target_1"), key=lambda kv: int(kv[0].split("_")[1]))
    names += [(f"draft_1:{d.path}", f"draft {d.label}, 1 token") for d in plan.drafts]
    names += [("target_1_after_5", "target, 1 token, right after a 5-token call (width changed)"),
              ("target_5_after_1", "target, 5 tokens, right after a 1-token call (width changed)"),
              ("trim_5", "roll the cache back by 4 tokens (mask them)"),
              ("greedy_choice_5", "greedy p over 5 rows (sampler.distribution)"),
              ("sampled_distribution_5", "sampled p over 5 rows (temperature, top-p)")]
    for key, label in names:
        if costs.get(key) is not None:
            lines.append(f"| {label} | {costs[key] * 1000:.2f} | {costs[key] / t1:.2f} |")
    lines.append("")
    roofline = roofline_of(costs)
    if roofline:
        lines += [f"**Roofline.** A decoding step reads {roofline['bytes_per_step'] / 1e9:.2f} GB of weights (every "
                  "constant of the IR but the embedding table, of which it gathers one row). Read bandwidth measured "
                  f"in this run (max over a 2 GiB int8 array in 2 threads): {roofline['bandwidth'] / 1e9:.1f} GB/s, so at "
                  f"most {roofline['tokens_per_second']:.1f} tokens/s. A 1-token target call here takes "
                  f"{t1 * 1000:.1f} ms = {1 / t1:.1f} tokens/s: **{roofline['step_share']:.2f} of the roofline**.", ""]
    # The f32 exactness runs are there for their text only (run once, at another precision): not timed here.
    phased = sorted((i for i, x in enumerate(plan.settings) if x.engine == OURS and not x.sampled and not x.exactness
                     and report["summaries"][i].get("ms_per_token")),
                    key=lambda i: (plan.settings[i].max_new_tokens, plan.settings[i].prompt_set))
    if phased:
        lines += ["Time per generated token in our runs, by phase (ms; medians are not used here: sums over all "
                  "prompts and repeats). Target calls: verify calls and plain steps after the prefill. Other: cache "
                  "trims after rejections, sampling, acceptance, Python, detokenizing.", "",
                  "| configuration | total | prefill | draft | target calls | other |", "|---|---|---|---|---|---|"]
        for i in phased:
            ms = report["summaries"][i]["ms_per_token"]
            setting = plan.settings[i]
            lines.append(f"| {setting.method} · N={setting.max_new_tokens} · {setting.prompt_set} | {sum(ms.values()):.1f} | "
                         f"{ms['prefill']:.1f} | {ms['draft']:.1f} | {ms['target']:.1f} | {ms['other']:.1f} |")
        lines.append("")
    ar = [i for i, x in enumerate(plan.settings) if x.engine == OURS and x.mode == AR and not x.sampled and not x.exactness]
    if ar:
        best = max(ar, key=lambda i: plan.settings[i].max_new_tokens)
        rate = report["summaries"][best]["tokens_per_second"]
        if rate:
            per_token = 1 / rate
            lines += [f"Our autoregressive loop spends {per_token * 1000:.1f} ms per token end to end "
                      f"({plan.settings[best].label}), prefill included, against {t1 * 1000:.1f} ms for the bare "
                      "1-token target call: the rest is prefill, Python, sampling and detokenizing.", ""]
    return lines


def _memory_lines(report: dict) -> list[str]:
    lines = ["## Peak memory per configuration family", "",
             "Each family runs in its own process for the whole run. Peak RSS is that process's high-water mark "
             "(getrusage ru_maxrss): runtime, libraries, models and every generation it ran. \"Before models\" is "
             "its RSS after imports, before loading any model.", "",
             "| family | peak RSS (MiB) | before models (MiB) | peak − before (MiB) | load (s) |", "|---|---|---|---|---|"]
    for name, fam in report["families"].items():
        mem = fam.get("memory") or {}
        peak, before = mem.get("peak_rss"), fam.get("info", {}).get("rss_before_load")
        lines.append(
            f"| {name} | {_mib(peak)} | {_mib(before)} | {_mib(peak - before) if peak and before else '—'} | "
            f"{_num(fam.get('info', {}).get('load_seconds'), 1)} |"
        )
    lines.append("")
    return lines


def _row_speedup(report: dict, i: int) -> str:
    return _num(report["summaries"][i].get("speedup"), 2, "×")


def _num(value, digits: int = 1, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def _verdict(target: dict) -> str:
    if target["met"] is None:
        return "not measured"
    margin = target["margin"] * 100
    digits = 1 if abs(margin) < 1 else 0  # "missed by 0%" would read as met
    if target["met"]:
        return f"**met** (+{margin:.{digits}f}%)" if margin else "**met**"
    return f"**missed** by {-margin:.{digits}f}%"


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def _mib(value: int | None) -> str:
    return "—" if not value else f"{value / 2**20:.0f}"

