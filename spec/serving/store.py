"""Finished races kept for replay: in memory, and on disk where the server keeps its models
(SPEC_MODELS_DIR/recordings, a mounted bucket on a Space), so a restarted server replays its
examples from the first click. A replay says when and on which CPU its race ran.

One gzipped JSON file per race, named by what makes the race (its request); least recently
watched dropped first, from memory and disk alike. A file this version cannot read is removed.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import logging
import os
from collections import OrderedDict
from pathlib import Path

from spec.config import GenerationConfig, ModelKey
from spec.decoding.metrics import Stats
from spec.serving.phases import RacePhase
from spec.serving.recording import Frame, RaceRequest, Recording
from spec.serving.verdict import Verdict

log = logging.getLogger(__name__)

FORMAT = 1  # bump when what a file holds changes: older files are then dropped, not misread
SUFFIX = ".json.gz"


class RecordingStore:
    """Finished races, kept for replay: at most `max_races` and about `max_bytes`, least recently
    watched dropped first; also in `directory` (None: memory only), read back when made."""

    def __init__(self, max_races: int = 64, max_bytes: int = 64 * 2**20, directory: Path | None = None):
        if max_races < 0 or max_bytes < 0:
            raise ValueError(f"a store's bounds must be non-negative, got {max_races} races, {max_bytes} bytes")
        self.max_races, self.max_bytes, self.directory = max_races, max_bytes, directory
        self._recordings: OrderedDict[tuple, Recording] = OrderedDict()
        if directory is not None:
            self._load(Path(directory))

    def get(self, key: tuple) -> Recording | None:
        """The recording of race `key`, now the most recently watched; None if not kept."""
        recording = self._recordings.get(key)
        if recording is not None:
            self._recordings.move_to_end(key)
            self._touch(key)
        return recording

    def peek(self, key: tuple) -> Recording | None:
        """The recording of race `key` without counting it as watched."""
        return self._recordings.get(key)

    def put(self, recording: Recording) -> None:
        self._recordings[recording.key] = recording
        self._recordings.move_to_end(recording.key)
        self._write(recording)
        self._trim()

    @property
    def nbytes(self) -> int:
        return sum(recording.nbytes for recording in self._recordings.values())

    def __len__(self) -> int:
        return len(self._recordings)

    # --- On disk ------------------------------------------------------------------------------

    def _trim(self) -> None:
        while self._recordings and (len(self._recordings) > self.max_races or self.nbytes > self.max_bytes):
            key, _ = self._recordings.popitem(last=False)
            if self.directory is not None:
                self._path(key).unlink(missing_ok=True)

    def _path(self, key: tuple) -> Path:
        return Path(self.directory) / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + SUFFIX)

    def _touch(self, key: tuple) -> None:
        if self.directory is not None:
            try:
                os.utime(self._path(key))  # its file's time orders the store when it is read back
            except OSError:
                pass

    def _write(self, recording: Recording) -> None:
        if self.directory is None:
            return
        path = self._path(recording.key)
        scratch = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(scratch, "wt", encoding="utf-8") as sink:
                json.dump(to_json(recording), sink, separators=(",", ":"))
            os.replace(scratch, path)
        except OSError as error:  # a full or read-only disk: the race is still kept in memory
            scratch.unlink(missing_ok=True)
            log.warning("Could not keep a finished race on disk (%s): it is kept in memory only", error)

    def _load(self, directory: Path) -> None:
        """Read back the races kept in `directory`, least recently watched first, within the bounds."""
        if not directory.is_dir():
            return
        for path in sorted(directory.glob("*" + SUFFIX), key=lambda p: p.stat().st_mtime):
            try:
                with gzip.open(path, "rt", encoding="utf-8") as source:
                    recording = from_json(json.load(source))
            except (OSError, ValueError, KeyError, TypeError, EOFError) as error:
                log.info("Dropped a kept race this version cannot read (%s: %s)", path.name, type(error).__name__)
                path.unlink(missing_ok=True)
                continue
            if path != self._path(recording.key):  # named by another version's key: it could never be found
                path.unlink(missing_ok=True)
                continue
            self._recordings[recording.key] = recording
        self._trim()
        if self._recordings:
            log.info("Replays ready from disk: %d finished races", len(self._recordings))


def to_json(recording: Recording) -> dict:
    """What a file keeps of a finished race: its request, frames, verdict, when and where it ran."""
    request = recording.request
    return {
        "format": FORMAT, "machine": recording.machine, "created": recording.created, "started": recording.started,
        "seconds": recording.seconds,
        "request": {"prompt": request.prompt, "target": dataclasses.asdict(request.target),
                    "draft": dataclasses.asdict(request.draft) if request.draft else None, "drafter": request.drafter,
                    "config": dataclasses.asdict(request.config)},
        "verdict": dataclasses.asdict(recording.verdict) if recording.verdict else None,
        "frames": [[f.at, f.lane, f.pieces, f.token_ids, dataclasses.asdict(f.stats), f.finished] for f in recording.frames],
    }


def from_json(data: dict) -> Recording:
    """A finished race from what `to_json` kept; ValueError (or KeyError, TypeError) if it cannot be."""
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
    asked = data["request"]
    config = GenerationConfig(**{**asked["config"], "stop_strings": tuple(asked["config"].get("stop_strings", ()))})
    request = RaceRequest(asked["prompt"], ModelKey(**asked["target"]), ModelKey(**asked["draft"]) if asked["draft"] else None,
                          asked["drafter"], config.validate())
    frames = [Frame(float(at), lane, tuple((str(text), str(kind)) for text, kind in pieces), tuple(int(i) for i in ids),
                    Stats(**stats), bool(finished)) for at, lane, pieces, ids, stats, finished in data["frames"]]
    recording = Recording(request.key, request, phase=RacePhase.DONE, frames=frames, verdict=Verdict(**data["verdict"]),
                          created=data["created"], started=data["started"], seconds=data["seconds"], machine=data["machine"])
    recording.nbytes = sum(frame.nbytes for frame in frames)
    if recording.key is None:
        raise ValueError("a race that cannot be shared is never kept")
    return recording
