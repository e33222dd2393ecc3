"""One weight matrix of a GGUF file as an OpenVINO IR holds it, read one chunk of rows at a time.

The `gguf` package dequantizes the file's blocks (as Transformers' GGUF loader does), NNCF's own
quantizer compresses them (INT8 per channel, or INT4 in groups with the embedding and head at
INT8, as `nncf.compress_weights` makes them), and the decompression subgraph is the one NNCF writes
(u8/u4 values, zero points, fp16 scales, to f32). No float copy of more than two chunks is ever held.
spec.models.gguf_ir puts these weights into the graph OpenVINO's GGUF reader builds.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from spec.config import FP32, INT4, INT8

INT4_GROUP = 128  # values per INT4 scale, halved until it divides a row (SmolLM2's 576 takes 64)

# Values dequantized at a time (4 MB as floats): the float copy of a matrix stays small, and the
# arrays it takes are reused from the heap rather than mapped afresh from the kernel each time.
_VALUES_AT_ONCE = 1 << 20


@dataclass(frozen=True)
class Tensor:
    """Where one tensor's data is in a GGUF file, and how to read it."""

    name: str
    kind: int  # its GGMLQuantizationType
    rows: int
    columns: int
    offset: int  # of its data, from the start of the file
    size: int  # bytes

    @property
    def is_matrix(self) -> bool:
        """Whether it is a weight matrix: a stand-in in the skeleton, compressed in the IR."""
        return self.rows > 1


@dataclass(frozen=True)
class Compressed:
    """A weight matrix as NNCF compresses it: unsigned values, fp16 scales and zero points."""

    values: np.ndarray  # uint8, (rows, columns) at 8 bits, (rows, groups, group) at 4
    scales: np.ndarray  # float16, (rows, 1) or (rows, groups, 1)
    zero_points: np.ndarray  # uint8, shaped as the scales
    bits: int

    def in_order(self, rows: np.ndarray) -> "Compressed":
        """The same weight with its rows in the order `rows` (the reader reorders some)."""
        if np.array_equal(rows, np.arange(len(self.values))):
            return self
        return Compressed(self.values[rows], self.scales[rows], self.zero_points[rows], self.bits)


def _keeps_8_bits(name: str) -> bool:
    """The embedding and the output layer stay at 8 bits in an INT4 model, as NNCF keeps them."""
    return name.startswith(("token_embd.", "output."))


def weight(tensor: Tensor, data: np.ndarray, rows: np.ndarray, weight_format: str, held: list[np.ndarray]):
    """GGUF `tensor` (its raw rows `data`) with its rows in the order `rows`, as `weight_format`:
    the weight's f32 output in the graph."""
    import openvino.opset13 as ops

    if weight_format == FP32:
        at_once = max(1, _VALUES_AT_ONCE // tensor.columns)
        values = np.concatenate([_dequantize(data[rows[i:i + at_once]], tensor.kind) for i in range(0, len(rows), at_once)])
        return ops.constant(values.reshape(len(rows), tensor.columns).astype(np.float32), name=tensor.name).output(0)
    return decompression(compress(tensor, data, rows, weight_format), tensor.name, held)


def compress(tensor: Tensor, data: np.ndarray, rows: np.ndarray, weight_format: str) -> Compressed:
    """GGUF `tensor` (its raw rows `data`) with its rows in the order `rows`, compressed to
    `weight_format` (INT8, or INT4 with the embedding and output kept at 8 bits) as NNCF does."""
    if weight_format not in (INT8, INT4):
        raise ValueError(f"unknown weight format {weight_format!r}")
    columns = tensor.columns
    at_once = max(1, _VALUES_AT_ONCE // columns)
    bits, group, shape = _layout(len(rows), columns, INT8 if _keeps_8_bits(tensor.name) else weight_format)
    values = np.empty(shape, dtype=np.uint8)
    zero_points = np.empty(shape[:-1] + (1,), dtype=np.uint8)
    scales = np.empty(shape[:-1] + (1,), dtype=np.float16)
    starts = range(0, len(rows), at_once)

    def dequantized(i: int) -> np.ndarray:
        return _dequantize(data[rows[i:i + at_once]], tensor.kind).reshape(-1, columns)

    # The next chunk is dequantized (numpy, one core) while this one is quantized, on the other
    # core. One chunk ahead, never more: the float copy stays two chunks.
    with ThreadPoolExecutor(1, thread_name_prefix="dequantize") as ahead:
        coming = ahead.submit(dequantized, starts[0]) if starts else None
        for n, i in enumerate(starts):
            part = coming.result()
            if n + 1 < len(starts):
                coming = ahead.submit(dequantized, starts[n + 1])
            q, s, z = _quantize(part, bits, group)
            values[i:i + len(part)], scales[i:i + len(part)], zero_points[i:i + len(part)] = q, s, z
    return Compressed(values, scales, zero_points, bits)


def random_compressed(rows: int, columns: int, weight_format: str, rng: np.random.Generator) -> Compressed:
    """A matrix of random values laid out as `compress` lays out one of this shape in `weight_format`
    (INT8 or INT4): what a kernel's speed depends on, for timing it without quantizing anything.
    Its weights spread as a trained layer's do (within ±0.06, three times a typical 0.02), so that
    layers stacked on it compute finite numbers, not infinities."""
    bits, _, shape = _layout(rows, columns, weight_format)
    values = rng.integers(0, 1 << bits, size=shape, dtype=np.uint8)
    zero_points = np.full(shape[:-1] + (1,), 1 << (bits - 1), dtype=np.uint8)  # the middle level: weights around 0
    scales = np.full(shape[:-1] + (1,), 0.12 / ((1 << bits) - 1), dtype=np.float16)
    return Compressed(values, scales, zero_points, bits)


def decompression(weight: Compressed, name: str, held: list[np.ndarray]):
    """`weight` as the decompression subgraph NNCF writes (u8/u4 values, zero points, fp16 scales,
    to f32): its f32 output. The constants share the memory of arrays appended to `held`."""
    import openvino as ov
    import openvino.opset13 as ops

    element = ov.Type.u8 if weight.bits == 8 else ov.Type.u4
    weights = ops.convert(_constant(weight.values, element, name, held), ov.Type.f16)
    zero = ops.convert(_constant(weight.zero_points, element, name + "/zero_point", held), ov.Type.f16)
    held.append(weight.scales)
    scale = ops.constant(weight.scales, name=name + "/scale", shared_memory=True)
    decompressed = ops.multiply(ops.subtract(weights, zero), scale)
    if weight.bits == 4:
        rows, groups, group = weight.values.shape
        decompressed = ops.reshape(decompressed, ops.constant(np.array([rows, groups * group], dtype=np.int64)), special_zero=False)
    return ops.convert(decompressed, ov.Type.f32).output(0)


def _dequantize(rows: np.ndarray, kind: int) -> np.ndarray:
    """Raw GGUF `rows` of quantization type `kind` as floats, by the gguf package. Its `dequantize`
    goes 16 rows at a time, a few Python calls each (half of a conversion's time); its row
    dequantizer takes the whole chunk at once."""
    from gguf import GGMLQuantizationType, quants

    kind = GGMLQuantizationType(kind)
    quant = getattr(quants, kind.name, None)
    if quant is None or not hasattr(quant, "dequantize_rows"):
        return quants.dequantize(rows, kind)
    quant.init_grid()
    return quant.dequantize_rows(rows)


def _layout(rows: int, columns: int, weight_format: str) -> tuple[int, int, tuple[int, ...]]:
    """How NNCF lays out a (rows, columns) weight in `weight_format`: its bits, the values per scale,
    and the values' shape (rows, columns) per channel at 8 bits, (rows, groups, group) at 4; a
    row no wider than one group stays at 8 bits."""
    group = columns if weight_format == INT8 else _group_size(columns)
    if group == columns:
        return 8, columns, (rows, columns)
    return 4, group, (rows, columns // group, group)


def _group_size(columns: int) -> int:
    group = INT4_GROUP
    while columns % group:
        group //= 2
    return group


def _quantize(weight: np.ndarray, bits: int, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NNCF's asymmetric integer quantization of `weight` (rows, columns): per row at 8 bits, per
    group of `group` values at 4; returns values, fp16 scales and zero points, as NNCF stores them."""
    from nncf import CompressWeightsMode
    from nncf.quantization.algorithms.weight_compression.config import WeightCompressionConfig
    from nncf.quantization.algorithms.weight_compression.weight_lowering import do_integer_quantization
    from nncf.tensor import Tensor

    mode, group_size = (CompressWeightsMode.INT8_ASYM, -1) if bits == 8 else (CompressWeightsMode.INT4_ASYM, group)
    compressed = do_integer_quantization(Tensor(weight), WeightCompressionConfig(mode=mode, group_size=group_size), reduction_axes=(1,))
    return (np.asarray(compressed.tensor.data, dtype=np.uint8), np.asarray(compressed.scale.data, dtype=np.float16),
            np.asarray(compressed.zero_point.data, dtype=np.uint8))


def _constant(values: np.ndarray, element, name: str, held: list[np.ndarray]):
    """An OpenVINO constant of `values` (uint8 holding u8 or u4 values); u4 packs two values a byte,
    the first low. A u8 constant shares `values`' memory, which is appended to `held`."""
    import openvino as ov
    import openvino.opset13 as ops

    if element == ov.Type.u8:
        held.append(values)
        return ops.constant(values, name=name, shared_memory=True)
    flat = values.reshape(-1)
    tensor = ov.Tensor(ov.Type.u4, ov.Shape(list(values.shape)))
    tensor.data[...] = (flat[0::2] | (flat[1::2] << 4)).reshape(tensor.data.shape)
    constant = ops.constant(tensor)
    constant.set_friendly_name(name)
    return constant
