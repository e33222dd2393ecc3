"""What the benchmark holds the engine to: each goal with the measured value, what is needed and
whether it is met (the report's Targets table)."""
from __future__ import annotations

import statistics

from bench.plan import AR, DRAFT_MODEL, GENAI, HYBRID, LOOKUP, OURS, SPEC, BenchPlan
from bench.records import Record
from bench.report.stats import baseline_of, exactness, median_ratio, ours_like, per_prompt_speedups, rates_per_repeat

DYNAMIC_FLOOR = 0.95  # dynamic K must never fall below this fraction of our autoregressive speed
VERIFY_CEILING = 1.2  # a target call on K+1 = 5 tokens vs a 1-token call
VERIFY_K = 4
ROOFLINE_SHARE = 0.85  # a decoding step vs reading its weights once at the measured bandwidth
BEST_FIXED_SHARE = 0.95  # dynamic K vs the best fixed K, on every prompt
HYBRID_SHARE = 0.95  # the hybrid vs the better of its two drafters, per prompt set
# The default pair (the hybrid of the 0.5B draft and lookup) vs autoregressive, median whole-run per
# prompt: on open questions, code edits (any other input-grounded set) and HumanEval, greedy; open
# questions sampled. With AMX or AVX-512, and for a run that did not record its CPU's class.
PAIR_GOALS = {"open": 1.35, "grounded": 1.9, "humaneval": 2.3, "sampled": 1.2}
DRAFT_TOKEN_CEILING = 0.30  # a draft model's token, all in (its catch-up of the prompt aside), in target steps
# On AVX2 kernels (VNNI or not) a verify call of 5 costs 1.6-2.3 steps and a draft token twice as
# much as with AVX-512: issue 38 holds that class to these (HumanEval's goal it did not lower).
AVX2_PAIR_GOALS = {**PAIR_GOALS, "open": 1.25, "grounded": 1.7, "sampled": 1.2}
AVX2_DRAFT_TOKEN_CEILING = 0.35


def goals_for(cpu_class: str | None) -> tuple[dict[str, float], float]:
    """The default pair's goals and a draft token's ceiling for a run on `cpu_class` (runtime.cpu_class)."""
    if cpu_class and cpu_class.startswith("AVX2"):
        return AVX2_PAIR_GOALS, AVX2_DRAFT_TOKEN_CEILING
    return PAIR_GOALS, DRAFT_TOKEN_CEILING


def check_targets(plan: BenchPlan, records: list[Record], summaries: list[dict], costs: dict | None,
                  cpu_class: str | None = None) -> list[dict]:
    """The goals (those of `cpu_class`, goals_for), each with the measured value, what is needed and whether it is met."""
    rates = rates_per_repeat(records)
    settings = plan.settings
    targets = []

    def ratio(a: int, b: int) -> float | None:
        return median_ratio(rates.get(a, {}), rates.get(b, {}))

    def add(goal: str, configuration: str, value: float | None, needed: float) -> None:
        targets.append({
            "target": goal, "configuration": configuration, "value": value, "needed": needed,
            "met": None if value is None else value >= needed,
            "margin": None if value is None else value / needed - 1,
        })

    for j, peer in enumerate(settings):
        if peer.engine != GENAI or peer.sampled:
            continue
        match = ours_like(plan, peer)
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
    roofline = roofline_of(costs)
    if roofline:
        add(f"a decoding step ≥ {ROOFLINE_SHARE} × the bandwidth roofline",
            f"1-token target call vs {roofline['bytes_per_step'] / 1e9:.2f} GB of weights at {roofline['bandwidth'] / 1e9:.1f} GB/s",
            roofline["step_share"] / ROOFLINE_SHARE, 1.0)
        targets[-1]["shown"] = f"{roofline['step_share']:.2f} of roofline (≥ {ROOFLINE_SHARE})"
    targets += _per_prompt_targets(plan, records, summaries, *goals_for(cpu_class))
    exact = exactness(plan, records)
    if exact:
        same = sum(e["identical"] for e in exact)
        targets.append({"target": "at f32, greedy texts identical to autoregressive on every prompt",
                        "configuration": ", ".join(sorted({e["method"] for e in exact})), "value": same / len(exact),
                        "needed": 1.0, "met": same == len(exact), "margin": same / len(exact) - 1,
                        "shown": f"{same}/{len(exact)} prompts × methods"})
    return targets


def roofline_of(costs: dict | None) -> dict | None:
    """What reading the weights once per step at the measured bandwidth allows, and the share a step reaches."""
    if not costs or not costs.get("bytes_per_step") or not costs.get("read_bytes_per_second") or not costs.get("target_1"):
        return None
    tokens_per_second = costs["read_bytes_per_second"] / costs["bytes_per_step"]
    return {"bandwidth": costs["read_bytes_per_second"], "bytes_per_step": costs["bytes_per_step"],
            "tokens_per_second": tokens_per_second, "step_share": 1 / costs["target_1"] / tokens_per_second}


def _find(plan: BenchPlan, **fields) -> int | None:
    for i, s in enumerate(plan.settings):
        if s.engine == OURS and not s.exactness and all(getattr(s, key) == value for key, value in fields.items()):
            return i
    return None


def _per_prompt_targets(plan: BenchPlan, records: list[Record], summaries: list[dict], pair_goals: dict[str, float],
                        draft_token_ceiling: float) -> list[dict]:
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
        base = None if i is None else baseline_of(plan, plan.settings[i])
        return {} if i is None or base is None else per_prompt_speedups(records, i, base)

    if draft:
        for prompt_set in plan.prompt_sets:
            for sampled in (False, True):
                goal = pair_goals["sampled" if sampled else "humaneval" if prompt_set.name == "humaneval" else prompt_set.kind]
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
        steps = [r for r in records if plan.settings[r.setting].engine == OURS and plan.settings[r.setting].mode == AR
                 and not plan.settings[r.setting].exactness and r.plain_steps]
        drafted = [r for r in records if plan.settings[r.setting].drafter == DRAFT_MODEL and plan.settings[r.setting].engine == OURS
                   and not plan.settings[r.setting].exactness and r.draft_tokens]
        if steps and drafted:
            step = sum(r.target_seconds for r in steps) / sum(r.plain_steps for r in steps)
            token = sum(r.draft_seconds - (r.draft_catch_up_seconds or 0.0) for r in drafted) / sum(r.draft_tokens for r in drafted)
            add(f"a {draft} token, all in, ≤ {draft_token_ceiling} of a target step", "draft-model runs' drafting (the prompt's "
                "catch-up aside) per drafted token ÷ autoregressive runs' step", draft_token_ceiling / (token / step), 1.0,
                f"{token / step:.2f} of a step ({token * 1e3:.1f} ms ÷ {step * 1e3:.1f} ms; ≤ {draft_token_ceiling})")
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

