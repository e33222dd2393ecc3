"""Tiny models for the engine tests: built and exported on the fly, shared by the whole session."""
from __future__ import annotations

import contextlib
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
    """Where tiny models are converted: a cache that lives only for this session."""
    return tmp_path_factory.mktemp("models")


@contextlib.contextmanager
def models_dir_at(path: Path | str | None):
    """Point SPEC_MODELS_DIR at `path` (None: unset, the default models/cache) for the block."""
    old = os.environ.pop("SPEC_MODELS_DIR", None)
    if path:
        os.environ["SPEC_MODELS_DIR"] = str(path)
    try:
        yield
    finally:
        os.environ.pop("SPEC_MODELS_DIR", None)
        if old is not None:
            os.environ["SPEC_MODELS_DIR"] = old


# The user's conversion cache (models/cache unless SPEC_MODELS_DIR says otherwise), read before any
# fixture moves it: the few tests that need a real model prepare it there, once, like the app.
REAL_MODELS_DIR = os.environ.get("SPEC_MODELS_DIR")


def real_models_dir():
    """SPEC_MODELS_DIR as the user had it, for a test that needs a real model (it says so)."""
    return models_dir_at(REAL_MODELS_DIR)


@pytest.fixture(scope="session", autouse=True)
def _tiny_conversions_stay_out_of_the_real_cache(tiny_models_dir):
    """Whatever a test converts (a custom pair typed on the page, a load that finishes after its test)
    goes to the session's temporary cache, never into the user's models/cache."""
    with models_dir_at(tiny_models_dir):
        yield


@pytest.fixture(autouse=True)
def _each_test_learns_afresh(tiny_models_dir):
    """The command line and the scheduler keep what their races learned of a pair beside the models
    (spec.decoding.kept_pairs): an earlier test's record would change what the next test drafts."""
    from spec.decoding.kept_pairs import FILE

    (tiny_models_dir / FILE).unlink(missing_ok=True)


def load_tiny(path: Path, models_dir: Path):
    """Convert (fp32, cached for the session) and load a tiny checkpoint at f32 precision."""
    from spec.config import ModelKey
    from spec.models.registry import load_model

    with models_dir_at(models_dir):
        return load_model(ModelKey(str(path), "fp32", "f32"))


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny target and a one-layer draft sharing its tokenizer, as checkpoints (not yet converted)."""
    root = tmp_path_factory.mktemp("tiny-checkpoints")
    return build_checkpoint(root / "target", seed=0), build_checkpoint(root / "draft", seed=0, num_layers=1)


@pytest.fixture(scope="session")
def cross_models(tmp_path_factory, tiny_models_dir):
    """A target (BPE with merges) and a draft with another tokenizer (one token per byte), both
    writing printable text, for drafting across tokenizers."""
    root = tmp_path_factory.mktemp("cross")
    target = build_checkpoint(root / "target", seed=0, printable=True)
    draft = build_checkpoint(root / "draft", seed=5, num_layers=1, tokenizer_kind="bytes", printable=True)
    return load_tiny(target, tiny_models_dir), load_tiny(draft, tiny_models_dir)


@pytest.fixture(scope="session")
def tiny_pairs(tmp_path_factory, tiny_models_dir):
    """Per architecture, a (target, draft) pair of loaded f32 models sharing a tokenizer.

    The draft is a noisy copy of its target, so rounds end in every way: all kept, some kept, none.
    """
    root = tmp_path_factory.mktemp("checkpoints")
    pairs = {}
    # llama: grouped-query attention, rotary positions; gpt2: multi-head attention, learned positions.
    for arch in ("llama", "gpt2"):
        target_dir = build_checkpoint(root / f"{arch}-target", arch=arch, seed=0)
        draft_dir = _noisy_copy(target_dir, root / f"{arch}-draft", noise=0.02, seed=1)
        pairs[arch] = (load_tiny(target_dir, tiny_models_dir), load_tiny(draft_dir, tiny_models_dir))
    return pairs



# The test Hub's repos (tests/hub_server.py): the tiny pair as OpenVINO IR repos, and the tiny target as a checkpoint.
TARGET, DRAFT, CHECKPOINT = "OpenVINO/tiny-llama-ov", "OpenVINO/tiny-llama-draft-ov", "tiny-owner/tiny-llama"
CHUNK = 64 * 1024  # huggingface_hub writes a download in chunks; a resume starts at the last whole one


@pytest.fixture(scope="session")
def repo_folders(tmp_path_factory, tiny_checkpoints) -> dict[str, Path]:
    """What the test Hub serves: the tiny pair as OpenVINO IR repos (converted as the OpenVINO org
    publishes them) and the tiny target as a Transformers checkpoint."""
    from spec.models import conversion_cache
    from spec.models.resolve import resolve_model

    root = tmp_path_factory.mktemp("hub-repos")
    folders = {CHECKPOINT: tiny_checkpoints[0]}
    for repo_id, checkpoint in ((TARGET, tiny_checkpoints[0]), (DRAFT, tiny_checkpoints[1])):
        converted = resolve_model(str(checkpoint), "fp32").path
        folders[repo_id] = root / repo_id.replace("/", "--")
        shutil.copytree(converted, folders[repo_id], ignore=shutil.ignore_patterns(conversion_cache.MARKER))
    return folders


@pytest.fixture
def test_hub(repo_folders, tmp_path, monkeypatch):
    """The test Hub serving every repo, with huggingface_hub pointed at it and an empty HF cache."""
    from huggingface_hub import constants

    from tests.hub_server import TestHub

    with TestHub() as server:
        for repo_id, folder in repo_folders.items():
            server.add(repo_id, folder)
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", CHUNK)
        monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))  # not the machine's login
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        yield server


def exact_first_tokens(target, prompt_ids: list[int], temperature: float = 1.0, top_k: int = 4) -> dict:
    """The exact law of a generation's first three tokens, p(t1) p(t2 | t1) p(t3 | t1 t2), under the
    same transforms the sampler applies: what sampled speculative decoding must follow."""
    import numpy as np

    from spec.decoding.sampling import Sampler

    sampler = Sampler(temperature, top_k, 1.0, target.vocab_size, np.random.default_rng(0))
    cache = target.model.new_cache()
    try:
        p1 = sampler.distribution(cache.forward(prompt_ids)[-1])[0]
        exact = {}
        for t1 in np.flatnonzero(p1):
            cache.trim(len(prompt_ids))
            p2 = sampler.distribution(cache.forward([t1])[-1])[0]
            for t2 in np.flatnonzero(p2):
                cache.trim(len(prompt_ids) + 1)
                p3 = sampler.distribution(cache.forward([t2])[-1])[0]
                for t3 in np.flatnonzero(p3):
                    exact[(int(t1), int(t2), int(t3))] = p1[t1] * p2[t2] * p3[t3]
    finally:
        cache.release()
    return exact


def assert_follows(counts: dict, exact: dict, runs: int) -> None:
    """Each outcome's frequency within 5 standard errors of its exact probability, and no other outcome."""
    import numpy as np

    assert set(counts) <= set(exact)
    for outcome, prob in exact.items():
        frequency = counts.get(outcome, 0) / runs
        assert abs(frequency - prob) < 5 * np.sqrt(prob * (1 - prob) / runs) + 1e-3, (outcome, frequency, prob)
