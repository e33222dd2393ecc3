"""Exporting a checkpoint to a stateful OpenVINO IR, with NNCF weight compression.

A Transformers checkpoint is exported by optimum-intel, then NNCF compresses its weights. A folder
holding a GGUF file (with the tokenizer and configs the engine reads) is converted by
spec.models.gguf_ir, without torch or optimum-intel. Heavy libraries are imported only here, when
a conversion actually runs.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Callable

from spec.config import FP32, INT8
from spec.errors import ModelError

# What an exported model folder holds.
IR_XML, IR_BIN = "openvino_model.xml", "openvino_model.bin"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # either lets AutoTokenizer load


def export_ir(checkpoint: Path, out: Path, weight_format: str, name: str,
              progress: Callable[[float, str], None] | None = None) -> None:
    """Export `checkpoint` into `out`; any failure becomes a ModelError naming the model.

    `progress(fraction, detail)` hears how far a conversion that can count its steps is (a GGUF's).
    """
    try:
        gguf = gguf_file(checkpoint)
        if gguf is not None:
            _convert_gguf(gguf, out, weight_format, progress)
        else:
            _export_ir(checkpoint, out, weight_format)
    except ModelError:
        raise
    except Exception as e:
        if getattr(e, "errno", None) == errno.ENOSPC:  # the disk, not the model: spec.models.conversion_cache says where
            raise
        detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise ModelError(
            f"Could not convert {name} to OpenVINO ({detail}): pick a model whose architecture "
            "optimum-intel can export, such as Llama, Qwen2 or Phi."
        ) from e


def gguf_file(checkpoint: Path) -> Path | None:
    """The GGUF file a source folder holds, or None for a Transformers checkpoint."""
    files = sorted(checkpoint.glob("*.gguf")) if checkpoint.is_dir() else []
    return files[0] if len(files) == 1 else None


def _convert_gguf(gguf: Path, out: Path, weight_format: str, progress: Callable[[float, str], None] | None) -> None:
    """Convert `gguf` into `out` with everything beside it (tokenizer, config, generation config)."""
    from spec.models import gguf_ir

    gguf_ir.convert(gguf, out, weight_format, progress)
    for path in gguf.parent.iterdir():
        if path.is_file() and path != gguf and not (out / path.name).exists():
            shutil.copyfile(path, out / path.name)


def _export_ir(checkpoint: Path, out: Path, weight_format: str) -> None:
    """Export `checkpoint` to a stateful OpenVINO IR in `out`, with tokenizer and generation config."""
    from optimum.exporters.openvino import main_export
    from optimum.intel import OVConfig

    # dtype="fp32" keeps full precision, and an explicit config stops optimum from quietly
    # compressing models over 1B parameters to INT8 itself; compression is ours to choose.
    main_export(
        str(checkpoint),
        output=out,
        task="text-generation-with-past",
        stateful=True,
        ov_config=OVConfig(dtype="fp32"),
        convert_tokenizer=True,  # openvino_tokenizer.xml too, so openvino-genai can load the directory
        library_name="transformers",
        local_files_only=True,
    )
    if weight_format != FP32:
        _compress_weights(out, weight_format)
    _copy_tokenizer(checkpoint, out)


def _compress_weights(ir_dir: Path, weight_format: str) -> None:
    """Compress the IR's weights in place with NNCF, as `optimum-cli --weight-format` does.

    optimum-intel 2.2's main_export ignores `ov_config.quantization_config`; only its CLI applies
    it afterwards, through a private helper. NNCF's public API does the same job.
    """
    import nncf
    import openvino as ov
    from nncf.quantization.advanced_parameters import AdvancedCompressionParameters, GroupSizeFallbackMode

    if weight_format == INT8:
        options = dict(mode=nncf.CompressWeightsMode.INT8_ASYM)
    else:
        # Group size 128 unless a layer's width is not a multiple of it (SmolLM2's 576 is not):
        # those layers get the largest power of two dividing it, 64 there.
        options = dict(
            mode=nncf.CompressWeightsMode.INT4_ASYM, group_size=128, ratio=1.0,
            advanced_parameters=AdvancedCompressionParameters(group_size_fallback_mode=GroupSizeFallbackMode.ADJUST),
        )
    xml = ir_dir / IR_XML
    model = nncf.compress_weights(ov.Core().read_model(str(xml)), **options)
    compressed = ir_dir / f"compressed-{IR_XML}"
    ov.save_model(model, str(compressed), compress_to_fp16=False)
    del model  # release the mapping of the uncompressed .bin before replacing it
    os.replace(compressed, xml)
    os.replace(compressed.with_suffix(".bin"), ir_dir / IR_BIN)


def _copy_tokenizer(checkpoint: Path, out: Path) -> None:
    """Make sure `out` has the Hugging Face tokenizer and generation config of `checkpoint`.

    main_export usually saves them already, but silently skips a tokenizer it fails to load.
    """
    if not any((out / name).is_file() for name in TOKENIZER_FILES):
        from transformers import AutoTokenizer

        try:
            AutoTokenizer.from_pretrained(str(checkpoint)).save_pretrained(str(out))
        except Exception as e:
            raise ModelError(
                f"The checkpoint in {checkpoint} has no usable Hugging Face tokenizer ({type(e).__name__}): "
                "add its tokenizer files."
            ) from e
    generation_config = checkpoint / "generation_config.json"
    if generation_config.is_file() and not (out / generation_config.name).exists():
        shutil.copyfile(generation_config, out / generation_config.name)
