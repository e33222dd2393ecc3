"""The page's HTML: both panes, their statistics and the race's summary, from what spec.race yields.

Model text is always escaped: it never becomes markup.
"""
from __future__ import annotations

import html

from spec.config import F32, PROMPT_LOOKUP, SPECULATIVE, GenerationConfig
from spec.metrics import Stats
from spec.presets import Preset
from spec.race import LOADING, Lane, RaceUpdate, Verdict

KIND_LABELS = {  # the speculative pane's colours: (legend label, what it means)
    "accepted": ("accepted draft", "a draft token the target kept"),
    "correction": ("correction", "the target's own token where it rejected a draft"),
    "bonus": ("bonus", "the target's extra token after it kept every draft"),
    "target": ("target step", "a plain target step, made without a draft"),
}
LEGEND = '<div class="legend">' + "".join(
    f'<span title="{html.escape(meaning)}"><span class="tok tok-{kind}"></span>{html.escape(label)}</span>'
    for kind, (label, meaning) in KIND_LABELS.items()
) + "</div>"

def pane(lane: Lane | None, placeholder: str = "") -> str:
    if lane is None or (not lane.pieces and not lane.finished):
        return f'<div class="pane"><span class="placeholder">{html.escape(placeholder)}</span></div>'
    colour = lane.mode == SPECULATIVE
    text = "".join(
        f'<span class="tok tok-{kind}">{html.escape(piece)}</span>' if colour else html.escape(piece)
        for piece, kind in lane.pieces
    )
    caret = "" if lane.finished else '<span class="caret"></span>'
    return f'<div class="pane">{text}{caret}</div>'


def cell(label: str, value: str, title: str = "") -> str:
    return f'<div class="stat" title="{html.escape(title)}"><b>{value}</b><span>{label}</span></div>'


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def stats(lane: Lane | None, speculative: bool) -> str:
    s = lane.stats if lane is not None else Stats()
    cells = [
        cell("tokens/s", f"{s.tokens_per_second:.1f}", "new tokens / compute time"),
        cell("time to first token", seconds(s.ttft_seconds), "prompt prefill plus the first step"),
        cell("elapsed (compute)", seconds(s.seconds if s.ttft_seconds is not None else None), "time this method spent computing"),
        cell("new tokens", str(s.new_tokens)),
        cell("target calls", str(s.target_calls), "forward passes of the target model, prefill included"),
    ]
    if not speculative:
        return f'<div class="stats">{"".join(cells)}</div>'
    cells += [
        cell("acceptance rate", f"{s.acceptance_rate:.0%}" if s.drafted else "–", f"{s.accepted} of {s.drafted} verified draft tokens kept (free guesses included)"),
        cell("tokens per target call", f"{s.tokens_per_target_call:.2f}", "autoregressive decoding makes exactly 1"),
    ]
    return f'<div class="stats">{"".join(cells)}</div>{histogram(s)}'


def histogram(s: Stats) -> str:
    """Draft tokens kept per verifying target call, as small bars."""
    counts = s.accepted_histogram
    if not counts and not s.plain_steps:
        return ""
    top = max([*counts, s.plain_steps, 1])
    rows = [
        f'<div class="bar-row"><span class="bar-label">{n} kept</span>'
        f'<span class="bar" style="width:{100 * count / top:.0f}%"></span><span class="bar-count">{count}</span></div>'
        for n, count in enumerate(counts)
    ]
    if s.plain_steps:
        rows.append(
            f'<div class="bar-row"><span class="bar-label">no draft</span>'
            f'<span class="bar plain" style="width:{100 * s.plain_steps / top:.0f}%"></span>'
            f'<span class="bar-count">{s.plain_steps}</span></div>'
        )
    return f'<div class="hist"><div class="hist-title">Draft tokens kept per target call</div>{"".join(rows)}</div>'


def summary(message: str, kind: str = "info") -> str:
    return f'<div class="summary summary-{kind}">{message}</div>'


def verdict(result: Verdict, ar: Lane, sp: Lane, config: GenerationConfig, pair: Preset, drafter: str) -> str:
    if result.stopped:
        return summary("Stopped. The numbers above cover the tokens produced until then.", "info")
    how = "prompt lookup" if drafter == PROMPT_LOOKUP else "a draft model"
    k = f"K={config.num_assistant_tokens}" + (" (dynamic)" if config.dynamic_k else "")
    if result.speedup is not None:
        ratio = result.speedup
        winner = f"<b>{ratio:.2f}× faster</b>" if ratio >= 1 else f"<b>{1 / ratio:.2f}× slower</b>"
        speed = (f"Speculative with {how}, {k}: {winner} — {sp.stats.tokens_per_second:.1f} vs "
                 f"{ar.stats.tokens_per_second:.1f} tokens/s, both measured.")
    else:
        speed = "No tokens were generated, so there is no speed to compare."
    if result.identical is None:
        same = (f"Sampling at temperature {config.temperature:g}: the texts may differ, but both follow the "
                "target model's distribution.")
    elif result.identical:
        same = f"Greedy: the two texts are <b>identical</b>, token for token ({len(ar.token_ids)} tokens). ✓"
    else:
        same = f"Greedy: the texts <b>differ</b> from token {result.first_difference + 1} on."
        if pair.precision != F32:
            same += (" At the CPU's default precision (bf16 on many CPUs), checking K tokens in one pass can "
                     "round a near-tie differently from one-by-one decoding. Tick <i>Exact (f32)</i> under "
                     "Advanced for texts identical token for token (its verify calls cost more).")
    return summary(f"{speed}<br>{same}", "done")


def outputs(update: RaceUpdate, config: GenerationConfig, pair: Preset, drafter: str) -> tuple[str, str, str, str, str]:
    """(ar pane, spec pane, ar stats, spec stats, summary) for one update of the race."""
    ar, sp = update.autoregressive, update.speculative
    if update.phase == LOADING:
        lines = "<br>".join(f"{html.escape(role)}: {html.escape(message)}" for role, message in update.loading.items())
        message = summary(f"Loading models ({update.loading_seconds:.0f} s; only the first use of a pair waits)<br>{lines}", "loading")
        blank = pane(None, "Waiting for the models…")
        return blank, blank, stats(None, False), stats(None, True), message
    if update.verdict is not None and ar is not None:
        message = verdict(update.verdict, ar, sp, config, pair, drafter)
    elif update.verdict is not None:
        message = summary("Stopped. The models keep loading in the background, so the next run starts sooner.")
    else:
        message = summary(f"Racing… autoregressive {ar.stats.new_tokens} tokens, speculative {sp.stats.new_tokens} tokens "
                          f"(after {ar.seconds:.2f} s and {sp.seconds:.2f} s of compute).")
    return pane(ar), pane(sp), stats(ar, False), stats(sp, True), message


def failure(message: str) -> tuple[str, str, str, str, str]:
    """The outputs after a race failed: the message stays on the page under the panes."""
    blank = pane(None, "No output.")
    return blank, blank, stats(None, False), stats(None, True), summary(html.escape(message), "error")


def preparing(label: str, message: str, instead: str) -> str:
    """The line above the prompt while the default pair is prepared for its first use."""
    return (f'<div class="preparing">⏳ <b>{html.escape(label)}</b> is being prepared on this server for its first '
            f'use (a few minutes, once): {html.escape(message)}. Until then, races run on {html.escape(instead)}.</div>')


def prepared(label: str) -> str:
    return f'<div class="preparing done">✓ <b>{html.escape(label)}</b> is ready: pick it under <i>Model pair</i>.</div>'
