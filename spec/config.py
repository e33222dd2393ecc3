"""Settings shared by the command line, the Space and the benchmark, and the names they use.

Each mode, drafter, precision and weight format is named here once; everything else imports it.
"""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field, fields, replace

# Decoding methods.
AUTOREGRESSIVE, SPECULATIVE = "autoregressive", "speculative"
MODES = (AUTOREGRESSIVE, SPECULATIVE)

# The built-in drafters' names: a small draft model, copying from the context (no second model), or
# each round the better of the two. Each is a plug-in (spec.decoding.plugins), which lists them all.
DRAFT_MODEL, PROMPT_LOOKUP, HYBRID = "draft-model", "prompt-lookup", "hybrid"

# "f32" pins exact arithmetic (a K-token verify call agrees with one-by-one decoding);
# "default" gives that up for speed: activations rounded to 8 bits on the fly (spec.models.runtime).
F32, DEFAULT_PRECISION = "f32", "default"
PRECISIONS = (F32, DEFAULT_PRECISION)

# Tokens a draft model's head scores (FR-Spec): its cost falls with it, and the answers of a coding
# chat model keep to a small part of a vocabulary like Qwen's 151,936 (spec.models.draft_vocabulary).
DRAFT_VOCABULARY = 32768

# Weight compression of models the engine converts; fp32 leaves them as they are (tiny test models).
INT8, INT4, FP32 = "int8", "int4", "fp32"
WEIGHT_FORMATS = (INT8, INT4, FP32)
# A preset's draft at whichever of INT4 and INT8 this machine multiplies faster (spec.models.draft_format).
MEASURED = "measured"


@dataclass(frozen=True)
class ModelKey:
    """Everything that makes one compiled model differ from another: what the registry keys on."""

    ref: str | None  # Hub id, local folder or embedded reference; None means the default embedded model
    weight_format: str = INT8  # compression, when the engine converts the model itself
    precision: str = DEFAULT_PRECISION  # F32 or DEFAULT_PRECISION
    device: str = "CPU"  # the OpenVINO device it is compiled for
    hub_only: bool = False  # a visitor's model on a shared server: a Hub id, never a path on the server
    vocabulary: int | None = None  # a draft's head scores only this many of the most frequent tokens; None: all


def default_device() -> str:
    """The OpenVINO device models are compiled for unless told otherwise: SPEC_DEVICE, else CPU."""
    return os.environ.get("SPEC_DEVICE", "").strip() or "CPU"


MIN_TEMPERATURE = 0.01  # the lowest sampling temperature; below it the scaled logits overflow (0 decodes greedily)


@dataclass
class GenerationConfig:
    """How to generate: the names are transformers' GenerationConfig's where the idea is the same."""

    max_new_tokens: int = 128  # stop after this many new tokens
    temperature: float = 0.0  # 0 means greedy decoding
    top_k: int = 0  # keep only the k most likely tokens; 0 keeps all
    top_p: float = 1.0  # nucleus sampling mass; 1.0 keeps all
    # Seeds sampling and speculative acceptance. A sampled run repeats token for token when decoding is
    # autoregressive or K is fixed; with dynamic K the rounds follow timings measured as it runs, so
    # the draws fall differently each run (the output still follows the target's distribution).
    seed: int | None = None
    num_assistant_tokens: int = 4  # K: drafts each verify call checks (its width is K+1)
    dynamic_k: bool = True  # adapt how many tokens a draft model makes; plain steps when drafting does not pay
    # The longest n-gram prompt lookup matches (shorter if absent); its match may reach further back.
    # transformers' name, as the rest of this config's; openvino-genai calls it max_ngram_size.
    max_matching_ngram_size: int = 3
    stop_strings: tuple[str, ...] = field(default_factory=tuple)  # stop when the text contains one of these
    chat: bool = True  # wrap the prompt in the tokenizer's chat template when it has one

    def __post_init__(self) -> None:
        # A script's numpy numbers (np.int64(4) from np.arange) are Python's: the rules check them as such.
        for name in ("max_new_tokens", "top_k", "seed", "num_assistant_tokens", "max_matching_ngram_size"):
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
                setattr(self, name, int(value))
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if isinstance(value, numbers.Real) and not isinstance(value, (bool, float, int)):
                setattr(self, name, float(value))
        if isinstance(self.stop_strings, str):  # one stop string, as transformers also takes it
            self.stop_strings = (self.stop_strings,)
        elif isinstance(self.stop_strings, list):
            self.stop_strings = tuple(self.stop_strings)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def updated(self, **settings) -> "GenerationConfig":
        """A validated copy with `settings` changed; ValueError names any setting it does not have."""
        unknown = sorted(set(settings) - {f.name for f in fields(self)})
        if unknown:
            raise ValueError(f"unknown generation setting(s) {', '.join(unknown)}: the settings are "
                             f"{', '.join(f.name for f in fields(self))}")
        return replace(self, **settings).validate()

    def validate(self) -> "GenerationConfig":
        """Raise ValueError naming the offending value; return self for chaining."""
        _check_int("max_new_tokens", self.max_new_tokens, 1, 8192)
        _check_number("temperature", self.temperature, 0.0, 10.0)
        if 0.0 < self.temperature < MIN_TEMPERATURE:  # logits divided by it overflow: 0 is greedy
            raise ValueError(f"temperature must be 0 (greedy) or from {MIN_TEMPERATURE:g} to 10, got {self.temperature!r}")
        _check_int("top_k", self.top_k, 0, None)
        if not _is_number(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        _check_int("num_assistant_tokens (K)", self.num_assistant_tokens, 1, 64)
        _check_int("max_matching_ngram_size", self.max_matching_ngram_size, 1, 16)
        if self.seed is not None:
            _check_int("seed", self.seed, 0, None)
        for name in ("dynamic_k", "chat"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not isinstance(self.stop_strings, tuple) or not all(isinstance(s, str) and s for s in self.stop_strings):
            raise ValueError(f"stop_strings must be non-empty strings, got {self.stop_strings!r}")
        return self


def named_as(error: ValueError, names: dict[str, str]) -> str:
    """validate()'s message, the setting it names called as the caller's user knows it (`names`:
    setting -> a command-line option, say); as it was where it names none of them."""
    message = str(error)
    setting = next((name for name in names if message.startswith(name + " ")), None)
    return message if setting is None else names[setting] + message[len(setting):]


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_number(name: str, value, low: float, high: float) -> None:
    if not _is_number(value) or not low <= value <= high:
        raise ValueError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")


def _check_int(name: str, value, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        what = f"from {low} to {high}" if high is not None else ("a positive integer" if low else "a non-negative integer")
        raise ValueError(f"{name} must be {'an integer ' + what if high is not None else what}, got {value!r}")
