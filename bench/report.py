"""Turning the benchmark's raw timings into medians, ratios, target verdicts, a markdown table and a plot.

Tokens/s of a setting in one repeat is its new tokens over its seconds, summed over the prompts of
its set; the reported figure is the median over repeats. A ratio (speed-up, ours ÷ peer) is taken
per repeat between two settings measured in that same repeat, then the median is reported.
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict

from bench.plan import AR, DRAFT_MODEL, GENAI, HYBRID, LOOKUP, OURS, SPEC, BenchPlan, Setting
from spec.decoding.policy import predicted_speedup

DYNAMIC_FLOOR = 0.95  # dynamic K must never fall below this fraction of our autoregressive speed
VERIFY_CEILING = 1.2  # a target call on K+1 = 5 tokens vs a 1-token call
VERIFY_K = 4
ROOFLINE_SHARE = 0.85  # a decoding step vs reading its weights once at the measured bandwidth
BEST_FIXED_SHARE = 0.95  # dynamic K vs the best fixed K, on every prompt
HYBRID_SHARE = 0.95  # the hybrid vs the better of its two drafters, per prompt set
# The default pair (the hybrid of the 0.5B draft and lookup) vs autoregressive, median whole-run per
# prompt: on open questions, code edits (any other input-grounded set) and HumanEval, greedy; open
# questions sampled.
PAIR_GOALS = {"open": 1.35, "grounded": 1.9, "humaneval": 2.3, "sampled": 1.2}
DRAFT_TOKEN_CEILING = 0.30  # a draft model's token, all in (its catch-up of the prompt aside), in target steps


def summarize(plan: BenchPlan, records: list[dict], costs: dict | None) -> list[dict]:
    """One summary per setting: median tokens/s, speed-ups over our autoregressive (whole run and decode,
    over the set and the median per prompt), acceptance, predictions."""
    by_setting: dict[int, list[dict]] = defaultdict(list)
    for record in records:
        by_setting[record["setting"]].append(record)
    per_repeat, per_repeat_decode = rates_per_repeat(records), rates_per_repeat(records, decode=True)
    summaries = []
    t1 = (costs or {}).get("target_1")
    for i, setting in enumerate(plan.settings):
        rows = by_setting.get(i, [])
        rates = per_repeat.get(i, {})
        summary = {"label": setting.label, "tokens_per_second": _median(rates.values()), "repeats": len(rates)}
        if rates:
            summary["tokens_per_second_range"] = [min(rates.values()), max(rates.values())]
        baseline = _baseline(plan, setting)
        if baseline is not None and baseline != i:
            summary["speedup"] = _median_ratio(rates, per_repeat.get(baseline, {}))
            summary["decode_speedup"] = _median_ratio(per_repeat_decode.get(i, {}), per_repeat_decode.get(baseline, {}))
            summary["prompt_median_speedup"] = _median(per_prompt_speedups(records, i, baseline).values())
            summary["prompt_median_decode_speedup"] = _median(per_prompt_speedups(records, i, baseline, decode=True).values())
            summary["baseline"] = plan.settings[baseline].label
        summary.update(_counts(rows))
        if baseline is not None and baseline != i and not setting.sampled:
            summary["same_tokens_as_ar"] = _same_tokens(rows, by_setting.get(baseline, []))
        if t1 and summary.get("draft_seconds_per_token") is not None:
            summary["cost_ratio_c"] = summary["draft_seconds_per_token"] / t1
        if costs and setting.engine == OURS and setting.drafter in (DRAFT_MODEL, LOOKUP) and not setting.dynamic and "alpha" in summary:
            summary.update(_predicted(setting, summary["alpha"], summary.get("cost_ratio_c") or 0.0, costs))
        summaries.append(summary)
    return summaries


def derive(plan: BenchPlan, records: list[dict], costs: dict | None) -> dict:
    """Everything a report derives from its records: summaries, ours ÷ peer (whole run and decode),
    target verdicts and the f32 exactness checks (a run writes them; bench.rewrite derives them again)."""
    summaries = summarize(plan, records, costs)
    return {
        "summaries": summaries,
        "peer_ratios": {str(i): v for i, v in peer_ratios(plan, records).items()},
        "peer_decode_ratios": {str(i): v for i, v in peer_ratios(plan, records, decode=True).items()},
        "targets": check_targets(plan, records, summaries, costs),
        "exactness": exactness(plan, records),
    }


def _timed(row: dict, decode: bool) -> tuple[int, float]:
    """(tokens, seconds) of one generation: the whole run, or with `decode` what follows its first token
    (the prefill, which makes it, excluded); (0, 0) when the first token was not timed."""
    if not decode:
        return row["new_tokens"], row["seconds"]
    ttft = row.get("ttft_seconds")
    if ttft is None or row["new_tokens"] < 2:
        return 0, 0.0
    return row["new_tokens"] - 1, row["seconds"] - ttft


def rates_per_repeat(records: list[dict], decode: bool = False) -> dict[int, dict[int, float]]:
    """setting -> repeat -> tokens/s summed over its prompts (whole run, or decode only)."""
    acc = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for row in records:
        tokens, seconds = _timed(row, decode)
        a = acc[row["setting"]][row["repeat"]]
        a[0] += tokens
        a[1] += seconds
    return {i: {r: t / s for r, (t, s) in reps.items() if s > 0} for i, reps in acc.items()}


def _counts(rows: list[dict]) -> dict:
    """Acceptance and call counts summed over every prompt and repeat."""
    if not rows:
        return {}
    total = lambda key: sum(row.get(key) or 0 for row in rows)  # noqa: E731
    out = {
        "new_tokens_per_prompt": total("new_tokens") / len(rows),
        "ttft_seconds": _median(row["ttft_seconds"] for row in rows if row.get("ttft_seconds") is not None),
    }
    calls = total("target_calls")
    if calls:
        rounds = calls - total("plain_steps") - len(rows)  # the prefill is a call but not a round
        out["tokens_per_target_call"] = total("new_tokens") / calls
        out["plain_step_share"] = total("plain_steps") / max(1, calls - len(rows))
        if total("drafted"):
            # Per-token acceptance (Leviathan's alpha): kept drafts over kept drafts plus rejections.
            out["alpha"] = total("accepted") / max(1, total("accepted") + total("corrections"))
            out["mean_k"] = total("drafted") / max(1, rounds)
    if total("drafted"):
        out["accepted_per_drafted"] = total("accepted") / total("drafted")
    if total("accepted"):
        out["accepted_from_lookup"] = total("accepted_lookup") / total("accepted")
    if total("draft_tokens"):
        out["draft_seconds_per_token"] = total("draft_seconds") / total("draft_tokens")
        out["round_draft_seconds_per_token"] = (total("draft_seconds") - total("draft_catch_up_seconds")) / total("draft_tokens")
    if all(row.get("ttft_seconds") is not None and "target_seconds" in row for row in rows) and total("new_tokens"):
        # ms per generated token in each phase; "other" is trimming caches, sampling, Python, detokenizing.
        per_token = 1000 / total("new_tokens")
        prefill = total("ttft_seconds")
        phases = {"prefill": prefill, "draft": total("draft_seconds"), "target": total("target_seconds")}
        phases["other"] = total("seconds") - sum(phases.values())
        out["ms_per_token"] = {name: value * per_token for name, value in phases.items()}
    return out


def _same_tokens(rows: list[dict], baseline_rows: list[dict]) -> str | None:
    """How many prompts gave exactly our greedy autoregressive tokens (first repeat)."""
    ours = {row["prompt"]: row.get("tokens") for row in baseline_rows if row["repeat"] == 0}
    theirs = {row["prompt"]: row.get("tokens") for row in rows if row["repeat"] == 0}
    shared = [p for p in theirs if theirs[p] is not None and ours.get(p) is not None]
    if not shared:
        return None
    return f"{sum(theirs[p] == ours[p] for p in shared)}/{len(shared)}"


def _baseline(plan: BenchPlan, setting: Setting) -> int | None:
    """Index of our autoregressive setting on the same prompts, N, decoding (and exactness run)."""
    for i, other in enumerate(plan.settings):
        if (other.engine, other.mode) == (OURS, AR) and (other.prompt_set, other.max_new_tokens, other.sampled, other.exactness) == (
            setting.prompt_set, setting.max_new_tokens, setting.sampled, setting.exactness
        ):
            return i
    return None


def _predicted(setting: Setting, alpha: float, c: float, costs: dict) -> dict:
    """Leviathan et al.'s speed-up from alpha and c (a drafted token's cost, measured in the run, over a
    1-token target call), and the same with the measured verify cost in place of the 1."""
    k = setting.k
    t1, t_verify = costs.get("target_1"), costs.get(f"target_{k + 1}")
    if not (t1 and t_verify):
        return {}
    return {
        "cost_ratio_c": c,
        "predicted_speedup": predicted_speedup(alpha, k, c),
        "predicted_speedup_measured_verify": predicted_speedup(alpha, k, c, t_verify / t1),
    }


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _median_ratio(ours: dict[int, float], theirs: dict[int, float]) -> float | None:
    return _median(ours[r] / theirs[r] for r in ours if theirs.get(r))


# --- targets -------------------------------------------------------------------------------------


def check_targets(plan: BenchPlan, records: list[dict], summaries: list[dict], costs: dict | None) -> list[dict]:
    """The issue's targets, each with the measured value, what is needed and whether it is met."""
    rates = rates_per_repeat(records)
    settings = plan.settings
    targets = []

    def ratio(a: int, b: int) -> float | None:
        return _median_ratio(rates.get(a, {}), rates.get(b, {}))

    def add(goal: str, configuration: str, value: float | None, needed: float) -> None:
        targets.append({
            "target": goal, "configuration": configuration, "value": value, "needed": needed,
            "met": None if value is None else value >= needed,
            "margin": None if value is None else value / needed - 1,
        })

    for j, peer in enumerate(settings):
        if peer.engine != GENAI or peer.sampled:
            continue
        match = _ours_like(plan, peer)
        if match is None:
            continue
        what = "our autoregressive ≥ openvino-genai plain" if peer.mode == AR else "our speculative ≥ openvino-genai speculative (same pair, K)"
        add(what, f"{settings[match].method} vs genai, N={peer.max_new_tokens}, {peer.prompt_set}", ratio(match, j), 1.0)
    for i, setting in enumerate(settings):
        if setting.engine == OURS and setting.mode == SPEC and setting.dynamic and not setting.exactness:
            add(
                f"dynamic K ≥ {DYNAMIC_FLOOR}× our autoregressive",
                f"{setting.method}, {'sampled' if setting.sampled else 'greedy'}, N={setting.max_new_tokens}, {setting.prompt_set}",
                summaries[i].get("speedup"), DYNAMIC_FLOOR,
            )
    if costs and costs.get("target_1") and costs.get(f"target_{VERIFY_K + 1}"):
        add(f"target call on K+1={VERIFY_K + 1} tokens ≤ {VERIFY_CEILING}× a 1-token call",
            f"spec.models.runtime StatefulLM, context {costs.get('context_tokens')} tokens",
            # Lower is better here: compare the inverse so that "value ≥ needed" reads the same way.
            costs["target_1"] / costs[f"target_{VERIFY_K + 1}"] * VERIFY_CEILING, 1.0)
        targets[-1]["shown"] = f"{costs[f'target_{VERIFY_K + 1}'] / costs['target_1']:.2f}× (≤ {VERIFY_CEILING}×)"
    roofline = _roofline(costs)
    if roofline:
        add(f"a decoding step ≥ {ROOFLINE_SHARE} × the bandwidth roofline",
            f"1-token target call vs {roofline['bytes_per_step'] / 1e9:.2f} GB of weights at {roofline['bandwidth'] / 1e9:.1f} GB/s",
            roofline["step_share"] / ROOFLINE_SHARE, 1.0)
        targets[-1]["shown"] = f"{roofline['step_share']:.2f} of roofline (≥ {ROOFLINE_SHARE})"
    targets += _per_prompt_targets(plan, records, summaries)
    exact = exactness(plan, records)
    if exact:
        same = sum(e["identical"] for e in exact)
        targets.append({"target": "at f32, greedy texts identical to autoregressive on every prompt",
                        "configuration": ", ".join(sorted({e["method"] for e in exact})), "value": same / len(exact),
                        "needed": 1.0, "met": same == len(exact), "margin": same / len(exact) - 1,
                        "shown": f"{same}/{len(exact)} prompts × methods"})
    return targets


def _roofline(costs: dict | None) -> dict | None:
    """What reading the weights once per step at the measured bandwidth allows, and the share a step reaches."""
    if not costs or not costs.get("bytes_per_step") or not costs.get("read_bytes_per_second") or not costs.get("target_1"):
        return None
    tokens_per_second = costs["read_bytes_per_second"] / costs["bytes_per_step"]
    return {"bandwidth": costs["read_bytes_per_second"], "bytes_per_step": costs["bytes_per_step"],
            "tokens_per_second": tokens_per_second, "step_share": 1 / costs["target_1"] / tokens_per_second}


def per_prompt_speedups(records: list[dict], setting: int, baseline: int, decode: bool = False) -> dict[str, float]:
    """prompt -> median over repeats of this setting's tokens/s over the baseline's on that prompt
    (whole run, or decode only)."""
    rates: dict = defaultdict(dict)
    for row in records:
        tokens, seconds = _timed(row, decode)
        if row["setting"] in (setting, baseline) and seconds > 0:
            rates[(row["setting"], row["prompt"])][row["repeat"]] = tokens / seconds
    out = {}
    for (index, prompt), reps in rates.items():
        if index == setting:
            ratio = _median_ratio(reps, rates.get((baseline, prompt), {}))
            if ratio is not None:
                out[prompt] = ratio
    return out


def _find(plan: BenchPlan, **fields) -> int | None:
    for i, s in enumerate(plan.settings):
        if s.engine == OURS and not s.exactness and all(getattr(s, key) == value for key, value in fields.items()):
            return i
    return None


def _per_prompt_targets(plan: BenchPlan, records: list[dict], summaries: list[dict]) -> list[dict]:
    """The targets judged prompt by prompt: prompt lookup's and the hybrid's median, dynamic K against
    the best fixed K, a draft model's floor, the hybrid against the better of its drafters."""
    out = []

    def add(goal: str, configuration: str, value: float | None, needed: float, shown: str | None = None) -> None:
        out.append({"target": goal, "configuration": configuration, "value": value, "needed": needed,
                    "met": None if value is None else value >= needed,
                    "margin": None if value is None else value / needed - 1, **({"shown": shown} if shown else {})})

    n_max, n_sweep = max(s.max_new_tokens for s in plan.settings), min(s.max_new_tokens for s in plan.settings)
    grounded = [p.name for p in plan.prompt_sets if p.kind == "grounded"]
    open_sets = [p.name for p in plan.prompt_sets if p.kind == "open"]
    draft = plan.drafts[0].label if plan.drafts else None

    def speedups(i: int | None) -> dict[str, float]:
        base = None if i is None else _baseline(plan, plan.settings[i])
        return {} if i is None or base is None else per_prompt_speedups(records, i, base)

    if draft:
        for prompt_set in plan.prompt_sets:
            for sampled in (False, True):
                goal = PAIR_GOALS["sampled" if sampled else "humaneval" if prompt_set.name == "humaneval" else prompt_set.kind]
                i = _find(plan, drafter=HYBRID, draft=draft, dynamic=True, sampled=sampled, max_new_tokens=n_max, prompt_set=prompt_set.name)
                per = speedups(i)
                if per and (prompt_set.kind == "open" or not sampled):
                    add(f"the default pair (hybrid) ≥ {goal}× autoregressive, median over {prompt_set.name}",
                        f"{plan.settings[i].method}, {'sampled' if sampled else 'greedy'}, N={n_max}", statistics.median(per.values()), goal)
    for drafter, home in ((LOOKUP, grounded), (DRAFT_MODEL, open_sets)):
        for name in home:
            d = None if drafter == LOOKUP else draft
            dyn = _find(plan, drafter=drafter, draft=d, dynamic=True, sampled=False, max_new_tokens=n_sweep, prompt_set=name)
            fixed = [i for i, s in enumerate(plan.settings) if s.engine == OURS and not s.exactness and s.drafter == drafter
                     and s.draft == d and not s.dynamic and not s.sampled and s.max_new_tokens == n_sweep and s.prompt_set == name]
            per_dyn = speedups(dyn)
            per_fixed = [speedups(i) for i in fixed]
            if not per_dyn or not per_fixed:
                continue
            shares = {p: per_dyn[p] / max(f.get(p, 0) for f in per_fixed) for p in per_dyn if any(f.get(p) for f in per_fixed)}
            worst = min(shares, key=shares.get)
            add(f"dynamic K ≥ {BEST_FIXED_SHARE} × the best fixed K on every prompt ({'prompt lookup' if drafter == LOOKUP else 'draft ' + str(d)})",
                f"{name}, N={n_sweep}; worst: {worst}", shares[worst] / BEST_FIXED_SHARE, 1.0,
                f"{shares[worst]:.2f} on {worst} (≥ {BEST_FIXED_SHARE})")
    if draft:
        steps = [r for r in records if plan.settings[r["setting"]].engine == OURS and plan.settings[r["setting"]].mode == AR
                 and not plan.settings[r["setting"]].exactness and r.get("plain_steps")]
        drafted = [r for r in records if plan.settings[r["setting"]].drafter == DRAFT_MODEL and plan.settings[r["setting"]].engine == OURS
                   and not plan.settings[r["setting"]].exactness and r.get("draft_tokens")]
        if steps and drafted:
            step = sum(r["target_seconds"] for r in steps) / sum(r["plain_steps"] for r in steps)
            token = sum(r["draft_seconds"] - r.get("draft_catch_up_seconds", 0.0) for r in drafted) / sum(r["draft_tokens"] for r in drafted)
            add(f"a {draft} token, all in, ≤ {DRAFT_TOKEN_CEILING} of a target step", "draft-model runs' drafting (the prompt's "
                "catch-up aside) per drafted token ÷ autoregressive runs' step", DRAFT_TOKEN_CEILING / (token / step), 1.0,
                f"{token / step:.2f} of a step ({token * 1e3:.1f} ms ÷ {step * 1e3:.1f} ms; ≤ {DRAFT_TOKEN_CEILING})")
        floor = {}
        for name in grounded + open_sets:
            i = _find(plan, drafter=DRAFT_MODEL, draft=draft, dynamic=True, sampled=False, max_new_tokens=n_max, prompt_set=name)
            floor.update({f"{name}/{p}": v for p, v in speedups(i).items()})
        if floor:
            worst = min(floor, key=floor.get)
            add(f"draft {draft} (dynamic K) ≥ {DYNAMIC_FLOOR}× autoregressive on every prompt", f"N={n_max}; worst: {worst}",
                floor[worst] / DYNAMIC_FLOOR, 1.0, f"{floor[worst]:.2f}× on {worst} (≥ {DYNAMIC_FLOOR}×)")
        for name, sampled in [(p.name, sampled) for p in plan.prompt_sets for sampled in (False, True)]:
            found = [_find(plan, drafter=d, draft=dd, dynamic=True, sampled=sampled, max_new_tokens=n_max, prompt_set=name)
                     for d, dd in ((HYBRID, draft), (LOOKUP, None), (DRAFT_MODEL, draft))]
            if None in found:
                continue
            rates = [summaries[i].get("speedup") for i in found]
            if None in rates:
                continue
            better = max(rates[1:])
            add(f"hybrid ≥ {HYBRID_SHARE} × the better of its drafters on {name}{' (sampled)' if sampled else ''}", f"N={n_max}",
                rates[0] / better / HYBRID_SHARE, 1.0, f"{rates[0]:.2f}× vs {better:.2f}× (≥ {HYBRID_SHARE} of it)")
    return out


def exactness(plan: BenchPlan, records: list[dict]) -> list[dict]:
    """For each f32 check: whether its greedy tokens equal f32 autoregressive's, per prompt."""
    tokens = {(row["setting"], row["prompt"]): row.get("tokens") for row in records if row["repeat"] == 0}
    out = []
    for i, s in enumerate(plan.settings):
        if not s.exactness or s.mode == AR:
            continue
        base = _baseline(plan, s)
        for prompt_id, _ in plan.prompt_set(s.prompt_set).prompts:
            ours, want = tokens.get((i, prompt_id)), tokens.get((base, prompt_id))
            if ours is not None and want is not None:
                out.append({"method": s.how, "prompt_set": s.prompt_set, "prompt": prompt_id, "identical": ours == want})
    return out


def _ours_like(plan: BenchPlan, peer: Setting) -> int | None:
    """Our setting with the same method, K, prompts, N and decoding as a peer's."""
    for i, s in enumerate(plan.settings):
        if s.engine == OURS and not s.exactness and (s.mode, s.drafter, s.draft, s.k, s.dynamic, s.sampled, s.max_new_tokens, s.prompt_set) == (
            peer.mode, peer.drafter, peer.draft, peer.k, False, peer.sampled, peer.max_new_tokens, peer.prompt_set
        ):
            return i
    return None


def peer_ratios(plan: BenchPlan, records: list[dict], decode: bool = False) -> dict[int, float | None]:
    """For each peer setting: ours ÷ peer tokens/s (whole run, or decode only), per repeat, median."""
    rates = rates_per_repeat(records, decode)
    out = {}
    for j, peer in enumerate(plan.settings):
        if peer.engine == OURS:
            continue
        match = _ours_like(plan, peer)
        out[j] = None if match is None else _median_ratio(rates.get(match, {}), rates.get(j, {}))
    return out


# --- markdown ------------------------------------------------------------------------------------


def _num(value, digits: int = 1, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def _verdict(target: dict) -> str:
    if target["met"] is None:
        return "not measured"
    margin = target["margin"] * 100
    return f"**met** (+{margin:.0f}%)" if target["met"] else f"**missed** by {-margin:.0f}%"


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
    lines += [
        f"Machine: {m['cpu']}, {m['cores']} cores / {m['threads']} threads, {m['memory_gib']:.0f} GiB; "
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


def _row_speedup(report: dict, i: int) -> str:
    return _num(report["summaries"][i].get("speedup"), 2, "×")


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
            match = _ours_like(plan, s[i])
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
    roofline = _roofline(costs)
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


def _per_prompt_lines(plan: BenchPlan, report: dict) -> list[str]:
    """Speed-up over autoregressive, prompt by prompt, of each dynamic method at the largest N."""
    records = report["records"]
    n_max = max(x.max_new_tokens for x in plan.settings)
    lines = []
    for prompt_set in plan.prompt_sets:
        methods = [i for i, x in enumerate(plan.settings) if x.engine == OURS and x.mode == SPEC and not x.exactness
                   and not x.sampled and x.max_new_tokens == n_max and x.prompt_set == prompt_set.name]
        if not methods:
            continue
        columns = {i: per_prompt_speedups(records, i, _baseline(plan, plan.settings[i])) for i in methods}
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


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def _mib(value: int | None) -> str:
    return "—" if not value else f"{value / 2**20:.0f}"


# --- plot ----------------------------------------------------------------------------------------


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
