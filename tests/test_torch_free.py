"""The command line and the app keep torch out of their process (spec.models.torch_free): the
offline models never need it, and a checkpoint is exported in a child process that has it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spec.models import conversion_cache, export, gguf
from spec.models.embedded import QUICK_REF, SmolLM2
from spec.models.torch_free import hidden, hide_torch

REPO = Path(__file__).resolve().parents[1]

# `python -m spec ARGS`, then whether torch was imported. A process of its own: this one has had
# torch for long.
_SPEC = """
import json, runpy, sys
sys.argv = ["spec", *sys.argv[1:]]
try:
    runpy.run_module("spec", run_name="__main__")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "torch": sys.modules.get("torch") is not None}))
"""


def _spec(models: Path, *argv: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", _SPEC, *argv], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "SPEC_MODELS_DIR": str(models)})
    assert done.stdout.strip(), done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_torch_is_left_alone_once_imported():
    import torch  # noqa: F401 -- as in any script that has used it

    assert not hide_torch() and not hidden()
    assert sys.modules["torch"] is not None


def test_an_embedded_model_is_prepared_without_torch_as_it_is_with_it(tmp_path):
    outcome, stderr = _spec(tmp_path, "prepare", "--convert-only", QUICK_REF)
    assert outcome == {"code": 0, "torch": False}, stderr[-2000:]
    assert "PyTorch was not found" not in stderr  # Transformers' advice is for its own users, not ours
    (entry,) = tmp_path.glob("SmolLM2-*")

    # What was read from the GGUF without torch is what is read with it.
    path = SmolLM2()._gguf()
    reading = gguf.read(path)
    here = gguf.write_source(path, reading, tmp_path / "with-torch", gguf.rebuilt_bpe_tokenizer(reading))
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (entry / name).read_bytes() == (here / name).read_bytes(), name


def test_a_checkpoint_is_exported_in_a_child_that_has_torch(tiny_checkpoints, tmp_path):
    outcome, stderr = _spec(tmp_path, "prepare", "--convert-only", "--weight-format", "fp32", str(tiny_checkpoints[0]))
    assert outcome == {"code": 0, "torch": False}, stderr[-2000:]
    assert "Exporting target to OpenVINO FP32 — done in" in stderr
    assert [p for p in tmp_path.iterdir() if (p / export.IR_XML).exists() and conversion_cache.entry_problem(p) is None]
