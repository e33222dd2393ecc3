"""The docs' links lead somewhere, and every result committed under bench/results/ is one they cite."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_docs_links_lead_somewhere():
    broken = [f"{doc.name}: {link}" for doc in DOCS for link in re.findall(r"\]\(([^)#\s]+)", doc.read_text())
              if not link.startswith(("http://", "https://", "mailto:")) and not (doc.parent / link).exists()]
    assert not broken, broken


def test_every_committed_result_is_cited():
    """A result is kept for a reader: the README, a doc, the code or a test names it, as a file
    (a report's .md stands for its .json and .png) or as a run's name in backquotes."""
    # Read from the folders, not from git: a fresh machine or a Space's copy may have no git.
    results = [path.relative_to(REPO) for path in (REPO / "bench" / "results").iterdir() if path.is_file()]
    sources = [*REPO.glob("*.md"), *REPO.glob("*.py"), *(REPO / "docs").rglob("*.md"),
               *(path for folder in ("spec", "bench", "tests") for path in (REPO / folder).rglob("*.py"))]
    citing = "\n".join(path.read_text(errors="replace") for path in sources if "bench/results" not in path.as_posix())
    uncited = [str(path) for path in results
               if not re.search(rf"(?<![\w.-]){re.escape(path.stem)}\.(json|md|png)|`{re.escape(path.stem)}`", citing)]
    assert not uncited, f"cite these in docs/ or remove them: {uncited}"


def test_the_readmes_pairs_are_the_pages_labels():
    """An API client copies a pair's label from the README into `/race`: each must be one the page offers."""
    from spec.serving.presets import PRESETS

    table = (REPO / "README.md").read_text().split("## Models and pairs", 1)[1].split("\n\n", 2)[1]
    named = [label for row in table.splitlines()[2:] for label in re.findall(r"`([^`]+)`", row.split("|")[1])]
    assert sorted(named) == sorted(preset.label for preset in PRESETS)


def test_every_engine_module_is_in_the_architectures_table():
    """A newcomer finds a module's one job in docs/architecture.md before opening it."""
    table = (REPO / "docs" / "architecture.md").read_text().split("## The engine's folders", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"([\w]+\.py)`", table))
    modules = [path for path in (REPO / "spec").rglob("*.py") if path.name != "__init__.py"]
    assert modules and not [str(path.relative_to(REPO)) for path in modules if path.name not in named]
