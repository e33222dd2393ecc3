"""The lock (constraints.txt) pins, at one exact version, every package the requirements name, at a
version each requirement allows, and torch at its CPU build; run.sh and the Dockerfile install from it."""
from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = ("requirements.txt", "requirements-dev.txt", "requirements-bench.txt")


def requirements(name: str) -> list[Requirement]:
    lines = (line.split("#")[0].strip() for line in (REPO / name).read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def lock() -> dict[str, Version]:
    """Package -> its pinned version, for the lines whose marker holds here."""
    pins = {}
    for requirement in requirements("constraints.txt"):
        if requirement.marker is None or requirement.marker.evaluate():
            (specifier,) = requirement.specifier  # one specifier: an exact version
            assert specifier.operator == "==" and "*" not in specifier.version, requirement
            name = canonicalize_name(requirement.name)
            assert name not in pins, f"{name} is pinned twice"
            pins[name] = Version(specifier.version)
    return pins


def test_every_requirement_is_pinned_in_the_lock_at_a_version_it_allows():
    pins = lock()
    for name in REQUIREMENTS:
        for requirement in requirements(name):
            pinned = pins.get(canonicalize_name(requirement.name))
            assert pinned is not None, f"{requirement} ({name}) is not in constraints.txt: run ./run.sh lock"
            assert requirement.specifier.contains(pinned, prereleases=True), \
                f"constraints.txt pins {requirement.name}=={pinned}, which {name} does not allow ({requirement})"


def test_torch_is_locked_at_its_cpu_build():
    assert lock()["torch"].local == "cpu", "PyPI's torch is the CUDA build: gigabytes of nvidia packages"
    assert not [name for name in lock() if name.startswith("nvidia-")]


def test_wheels_installed_without_dependencies_are_at_the_locks_version():
    """run.sh and the Dockerfile name the versions of what they install with --no-deps themselves."""
    pins = lock()
    for name in ("run.sh", "Dockerfile"):
        named = re.findall(r"([A-Za-z0-9][\w.-]*)==(\d[\w.+]*)", (REPO / name).read_text())
        for package, version in named:
            if canonicalize_name(package) in pins and package != "torch":
                assert pins[canonicalize_name(package)] == Version(version), f"{name} installs {package}=={version}"


def _installed_by(requirement_files: tuple[str, ...]) -> set[str]:
    """The distributions pip installs for `requirement_files`: those they name and, through the installed
    packages' metadata, everything those require (with the extras asked for)."""
    from importlib.metadata import PackageNotFoundError, distribution

    todo = [req for name in requirement_files for req in requirements(name)]
    seen: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            required = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        for line in required:
            dependency = Requirement(line)
            extras = requirement.extras or {""}
            if dependency.marker is None or any(dependency.marker.evaluate({"extra": extra}) for extra in extras):
                todo.append(dependency)
    return seen


def test_every_package_the_app_imports_is_installed_by_the_run_time_requirements():
    """./run.sh app and the Dockerfile install requirements.txt alone: a package that app.py or spec/
    imports but only the tests' or the benchmark's requirements bring would be missing there (the
    GGUF reader's openvino_genai once was, and every first start failed to convert a model)."""
    import ast
    import sys
    from importlib.metadata import packages_distributions

    page = list(REPO.glob("*.py"))  # app.py and the modules beside it
    own = {"spec", "tests", *(path.stem for path in page)}
    distributions = packages_distributions()
    installed = _installed_by(("requirements.txt",))
    missing = {}
    for path in [*page, *(REPO / "spec").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for top in {module.split(".")[0] for module in modules} - own - set(sys.stdlib_module_names):
                names = {canonicalize_name(d) for d in distributions.get(top, [top])}
                if not names & installed:
                    missing[top] = path.relative_to(REPO)
    assert not missing, f"imported but not installed by requirements.txt: {missing}"
