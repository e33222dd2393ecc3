"""What the benchmark measures: prompt sets, drafts, and the configurations (settings) to time.

A Setting is one measured configuration: an engine with its models (a worker Family), a decoding
method, K, greedy or sampled, max_new_tokens and a prompt set. The plan covers the paper's table
(autoregressive vs speculative at each N), a K sweep for each drafter, greedy and sampled,
open-ended and input-grounded prompts, and the peers on the same models, prompts and settings.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.workers import Family

OPEN, GROUNDED = "open", "grounded"  # prompt-set kinds: answer not in the prompt / answer copies from it
OURS, GENAI, OPTIMUM = "ours", "openvino-genai", "optimum-intel"
AR, SPEC = "autoregressive", "speculative"
GENAI_LOOKUP_K = 5  # openvino-genai's prompt lookup drafts this many tokens unless told otherwise
DRAFT_MODEL, LOOKUP, HYBRID = "draft-model", "prompt-lookup", "hybrid"


@dataclass(frozen=True)
class PromptSet:
    name: str  # e.g. "open"
    kind: str  # OPEN or GROUNDED
    description: str
    prompts: tuple[tuple[str, str], ...]  # (id, text)


def load_prompt_sets(paths: list[Path], limit: int | None = None) -> list[PromptSet]:
    """Read prompt-set JSON files ({name, kind, description, prompts: [{id, text}]})."""
    sets = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
            prompts = tuple((str(p["id"]), str(p["text"])) for p in data["prompts"])
            kind = data.get("kind", OPEN)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"cannot read prompt set {path}: {error}") from error
        if kind not in (OPEN, GROUNDED) or not prompts:
            raise ValueError(f"prompt set {path} needs kind 'open' or 'grounded' and at least one prompt, got kind {kind!r}")
        sets.append(PromptSet(data.get("name", Path(path).stem), kind, data.get("description", ""), prompts[:limit]))
    if len({s.name for s in sets}) != len(sets):
        raise ValueError(f"prompt set names must differ, got {[s.name for s in sets]}")
    return sets


@dataclass(frozen=True)
class Draft:
    label: str  # short name in tables, e.g. "self-int4"
    path: str  # its OpenVINO IR folder
    description: str  # exactly what it is
    same_tokenizer: bool = True  # False: it drafts across tokenizers (openvino-genai cannot pair it)
    vocabulary: int | None = None  # its head scores only this many frequent tokens (ours only); None: all


@dataclass(frozen=True)
class Setting:
    """One measured configuration."""

    family: str  # name of the worker Family that runs it
    engine: str  # OURS, GENAI or OPTIMUM
    mode: str  # AR or SPEC
    drafter: str | None  # DRAFT_MODEL, LOOKUP, HYBRID, or None for autoregressive
    draft: str | None  # Draft.label for the draft-model drafter
    k: int | None  # tokens drafted per round (the starting K when dynamic); None for autoregressive
    dynamic: bool  # dynamic K (ours only)
    sampled: bool  # temperature / top-p sampling instead of greedy
    max_new_tokens: int
    prompt_set: str
    exactness: bool = False  # run once, at f32, only to compare its greedy text with autoregressive's

    @property
    def how(self) -> str:
        """Its drafter in words, e.g. "draft self-int4", "prompt lookup", "hybrid (smollm2 + lookup)"."""
        return {DRAFT_MODEL: f"draft {self.draft}", LOOKUP: "prompt lookup", HYBRID: f"hybrid ({self.draft} + lookup)"}[self.drafter]

    @property
    def method(self) -> str:
        """How it decodes, e.g. "speculative · draft self-int4 · K=4" or "autoregressive"."""
        if self.mode == AR:
            return AR
        return f"speculative · {self.how} · {'dynamic K' if self.dynamic else f'K={self.k}'}"

    @property
    def label(self) -> str:
        decoding = "sampled" if self.sampled else "greedy"
        return f"{self.engine} | {self.method} | {decoding} | N={self.max_new_tokens} | {self.prompt_set}"

    def job(self, prompt: str, prompt_ids: list[int], eos_token_ids: list[int], seed: int, temperature: float, top_p: float) -> dict:
        """What the worker needs to run this setting on one prompt (peers take the token ids ours encodes)."""
        return {
            "prompt": prompt,
            "prompt_ids": prompt_ids,
            "eos_token_ids": eos_token_ids,
            "max_ngram_size": 3,  # prompt lookup's longest n-gram: spec's default, given to openvino-genai too
            "mode": self.mode,
            "drafter": self.drafter,
            "k": self.k,
            "dynamic": self.dynamic,
            "max_new_tokens": self.max_new_tokens,
            "temperature": temperature if self.sampled else 0.0,
            "top_p": top_p if self.sampled else 1.0,
            "seed": seed,
        }


@dataclass
class Plan:
    target_label: str
    target_path: str
    drafts: list[Draft]
    prompt_sets: list[PromptSet]
    families: list[Family]
    settings: list[Setting]
    costs_family: Family
    notes: list[str] = field(default_factory=list)  # what was skipped and why

    def prompt_set(self, name: str) -> PromptSet:
        return next(s for s in self.prompt_sets if s.name == name)

    def generations_per_repeat(self) -> int:
        return sum(len(self.prompt_set(s.prompt_set).prompts) for s in self.settings if not s.exactness)


def build_plan(
    target_label: str,
    target_path: str,
    drafts: list[Draft],
    prompt_sets: list[PromptSet],
    max_new_tokens: list[int],
    ks: list[int],
    dynamic: bool,
    sampled: bool,
    peers: list[str],
    peer_k: int,
    precision: str,
    exactness: bool = True,
) -> Plan:
    """Families and settings for one run.

    Draft models are swept on open-ended prompts (where a model is the only way to guess), prompt
    lookup on input-grounded ones (where it can copy); each drafter's dynamic-K setting also runs
    on the other kind, at the largest N, and sampled on both; the hybrid of each draft with lookup runs on both
    kinds at every N. Fixed K is swept at the smallest N (it shows the shape of speed-up vs K at a
    fraction of the time); peers' speculative runs use that N and the peer K, which ours also runs.
    Peers decode greedily. Unless `precision` is already f32, every method runs once more at f32
    on every prompt (greedy, largest N), only to check its text equals autoregressive's. Any further
    prompt set (e.g. HumanEval) gets autoregressive, dynamic-K prompt lookup, the hybrids and the
    peers at every N, greedy.
    """
    open_set = next((s.name for s in prompt_sets if s.kind == OPEN), prompt_sets[0].name)
    grounded_set = next((s.name for s in prompt_sets if s.kind == GROUNDED), prompt_sets[-1].name)
    n_max, n_sweep = max(max_new_tokens), min(max_new_tokens)
    k_default = peer_k if peer_k in ks else (ks[len(ks) // 2] if ks else 4)
    fixed_ks = list(ks)
    if peers and peer_k not in fixed_ks:
        fixed_ks.append(peer_k)

    families: dict[str, Family] = {}
    settings: list[Setting] = []

    def add(family: Family, **fields) -> None:
        families.setdefault(family.name, family)
        setting = Setting(family=family.name, engine=family.engine, **fields)
        if setting not in settings:
            settings.append(setting)

    ours_ar = Family("ours · autoregressive", OURS, target_path, precision=precision)
    for prompt_set in (open_set, grounded_set):
        for n in max_new_tokens:
            add(ours_ar, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=False, max_new_tokens=n, prompt_set=prompt_set)
        if sampled:
            add(ours_ar, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=True, max_new_tokens=n_max, prompt_set=prompt_set)

    def sweep(family: Family, drafter: str, draft: str | None, home: str, away: str) -> None:
        common = dict(mode=SPEC, drafter=drafter, draft=draft)
        for k in fixed_ks:
            add(family, **common, k=k, dynamic=False, sampled=False, max_new_tokens=n_sweep, prompt_set=home)
        if not dynamic:
            return
        dyn = dict(common, k=k_default, dynamic=True)
        for n in max_new_tokens:
            add(family, **dyn, sampled=False, max_new_tokens=n, prompt_set=home)
        add(family, **dyn, sampled=False, max_new_tokens=n_max, prompt_set=away)
        if sampled:  # on both kinds, so the hybrid's sampled runs have both its drafters beside them
            for prompt_set in (home, away):
                add(family, **dyn, sampled=True, max_new_tokens=n_max, prompt_set=prompt_set)

    for draft in drafts:
        family = Family(f"ours · draft {draft.label}", OURS, target_path, draft=draft.path, precision=precision,
                        draft_vocabulary=draft.vocabulary)
        sweep(family, DRAFT_MODEL, draft.label, open_set, grounded_set)
        if dynamic:
            for prompt_set in (grounded_set, open_set):
                for n in max_new_tokens:
                    add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, k=k_default, dynamic=True, sampled=False, max_new_tokens=n, prompt_set=prompt_set)
                if sampled:
                    add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, k=k_default, dynamic=True, sampled=True, max_new_tokens=n_max, prompt_set=prompt_set)
    sweep(Family("ours · prompt lookup", OURS, target_path, precision=precision), LOOKUP, None, grounded_set, open_set)
    if exactness and precision != "f32":
        exact = dict(k=k_default, dynamic=True, sampled=False, max_new_tokens=n_max, exactness=True)
        for draft in drafts[:1] or [None]:
            family = Family("ours · f32 exactness check", OURS, target_path, draft=draft.path if draft else None, precision="f32",
                            draft_vocabulary=draft.vocabulary if draft else None)
            for prompt_set in (grounded_set, open_set):
                add(family, mode=AR, drafter=None, draft=None, **{**exact, "k": None, "dynamic": False}, prompt_set=prompt_set)
                add(family, mode=SPEC, drafter=LOOKUP, draft=None, **exact, prompt_set=prompt_set)
                if draft:
                    add(family, mode=SPEC, drafter=DRAFT_MODEL, draft=draft.label, **exact, prompt_set=prompt_set)
                    add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, **exact, prompt_set=prompt_set)

    if GENAI in peers:
        plain = Family("openvino-genai · plain", GENAI, target_path, precision=precision)
        for prompt_set in (open_set, grounded_set):
            for n in max_new_tokens:
                add(plain, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=False, max_new_tokens=n, prompt_set=prompt_set)
        for draft in (d for d in drafts if d.same_tokenizer):  # it cannot draft across tokenizers
            family = Family(f"openvino-genai · draft {draft.label}", GENAI, target_path, draft=draft.path, precision=precision)
            add(family, mode=SPEC, drafter=DRAFT_MODEL, draft=draft.label, k=peer_k, dynamic=False, sampled=False, max_new_tokens=n_sweep, prompt_set=open_set)
        lookup = Family("openvino-genai · prompt lookup", GENAI, target_path, prompt_lookup=True, precision=precision)
        for k in sorted({peer_k, GENAI_LOOKUP_K}):  # at our K and at its own default
            add(lookup, mode=SPEC, drafter=LOOKUP, draft=None, k=k, dynamic=False, sampled=False, max_new_tokens=n_sweep, prompt_set=grounded_set)
    if OPTIMUM in peers:
        plain = Family("optimum-intel · plain", OPTIMUM, target_path, precision=precision)
        for prompt_set in (open_set, grounded_set):
            add(plain, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=False, max_new_tokens=n_max, prompt_set=prompt_set)

    # Further prompt sets (HumanEval, say): the paper's table and the per-prompt speed-ups at every N,
    # beside the peers; the K sweep, sampling and the f32 check stay on the two sets above.
    for prompt_set in (s.name for s in prompt_sets if s.name not in (open_set, grounded_set)):
        greedy = dict(sampled=False, prompt_set=prompt_set)
        for n in max_new_tokens:
            add(ours_ar, mode=AR, drafter=None, draft=None, k=None, dynamic=False, max_new_tokens=n, **greedy)
            if dynamic:
                add(Family("ours · prompt lookup", OURS, target_path, precision=precision), mode=SPEC, drafter=LOOKUP,
                    draft=None, k=k_default, dynamic=True, max_new_tokens=n, **greedy)
                for draft in drafts:
                    family = Family(f"ours · draft {draft.label}", OURS, target_path, draft=draft.path, precision=precision,
                                    draft_vocabulary=draft.vocabulary)
                    add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, k=k_default, dynamic=True, max_new_tokens=n, **greedy)
            if GENAI in peers:
                add(Family("openvino-genai · plain", GENAI, target_path, precision=precision), mode=AR, drafter=None, draft=None, k=None,
                    dynamic=False, max_new_tokens=n, **greedy)
                lookup = Family("openvino-genai · prompt lookup", GENAI, target_path, prompt_lookup=True, precision=precision)
                add(lookup, mode=SPEC, drafter=LOOKUP, draft=None, k=peer_k, dynamic=False, max_new_tokens=n, **greedy)

    costs = Family("ours · per-call costs", "costs", target_path, drafts=tuple(d.path for d in drafts), precision=precision,
                   draft_vocabularies=tuple(d.vocabulary for d in drafts))
    return Plan(target_label, target_path, drafts, prompt_sets, list(families.values()), settings, costs)

