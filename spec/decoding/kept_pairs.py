"""What speculation learned of each (target, draft model) pair, and of prompt lookup on each
target, kept for the next start.

Race after race a server learns how often a draft model's tokens are kept, what its calls and its
first reading of a prompt cost, and what its rounds yield for each token they promise (PairMemory).
Where a draft token is dear (AVX2 kernels), the races a server runs before that record is learned
try the draft model where it does not pay, and a visitor sees them lose. Kept in a file beside
the models (SPEC_MODELS_DIR), under a key naming the machine, both models' files, how each was
compiled and the drafter, a restarted server starts from where it stopped, as it does from its
models' curves (spec.models.calibration). Dynamic K's pause between probes is not kept: it is
about the generation under way. What prompt lookup's long copies kept of their promise
(LookupYields) is kept per target, under a key naming its files: it is about the target's answers,
not about what its calls cost on this machine.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

from spec.decoding.policy import LookupYields, PairMemory

# machine, read_record and write_record come from spec.models.calibration, which imports openvino:
# imported where a record is read or kept, so the pure modules that import this one stay without it.

if TYPE_CHECKING:
    from spec.models.registry import LoadedModel

FILE = "learned.json"  # in the models folder
_KEPT = 64  # records kept at most, the most recently kept first: models and machines change
_FIELDS = tuple(f.name for f in dataclasses.fields(PairMemory) if f.name not in ("pause", "idle_generations"))


def beside_models() -> Path:
    """Where the page and the command line keep the record: FILE in the models folder (SPEC_MODELS_DIR)."""
    from spec.models.conversion_cache import models_dir

    return models_dir() / FILE


def pair_key(target: LoadedModel, draft: LoadedModel, drafter: str) -> str:
    """The key a pair's record is kept under: this machine (CPU, cores, OpenVINO's version), each
    model's files and the settings it runs with (the target's for verify calls), and the drafter."""
    def model(loaded: LoadedModel, speculative: bool) -> list:
        return [*_files(loaded), loaded.settings(speculative=speculative)]

    return _hashed([_calibration().machine(), model(target, True), model(draft, False), drafter])


def target_key(target: LoadedModel) -> str:
    """The key what prompt lookup learned of `target` is kept under: its files and precision."""
    return _hashed([_files(target), "prompt lookup"])


def _files(loaded: LoadedModel) -> list:
    folder = loaded.resolved.path
    files = [(p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in sorted(folder.glob("openvino_model.*"))]
    return [str(folder.resolve()), files, repr(loaded.key)]


def _hashed(parts: list) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


def read_pair(path: Path, key: str) -> PairMemory | None:
    """The record kept under `key` in the file at `path`, or None (none kept, or not one this version reads)."""
    return _pair(_calibration().read_record(path).get(key))


def read_lookup_yields(path: Path, key: str) -> LookupYields | None:
    """What prompt lookup's rounds kept on the target kept under `key`, or None (none kept, or not
    one this version reads)."""
    return _lookup_yields(_calibration().read_record(path).get(key))


def _lookup_yields(entry: object) -> LookupYields | None:
    """A kept entry as a target's lookup yields, or None where it is not one this version reads."""
    if not isinstance(entry, dict):
        return None
    promised, kept = _per_k(entry.get("lookup_promised"), positive=True), _per_k(entry.get("lookup_kept"), positive=False)
    return LookupYields(promised, kept) if promised is not None and kept is not None else None


def _per_k(counts: object, positive: bool) -> dict[int, float] | None:
    """A kept {K: tokens} map (JSON's keys are text), or None where one entry is not a K and a finite
    count (above 0 where `positive`: the yield divides by it)."""
    if not isinstance(counts, dict):
        return None
    try:
        parsed = {int(k): v for k, v in counts.items()}
    except ValueError:
        return None
    if all(k > 0 and _count(v) and (v > 0 or not positive) for k, v in parsed.items()):
        return {k: float(v) for k, v in parsed.items()}
    return None


def _pair(entry: object) -> PairMemory | None:
    """A kept entry as a pair's record, or None where it is not one this version reads."""
    if not isinstance(entry, dict) or not all(_valid(name, entry.get(name)) for name in _FIELDS):
        return None
    return PairMemory(**{name: entry[name] for name in _FIELDS})


def describe(path: Path) -> str:
    """What the file at `path` holds, in words a measurement is labelled with ("1 pair's record in
    learned.json (long α 0.83)", newest first): a served race and the lane alone both start from it,
    so two runs compare only where they started alike."""
    kept = _calibration().read_record(path)
    records = [_pair(kept[key]) for key in sorted(kept, key=lambda key: _kept_at(kept[key]), reverse=True)]
    records = [record for record in records if record is not None]
    lookups = sum(_lookup_yields(entry) is not None for entry in kept.values())
    lookups_kept = f", and prompt lookup's yields on {lookups} target{'s' if lookups > 1 else ''}" if lookups else ""
    if not records:
        return f"no pair's record in {path.name}{lookups_kept}"
    alphas = ", ".join(f"{record.long_alpha:.2f}" for record in records)
    count = "1 pair's record" if len(records) == 1 else f"{len(records)} pairs' records"
    return f"{count} in {path.name} (long α {alphas}){lookups_kept}"


def _valid(name: str, value: object) -> bool:
    """Whether `value` can stand for the field `name`: a finite number, not negative (None where the field may be unmeasured)."""
    if value is None:
        return PairMemory.__dataclass_fields__[name].default is None
    return _count(value)


def _count(value: object) -> bool:
    """Whether `value` is a finite number, not negative (JSON's true and false are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def keep_pairs(path: Path, pairs: dict[str, PairMemory], lookup_yields: dict[str, LookupYields] | None = None) -> None:
    """Keep each pair's record, and each target's lookup yields, under its key in the file at `path`,
    beside the records kept there before (the _KEPT most recent); written whole to a new file, then
    renamed into place."""
    calibration = _calibration()
    kept = calibration.read_record(path)
    now = time.time()
    for key, pair in pairs.items():
        kept[key] = {**{name: getattr(pair, name) for name in _FIELDS}, "kept_at": now}
    for key, yields in (lookup_yields or {}).items():  # dict(): copied whole while a race may be adding to it
        kept[key] = {"lookup_promised": dict(yields.promised), "lookup_kept": dict(yields.kept), "kept_at": now}

    path.parent.mkdir(parents=True, exist_ok=True)
    newest = sorted(kept, key=lambda key: _kept_at(kept[key]), reverse=True)
    calibration.write_record(path, {key: kept[key] for key in newest[:_KEPT]})


def _kept_at(entry: object) -> float:
    """When a record was kept (0 where it does not say)."""
    return entry.get("kept_at", 0.0) if isinstance(entry, dict) and isinstance(entry.get("kept_at"), (int, float)) else 0.0


def _calibration():
    from spec.models import calibration

    return calibration
