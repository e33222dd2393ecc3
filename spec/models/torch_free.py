"""Keeping torch out of the processes that run models: only exporting a checkpoint needs it.

Transformers imports torch whenever it is installed, even to read a tokenizer or a config, and
torch then holds a few hundred MB for as long as the process lives. The offline models never
compute with it: OpenVINO reads and runs them, and NNCF compresses their weights with numpy. Only
exporting a Transformers checkpoint (a Hub model, a local checkpoint) needs it. So a process that
runs models hides torch before anything imports it (the app, the command line), Transformers then
works as it does where torch is not installed, and a checkpoint is exported in a child process that
has torch (spec.models.export_process). A script that imports spec keeps torch as it is.
"""
from __future__ import annotations

import os
import sys


def hide_torch() -> bool:
    """Make `import torch` fail in this process from now on; returns whether torch is hidden.

    Does nothing (returns False) once torch or Transformers is imported: Transformers decides once
    whether torch is there, and code already holding torch would break without it."""
    if sys.modules.get("torch", ...) is None:
        return True
    if "torch" in sys.modules or "transformers" in sys.modules:
        return False
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # its "PyTorch was not found" line
    sys.modules["torch"] = None  # the import system's own way to say a module is absent
    return True


def hidden() -> bool:
    """Whether torch is hidden in this process (hide_torch)."""
    return "torch" in sys.modules and sys.modules["torch"] is None
