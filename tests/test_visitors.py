"""Visitors' models on a shared server, against the test Hub (tests/hub_server.py): weighed before a
byte is downloaded and refused in one sentence, converted in a child process whose death is a
sentence while the server races on, bounded on disk (least recently used evicted first, never the
operator's), and stopped once nobody waits for them."""
from __future__ import annotations

import errno
import json
import logging
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from spec.config import DRAFT_MODEL, PROMPT_LOOKUP, GenerationConfig, ModelKey
from spec.errors import Cancelled, ModelError
from spec.models import export, export_process, weigh
from spec.models.conversion_cache import convert_cached, models_dir
from spec.models.registry import ModelRegistry
from spec.models.resolve import resolve_model
from spec.models.visitors import LEDGER, VisitorLimits, VisitorModels
from spec.serving.phases import RacePhase
from spec.serving.playback import watch
from spec.serving.scheduler import RaceRequest, Scheduler
from tests.conftest import CHECKPOINT, DRAFT, TARGET, models_dir_at

BIG = "Qwen/Qwen2.5-72B-Instruct"
SHARDS = {f"model-{i:05d}-of-00030.safetensors": 5 * 10**9 for i in range(1, 31)}  # 150 GB, as large models are stored
SMALL = VisitorLimits(memory_bytes=8 * 10**9, disk_bytes=40 * 10**9)


def _bytes_under(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) if path.exists() else 0


def _race(scheduler: Scheduler, target: str, draft: str | None = None, weight_format: str = "fp32"):
    keys = [ModelKey(ref, weight_format, "f32", hub_only=True) if ref else None for ref in (target, draft)]
    request = RaceRequest("Hello world", keys[0], keys[1], DRAFT_MODEL if draft else PROMPT_LOOKUP,
                          GenerationConfig(max_new_tokens=8))
    recording, how = scheduler.submit(request)
    return list(watch(recording, how, scheduler.place, threading.Event(), 0.0))[-1]


@pytest.fixture
def fresh_models_dir(tmp_path, monkeypatch):
    """An empty conversion cache for the test: what it holds is what the test made. The disk shows
    500 GB free, so the limits the tests read are theirs, not those of the machine's disk that day."""
    monkeypatch.setattr("spec.models.visitors._free_disk", lambda: 500 * 10**9)
    with models_dir_at(tmp_path / "models"):
        yield tmp_path / "models"


def test_the_estimate_follows_the_weight_format():
    checkpoint = weigh.footprint("o/ckpt", {"config.json": 1000, "model.safetensors": 2 * 10**9}, "int8", {"BF16": 10**9})
    assert (checkpoint.parameters, checkpoint.is_ir, checkpoint.download_bytes) == (10**9, False, 2 * 10**9 + 1000)
    assert checkpoint.memory_bytes == int(4 * 10**9 * weigh.EXPORT_MEMORY_FACTOR) + weigh.LIBRARIES_BYTES  # through fp32
    assert checkpoint.disk_bytes == 2 * 10**9 + 1000 + 4 * 10**9 + 10**9  # the download, the fp32 IR, the INT8 IR
    fp32 = weigh.footprint("o/ckpt", {"config.json": 1000, "model.safetensors": 2 * 10**9}, "fp32", {"BF16": 10**9})
    assert fp32.disk_bytes == checkpoint.disk_bytes - 10**9
    unstated = weigh.footprint("o/ckpt", {"pytorch_model.bin": 4 * 10**9}, "int8", None, dtype_bytes=4)
    assert unstated.parameters == 10**9, "an fp32 checkpoint's config.json says 4 bytes a parameter"
    assert weigh.footprint("o/ckpt", {"pytorch_model.bin": 4 * 10**9}, "int8").parameters == 2 * 10**9, "unknown: 16 bits"
    ir = weigh.footprint("o/ir", {"openvino_model.xml": 10**6, "openvino_model.bin": 3 * 10**9, "config.json": 10}, "int8")
    assert (ir.is_ir, ir.disk_bytes, ir.weight_bytes) == (True, 3 * 10**9 + 10**6 + 10, 3 * 10**9)
    assert ir.memory_bytes == int(3 * 10**9 * weigh.LOAD_MEMORY_FACTOR)


def test_a_model_of_150_gb_is_refused_in_a_sentence_before_a_byte_is_downloaded_and_a_small_one_races_after(
        test_hub, fresh_models_dir, caplog):
    from huggingface_hub import constants

    test_hub.claim(BIG, {**SHARDS, "model.safetensors.index.json": 30_000, "tokenizer.json": 7_000_000},
                   parameters={"BF16": 75 * 10**9}, files={"config.json": json.dumps({"model_type": "qwen2"}).encode()})
    scheduler = Scheduler(ModelRegistry(visitors=VisitorModels(SMALL)))
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    refused = _race(scheduler, BIG, weight_format="int8")
    seconds = time.monotonic() - started
    assert refused.phase == RacePhase.FAILED and seconds < 1.0, seconds
    assert refused.error == (
        f"{BIG} has 150 GB of weights (75.0 billion parameters): converting it to OpenVINO INT8 takes about 390 GB of "
        "memory and 525 GB of disk, and this server converts models up to 8.0 GB of memory and has 40 GB of disk free "
        "for them: pick a smaller model.")
    assert not [r for r in test_hub.requests if r.method == "GET" and r.path.endswith(".safetensors")], "no weights asked for"
    written = _bytes_under(Path(constants.HF_HUB_CACHE)) + _bytes_under(fresh_models_dir)
    assert written < 100 * 2**20, written
    assert not [r for r in caplog.records if r.exc_info], "a refusal is a sentence, not a traceback"
    after = _race(scheduler, TARGET, DRAFT)  # a small visitor's model, right after
    assert after.phase == RacePhase.DONE and after.verdict.identical


def test_a_model_without_a_parameter_count_is_weighed_by_its_files(test_hub, fresh_models_dir):
    test_hub.claim("someone/big-bin", {"pytorch_model.bin": 60 * 10**9},
                   files={"config.json": json.dumps({"model_type": "llama", "torch_dtype": "float32"}).encode()})
    with pytest.raises(ModelError, match=r"someone/big-bin has 60 GB of weights \(15.0 billion parameters\)"):
        resolve_model("someone/big-bin", "int8", hub_only=True, visitors=VisitorModels(SMALL))
    assert not [r for r in test_hub.requests if r.method == "GET" and r.path.endswith(".bin")]


def test_an_ir_too_large_to_load_is_refused(test_hub, fresh_models_dir):
    test_hub.claim("OpenVINO/huge-ov", {"openvino_model.xml": 3 * 10**6, "openvino_model.bin": 20 * 10**9},
                   files={"config.json": b"{}", "tokenizer.json": b"{}"})
    with pytest.raises(ModelError, match=r"OpenVINO/huge-ov has 20 GB of OpenVINO weights: loading it takes about 24 GB "
                                         r"of memory .* this server loads visitors' models up to 8.0 GB"):
        resolve_model("OpenVINO/huge-ov", "int8", hub_only=True, visitors=VisitorModels(SMALL))


def test_a_conversion_that_dies_is_a_sentence_and_the_next_race_runs(test_hub, repo_folders, tmp_path, fresh_models_dir, caplog):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (broken / name).write_bytes((repo_folders[CHECKPOINT] / name).read_bytes())
    (broken / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}  ")
    test_hub.add("someone/broken", broken)
    scheduler = Scheduler(ModelRegistry(visitors=VisitorModels(SMALL)))
    caplog.set_level(logging.INFO)
    failed = _race(scheduler, "someone/broken")
    assert failed.phase == RacePhase.FAILED and failed.error.startswith("Could not convert someone--broken to OpenVINO"), failed.error
    assert str(models_dir()) not in failed.error and "Traceback" not in failed.error
    assert not [r for r in caplog.records if r.exc_info]
    log = next((models_dir() / "logs").glob("someone--broken-*.log")).read_text()
    assert "Traceback" in log, "what the child printed is in the conversion's log, for the operator"
    assert _race(scheduler, TARGET, DRAFT).phase == RacePhase.DONE, "the server races on"


def test_a_conversion_over_its_memory_limit_ends_in_its_own_process(test_hub, fresh_models_dir, monkeypatch):
    monkeypatch.setattr(weigh, "LIBRARIES_BYTES", 0)  # admitted by the estimate, so that the limit itself is what stops it
    limits = VisitorLimits(memory_bytes=200 * 10**6, disk_bytes=10**9)
    with pytest.raises(ModelError, match=f"Converting {CHECKPOINT.replace('/', '--')} needed more than the 0.2 GB of memory "
                                         "this server gives a conversion: pick a smaller model."):
        resolve_model(CHECKPOINT, "int8", hub_only=True, visitors=VisitorModels(limits))
    assert resolve_model(CHECKPOINT, "fp32", hub_only=True, visitors=VisitorModels(SMALL)).source == "converted"


def test_a_child_that_crashes_is_a_sentence(tmp_path, monkeypatch):
    crash = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    monkeypatch.setattr(export_process, "_child_argv", lambda *args: crash)
    with pytest.raises(ModelError, match=r"Converting tiny crashed \(signal SIGSEGV\) in its own process"):
        export_process.run_child(tmp_path, tmp_path / "out", "int8", "tiny", tmp_path / "log", 10**9)


def test_a_full_disk_in_the_child_is_said_as_such(tmp_path, monkeypatch):
    def export_ir(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "export_ir", export_ir)
    result = tmp_path / "result.json"
    assert export_process.main([str(tmp_path), str(tmp_path / "out"), "int8", "tiny", str(result)]) == 4
    assert json.loads(result.read_text()) == {"error": "disk"}


def test_a_full_disk_in_a_visitors_conversion_names_no_server_folder(tmp_path, fresh_models_dir, monkeypatch):
    says_full = "import json, sys; open(sys.argv[1], 'w').write(json.dumps({'error': 'disk'})); sys.exit(4)"
    monkeypatch.setattr(export_process, "_child_argv", lambda *args: [sys.executable, "-c", says_full, str(args[-1])])
    exporter = export_process.exporter(10**9, lambda message, fraction: None)
    with pytest.raises(ModelError, match="The server ran out of disk space while converting tiny: try a smaller model") as raised:
        convert_cached("someone/tiny", "tiny", {"n": 1}, "int8", lambda work_dir: tmp_path, lambda message, fraction: None,
                       1, exporter)
    assert str(models_dir()) not in str(raised.value)
    assert not list(models_dir().glob(".tmp-*"))


def test_one_conversion_at_a_time_the_next_says_it_waits_and_stops_when_nobody_does(tmp_path, monkeypatch):
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setattr(export_process, "_child_argv", lambda *args: sleeper)
    first_stop, second_stop = threading.Event(), threading.Event()
    seen, outcomes = [], {}

    def convert(name, stop):
        export = export_process.exporter(10**9, lambda message, fraction: seen.append((name, message)), stop.is_set)
        try:
            export(tmp_path, tmp_path / name, "int8", name, tmp_path / f"{name}.log", 60)
        except Cancelled as stopped:
            outcomes[name] = stopped

    first = threading.Thread(target=convert, args=("first", first_stop))
    first.start()
    deadline = time.monotonic() + 10
    while not any(message.startswith("Exporting first") for _, message in seen) and time.monotonic() < deadline:
        time.sleep(0.02)
    second = threading.Thread(target=convert, args=("second", second_stop))
    second.start()
    while ("second", export_process.WAITING) not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ("second", export_process.WAITING) in seen and not any(m.startswith("Exporting second") for _, m in seen)
    second_stop.set()  # its visitor left while it waited
    second.join(5)
    assert isinstance(outcomes.get("second"), Cancelled)
    sleepers = [p for p in psutil.Process().children() if "time.sleep(60)" in " ".join(p.cmdline())]
    assert len(sleepers) == 1, "one child converts; the second never started one"
    first_stop.set()  # nobody waits for the running one either: its child is killed
    first.join(5)
    assert isinstance(outcomes.get("first"), Cancelled) and not first.is_alive()
    assert not sleepers[0].is_running(), "the child is gone"


def test_visitors_models_stay_within_their_disk_and_the_least_recently_used_goes_first(test_hub, repo_folders, fresh_models_dir):
    from huggingface_hub import constants

    operators = "operator/pair-ov"  # a preset's model, which a visitor may type too
    test_hub.add(operators, repo_folders[TARGET])
    sizes = {ref: sum(f.stat().st_size for f in repo_folders[ref].iterdir()) for ref in (TARGET, DRAFT)}
    budget = int(max(sizes.values()) * 1.5)  # room for either, not both
    visitors = VisitorModels(VisitorLimits(memory_bytes=8 * 10**9, disk_bytes=budget), protected={operators})
    hub_cache = Path(constants.HF_HUB_CACHE)
    folder = {ref: hub_cache / f"models--{ref.replace('/', '--')}" for ref in (TARGET, DRAFT, operators)}
    resolve_model(TARGET, "fp32", hub_only=True, visitors=visitors)
    assert visitors.held_bytes() == pytest.approx(sizes[TARGET], rel=0.05)
    resolve_model(DRAFT, "fp32", hub_only=True, visitors=visitors)
    assert not folder[TARGET].exists() and folder[DRAFT].exists(), "the least recently used was evicted"
    assert visitors.held_bytes() <= budget
    resolve_model(operators, "fp32", hub_only=True, visitors=visitors)
    assert folder[operators].exists() and folder[DRAFT].exists(), "the operator's model is not counted, and evicts nothing"
    assert set(json.loads((models_dir() / LEDGER).read_text())) == {DRAFT}
    resolve_model(TARGET, "fp32", hub_only=True, visitors=visitors)  # back again: the draft goes now
    assert folder[TARGET].exists() and not folder[DRAFT].exists() and visitors.held_bytes() <= budget
    assert folder[operators].exists(), "never the operator's"


def test_a_download_nobody_waits_for_stops(test_hub, fresh_models_dir, caplog):
    from huggingface_hub import constants

    test_hub.claim("someone/slow", {"model.safetensors": 10**9}, parameters={"F16": 5 * 10**8},
                   files={"config.json": b"{}", "tokenizer.json": b"{}"}, bytes_per_second=2 * 10**6)
    registry = ModelRegistry(visitors=VisitorModels(VisitorLimits(20 * 10**9, 20 * 10**9)))
    key, cancel, seen, outcome = ModelKey("someone/slow", hub_only=True), threading.Event(), [], {}

    def load():
        try:
            registry.get(key, lambda message, fraction: seen.append(message), cancel)
        except BaseException as error:  # noqa: BLE001 -- the test reads it
            outcome["error"] = error

    loading = threading.Thread(target=load)
    loading.start()
    deadline = time.monotonic() + 10
    while not any("%" in m for m in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(m.startswith("Downloading someone/slow") for m in seen)
    cancel.set()
    loading.join(5)
    assert not loading.is_alive() and isinstance(outcome.get("error"), Cancelled)
    assert _bytes_under(Path(constants.HF_HUB_CACHE)) < 50 * 10**6, "it stopped long before the end"
    assert not [r for r in caplog.records if r.exc_info]


def test_with_the_hub_out_of_reach_a_cached_model_is_weighed_as_cached_and_another_gets_a_sentence(
        test_hub, fresh_models_dir, monkeypatch):
    from spec.models import hub

    visitors = VisitorModels(SMALL)
    first = resolve_model(TARGET, "fp32", hub_only=True, visitors=visitors).path
    monkeypatch.setattr(hub, "REQUEST_TIMEOUT_SECONDS", 0.5)
    for repo in (TARGET, DRAFT):
        test_hub.stall(repo, None)  # the repos' info never comes
    assert resolve_model(TARGET, "fp32", hub_only=True, visitors=visitors).path == first
    with pytest.raises(ModelError, match=f"Could not reach the Hub at {test_hub.url} to download {DRAFT}, and it is not cached"):
        resolve_model(DRAFT, "fp32", hub_only=True, visitors=visitors)
