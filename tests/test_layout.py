"""The layout is part of the spec: the engine's modules form no import cycle, its folders are
layered one way (models below decoding below serving), the pure ones load without OpenVINO, and
nothing in the engine knows about the UI."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# The engine's folders, lowest first: each may import its own modules and those of the folders
# before it, never those after. The shared modules (settings, errors, progress) sit below all three.
LAYERS = ("spec.models", "spec.decoding", "spec.serving")
SHARED = ("spec.config", "spec.errors", "spec.progress")


def spec_paths() -> dict[str, Path]:
    """spec module name -> its file."""
    return {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): path for path in (REPO / "spec").rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Every module the file imports, anywhere in it (lazy imports too); for `from a.b import c`,
    a.b and a.b.c (which may be a module)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
    return imported


def spec_imports() -> dict[str, set[str]]:
    """spec module -> the spec modules it imports, anywhere in the file (lazy imports too)."""
    paths = spec_paths()
    graph = {}
    for name, path in paths.items():
        # `from spec.models import hub` imports the module spec.models.hub; `from spec.config import X`, spec.config
        found = {m if m in paths else m.rpartition(".")[0] for m in imports(path)}
        graph[name] = found & set(paths) - {name}
    return graph


def layer(module: str) -> int | None:
    """The module's place among LAYERS (0 lowest), -1 for the shared modules, None above them all."""
    if module in SHARED:
        return -1
    return next((i for i, folder in enumerate(LAYERS) if module == folder or module.startswith(folder + ".")), None)


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    """Each import in `graph` of a module in a later layer than the importer's (or above them all)."""
    return sorted(
        f"{module} -> {imported}"
        for module, imports_ in graph.items() if layer(module) is not None
        for imported in imports_ if layer(imported) is None or layer(imported) > layer(module)
    )


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


def test_the_folders_are_layered_models_below_decoding_below_serving():
    graph = spec_imports()
    unplaced = [m for m in graph if m.count(".") >= 2 and layer(m) is None]
    assert not unplaced, f"modules in a folder LAYERS does not name: {unplaced}"
    assert arrows_up(graph) == []


def test_the_layering_check_sees_an_arrow_back_up():
    """As when the registry imported decoding's cost model: an arrow back up from each layer is named."""
    graph = {
        "spec.models.registry": {"spec.config", "spec.models.runtime", "spec.decoding.adaptive_k"},
        "spec.decoding.engine": {"spec.models.registry", "spec.serving.race"},
        "spec.serving.race": {"spec.decoding.engine", "spec.models.registry", "spec.progress"},
        "spec.config": {"spec.cli"},
        "spec.cli": {"spec.serving.race"},
    }
    assert arrows_up(graph) == [
        "spec.config -> spec.cli", "spec.decoding.engine -> spec.serving.race", "spec.models.registry -> spec.decoding.adaptive_k",
    ]


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
    pure = ["spec.decoding.sampling", "spec.decoding.acceptance", "spec.decoding.drafters", "spec.decoding.policy",
            "spec.decoding.target_memory", "spec.decoding.speculative", "spec.decoding.autoregressive"]
    code = f"import sys; import {', '.join(pure)}; print(sorted(m for m in ('openvino', 'gradio', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_engine_never_imports_the_ui_or_the_benchmark():
    """Not gradio, not the page (app.py and the modules beside it), not the benchmark, even lazily."""
    page = {path.stem for path in REPO.glob("*.py")}
    assert {"app", "render"} <= page
    for path in (REPO / "spec").rglob("*.py"):
        outside = {m for m in imports(path) if m.split(".")[0] in {"gradio", "bench", "tests", *page}}
        assert not outside, (path.relative_to(REPO), sorted(outside))


def test_the_page_and_the_loop_stay_short_enough_to_read_in_one_sitting():
    # Issue 40's limits: app.py only lays out the page and renders what the engine yields; the loop
    # reads like the paper's algorithm. Each grew past its limit once without anyone noticing.
    assert len((REPO / "app.py").read_text().splitlines()) <= 350
    tree = ast.parse((REPO / "spec" / "decoding" / "speculative.py").read_text())
    loop = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "speculative")
    assert loop.end_lineno - loop.lineno + 1 <= 60
