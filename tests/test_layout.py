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
    graph = {}
    for path in (REPO / "spec").glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "spec":
                imported |= {f"spec.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spec."):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name.startswith("spec.")}
        graph[f"spec.{path.stem}"] = imported - {f"spec.{path.stem}"}
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


def test_pure_modules_import_without_openvino_or_ui():
    pure = ["spec.sampling", "spec.acceptance", "spec.drafters", "spec.adaptive_k", "spec.speculative", "spec.autoregressive"]
    code = f"import sys; import {', '.join(pure)}; print(sorted(m for m in ('openvino', 'gradio', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_engine_never_imports_the_ui():
    for path in (REPO / "spec").glob("*.py"):
        text = path.read_text()
        assert "import gradio" not in text and "from gradio" not in text, path.name
