"""Weighing a Hub model before a byte of it is downloaded: what it would take to download, convert
and load, from the sizes the Hub lists (and the parameter count it reads from safetensors headers).

An OpenVINO IR is used as it is: its download is its disk, its weights about its memory. A
Transformers checkpoint is exported through fp32 (spec.models.export): the export holds the fp32
weights and more while it traces the model, writes an fp32 IR, then compresses it beside that.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from spec.config import FP32, INT4, INT8
from spec.models import hub
from spec.models.export import IR_BIN, IR_XML

WEIGHT_SUFFIXES = (".safetensors", ".bin")
CONFIG_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
# A checkpoint that says nothing of its dtype is taken as 16-bit, as most on the Hub are: if it is
# fp32 after all, its parameters are overcounted, which errs on the server's side.
UNKNOWN_DTYPE_BYTES = 2
# The export traces the model while it holds its fp32 weights: its peak is this many times them ...
EXPORT_MEMORY_FACTOR = 1.3
# ... plus what torch, optimum and OpenVINO take in the converting process before any weight.
LIBRARIES_BYTES = 500 * 10**6
# Compiling an IR keeps its weights and repacks some of them for the CPU's kernels.
LOAD_MEMORY_FACTOR = 1.2
# The compressed IR's bytes per parameter (INT4 keeps the embeddings and a few layers in 8 bits).
IR_BYTES_PER_PARAMETER = {INT8: 1.0, INT4: 0.6, FP32: 4.0}


@dataclass(frozen=True)
class Footprint:
    """What a Hub model would take from the server, estimated before downloading it."""

    ref: str
    files: tuple[str, ...]  # the files to download (spec.models.hub.pick_files)
    download_bytes: int
    weight_bytes: int  # of which weights
    parameters: int | None  # None for an IR (not needed: it is used as it is)
    is_ir: bool
    weight_format: str  # the conversion's ("as-is" for an IR)
    disk_bytes: int  # at the peak: the download and everything the conversion writes
    memory_bytes: int  # at the peak: converting a checkpoint, or loading an IR


def weigh(ref: str, weight_format: str) -> Footprint:
    """Ask the Hub what `ref` holds and estimate what it takes (one request; a checkpoint whose
    weights the Hub gives no parameter count for costs a second, for its config.json's dtype)."""
    listed = hub.files(ref)
    dtype_bytes = None
    chosen = hub.pick_files(list(listed.sizes))
    if not listed.parameters and IR_XML not in chosen and "config.json" in chosen:
        dtype_bytes = _config_dtype_bytes(ref)
    return footprint(ref, {name: listed.sizes[name] for name in chosen}, weight_format, listed.parameters, dtype_bytes)


def footprint(ref: str, sizes: dict[str, int], weight_format: str, parameters: dict[str, int] | None = None,
              dtype_bytes: float | None = None) -> Footprint:
    """The estimate for files of these `sizes` (already the ones to download), converted to
    `weight_format` unless they hold an IR; `parameters` (dtype -> count) as the Hub reads them
    from safetensors headers, else `dtype_bytes` per parameter (from config.json), else 16 bits."""
    download = sum(sizes.values())
    if IR_XML in sizes:
        weights = sizes.get(IR_BIN, 0)
        memory = int(weights * LOAD_MEMORY_FACTOR)
        return Footprint(ref, tuple(sizes), download, weights, None, True, "as-is", download, memory)
    weights = sum(size for name, size in sizes.items() if name.endswith(WEIGHT_SUFFIXES))
    if parameters:
        count = sum(parameters.values())
    else:
        count = int(weights / (dtype_bytes or UNKNOWN_DTYPE_BYTES))
    fp32 = 4 * count
    written = fp32 + (int(count * IR_BYTES_PER_PARAMETER[weight_format]) if weight_format != FP32 else 0)
    memory = int(fp32 * EXPORT_MEMORY_FACTOR) + LIBRARIES_BYTES
    return Footprint(ref, tuple(sizes), download, weights, count, False, weight_format, download + written, memory)


def _config_dtype_bytes(ref: str) -> float | None:
    """Bytes per parameter as the checkpoint's config.json states its dtype (a few KB to fetch)."""
    from huggingface_hub import hf_hub_download

    try:
        config = json.loads(open(hf_hub_download(ref, "config.json"), encoding="utf-8").read())
    except Exception:  # no readable config: the estimate assumes 16 bits
        return None
    return CONFIG_DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or ""))


def memory_for_copies(size_bytes: int, copies: int) -> int:
    """Bytes to hold `copies` compiled copies of a model whose weights take `size_bytes` on disk,
    and as much as one more for what loads beside them."""
    return int((copies + 1) * LOAD_MEMORY_FACTOR * size_bytes)


def gb(nbytes: float) -> str:
    """Bytes as people read them on the Hub: "145 GB", "1.8 GB", "350 MB"."""
    if nbytes >= 10 * 10**9:
        return f"{nbytes / 10**9:.0f} GB"
    if nbytes >= 10**9:
        return f"{nbytes / 10**9:.1f} GB"
    return f"{max(nbytes, 10**6) / 10**6:.0f} MB"


def parameters_text(count: int) -> str:
    """"72.7 billion", "135 million"."""
    if count >= 10**9:
        return f"{count / 10**9:.1f} billion"
    return f"{count / 10**6:.0f} million" if count >= 10**6 else f"{count:,}"
