"""Medians and ratios from a run's raw records: tokens/s per setting, speed-ups, acceptance, predictions.

Tokens/s of a setting in one repeat is its new tokens over its seconds, summed over the prompts of
its set; the reported figure is the median over repeats. A ratio (speed-up, ours ÷ peer) is taken
per repeat between two settings measured in that same repeat, then the median is reported.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from bench.plan import AR, DRAFT_MODEL, LOOKUP, OURS, BenchPlan, Setting
from bench.records import Record
from spec.decoding.policy import predicted_speedup


def summarize(plan: BenchPlan, records: list[Record], costs: dict | None) -> list[dict]:
    """One summary per setting: median tokens/s, speed-ups over our autoregressive (whole run and decode,
    over the set and the median per prompt), acceptance, predictions."""
    by_setting: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        by_setting[record.setting].append(record)
    per_repeat, per_repeat_decode = rates_per_repeat(records), rates_per_repeat(records, decode=True)
    summaries = []
    t1 = (costs or {}).get("target_1")
    for i, setting in enumerate(plan.settings):
        rows = by_setting.get(i, [])
        rates = per_repeat.get(i, {})
        summary = {"label": setting.label, "tokens_per_second": _median(rates.values()), "repeats": len(rates)}
        if rates:
            summary["tokens_per_second_range"] = [min(rates.values()), max(rates.values())]
        baseline = baseline_of(plan, setting)
        if baseline is not None and baseline != i:
            summary["speedup"] = median_ratio(rates, per_repeat.get(baseline, {}))
            summary["decode_speedup"] = median_ratio(per_repeat_decode.get(i, {}), per_repeat_decode.get(baseline, {}))
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


def rates_per_repeat(records: list[Record], decode: bool = False) -> dict[int, dict[int, float]]:
    """setting -> repeat -> tokens/s summed over its prompts (whole run, or decode only)."""
    acc = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    for row in records:
        tokens, seconds = _timed(row, decode)
        a = acc[row.setting][row.repeat]
        a[0] += tokens
        a[1] += seconds
    return {i: {r: t / s for r, (t, s) in reps.items() if s > 0} for i, reps in acc.items()}


def per_prompt_speedups(records: list[Record], setting: int, baseline: int, decode: bool = False) -> dict[str, float]:
    """prompt -> median over repeats of this setting's tokens/s over the baseline's on that prompt
    (whole run, or decode only)."""
    rates: dict = defaultdict(dict)
    for row in records:
        tokens, seconds = _timed(row, decode)
        if row.setting in (setting, baseline) and seconds > 0:
            rates[(row.setting, row.prompt)][row.repeat] = tokens / seconds
    out = {}
    for (index, prompt), reps in rates.items():
        if index == setting:
            ratio = median_ratio(reps, rates.get((baseline, prompt), {}))
            if ratio is not None:
                out[prompt] = ratio
    return out


def _timed(row: Record, decode: bool) -> tuple[int, float]:
    """(tokens, seconds) of one generation: the whole run, or with `decode` what follows its first token
    (the prefill, which makes it, excluded); (0, 0) when the first token was not timed."""
    if not decode:
        return row.new_tokens, row.seconds
    if row.ttft_seconds is None or row.new_tokens < 2:
        return 0, 0.0
    return row.new_tokens - 1, row.seconds - row.ttft_seconds


def _counts(rows: list[Record]) -> dict:
    """Acceptance and call counts summed over every prompt and repeat."""
    if not rows:
        return {}
    total = lambda key: sum(getattr(row, key) or 0 for row in rows)  # noqa: E731
    out = {
        "new_tokens_per_prompt": total("new_tokens") / len(rows),
        "ttft_seconds": _median(row.ttft_seconds for row in rows if row.ttft_seconds is not None),
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
    if all(row.ttft_seconds is not None and row.target_seconds is not None for row in rows) and total("new_tokens"):
        # ms per generated token in each phase; "other" is trimming caches, sampling, Python, detokenizing.
        per_token = 1000 / total("new_tokens")
        prefill = total("ttft_seconds")
        phases = {"prefill": prefill, "draft": total("draft_seconds"), "target": total("target_seconds")}
        phases["other"] = total("seconds") - sum(phases.values())
        out["ms_per_token"] = {name: value * per_token for name, value in phases.items()}
    return out


def _same_tokens(rows: list[Record], baseline_rows: list[Record]) -> str | None:
    """How many prompts gave exactly our greedy autoregressive tokens (first repeat)."""
    ours = {row.prompt: row.tokens for row in baseline_rows if row.repeat == 0}
    theirs = {row.prompt: row.tokens for row in rows if row.repeat == 0}
    shared = [p for p in theirs if theirs[p] is not None and ours.get(p) is not None]
    if not shared:
        return None
    return f"{sum(theirs[p] == ours[p] for p in shared)}/{len(shared)}"


def baseline_of(plan: BenchPlan, setting: Setting) -> int | None:
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


def median_ratio(ours: dict[int, float], theirs: dict[int, float]) -> float | None:
    return _median(ours[r] / theirs[r] for r in ours if theirs.get(r))


def exactness(plan: BenchPlan, records: list[Record]) -> list[dict]:
    """For each f32 check: whether its greedy tokens equal f32 autoregressive's, per prompt."""
    tokens = {(row.setting, row.prompt): row.tokens for row in records if row.repeat == 0}
    out = []
    for i, s in enumerate(plan.settings):
        if not s.exactness or s.mode == AR:
            continue
        base = baseline_of(plan, s)
        for prompt_id, _ in plan.prompt_set(s.prompt_set).prompts:
            ours, want = tokens.get((i, prompt_id)), tokens.get((base, prompt_id))
            if ours is not None and want is not None:
                out.append({"method": s.how, "prompt_set": s.prompt_set, "prompt": prompt_id, "identical": ours == want})
    return out


def ours_like(plan: BenchPlan, peer: Setting) -> int | None:
    """Our setting with the same method, K, prompts, N and decoding as a peer's."""
    for i, s in enumerate(plan.settings):
        if s.engine == OURS and not s.exactness and (s.mode, s.drafter, s.draft, s.k, s.dynamic, s.sampled, s.max_new_tokens, s.prompt_set) == (
            peer.mode, peer.drafter, peer.draft, peer.k, False, peer.sampled, peer.max_new_tokens, peer.prompt_set
        ):
            return i
    return None


def peer_ratios(plan: BenchPlan, records: list[Record], decode: bool = False) -> dict[int, float | None]:
    """For each peer setting: ours ÷ peer tokens/s (whole run, or decode only), per repeat, median."""
    rates = rates_per_repeat(records, decode)
    out = {}
    for j, peer in enumerate(plan.settings):
        if peer.engine == OURS:
            continue
        match = ours_like(plan, peer)
        out[j] = None if match is None else median_ratio(rates.get(match, {}), rates.get(j, {}))
    return out

