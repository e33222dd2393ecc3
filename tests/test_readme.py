"""The README is for users: what it shows must work as shown, and stay short."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import yaml

import spec
from spec.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_the_space_card_on_top_stays_valid():
    assert README.startswith("---\n")
    card = yaml.safe_load(README.split("---\n")[1])
    assert card["sdk"] == "docker" and card["app_port"] == 7860 and card["title"]


def test_it_stays_short_and_its_first_screen_says_what_it_needs():
    assert len(README.splitlines()) <= 300
    first_screen = README[: README.index("## At a workshop")]
    for need in ("Python 3.10", "./run.sh app", "./run.sh test", "docs/screenshot.png"):
        assert need in first_screen, need
    for row in ("memory", "disk", "time"):  # what it needs, in figures
        assert re.search(rf"\| {row} \| [^|\n]*\d", first_screen), row


def test_its_links_lead_somewhere():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links and all((REPO / link).exists() for link in links), [link for link in links if not (REPO / link).exists()]


def test_the_python_example_runs(tiny_pairs, monkeypatch):
    target, draft = tiny_pairs["llama"]
    loaded = {"embedded:Qwen2.5-Coder-1.5B-Instruct": target, "embedded:Qwen2.5-Coder-0.5B-Instruct": draft}
    monkeypatch.setattr(spec, "load_model", lambda ref, *args, **kwargs: loaded[ref])  # the real ones take minutes
    example = blocks("python")[0]
    assert len([line for line in example.splitlines() if line.strip()]) == 5
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, "README.md", "exec"), {})
    assert out.getvalue().strip(), "the example prints the answer and its speed"


def test_the_command_lines_parse():
    commands = [line.split("#")[0].split("<")[0] for block in blocks("bash") for line in block.splitlines()
                if line.startswith("python -m spec ")]
    assert {shlex.split(c)[3] for c in commands} == {"run", "race", "prepare"}
    for command in commands:
        build_parser().parse_args(shlex.split(command)[3:])


def test_the_configuration_table_names_every_setting():
    read = set(re.findall(r'"((?:SPEC|SPACE)_[A-Z_]+)"', (REPO / "spec/serving/settings.py").read_text()))
    read |= {"SPEC_MODELS_DIR", "SPEC_PREPARED_DIR", "SPEC_DEVICE", "SPACE_HOST", "SPEC_DEBUG"}
    table = README[README.index("## Configuration"): README.index("## Models and pairs")]
    assert read and not {name for name in read if f"`{name}`" not in table}
