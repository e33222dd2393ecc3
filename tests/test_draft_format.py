"""The default pair's draft at INT4 or INT8, whichever this machine multiplies faster: timed on the
real CPU plugin, kept beside the models, and an image's prepared draft kept as it is."""
from __future__ import annotations

import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType

import spec.models.draft_format as draft_format_module
from spec.config import INT4, INT8
from spec.models.calibration import machine
from spec.models.draft_format import draft_format, measure
from spec.models.embedded import DRAFT_REF
from spec.models.gguf_weights import Tensor, compress, random_compressed
from spec.serving.presets import pair_keys
from tests.conftest import models_dir_at


def _never_timed() -> dict[str, float]:
    raise AssertionError("timed again although the choice was kept")


def test_this_cpu_times_both_formats_and_the_choice_is_kept_for_the_next_start(tmp_path, monkeypatch):
    record = measure()
    assert record["format"] in (INT4, INT8) and record["machine"] == machine()
    assert all(0 < seconds < 0.1 for seconds in record["seconds"].values()) and set(record["seconds"]) == {INT4, INT8}
    assert record["format"] == min(record["seconds"], key=record["seconds"].get)
    with models_dir_at(tmp_path):
        monkeypatch.delenv("SPEC_PREPARED_DIR", raising=False)
        assert draft_format() == record["format"]
        assert json.loads((tmp_path / "draft-format.json").read_text())["format"] == record["format"]
        monkeypatch.setattr(draft_format_module, "_measured", None)
        monkeypatch.setattr(draft_format_module, "_decided", {})  # a new process: the choice read from the file
        monkeypatch.setattr(draft_format_module, "_time_in_child", _never_timed)
        assert draft_format() == record["format"]
        assert pair_keys(None, DRAFT_REF)[1].weight_format == record["format"]


def _record(folder, weight_format: str, where: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "draft-format.json").write_text(json.dumps({"format": weight_format, "machine": where, "seconds": {}}))


@pytest.mark.parametrize("weight_format", [INT4, INT8])
def test_a_prepared_folders_draft_is_loaded_as_it_was_prepared_whatever_cpu_prepared_it(tmp_path, monkeypatch, weight_format):
    """An image's models were converted on its builder: its draft is the one there is."""
    _record(tmp_path / "prepared", weight_format, {"cpu": "the builder's"})
    monkeypatch.setenv("SPEC_PREPARED_DIR", str(tmp_path / "prepared"))
    monkeypatch.setattr(draft_format_module, "_time_in_child", _never_timed)
    with models_dir_at(tmp_path / "models"):
        assert draft_format() == weight_format
        assert pair_keys(None, DRAFT_REF)[1].weight_format == weight_format
        assert pair_keys(None, DRAFT_REF, "GPU")[1].weight_format == INT4  # timed on the CPU: another device keeps INT4


def test_a_choice_another_machine_made_in_the_models_folder_is_made_again(tmp_path, monkeypatch):
    """A models folder on shared storage moves between machines: their kernels differ."""
    monkeypatch.delenv("SPEC_PREPARED_DIR", raising=False)
    monkeypatch.setattr(draft_format_module, "_measured", None)
    monkeypatch.setattr(draft_format_module, "_time_in_child", lambda: {INT4: 2.0, INT8: 1.0})
    _record(tmp_path, INT4, {**machine(), "cpu": "another CPU"})
    with models_dir_at(tmp_path):
        assert draft_format() == INT8
    assert json.loads((tmp_path / "draft-format.json").read_text())["machine"] == machine()


def test_a_choice_this_machine_made_on_the_layers_that_computed_nan_is_made_again(tmp_path, monkeypatch):
    monkeypatch.delenv("SPEC_PREPARED_DIR", raising=False)
    monkeypatch.setattr(draft_format_module, "_measured", None)
    monkeypatch.setattr(draft_format_module, "_time_in_child", lambda: {INT4: 2.0, INT8: 1.0})
    _record(tmp_path, INT4, machine())  # no "timed_on": kept before the layers were normed
    with models_dir_at(tmp_path):
        assert draft_format() == INT8
    assert json.loads((tmp_path / "draft-format.json").read_text())["timed_on"] == draft_format_module._TIMED_ON


def test_a_timing_that_fails_leaves_the_draft_at_int4_and_is_tried_again_next_start(tmp_path, monkeypatch):
    monkeypatch.delenv("SPEC_PREPARED_DIR", raising=False)
    monkeypatch.setattr(draft_format_module, "_measured", None)
    monkeypatch.setattr(draft_format_module, "_time_in_child", lambda: None)
    with models_dir_at(tmp_path):
        assert draft_format() == INT4
        assert draft_format_module._measured is None and not (tmp_path / "draft-format.json").exists()
        monkeypatch.setattr(draft_format_module, "_time_in_child", _never_timed)
        assert draft_format() == INT4  # not timed again at every race: at the next start


def test_a_child_that_cannot_time_says_why_in_the_log(monkeypatch, caplog):
    monkeypatch.setattr(draft_format_module.sys, "executable", "/bin/false")  # exits at once, prints nothing
    assert draft_format_module._time_in_child() is None
    assert "Could not time the draft's layers" in caplog.text and "stays INT4" in caplog.text


@pytest.mark.parametrize("weight_format", [INT4, INT8])
def test_the_timed_layers_weights_are_laid_out_as_a_converted_drafts(weight_format):
    """The kernels timed are the ones the draft runs: random values, but compress's shapes, types and bits."""
    rows, columns = 64, 896  # 896: the 0.5B's hidden size, seven groups of 128 at INT4
    tensor = Tensor("blk.0.ffn_up.weight", int(GGMLQuantizationType.F32), rows, columns, 0, rows * columns * 4)
    data = np.random.default_rng(1).standard_normal((rows, columns)).astype(np.float32).view(np.uint8).reshape(rows, -1)
    converted = compress(tensor, data, np.arange(rows), weight_format)
    timed = random_compressed(rows, columns, weight_format, np.random.default_rng(0))
    assert timed.bits == converted.bits
    for part in ("values", "scales", "zero_points"):
        ours, theirs = getattr(timed, part), getattr(converted, part)
        assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype)
    assert timed.values.max() < 1 << timed.bits


@pytest.mark.parametrize("weight_format", [INT4, INT8])
def test_the_timed_layers_compute_finite_numbers(weight_format):
    """Infinities and NaNs could take other paths through the kernels than a real draft's numbers."""
    import openvino as ov

    request = ov.Core().compile_model(draft_format_module._layers(weight_format, []), "CPU").create_infer_request()
    assert np.isfinite(request.infer([np.ones((1, 1, 896), dtype=np.float32)])[0]).all()
