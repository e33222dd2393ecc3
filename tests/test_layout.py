"""The layout is part of the spec: the engine's modules form no import cycle, the pure ones load
without OpenVINO, and nothing in the engine knows about the UI."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def spec_imports() -> dict[str, set[str]]:
    """spec module -> the spec modules it imports, anywhere in the file (lazy imports too)."""
    paths = {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): path for path in (REPO / "spec").rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "spec":
                # `from spec.models import hub` imports the module spec.models.hub
                imported.add(node.module)
                imported |= {f"{node.module}.{alias.name}" for alias in node.names} & set(paths)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name.startswith("spec.")}
        graph[name] = imported - {name}
    return graph


def test_the_engine_has_no_import_cycle():
    graph = spec_imports()
    done, path = set(), []

    def visit(module: str) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(module):] + [module]))
        if module in done or module not in graph:
            return
        path.append(module)
        for imported in sorted(graph[module]):
            visit(imported)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_decoding_never_imports_serving():
    for module, imported in spec_imports().items():
        if module.startswith("spec.decoding"):
            assert not {m for m in imported if m.startswith("spec.serving")}, module


def test_each_job_has_its_folder():
    """The three jobs are subpackages, and nothing but settings, errors, progress and the command
    line sits beside them."""
    top = {path.stem for path in (REPO / "spec").glob("*.py")}
    assert top == {"__init__", "__main__", "config", "errors", "progress", "cli"}, top
    for job in ("models", "decoding", "serving"):
        assert (REPO / "spec" / job / "__init__.py").exists(), job


def test_the_front_door_exports_what_scripts_use_without_loading_openvino():
    code = (
        "import sys, spec; from spec import GenerationConfig, ModelKey; "
        "print(sorted(m for m in ('openvino', 'gradio') if m in sys.modules)); "
        "from spec import generate, load_model; import spec.decoding.engine as e, spec.models.registry as r; "
        "print(generate is e.generate and load_model is r.load_model)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True"]
    missing = subprocess.run([sys.executable, "-c", "import spec; spec.nothing_here"], cwd=REPO, capture_output=True, text=True)
    assert "has no attribute 'nothing_here'" in missing.stderr


def test_pure_modules_import_without_openvino_or_ui():
    pure = ["spec.decoding.sampling", "spec.decoding.acceptance", "spec.decoding.drafters", "spec.decoding.adaptive_k", "spec.decoding.speculative", "spec.decoding.autoregressive"]
    code = f"import sys; import {', '.join(pure)}; print(sorted(m for m in ('openvino', 'gradio', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_engine_never_imports_the_ui():
    for path in (REPO / "spec").rglob("*.py"):
        text = path.read_text()
        assert "import gradio" not in text and "from gradio" not in text, path.name
