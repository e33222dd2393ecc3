"""Turning the benchmark's raw timings into medians, ratios, goal verdicts, Markdown tables and a plot.

One module per job: `stats` (medians and ratios from the records), `goals` (what the engine is
held to, and whether it was met), `tables` (the Markdown) and `figure` (the plot).
"""
from __future__ import annotations

from bench.plan import BenchPlan
from bench.records import Record
from bench.report.figure import plot
from bench.report.goals import check_targets
from bench.report.stats import exactness, peer_ratios, per_prompt_speedups, rates_per_repeat, summarize
from bench.report.tables import markdown

__all__ = ["check_targets", "derive", "exactness", "markdown", "peer_ratios", "per_prompt_speedups", "plot", "rates_per_repeat",
           "summarize"]


def derive(plan: BenchPlan, records: list[Record], costs: dict | None, cpu_class: str | None = None) -> dict:
    """Everything a report derives from its records: summaries, ours ÷ peer (whole run and decode),
    target verdicts (by the goals of the run's CPU class) and the f32 exactness checks (a run writes
    them; bench.rewrite derives them again)."""
    summaries = summarize(plan, records, costs)
    return {
        "summaries": summaries,
        "peer_ratios": {str(i): v for i, v in peer_ratios(plan, records).items()},
        "peer_decode_ratios": {str(i): v for i, v in peer_ratios(plan, records, decode=True).items()},
        "targets": check_targets(plan, records, summaries, costs, cpu_class),
        "exactness": exactness(plan, records),
    }

