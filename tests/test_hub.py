"""The Hub path against a server that speaks the Hub's HTTP API (tests/hub_server.py), reached
through HF_ENDPOINT as on a Space: a race on downloaded models, a download that resumes, the gated
and missing sentences, a Hub that stops answering, the offline second start, and `reachable()`.

huggingface_hub reads HF_ENDPOINT into `constants` when it is imported: in this process the tests
point those constants at the test Hub; the tests that start the command line set HF_ENDPOINT itself.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spec.config import DRAFT_MODEL, GenerationConfig, ModelKey
from spec.errors import ModelError
from spec.models import hub
from spec.models.export import IR_BIN
from spec.models.registry import ModelRegistry
from spec.models.resolve import resolve_model
from spec.serving.phases import RacePhase
from spec.serving.playback import watch
from spec.serving.scheduler import RaceRequest, Scheduler
from tests.conftest import CHECKPOINT, CHUNK, DRAFT, TARGET

REPO = Path(__file__).resolve().parents[1]


def _download(repo_id: str) -> Path:
    return hub.download(repo_id, lambda message, fraction: None)


def test_a_race_runs_on_models_downloaded_from_the_hub(test_hub):
    registry = ModelRegistry()
    scheduler = Scheduler(registry)  # as the Space races: the pair loads on the first race
    keys = ModelKey(TARGET, "fp32", "f32"), ModelKey(DRAFT, "fp32", "f32")
    recording, how = scheduler.submit(RaceRequest("Hello world", *keys, DRAFT_MODEL, GenerationConfig(max_new_tokens=12)))
    final = list(watch(recording, how, scheduler.place, threading.Event(), 0.0))[-1]
    assert final.phase == RacePhase.DONE and final.verdict.identical  # greedy at f32: the same text, token for token
    assert final.speculative.stats.new_tokens == 12
    from huggingface_hub import constants

    for key in keys:
        loaded = registry.get(key)
        assert loaded.resolved.source == "hub-ir" and Path(constants.HF_HUB_CACHE) in loaded.resolved.path.parents
    assert test_hub.gets(IR_BIN), "the weights came from the test Hub"


def test_a_checkpoint_repo_is_downloaded_then_converted(test_hub):
    resolved = resolve_model(CHECKPOINT, "fp32")
    assert resolved.source == "converted"
    assert all(test_hub.gets(name) for name in ("config.json", "model.safetensors", "tokenizer.json"))
    redirected = [r.path for r in test_hub.gets("model.safetensors")]
    assert len(redirected) == 1 and redirected[0].startswith("/cdn/"), "weights come the way LFS files do"


def test_an_interrupted_download_resumes_where_it_stopped(test_hub, repo_folders):
    weights = (repo_folders[TARGET] / IR_BIN).read_bytes()
    assert len(weights) > 3 * CHUNK
    test_hub.cut_off(TARGET, IR_BIN, after_bytes=CHUNK + 1000)
    snapshot = _download(TARGET)
    assert (snapshot / IR_BIN).read_bytes() == weights
    assert [r.range for r in test_hub.gets(IR_BIN)] == [None, f"bytes={CHUNK}-"]  # only the rest, asked for again


def test_a_hub_that_stops_answering_gives_a_sentence_not_a_hang(test_hub, repo_folders, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.3)
    test_hub.stall(TARGET, IR_BIN, after_bytes=2 * CHUNK + 1000)
    start = time.monotonic()
    with pytest.raises(ModelError, match=f"the Hub at {test_hub.url} stopped answering while {TARGET} was downloading"):
        _download(TARGET)
    assert time.monotonic() - start < 15  # huggingface_hub tries 6 times, 0.3 s of silence and a 1 s pause each
    ranges = [r.range for r in test_hub.gets(IR_BIN)]
    assert ranges[0] is None and set(ranges[1:]) == {f"bytes={2 * CHUNK}-"}  # each retry asked only for the rest
    assert not list(Path(constants.HF_HUB_CACHE).rglob(IR_BIN)), "no half file may pass for the weights"
    test_hub.mend()
    snapshot = _download(TARGET)  # the next try, once the Hub answers again
    assert (snapshot / IR_BIN).read_bytes() == (repo_folders[TARGET] / IR_BIN).read_bytes()
    assert not list(Path(constants.HF_HUB_CACHE).rglob("*.incomplete"))


def test_a_hub_that_never_lists_the_files_gives_a_sentence_not_a_hang(test_hub, monkeypatch):
    # huggingface_hub asks for the repo's info and file list with no timeout of its own.
    monkeypatch.setattr(hub, "REQUEST_TIMEOUT_SECONDS", 0.5)
    test_hub.stall(TARGET, None)
    start = time.monotonic()
    with pytest.raises(ModelError, match=f"Could not reach the Hub at {test_hub.url} to download {TARGET}"):
        _download(TARGET)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("token, status", [(None, 401), ("hf_secret_never_shown", 403)])
def test_a_gated_repo_names_the_hub_the_models_come_from(test_hub, repo_folders, monkeypatch, token, status):
    test_hub.add("meta-llama/tiny-gated", repo_folders[CHECKPOINT], gated=True)
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    with pytest.raises(ModelError) as raised:
        resolve_model("meta-llama/tiny-gated")
    message = str(raised.value)
    assert f"accept its license on {test_hub.url}/meta-llama/tiny-gated" in message and "HF_TOKEN" in message
    assert "huggingface.co" not in message and "hf_secret" not in message
    gated = [r for r in test_hub.requests if "/resolve/" in r.path]
    assert gated and {r.authorized for r in gated} == {bool(token)}


def test_a_missing_repo_says_so(test_hub):
    with pytest.raises(ModelError, match=f"the Hub at {test_hub.url} has no model nobody/no-such-model .*HF_TOKEN"):
        resolve_model("nobody/no-such-model")


def test_reachable_honours_the_endpoints_scheme_and_port(test_hub, monkeypatch):
    from huggingface_hub import constants

    assert hub.reachable(timeout=2)  # http://127.0.0.1:<port>: nothing listens on 443 here
    assert [r.method for r in test_hub.requests] == ["HEAD"]
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert not hub.reachable(timeout=2)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed.getsockname()[1]}")
    assert not hub.reachable(timeout=2)


def test_reachable_gives_up_on_a_server_that_never_answers(monkeypatch):
    from huggingface_hub import constants

    with socket.socket() as silent:  # accepts connections (the kernel's backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        start = time.monotonic()
        assert not hub.reachable(timeout=0.5)
        assert time.monotonic() - start < 2


def test_first_start_downloads_through_hf_endpoint_and_the_second_runs_offline(test_hub, tmp_path):
    """As on a Space, in fresh processes: HF_ENDPOINT names the Hub; the second start has no Hub at all."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "HF_ENDPOINT": test_hub.url, "HF_HUB_OFFLINE": "0",
           "SPEC_MODELS_DIR": str(tmp_path / "models")}
    for name in ("HF_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        env.pop(name, None)
    first = subprocess.run([sys.executable, "-m", "spec", "prepare", TARGET], env=env, capture_output=True, text=True,
                           timeout=120, cwd=REPO)
    assert first.returncode == 0, first.stderr
    assert f"Downloading {TARGET} — done" in first.stderr and test_hub.gets(IR_BIN)
    served = len(test_hub.requests)
    env.update(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")  # nothing there: it must not be needed
    argv = [sys.executable, "-m", "spec", "run", "--target", TARGET, "--prompt", "Hello", "--mode", "autoregressive",
            "--max-new-tokens", "4", "--json", "--quiet"]
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["target"] == TARGET
    assert len(test_hub.requests) == served


@pytest.mark.parametrize("label", ["Qwen2.5-Coder-7B-Instruct INT4 + 0.5B INT4", "Qwen2.5-Coder-3B-Instruct INT4 + 0.5B INT4"])
def test_the_coder_pairs_race_from_the_hub_with_a_restricted_draft_head(test_hub, repo_folders, label):
    """The Coder presets' Hub ids, served with tiny stand-ins: both are downloaded through the Hub's
    API, the draft's head is restricted to its most frequent tokens as the page loads it, and the
    race's greedy texts agree token for token."""
    import dataclasses

    from spec.serving.presets import PRESETS

    pair = next(p for p in PRESETS if p.label == label)
    test_hub.add(pair.target, repo_folders[TARGET])
    test_hub.add(pair.draft, repo_folders[DRAFT])
    pair = dataclasses.replace(pair, precision="f32", draft_vocabulary=120)  # the tiny vocabulary has ~310 tokens
    target_key, draft_key = pair.keys(*pair.models("hybrid"))
    assert draft_key.vocabulary == 120 and target_key.vocabulary is None
    registry = ModelRegistry()
    request = RaceRequest("def add(a, b):\n    return a + b\n", target_key, draft_key, "hybrid", GenerationConfig(max_new_tokens=16))
    scheduler = Scheduler(registry)
    recording, how = scheduler.submit(request)
    final = list(watch(recording, how, scheduler.place, threading.Event(), 0.0))[-1]
    assert final.phase == RacePhase.DONE and final.verdict.identical
    assert len(registry.get(draft_key).token_ids) == 120
