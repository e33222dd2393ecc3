"""A GGUF file (llama.cpp's format) to a stateful OpenVINO IR, without a float copy of the model.

Two tools, each doing what it does well:

- openvino-genai's GGUF reader builds the graph: the same stateful layout optimum-intel exports
  (inputs `input_ids, attention_mask, position_ids, beam_idx`, one state per key and value per
  layer), and `openvino_tokenizer.xml` / `openvino_detokenizer.xml` beside it. It is not trusted
  with the weights: it rounds a Q4_K block's minimum to a whole zero point (an error of several
  percent of each weight), refuses Q5_0 tensors, and its group-wise 8-bit form runs at half the
  speed of a per-channel one.
- The weights come from the file itself (spec.models.gguf_weights): the `gguf` package
  dequantizes one tensor at a time, exactly as Transformers does, and NNCF's own quantizer
  compresses it to the form asked for.

The reader is given a skeleton of the file: the same metadata, norms and biases, every weight
matrix replaced by a Q4_0 stand-in whose scale is the tensor's number and whose first values
spell each row's number. In the graph it builds, each stand-in is then recognised, with any rows
the reader reordered (Llama's query and key projections), and replaced by the real weight.
Memory stays near the reader's own (a few times the skeleton) plus the compressed model. Where
the machine has room for both at once, the weights are compressed while the reader builds the
graph (in a child process, on the other core), and put in once it is built.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from spec.config import FP32
from spec.errors import ModelError
from spec.models.gguf import reader as gguf_reader
from spec.models.gguf_weights import Compressed, Tensor, compress, decompression, weight

READER_ARCHITECTURES = ("llama", "qwen2", "qwen3")  # what openvino-genai's reader builds
MAX_TENSORS = 2048  # tensor numbers are stored as fp16 scales, exact up to 2048
ROW_DIGITS = 5  # 4-bit digits that number a row: up to 16**5 rows (a vocabulary of a million)
# Free memory, in GGUF sizes, for compressing the weights while the reader builds the graph: the
# reader's child peaks near twice the GGUF's size, the compressed weights reach 1.4 times it at
# INT8 (docs/design-notes.md). With less, the two run one after the other, as on a 4 GB machine.
ROOM_TO_OVERLAP = 4
REPO_ROOT = Path(__file__).resolve().parents[2]


_Q4_0_BLOCK = 32  # values per Q4_0 block; a block is an fp16 scale and 16 bytes of 4-bit values
_STAND_IN = "skeleton.gguf"


StepFn = Callable[[float, str], None]  # (fraction done, what is being done): a phase's `update`


def convert(gguf: Path, out: Path, weight_format: str, progress: StepFn | None = None) -> None:
    """Write `gguf` as a stateful OpenVINO IR into `out` (openvino_model.xml/.bin and the
    openvino_tokenizer/detokenizer IRs), its weights compressed to `weight_format`; `progress`
    hears how far it is."""
    work = out / ".gguf-reader"
    work.mkdir(parents=True, exist_ok=True)
    try:
        _say(progress, 0.0, "writing a skeleton of the GGUF")
        tensors = write_skeleton(gguf, work / _STAND_IN)
        _say(progress, 0.1, "building the graph with OpenVINO's GGUF reader")
        compressed: dict[str, Compressed] = {}
        with graph_building(work / _STAND_IN) as built:
            if weight_format != FP32 and _room_to_overlap(gguf):
                compressed = compress_weights(gguf, tensors, weight_format,
                                              lambda done, detail: _say(progress, 0.1 + 0.6 * done, detail + ", while the graph is built"))
            built()
        start = 0.7 if compressed else 0.3
        _say(progress, start, "putting the weights in")
        fill_weights(work / "openvino_model.xml", gguf, tensors, out / "openvino_model.xml", weight_format,
                     lambda done, detail: _say(progress, start + (1 - start) * done, detail), compressed)
        for name in ("openvino_tokenizer", "openvino_detokenizer"):
            for suffix in (".xml", ".bin"):
                if (work / (name + suffix)).is_file():
                    os.replace(work / (name + suffix), out / (name + suffix))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _room_to_overlap(gguf: Path) -> bool:
    from spec.models.memory import available_bytes

    return available_bytes() >= ROOM_TO_OVERLAP * gguf.stat().st_size


def _say(progress: StepFn | None, fraction: float, detail: str) -> None:
    if progress is not None:
        progress(fraction, detail)


def _is_matrix(tensor) -> bool:
    return len(tensor.shape) >= 2 and int(np.prod(tensor.shape[1:])) > 1


def write_skeleton(gguf: Path, out: Path) -> list[Tensor]:
    """Write `gguf` again as `out`, each weight matrix a Q4_0 stand-in: every block's scale is the
    tensor's number plus one, and each row's first ROW_DIGITS values spell its row number (4 bits
    each, lowest first). Everything else is copied as it is. Returns where `gguf`'s tensors are."""
    import gguf as gguf_lib
    from gguf import GGMLQuantizationType, GGUFValueType

    reader = gguf_reader(gguf, keep=False)  # parsed once with the tokenizer's reading, and not kept after
    architecture = reader.fields["general.architecture"].contents()
    if architecture not in READER_ARCHITECTURES:
        raise ModelError(f"{gguf.name} is a {architecture} model; OpenVINO's GGUF reader builds {', '.join(READER_ARCHITECTURES)} only.")
    if len(reader.tensors) >= MAX_TENSORS:
        raise ModelError(f"{out.name}: {len(reader.tensors)} tensors are more than this conversion numbers ({MAX_TENSORS}).")
    writer = gguf_lib.GGUFWriter(str(out), architecture)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # the header's own counts, and what the writer adds itself
        vtype = field.types[0]
        writer.add_key_value(name, field.contents(), vtype, sub_type=field.types[-1] if vtype == GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        if _is_matrix(tensor):
            rows, blocks = _rows_and_blocks(tensor)
            writer.add_tensor_info(tensor.name, (rows, blocks * 18), np.dtype(np.uint8), rows * blocks * 18,
                                   raw_dtype=GGMLQuantizationType.Q4_0)
        else:
            writer.add_tensor_info(tensor.name, tuple(int(n) for n in tensor.data.shape), tensor.data.dtype, tensor.data.nbytes,
                                   raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for number, tensor in enumerate(reader.tensors):
        writer.write_tensor_data(_stand_in(number, *_rows_and_blocks(tensor)) if _is_matrix(tensor) else np.asarray(tensor.data))
    writer.close()
    return [Tensor(t.name, int(t.tensor_type), int(np.prod(t.shape[1:])), int(t.shape[0]), int(t.data_offset), int(t.n_bytes))
            for t in reader.tensors]


def _rows_and_blocks(tensor) -> tuple[int, int]:
    columns, rows = int(tensor.shape[0]), int(np.prod(tensor.shape[1:]))  # GGUF lists dimensions innermost first
    if columns % _Q4_0_BLOCK:
        raise ModelError(f"{tensor.name} has rows of {columns} values, not a multiple of {_Q4_0_BLOCK}: OpenVINO's GGUF "
                         "reader cannot take it.")
    if rows >= 16 ** ROW_DIGITS:
        raise ModelError(f"{tensor.name} has {rows} rows, more than this conversion numbers.")
    return rows, columns // _Q4_0_BLOCK


def _stand_in(number: int, rows: int, blocks: int) -> np.ndarray:
    """Q4_0 blocks (rows, blocks * 18 bytes) whose scale is number + 1 and whose row r begins with r's digits."""
    data = np.zeros((rows, blocks, 18), dtype=np.uint8)
    data[:, :, :2] = np.frombuffer(np.float16(number + 1).tobytes(), dtype=np.uint8)
    row = np.arange(rows, dtype=np.int64)
    for digit in range(ROW_DIGITS):  # value j of a block is the low nibble of its byte 2 + j
        data[:, 0, 2 + digit] = (row >> (4 * digit)) & 0x0F
    return data.reshape(rows, blocks * 18)


def build_graph(skeleton: Path) -> None:
    """Have openvino-genai's reader build the IR of `skeleton` beside it, in a child process (the
    memory it takes goes back when it ends)."""
    with graph_building(skeleton) as built:
        built()


@contextlib.contextmanager
def graph_building(skeleton: Path) -> Iterator[Callable[[], None]]:
    """Start build_graph's child and yield a function that waits for it to finish, raising
    ModelError if it failed; leaving the block any other way kills the child."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
           # The reader allocates and frees small buffers by the million: glibc's per-thread cache
           # holding more of them takes about a quarter off its time. Ignored elsewhere.
           "GLIBC_TUNABLES": ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), "glibc.malloc.tcache_count=65535"]))}
    log = skeleton.with_name("reader.log")  # a file, not a pipe: a child writing to a full pipe nobody reads would stop
    with open(log, "wb") as sink:
        child = subprocess.Popen([sys.executable, "-m", "spec.models.gguf_ir", str(skeleton)], env=env,
                                 stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)

    def built() -> None:
        code = child.wait()
        if code == -signal.SIGKILL:  # the kernel's OOM killer, in all likelihood: nothing else here sends it
            raise ModelError(f"OpenVINO's GGUF reader was killed while building {skeleton.name}'s graph, most likely for "
                             "want of memory: close other programs, or give this machine (or container) more memory.")
        if code != 0 or not (skeleton.parent / "openvino_model.xml").is_file():
            lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            detail = lines[-1].strip()[:300] if lines else f"exit code {code}"
            raise ModelError(f"OpenVINO's GGUF reader could not build {skeleton.name}'s graph ({detail}): install the "
                             "openvino-genai version in requirements.txt.")

    try:
        yield built
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _read_in_child(skeleton: Path) -> None:
    """The child: the reader saves the IR and tokenizers beside `skeleton` while it makes a
    pipeline, before compiling it; a device this process does not have stops it there. (The
    pipeline saves the tokenizers too: an `openvino_genai.Tokenizer` of its own would read the file
    again.)"""
    import openvino_genai

    try:
        openvino_genai.LLMPipeline(str(skeleton), "NO-SUCH-DEVICE", enable_save_ov_model=True)
    except RuntimeError:
        pass  # the device, as intended; build_graph checks that the IR is there


def compress_weights(gguf: Path, tensors: list[Tensor], weight_format: str,
                     report: StepFn | None = None) -> dict[str, Compressed]:
    """Every weight matrix of `gguf` (whose `tensors` write_skeleton listed) compressed to
    `weight_format` (INT8 or INT4), in the file's row order, by tensor name."""
    source = np.memmap(gguf, dtype=np.uint8, mode="r")
    matrices = [tensor for tensor in tensors if tensor.is_matrix]
    total, done, compressed = sum(tensor.rows for tensor in matrices), 0, {}
    for i, tensor in enumerate(matrices):
        data = source[tensor.offset:tensor.offset + tensor.size].reshape(tensor.rows, -1)
        compressed[tensor.name] = compress(tensor, data, np.arange(tensor.rows), weight_format)
        _forget(data)
        done += tensor.rows
        if report is not None:
            report(done / total, f"compressing tensor {i + 1} of {len(matrices)}")
    return compressed


def fill_weights(skeleton_xml: Path, gguf: Path, tensors: list[Tensor], out_xml: Path, weight_format: str,
                 report: StepFn | None = None, compressed: dict[str, Compressed] | None = None) -> None:
    """Replace each stand-in weight of the IR `skeleton_xml` by the real one from `gguf` (whose
    `tensors` write_skeleton listed), compressed to `weight_format`, and save the IR as `out_xml`.
    `compressed`: weights compress_weights made already (taken out of it as they are put in)."""
    import openvino as ov

    compressed = {} if compressed is None else compressed
    model = ov.Core().read_model(str(skeleton_xml))
    stand_ins = [found for op in model.get_ordered_ops() if (found := _stand_in_at(op)) is not None]
    if not stand_ins:
        raise ModelError(f"{skeleton_xml}: the reader's graph has none of the stand-in weights it was given.")
    source = np.memmap(gguf, dtype=np.uint8, mode="r")
    total = sum(values.get_output_partial_shape(0).to_shape()[0] for values, _, _ in stand_ins)
    done = 0
    held: list[np.ndarray] = []  # the constants' memory (shared, not copied): kept until the model is saved
    for i, (values, scale, output) in enumerate(stand_ins):
        tensor = tensors[int(scale.get_data().flat[0]) - 1]
        rows = _row_numbers(values)
        if tensor.name in compressed:
            output_weight = decompression(compressed.pop(tensor.name).in_order(rows), tensor.name, held)
        else:
            data = source[tensor.offset:tensor.offset + tensor.size].reshape(tensor.rows, -1)
            output_weight = weight(tensor, data, rows, weight_format, held)
            _forget(data)
        for target in list(output.get_target_inputs()):
            target.replace_source_output(output_weight)
        done += len(rows)
        if report is not None:
            report(done / total, f"tensor {i + 1} of {len(stand_ins)}")
    model.validate_nodes_and_infer_types()
    # What optimum-intel asks of the LLMs it exports: where a compile leaves the KV cache's
    # precision to the model, it is f16, so the race computes what it computed on those IRs.
    model.set_rt_info("f16", ["runtime_options", "KV_CACHE_PRECISION"])
    ov.save_model(model, str(out_xml), compress_to_fp16=False)
    del model, stand_ins, output_weight, values, scale, output, source, held
    _trim_heap()


def _trim_heap() -> None:
    """Hand the freed weights back to the system (glibc keeps freed memory for later otherwise):
    the same process compiles the model next, and would hold both."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def _stand_in_at(op):
    """(4-bit values, scale, f32 output) when `op` is the Multiply of a stand-in's decompression:
    Convert(Reshape(Multiply(Subtract(Convert(u4 values), zero point), fp16 scale))); else None."""
    if op.get_type_name() != "Multiply":
        return None
    subtract, scale = (op.input_value(i).get_node() for i in range(2))
    if subtract.get_type_name() != "Subtract" or scale.get_type_name() != "Constant":
        return None
    convert = subtract.input_value(0).get_node()
    values = convert.input_value(0).get_node() if convert.get_type_name() == "Convert" else None
    if values is None or values.get_type_name() != "Constant" or values.get_output_element_type(0).get_type_name() != "u4":
        return None
    node = op
    for kind in ("Reshape", "Convert"):
        users = list(node.output(0).get_target_inputs())
        if len(users) != 1 or users[0].get_node().get_type_name() != kind:
            return None
        node = users[0].get_node()
    return values, scale, node.output(0)


def _row_numbers(values) -> np.ndarray:
    """For each row of a stand-in's 4-bit values in the graph, the row of the GGUF tensor it came from."""
    rows = values.get_output_partial_shape(0).to_shape()[0]
    data = values.get_data().view(np.uint8)
    packed = data.reshape(rows, -1)[:, : (ROW_DIGITS + 1) // 2].astype(np.int64)
    _forget(data)
    digits = np.stack([packed[:, d // 2] >> (4 * (d % 2)) & 0x0F for d in range(ROW_DIGITS)], axis=1)
    return (digits << (4 * np.arange(ROW_DIGITS))).sum(axis=1)


def _forget(mapped: np.ndarray) -> None:
    """Give back the pages of a memory-mapped file this has read and will not read again (Linux).

    They are the file's, so the kernel could drop them under pressure anyway, but until then they
    count as the process's memory: a conversion would seem to hold the GGUF and the skeleton too.
    """
    if not sys.platform.startswith("linux") or mapped.size == 0:
        return
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    start = mapped.__array_interface__["data"][0]
    first, last = -(-start // page) * page, (start + mapped.nbytes) // page * page  # whole pages inside it only
    if last > first:
        ctypes.CDLL(None, use_errno=True).madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), mmap.MADV_DONTNEED)


if __name__ == "__main__":
    _read_in_child(Path(sys.argv[1]))
