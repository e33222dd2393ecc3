"""Compiling models and owning their KV-cache state: the one module that holds OpenVINO state.

A compiled model is shared by every session; each generation gets an infer request of its own
(and so its own KV cache), borrowed from the model's pool of idle ones and handed back when it
ends. Rolling back rejected tokens means trimming every state variable along its sequence axis,
which is found from the model rather than assumed.
"""
from __future__ import annotations

import os
import platform
import threading
from pathlib import Path
from typing import Sequence

import numpy as np
import openvino as ov

from spec.config import DEFAULT_PRECISION, F32
from spec.models.lm_head import compute_only_kept_logits, score_only

# F32 pins both compute and KV cache to f32: a K-token verify call and one-by-one decoding then
# agree exactly. The CPU quantizes activations to 8 bits on the fly to multiply them with INT8/INT4
# weights, which (with rolled-back slots masked in the cache, see _MAX_DEAD_SLOTS) flips greedy
# near-ties even in f32: F32 turns that off. The default keeps it, in groups of 128 channels (wider
# groups make a verify call cheaper), and on a CPU with AMX computes the rest in f32 rather than the
# bf16 the plugin picks there, which is slower for a memory-bound step; elsewhere the plugin's own
# precision is the faster (docs/design-notes.md has the timings).
_EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
_FAST = {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"}
_FAST_ON_AMX = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "128"}


def emulated_class() -> str | None:
    """The CPU class bench.tools.cpu_class makes OpenVINO see here ("AVX2"), or None: the CPU's own.
    Named only where its CPUID mask is preloaded, so the variable alone never mislabels a run."""
    name = os.environ.get("SPEC_CPU_CLASS", "").strip().upper()
    return name if name and "cpuid_mask" in os.environ.get("LD_PRELOAD", "") else None


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's flags as Linux reports them (elsewhere none)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return set()
    return next((set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags")), set())


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name as Linux reports it ("Intel(R) Xeon(R) Platinum 8480+"). Where a hypervisor
    gives a bare name ("AMD EPYC" under KVM, a Zen 4's and a Zen 5's alike, whose steps differ twofold),
    its family and model are added ("AMD EPYC (family 26 model 2)"): every figure, and every
    measurement kept for reuse, is named with it."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if not line.strip():
                break  # the first processor's block names them all
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), " ".join(value.split()))
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "an unknown CPU"
    if not any(c.isdigit() for c in name) and "cpu family" in fields:
        name += f" (family {fields['cpu family']} model {fields.get('model', '?')})"
    return name


def cpu_has_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU has Intel AMX tiles (Linux reports them; elsewhere assume not), as OpenVINO
    sees it: an emulated smaller class has none."""
    return not emulated_class() and "amx_tile" in cpu_flags(cpuinfo)


_EMULATED_CLASSES = {"AVX512": "AVX-512", "AVX2_VNNI": "AVX2 + VNNI", "AVX2": "AVX2"}


def cpu_class(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The class of CPU OpenVINO's kernels run as here, which decides what a verify call costs:
    "AMX", "AVX-512", "AVX2 + VNNI" (8-bit dot products on 256-bit vectors, as Intel's laptops since
    2021), "AVX2" or "other"; under bench.tools.cpu_class, the class it emulates."""
    emulated = emulated_class()
    return _EMULATED_CLASSES.get(emulated, emulated) if emulated else own_class(cpuinfo)


def own_class(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The class of this CPU's own vector units (as cpu_class names them), whatever OpenVINO is made to see."""
    flags = cpu_flags(cpuinfo)
    for name, flag in (("AMX", "amx_tile"), ("AVX-512", "avx512f"), ("AVX2 + VNNI", "avx_vnni"), ("AVX2", "avx2")):
        if flag in flags:
            return name
    return "other"


# OpenVINO's threads pinned to their cores: unpinned, the server's own threads waking beside them
# slow a served race down.
_PINNED = {"ENABLE_CPU_PINNING": True}


def precision_config(precision: str) -> dict[str, str | bool]:
    """The CPU properties a precision compiles with (peers in the benchmark get the same)."""
    if precision == F32:
        return {**_PINNED, **_EXACT}
    if precision == DEFAULT_PRECISION:
        return {**_PINNED, **(_FAST_ON_AMX if cpu_has_amx() else _FAST)}
    raise ValueError(f"precision must be one of {sorted((F32, DEFAULT_PRECISION))}, got {precision!r}")


_core: ov.Core | None = None
_core_lock = threading.Lock()


def core() -> ov.Core:
    """The process-wide OpenVINO Core (cheap to share, expensive to create)."""
    global _core
    with _core_lock:
        if _core is None:
            _core = ov.Core()
        return _core


# Devices that choose or combine others ("AUTO:GPU,CPU"): OpenVINO checks what they name when it compiles.
_VIRTUAL_DEVICES = ("AUTO", "HETERO", "MULTI", "BATCH")


def reason(error: Exception) -> str:
    """The line of an error that says what went wrong: OpenVINO wraps it in lines naming where in its
    C++ it was raised ("Exception from src/...", "Check '...' failed at src/...")."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Exception from ", "Check '"))]
    return (said or lines or [type(error).__name__])[0]


def check_device(device: str) -> None:
    """ValueError for a device OpenVINO does not see on this machine, naming those it does: said before
    a model is downloaded or converted for it, not as the plugin's failure to load a library."""
    name = device.split(":")[0].strip()
    if name in _VIRTUAL_DEVICES:
        return
    seen = core().available_devices  # "GPU.0", "GPU.1" where there are two, either of which "GPU" names
    names = set(seen) | {found.split(".")[0] for found in seen}
    if ":" in device and name in names:  # "CPU:0": OpenVINO numbers devices with a dot, and only AUTO-like ones take a list
        raise ValueError(f"OpenVINO does not take {device!r}: name one device as it lists them ({', '.join(seen)}); only "
                         f"{', '.join(_VIRTUAL_DEVICES)} take devices after ':' (AUTO:{name})")
    if name not in names:
        case = f" ({name.upper()}: names are upper case)" if name.upper() in names else ""
        raise ValueError(f"OpenVINO finds no device {device!r} on this machine{case}: use one of {', '.join(seen)}")


class CompiledLM:
    """A compiled stateful causal LM plus what its KV cache needs: each state's sequence axis."""

    def __init__(self, compiled: ov.CompiledModel, state_axes: dict[str, int], vocab_size: int,
                 properties: dict[str, str | bool] | None = None):
        self.compiled = compiled
        self.properties = properties or {}  # what it was compiled with: what its calls' costs depend on
        self.state_axes = state_axes
        self.vocab_size = vocab_size  # width of the logits, possibly padded past the tokenizer's vocabulary
        self.input_names = {name for port in compiled.inputs for name in port.get_names()}
        # Infer requests that finished a generation. A request that has run keeps its buffers, so
        # reusing one skips the allocations a new request makes while its cache grows
        # (openvino-genai keeps one request for its lifetime).
        self._idle: list[ov.InferRequest] = []
        # Reentrant: a dropped stream gives its caches back from a finalizer, which the garbage
        # collector may run in a thread already holding it.
        self._idle_lock = threading.RLock()
        self._grown = False  # a large call made the model's scratch memory grow: give it back when idle
        # Calls so far through any of its caches, and the last one's input width: its requests share
        # the CPU plugin's prepared shapes, so a call right after another cache's of another width
        # pays for re-preparing, and one of the same width does not.
        self.calls = 0
        self.last_width: int | None = None

    def applied(self, names: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
        """What the device says it applies for each of the property `names` (its own choice where
        none was given), or None where it will not say: two copies that agree run alike."""
        try:
            return tuple((name, str(self.compiled.get_property(name))) for name in sorted(names))
        except (RuntimeError, TypeError):
            return None

    def new_cache(self) -> "StatefulLM":
        """An empty KV cache of its own, so sessions never share one; `release` it when done."""
        with self._idle_lock:
            request = self._idle.pop() if self._idle else None
        return StatefulLM(self, request)

    def warm_up(self) -> None:
        """A throwaway prompt-sized call, then a one-token one: a compiled model's first calls pay
        one-off set-up costs, which no generation should be charged. The next cache gets this
        warm infer request. Once any call has run, there is nothing left to pay: it returns."""
        if self.calls:
            return
        cache = self.new_cache()
        cache.forward(list(range(8)))
        cache.forward([0])
        cache.release()

    def _give_back(self, request: ov.InferRequest | None, grown: bool) -> None:
        """Pool `request` (None: it is dropped); after a large generation, release the memory the
        compiled model grew for it."""
        with self._idle_lock:
            if request is not None:
                self._idle.append(request)
            self._grown = self._grown or grown
            if not self._grown:
                return
        # The CPU plugin keeps intermediate buffers sized for the widest call so far in the compiled
        # model, shared by its requests, so one long prompt would leave it larger for good.
        # release_memory() gives that back; it refuses while another generation is inferring,
        # and then the next release tries again.
        try:
            self.compiled.release_memory()
        except RuntimeError:
            return
        with self._idle_lock:
            self._grown = False


def compile_properties(
    precision: str = DEFAULT_PRECISION, device: str = "CPU", token_ids: np.ndarray | None = None,
    settings: dict[str, str] | None = None,
) -> dict[str, str | bool | int]:
    """What `compile_model` records as a model's `properties`: the device, the CPU properties (the
    precision's, or `settings` in their place) and how many tokens its head scores."""
    properties = {"DEVICE": device, "PERFORMANCE_HINT": "LATENCY",
                  **(precision_config(precision) if settings is None else {**_PINNED, **settings})}
    if token_ids is not None:
        properties["SCORED_TOKENS"] = len(token_ids)  # not OpenVINO's: the head's size, which a call's cost depends on
    return properties


def compile_model(
    xml: Path, precision: str = DEFAULT_PRECISION, device: str = "CPU", cache_dir: Path | None = None,
    token_ids: np.ndarray | None = None, settings: dict[str, str] | None = None,
) -> CompiledLM:
    """Compile a stateful causal-LM IR; `cache_dir` lets OpenVINO reuse the compiled blob across runs.

    `token_ids`: score only these tokens (a draft's most frequent ones): logit i is token_ids[i].
    `settings`: CPU properties chosen by measurement (spec.models.tuning) instead of the precision's.
    """
    properties = compile_properties(precision, device, token_ids, settings)
    config = {key: value for key, value in properties.items() if key not in ("DEVICE", "SCORED_TOKENS")}
    if cache_dir is not None:
        config["CACHE_DIR"] = str(cache_dir)
    model = core().read_model(str(xml))
    _check_stateful(model, xml)
    compute_only_kept_logits(model)
    if token_ids is not None:
        score_only(model, token_ids, xml)
    axes = _sequence_axes(model)
    vocab_size = model.outputs[0].get_partial_shape()[-1]
    if vocab_size.is_dynamic:
        raise ValueError(f"{xml} has a dynamic vocabulary dimension in its logits")
    return CompiledLM(core().compile_model(model, device, config), axes, vocab_size.get_length(), properties)


def _check_stateful(model: ov.Model, xml: Path) -> None:
    names = {name for port in model.inputs for name in port.get_names()}
    missing = {"input_ids", "attention_mask"} - names
    if missing or not model.get_sinks():
        raise ValueError(
            f"{xml} is not a stateful causal-LM IR (missing inputs {sorted(missing)} or KV-cache state); "
            "export it with task text-generation-with-past"
        )


def _sequence_axes(model: ov.Model) -> dict[str, int]:
    """Each state variable's sequence axis: the dynamic dimension that is not the batch (axis 0)."""
    axes = {}
    for op in model.get_ops():
        if op.get_type_name() != "ReadValue":
            continue
        shape = op.get_output_partial_shape(0)
        dynamic = [axis for axis in range(1, len(shape)) if shape[axis].is_dynamic]
        if len(dynamic) != 1:
            raise ValueError(f"cannot find the sequence axis of state {op.get_variable_id()} with shape {shape}")
        axes[op.get_variable_id()] = dynamic[0]
    return axes


# A generation past either size gives its memory back when it ends: its infer request (whose KV
# state buffers keep their largest size) is dropped rather than pooled, and the compiled model
# releases its intermediate buffers. Below them, reusing the request saves allocations on every step.
_POOL_MAX_WIDTH = 256  # tokens in one call (a long prompt's prefill)
_POOL_MAX_LENGTH = 2048  # slots in the KV cache

# Rolled-back slots tolerated before the cache is compacted. Rolling back by masking costs nothing,
# and attending over a few hundred masked slots costs little; copying every state out and back
# (OpenVINO has no in-place trim) costs several target calls, so it is done once per this many
# rejected tokens instead of once per rejection. The price at the default precision: masked slots
# change the logits a little, so greedy texts can part from one-by-one decoding at a near-tie.
_MAX_DEAD_SLOTS = 256


class StatefulLM:
    """One KV cache over a compiled model: feed tokens, get logits, roll back after a rejection.

    `length` is how many tokens the cache holds. Rolled-back tokens stay in the state but are
    masked out (attention_mask 0) and later positions continue from `length`, so attention sees
    exactly the kept tokens; the state is compacted once enough dead slots pile up.
    """

    def __init__(self, model: CompiledLM, request: ov.InferRequest | None = None):
        self._model = model
        # A pooled request was emptied when it was released, and a new one starts empty.
        self._request = request if request is not None else model.compiled.create_infer_request()
        self._axes = model.state_axes
        self._has_positions = "position_ids" in model.input_names
        self._has_beam_idx = "beam_idx" in model.input_names
        self._can_keep = "logits_to_keep" in model.input_names
        self._beam_idx = np.zeros(1, dtype=np.int32)
        self._slots = np.zeros(0, dtype=np.int64)  # the attention mask over the state: 1 kept, 0 rolled back
        self.length = 0
        self._large = False  # a call or the cache went past _POOL_MAX_WIDTH / _POOL_MAX_LENGTH
        self._seen = model.calls  # the model's calls as of this cache's last one

    def forward(self, token_ids: Sequence[int], keep: int | None = None) -> np.ndarray:
        """Append `token_ids` to the cache; return the logits of the last `keep` of them (all if None).

        Shape (keep, vocab). Asking only for the rows you need skips most of the LM head's work.
        """
        if self._request is None:
            raise ValueError("this KV cache was released at the end of its generation: take a new one with new_cache()")
        ids = np.asarray(token_ids, dtype=np.int64).reshape(1, -1)
        n = ids.shape[1]
        if n == 0:
            raise ValueError("forward needs at least one token")
        keep = n if keep is None else keep
        if not 1 <= keep <= n:
            raise ValueError(f"keep must be from 1 to the {n} tokens fed, got {keep}")
        slots = np.concatenate([self._slots, np.ones(n, dtype=np.int64)])
        inputs = {"input_ids": ids, "attention_mask": slots.reshape(1, -1)}
        if self._has_positions:
            inputs["position_ids"] = np.arange(self.length, self.length + n, dtype=np.int64).reshape(1, -1)
        if self._has_beam_idx:
            inputs["beam_idx"] = self._beam_idx
        if self._can_keep:
            inputs["logits_to_keep"] = np.array([keep], dtype=np.int64)
        self._request.infer(inputs, share_inputs=True, share_outputs=True)
        self._model.calls += 1
        self._model.last_width = n
        self._seen = self._model.calls
        self._slots = slots
        self._large = self._large or n > _POOL_MAX_WIDTH or len(slots) > _POOL_MAX_LENGTH
        self.length += n
        # Copy: the output buffer is reused by the next call.
        return np.array(self._request.get_output_tensor(0).data[0, -keep:], dtype=np.float32)

    @property
    def others_width(self) -> int | None:
        """The input width of the compiled model's last call where another cache made it since this
        one's last call (the race's other lane); None where none did."""
        return self._model.last_width if self._model.calls != self._seen else None

    def trim(self, length: int) -> None:
        """Roll the cache back to its first `length` tokens (drop rejected tokens)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot trim a cache of {self.length} tokens to {length}")
        if length == self.length:
            return
        if length == 0:
            self.reset()
            return
        kept = np.flatnonzero(self._slots)
        self._slots[kept[length:]] = 0
        self.length = length
        # Without position ids the model would number positions by slot: rolled-back slots must go.
        if not self._has_positions or len(self._slots) - length > _MAX_DEAD_SLOTS:
            self._compact(kept[:length])

    def _compact(self, kept: np.ndarray) -> None:
        """Copy only the kept slots back into every state variable."""
        contiguous = len(kept) == 0 or kept[-1] == len(kept) - 1
        for state in self._request.query_state():
            axis = self._axes[state.name]
            data = state.state.data
            if contiguous:  # the usual case after a roll back: a slice, not a gather
                index = [slice(None)] * data.ndim
                index[axis] = slice(0, len(kept))
                state.state = ov.Tensor(np.ascontiguousarray(data[tuple(index)]))
            else:
                state.state = ov.Tensor(np.ascontiguousarray(np.take(data, kept, axis=axis)))
        self._slots = np.ones(len(kept), dtype=np.int64)

    def reset(self) -> None:
        """Empty the cache for a new prompt."""
        self._request.reset_state()
        self._slots = np.zeros(0, dtype=np.int64)
        self.length = 0

    def release(self) -> None:
        """Hand the infer request back to the model's pool (after a large generation, drop it and
        free the memory it grew); this cache is unusable afterwards."""
        if self._request is not None:
            request, self._request = self._request, None
            if self._large:
                del request  # its state buffers go with it
                self._model._give_back(None, grown=True)
                return
            request.reset_state()  # nothing of this generation stays behind for the next one
            self._model._give_back(request, grown=False)
