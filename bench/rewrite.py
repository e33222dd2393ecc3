"""Write a committed run's report again from its raw records: `python -m bench.rewrite bench/results/NAME.json`.

The records (every generation's tokens, seconds and counts) are the measurement; medians, ratios,
verdicts, the markdown and the plot are derived from them. When the report learns to show
something new (decode speed-ups, say), committed runs get it without being measured again.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.plan import BenchPlan, Draft, PromptSet, Setting
from bench.records import read_records
from bench.report import derive
from bench.run import write_outputs
from bench.tools import Parser

_DERIVED = ("index", "method", "label")  # settings' keys written for readers, not Setting fields


def plan_of(report: dict) -> BenchPlan:
    """The plan a report was measured with, as far as the report needs it (prompt texts are not kept)."""
    settings = [Setting(**{k: v for k, v in s.items() if k not in _DERIVED}) for s in report["settings"]]
    prompt_sets = [PromptSet(p["name"], p["kind"], p["description"], tuple((pid, "") for pid in p["prompts"]))
                   for p in report["prompt_sets"]]
    drafts = [Draft(d["label"], d["path"], d["description"]) for d in report["models"]["drafts"]]
    target = report["models"]["target"]
    return BenchPlan(target["label"], target["path"], drafts, prompt_sets, [], settings, None,
                notes=report.get("peer_notes", []) + report.get("notes", []))


def rewrite(path: Path) -> None:
    """Recompute everything derived in the report at `path` from its records; write .json, .md and .png beside it."""
    report = json.loads(path.read_text())
    plan = plan_of(report)
    report.update(derive(plan, read_records(report["records"]), report.get("costs"), report["machine"].get("cpu_class")))
    write_outputs(report, plan, path.parent)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.rewrite", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results JSON files written by python -m bench")
    args = parser.parse_args(argv)
    for path in args.results:
        try:
            rewrite(path)
        except KeyError as error:  # a JSON file, but not one python -m bench wrote
            print(f"[bench.rewrite] cannot rewrite {path}: not a results file of python -m bench (it has no {error} field)",
                  file=sys.stderr)
            return 1
        except (OSError, ValueError, TypeError) as error:
            print(f"[bench.rewrite] cannot rewrite {path}: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
