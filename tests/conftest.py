"""Tiny models for the engine tests: built and exported on the fly, shared by the whole session."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.tiny_models import build_checkpoint


def _noisy_copy(source: Path, path: Path, noise: float, seed: int) -> Path:
    """A draft that agrees with its target most of the time: the target's weights plus noise."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * noise)
    model.save_pretrained(path)
    for name in os.listdir(source):
        if name.startswith(("tokenizer", "special_tokens", "generation_config", "chat_template")):
            shutil.copy(source / name, path / name)
    return path


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory) -> Path:
    """SPEC_MODELS_DIR for tiny models: their conversion cache lives only for this session."""
    path = tmp_path_factory.mktemp("models")
    os.environ["SPEC_MODELS_DIR"] = str(path)
    return path


@pytest.fixture(scope="session")
def tiny_pairs(tmp_path_factory, tiny_models_dir):
    """Per architecture, a (target, draft) pair of loaded f32 models sharing a tokenizer.

    The draft is a noisy copy of its target, so rounds end in every way: all kept, some kept, none.
    """
    from spec.engine import load_model

    root = tmp_path_factory.mktemp("checkpoints")
    pairs = {}
    # llama: grouped-query attention, rotary positions; gpt2: multi-head attention, learned positions.
    for arch in ("llama", "gpt2"):
        target_dir = build_checkpoint(root / f"{arch}-target", arch=arch, seed=0)
        draft_dir = _noisy_copy(target_dir, root / f"{arch}-draft", noise=0.02, seed=1)
        pairs[arch] = (
            load_model(str(target_dir), "fp32", "f32"),
            load_model(str(draft_dir), "fp32", "f32"),
        )
    return pairs
