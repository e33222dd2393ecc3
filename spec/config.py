"""Settings shared by the command line, the Space and the benchmark, and the names they use.

Each mode, drafter, precision and weight format is named here once; everything else imports it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Decoding methods.
AUTOREGRESSIVE, SPECULATIVE = "autoregressive", "speculative"
MODES = (AUTOREGRESSIVE, SPECULATIVE)

# Drafters: a small draft model, copying from the context (no second model), or each round the
# better of the two.
DRAFT_MODEL, PROMPT_LOOKUP, HYBRID = "draft-model", "prompt-lookup", "hybrid"
DRAFTERS = (HYBRID, DRAFT_MODEL, PROMPT_LOOKUP)

# "f32" pins exact arithmetic (a K-token verify call agrees with one-by-one decoding);
# "default" is the fastest measured: activations rounded to 8 bits on the fly (spec.models.runtime).
F32, DEFAULT_PRECISION = "f32", "default"
PRECISIONS = (F32, DEFAULT_PRECISION)

# Tokens a draft model's head scores (FR-Spec): its cost falls with it, and the answers of a coding
# chat model keep to a small part of a vocabulary like Qwen's 151,936 (spec.models.draft_vocabulary).
DRAFT_VOCABULARY = 32768

# Weight compression of models the engine converts; fp32 leaves them as they are (tiny test models).
INT8, INT4, FP32 = "int8", "int4", "fp32"
WEIGHT_FORMATS = (INT8, INT4, FP32)


@dataclass(frozen=True)
class ModelKey:
    """Everything that makes one compiled model differ from another: what the registry keys on."""

    ref: str | None  # Hub id, local folder or embedded reference; None means the default embedded model
    weight_format: str = INT8  # compression, when the engine converts the model itself
    precision: str = DEFAULT_PRECISION  # F32 or DEFAULT_PRECISION
    device: str = "CPU"  # the OpenVINO device it is compiled for
    hub_only: bool = False  # a visitor's model on a shared server: a Hub id, never a path on the server
    vocabulary: int | None = None  # a draft's head scores only this many of the most frequent tokens; None: all


@dataclass
class GenerationConfig:
    max_new_tokens: int = 128  # stop after this many new tokens
    temperature: float = 0.0  # 0 means greedy decoding
    top_k: int = 0  # keep only the k most likely tokens; 0 keeps all
    top_p: float = 1.0  # nucleus sampling mass; 1.0 keeps all
    seed: int | None = None  # seeds sampling (and speculative acceptance) for reproducible runs
    num_assistant_tokens: int = 4  # K: drafts each verify call checks (its width is K+1)
    dynamic_k: bool = True  # adapt how many tokens a draft model makes; plain steps when drafting does not pay
    prompt_lookup_max_ngram: int = 3  # n-gram prompt lookup looks up (shorter if absent); its match may reach further back
    stop_strings: tuple[str, ...] = field(default_factory=tuple)  # stop when the text contains one of these
    chat: bool = True  # wrap the prompt in the tokenizer's chat template when it has one

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validate(self) -> "GenerationConfig":
        """Raise ValueError naming the offending value; return self for chaining."""
        if not isinstance(self.max_new_tokens, int) or not 1 <= self.max_new_tokens <= 8192:
            raise ValueError(f"max_new_tokens must be an integer from 1 to 8192, got {self.max_new_tokens!r}")
        if not 0.0 <= self.temperature <= 10.0:
            raise ValueError(f"temperature must be between 0 and 10, got {self.temperature!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be a non-negative integer, got {self.top_k!r}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.num_assistant_tokens, int) or not 1 <= self.num_assistant_tokens <= 64:
            raise ValueError(f"num_assistant_tokens (K) must be an integer from 1 to 64, got {self.num_assistant_tokens!r}")
        if not 1 <= self.prompt_lookup_max_ngram <= 16:
            raise ValueError(f"prompt_lookup_max_ngram must be from 1 to 16, got {self.prompt_lookup_max_ngram!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        return self
