"""Visitors' models on a shared server (a custom pair typed on the page): weighed before a byte is
downloaded and refused in one sentence when the server cannot hold them, and bounded on disk.

The server's limits follow the machine unless set: a visitor's model may take a share of the memory
available when it is asked for, and visitors' downloads and conversions together a share of the
free disk. Whatever they hold on disk is listed in a ledger beside the conversion cache; the least
recently used goes first when a new one needs room. The operator's models (the presets, the
offline pairs, SPEC_APP_TARGET) are never listed, never evicted and never limited.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from spec.errors import ModelError
from spec.models.conversion_cache import models_dir
from spec.models.weigh import Footprint, gb, parameters_text, weigh

log = logging.getLogger(__name__)

LEDGER = "visitor-models.json"
# Shares of the machine visitors' models may take when no limit is set: memory available when one
# is asked for (the rest stays with the races already loaded), and disk free at the models folder.
MEMORY_SHARE, DISK_SHARE = 0.8, 0.5
# Disk always left free: the recordings, logs and compiled blobs the server itself writes.
DISK_RESERVE_BYTES = 10**9


@dataclass(frozen=True)
class VisitorLimits:
    """What one visitor's model may take from the server; None follows the machine."""

    memory_bytes: int | None = None  # converting or loading one model (None: MEMORY_SHARE of the memory available)
    disk_bytes: int | None = None  # all visitors' models on disk together (None: DISK_SHARE of the free disk and theirs)

    def __post_init__(self):
        for name in ("memory_bytes", "disk_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"VisitorLimits.{name} must be positive or None, got {value!r}")

    def memory(self) -> int:
        """Bytes one visitor's model may take to convert or load, now."""
        import psutil

        return self.memory_bytes if self.memory_bytes is not None else int(psutil.virtual_memory().available * MEMORY_SHARE)


@dataclass(frozen=True)
class Admission:
    """A visitor's model the server can hold: its estimate and the memory its conversion may use."""

    footprint: Footprint
    memory_limit: int


class VisitorModels:
    """The server's visitors' models: admitted by their weight, bounded on disk, least recently used evicted first."""

    def __init__(self, limits: VisitorLimits | None = None, protected: Iterable[str] = ()):
        self.limits = limits or VisitorLimits()
        self.protected = frozenset(protected)  # the operator's model references
        self._busy: dict[str, int] = {}  # ref -> loads under way (never evicted meanwhile)
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def admitted(self, ref: str, weight_format: str) -> Iterator[Admission]:
        """Weigh `ref` on the Hub and refuse it (ModelError, one sentence) if the server cannot hold
        it; else make room on disk for it and hold it as in use for the block. Nothing is
        downloaded before it is admitted."""
        footprint = weigh(ref, weight_format)
        memory = self.limits.memory()
        with self._lock:
            held = self._sizes()
            mine = held.pop(ref, 0)  # what it already has on disk (a download, a conversion) is used again
            need = max(footprint.disk_bytes - mine, 0)
            free = _free_disk()
            if ref in self.protected:  # the operator's model: not counted among visitors', nothing evicted for it
                budget, room = free, max(free - DISK_RESERVE_BYTES, 0)
            else:
                evictable = sum(size for other, size in held.items() if not self._busy.get(other))
                budget = self.limits.disk_bytes if self.limits.disk_bytes is not None else int(DISK_SHARE * (free + sum(held.values()) + mine))
                room = max(free + evictable - DISK_RESERVE_BYTES, 0)  # for what it still needs, once others are evicted
            if footprint.memory_bytes > memory or footprint.disk_bytes > budget or need > room:
                raise ModelError(refusal(footprint, memory, min(budget, room + mine)))
            if ref not in self.protected:
                self._make_room(need, footprint.disk_bytes, budget, held)
            self._busy[ref] = self._busy.get(ref, 0) + 1
            if ref not in self.protected:
                self._touch(ref, [_hub_folder(ref)])
        try:
            yield Admission(footprint, memory)
        finally:
            with self._lock:
                self._busy[ref] -= 1
                if not self._busy[ref]:
                    del self._busy[ref]
                if ref not in self.protected:
                    self._touch(ref, [])

    def used(self, ref: str, path: Path) -> None:
        """`path` (a conversion) belongs to visitor model `ref`: counted, and evicted with it."""
        if ref not in self.protected:
            with self._lock:
                self._touch(ref, [path])

    def held_bytes(self) -> int:
        """What visitors' models take on disk now."""
        with self._lock:
            return sum(self._sizes().values())

    # --- The ledger --------------------------------------------------------------------------

    def _make_room(self, need: int, total: int, budget: int, held: dict[str, int]) -> None:  # with the lock held
        """Evict the least recently used of the other visitors' models (`held`) until a model of
        `total` bytes, `need` of them still to write, fits the budget and the free disk."""
        ledger = self._read()
        order = sorted((entry.get("last_used", 0), ref) for ref, entry in ledger.items() if ref in held)
        for _, ref in order:
            if sum(held.values()) + total <= budget and _free_disk() - DISK_RESERVE_BYTES >= need:
                return
            if self._busy.get(ref):
                continue
            for path in ledger[ref].get("paths", []):
                shutil.rmtree(path, ignore_errors=True)
            log.info("Evicted a visitor's model (%s, %s) to make room for another", ref, gb(held.pop(ref)))
            del ledger[ref]
            self._write(ledger)

    def _sizes(self) -> dict[str, int]:  # with the lock held
        return {ref: sum(_size(Path(p)) for p in entry.get("paths", [])) for ref, entry in self._read().items()
                if ref not in self.protected}

    def _touch(self, ref: str, paths: list[Path]) -> None:  # with the lock held
        ledger = self._read()
        entry = ledger.setdefault(ref, {"paths": []})
        entry["paths"] = sorted(set(entry["paths"]) | {str(p) for p in paths})
        entry["last_used"] = time.time()
        self._write(ledger)

    @staticmethod
    def _read() -> dict:
        try:
            ledger = json.loads((models_dir() / LEDGER).read_text())
            return ledger if isinstance(ledger, dict) else {}
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _write(ledger: dict) -> None:
        path = models_dir() / LEDGER
        scratch = path.with_name(f".{LEDGER}.{os.getpid()}")
        scratch.write_text(json.dumps(ledger, indent=1))
        os.replace(scratch, path)


def refusal(footprint: Footprint, memory: int, disk: int) -> str:
    """The sentence a visitor reads when the server cannot hold their model: its figures, the server's limits."""
    f = footprint
    if f.is_ir:
        size = f"{f.ref} has {gb(f.weight_bytes)} of OpenVINO weights: loading it takes about {gb(f.memory_bytes)} of memory"
        limit = "loads visitors' models up to"
    else:
        size = (f"{f.ref} has {gb(f.weight_bytes)} of weights ({parameters_text(f.parameters or 0)} parameters): converting it "
                f"to OpenVINO {f.weight_format.upper()} takes about {gb(f.memory_bytes)} of memory")
        limit = "converts models up to"
    return (f"{size} and {gb(f.disk_bytes)} of disk, and this server {limit} {gb(memory)} of memory and has {gb(disk)} "
            "of disk free for them: pick a smaller model.")


def _hub_folder(ref: str) -> Path:
    """Where the Hugging Face cache keeps `ref`'s downloads."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    return Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=ref, repo_type="model")


def _free_disk() -> int:
    """Free bytes where visitors' models land: the models folder and the Hugging Face cache, the fuller of the two."""
    from huggingface_hub import constants

    free = []
    for folder in (models_dir(), Path(constants.HF_HUB_CACHE)):
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        free.append(shutil.disk_usage(folder).free)
    return min(free)


def _size(path: Path) -> int:
    """Bytes under `path` (symbolic links not followed: a Hub snapshot links to its blobs)."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(os.lstat(os.path.join(root, name)).st_size for root, _, names in os.walk(path) for name in names)
