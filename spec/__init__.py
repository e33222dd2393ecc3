"""Speculative sampling on OpenVINO: a draft proposes K tokens, the target verifies them in one call.

Paper names throughout: `p` is the target model's distribution, `q` the draft's
(Leviathan et al. 2023; Chen et al. 2023).

The engine does three jobs, a subpackage each: `spec.models` (where a model comes from and how it
becomes a compiled IR), `spec.decoding` (both loops, the drafters, the acceptance rule) and
`spec.serving` (the race the Space shows). Scripts need only this front door, shaped like
transformers' and openvino-genai's `generate` (plain decoding unless a draft model or prompt
lookup is given; settings as keywords):

    from spec import generate, load_model, stream
    target = load_model("embedded:Qwen2.5-Coder-1.5B-Instruct")
    draft = load_model("embedded:Qwen2.5-Coder-0.5B-Instruct")
    result = generate("Rename x to n: def f(x): return x * x", target, draft=draft, prompt_lookup=True)
    print(result.text, result.stats.decode_tokens_per_second)
    for step in stream("Explain Python generators", target, draft=draft, max_new_tokens=64):
        print(step.text, end="", flush=True)
"""
from __future__ import annotations

import importlib

# name -> the module that defines it. Loaded on first use, so `import spec.decoding.sampling`
# (or `from spec import GenerationConfig`) never pulls in OpenVINO.
_EXPORTS = {
    "GenerationConfig": "spec.config",
    "ModelKey": "spec.config",
    "AUTOREGRESSIVE": "spec.config",
    "SPECULATIVE": "spec.config",
    "DRAFT_MODEL": "spec.config",
    "PROMPT_LOOKUP": "spec.config",
    "HYBRID": "spec.config",
    "ModelError": "spec.errors",
    "load_model": "spec.models.registry",
    "LoadedModel": "spec.models.registry",
    "ModelRegistry": "spec.models.registry",
    "generate": "spec.decoding.engine",
    "stream": "spec.decoding.engine",
    "GenerationResult": "spec.decoding.generation",
    "AnswerHistory": "spec.decoding.history",
    "LearnedState": "spec.decoding.target_memory",
    "Step": "spec.decoding.generation",
    "Stats": "spec.decoding.metrics",
    "DEFAULT_REF": "spec.models.embedded",
    "DRAFT_REF": "spec.models.embedded",
    "QUICK_REF": "spec.models.embedded",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'spec' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
