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
from typing import Sequence

from bench.workers import Family
from spec.config import (
    AUTOREGRESSIVE as AR,  # the engine's names for its modes and drafters, which the results record
    DRAFT_MODEL,
    HYBRID,
    PROMPT_LOOKUP as LOOKUP,
    SPECULATIVE as SPEC,
)
from spec.decoding.plugins import needs_draft_model

SHIPPED_DRAFTERS = (HYBRID, DRAFT_MODEL, LOOKUP)  # measured in every run; a plug-in of your own only when named (--drafters)
OPEN, GROUNDED = "open", "grounded"  # prompt-set kinds: answer not in the prompt / answer copies from it
OURS, GENAI, OPTIMUM = "ours", "openvino-genai", "optimum-intel"
GENAI_LOOKUP_K = 5  # openvino-genai's prompt lookup drafts this many tokens unless told otherwise


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
        named = {DRAFT_MODEL: f"draft {self.draft}", LOOKUP: "prompt lookup", HYBRID: f"hybrid ({self.draft} + lookup)"}
        return named.get(self.drafter) or f"{self.drafter}{f' ({self.draft})' if self.draft else ''}"  # a plug-in of your own

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
class BenchPlan:
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
    plugins: Sequence[str] = (),
) -> BenchPlan:
    """Families and settings for one run.

    Draft models are swept on open-ended prompts (where a model is the only way to guess), prompt
    lookup on input-grounded ones (where it can copy); each drafter's dynamic-K setting also runs
    on the other kind, at the largest N, and sampled on both; the hybrid of each draft with lookup runs on both
    kinds at every N. Fixed K is swept at the smallest N (it shows the shape of speed-up vs K at a
    fraction of the time); peers' speculative runs use that N and the peer K, which ours also runs.
    Peers decode greedily. Unless `precision` is already f32, every method runs once more at f32
    on every prompt (greedy, largest N), only to check its text equals autoregressive's. Any further
    prompt set (e.g. HumanEval) gets autoregressive, dynamic-K prompt lookup, the hybrids and the
    peers at every N, greedy. `plugins`: drafters of your own, each swept as the shipped one it is
    like (with each draft model as the draft model is, or without one as prompt lookup is), and
    checked at f32 too. ValueError for one that needs a draft model where the run has none.
    """
    plan = _PlanBuilder(target_path, drafts, prompt_sets, max_new_tokens, ks, dynamic, sampled, peers, peer_k, precision, plugins)
    plan.autoregressive()
    for draft in drafts:
        plan.draft_model(draft)
    plan.prompt_lookup()
    for name in plugins:
        plan.plugin(name)
    if exactness and precision != "f32":
        plan.exactness_checks()
    if GENAI in peers:
        plan.openvino_genai()
    if OPTIMUM in peers:
        plan.optimum_intel()
    plan.further_prompt_sets()
    return plan.build(target_label)


class _PlanBuilder:
    """A plan's families and settings as they are added, each once, in the order added (the
    order they are timed and reported in)."""

    def __init__(self, target_path: str, drafts: list[Draft], prompt_sets: list[PromptSet], max_new_tokens: list[int],
                 ks: list[int], dynamic: bool, sampled: bool, peers: list[str], peer_k: int, precision: str,
                 plugins: Sequence[str] = ()):
        self.target_path, self.drafts, self.prompt_sets, self.precision = target_path, drafts, prompt_sets, precision
        self.plugins = list(plugins)
        self.max_new_tokens, self.dynamic, self.sampled, self.peers, self.peer_k = max_new_tokens, dynamic, sampled, peers, peer_k
        self.open_set = next((s.name for s in prompt_sets if s.kind == OPEN), prompt_sets[0].name)
        self.grounded_set = next((s.name for s in prompt_sets if s.kind == GROUNDED), prompt_sets[-1].name)
        self.n_max, self.n_sweep = max(max_new_tokens), min(max_new_tokens)
        self.k_default = peer_k if peer_k in ks else (ks[len(ks) // 2] if ks else 4)
        self.fixed_ks = list(ks)
        if peers and peer_k not in self.fixed_ks:
            self.fixed_ks.append(peer_k)
        self.families: dict[str, Family] = {}
        self.settings: list[Setting] = []

    def add(self, family: Family, **fields) -> None:
        self.families.setdefault(family.name, family)
        setting = Setting(family=family.name, engine=family.engine, **fields)
        if setting not in self.settings:
            self.settings.append(setting)

    def build(self, target_label: str) -> BenchPlan:
        costs = Family("ours · per-call costs", "costs", self.target_path, drafts=tuple(d.path for d in self.drafts),
                       precision=self.precision, draft_vocabularies=tuple(d.vocabulary for d in self.drafts))
        return BenchPlan(target_label, self.target_path, self.drafts, self.prompt_sets, list(self.families.values()), self.settings, costs)

    # --- Our families -----------------------------------------------------------------------

    def _ours_autoregressive(self) -> Family:
        return Family("ours · autoregressive", OURS, self.target_path, precision=self.precision)

    def _ours_draft(self, draft: Draft) -> Family:
        return Family(f"ours · draft {draft.label}", OURS, self.target_path, draft=draft.path, precision=self.precision,
                      draft_vocabulary=draft.vocabulary)

    def _ours_lookup(self) -> Family:
        return Family("ours · prompt lookup", OURS, self.target_path, precision=self.precision)

    def autoregressive(self) -> None:
        """Our autoregressive decoding on both kinds of prompt at every N, and sampled at the largest."""
        ours_ar = self._ours_autoregressive()
        for prompt_set in (self.open_set, self.grounded_set):
            for n in self.max_new_tokens:
                self.add(ours_ar, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=False, max_new_tokens=n, prompt_set=prompt_set)
            if self.sampled:
                self.add(ours_ar, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=True, max_new_tokens=self.n_max,
                         prompt_set=prompt_set)

    def _sweep(self, family: Family, drafter: str, draft: str | None, home: str, away: str) -> None:
        """Fixed K swept on the drafter's `home` prompts; its dynamic K there at every N, on the
        `away` ones at the largest, and sampled on both."""
        common = dict(mode=SPEC, drafter=drafter, draft=draft)
        for k in self.fixed_ks:
            self.add(family, **common, k=k, dynamic=False, sampled=False, max_new_tokens=self.n_sweep, prompt_set=home)
        if not self.dynamic:
            return
        dyn = dict(common, k=self.k_default, dynamic=True)
        for n in self.max_new_tokens:
            self.add(family, **dyn, sampled=False, max_new_tokens=n, prompt_set=home)
        self.add(family, **dyn, sampled=False, max_new_tokens=self.n_max, prompt_set=away)
        if self.sampled:  # on both kinds, so the hybrid's sampled runs have both its drafters beside them
            for prompt_set in (home, away):
                self.add(family, **dyn, sampled=True, max_new_tokens=self.n_max, prompt_set=prompt_set)

    def draft_model(self, draft: Draft) -> None:
        """The draft model swept on open prompts, and its hybrid with lookup on both kinds at every N."""
        family = self._ours_draft(draft)
        self._sweep(family, DRAFT_MODEL, draft.label, self.open_set, self.grounded_set)
        if not self.dynamic:
            return
        for prompt_set in (self.grounded_set, self.open_set):
            for n in self.max_new_tokens:
                self.add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, k=self.k_default, dynamic=True, sampled=False,
                         max_new_tokens=n, prompt_set=prompt_set)
            if self.sampled:
                self.add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, k=self.k_default, dynamic=True, sampled=True,
                         max_new_tokens=self.n_max, prompt_set=prompt_set)

    def prompt_lookup(self) -> None:
        """Prompt lookup swept on grounded prompts."""
        self._sweep(self._ours_lookup(), LOOKUP, None, self.grounded_set, self.open_set)

    def plugin(self, name: str) -> None:
        """A drafter of your own: with each draft model, swept on open prompts as the draft model is;
        without one, on grounded prompts as prompt lookup is (its own worker, the target alone)."""
        if not needs_draft_model(name):
            family = Family(f"ours · {name}", OURS, self.target_path, precision=self.precision)
            self._sweep(family, name, None, self.grounded_set, self.open_set)
            return
        if not self.drafts:
            raise ValueError(f"the drafter {name!r} drafts with a draft model, and this run has none: give one with --draft")
        for draft in self.drafts:
            self._sweep(self._ours_draft(draft), name, draft.label, self.open_set, self.grounded_set)

    def exactness_checks(self) -> None:
        """Every method once more at f32 (with the first draft), greedy at the largest N, for its text only."""
        exact = dict(k=self.k_default, dynamic=True, sampled=False, max_new_tokens=self.n_max, exactness=True)
        for draft in self.drafts[:1] or [None]:
            family = Family("ours · f32 exactness check", OURS, self.target_path, draft=draft.path if draft else None, precision="f32",
                            draft_vocabulary=draft.vocabulary if draft else None)
            for prompt_set in (self.grounded_set, self.open_set):
                self.add(family, mode=AR, drafter=None, draft=None, **{**exact, "k": None, "dynamic": False}, prompt_set=prompt_set)
                self.add(family, mode=SPEC, drafter=LOOKUP, draft=None, **exact, prompt_set=prompt_set)
                if draft:
                    self.add(family, mode=SPEC, drafter=DRAFT_MODEL, draft=draft.label, **exact, prompt_set=prompt_set)
                    self.add(family, mode=SPEC, drafter=HYBRID, draft=draft.label, **exact, prompt_set=prompt_set)
                for name in self.plugins:
                    if draft or not needs_draft_model(name):
                        self.add(family, mode=SPEC, drafter=name, draft=draft.label if needs_draft_model(name) else None,
                                 **exact, prompt_set=prompt_set)

    # --- The peers ---------------------------------------------------------------------------

    def _genai_plain(self) -> Family:
        return Family("openvino-genai · plain", GENAI, self.target_path, precision=self.precision)

    def _genai_lookup(self) -> Family:
        return Family("openvino-genai · prompt lookup", GENAI, self.target_path, prompt_lookup=True, precision=self.precision)

    def openvino_genai(self) -> None:
        """openvino-genai plainly at every N, with each same-tokenizer draft and with prompt lookup
        (at our K and its own default) at the smallest."""
        for prompt_set in (self.open_set, self.grounded_set):
            for n in self.max_new_tokens:
                self.add(self._genai_plain(), mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=False, max_new_tokens=n,
                         prompt_set=prompt_set)
        for draft in (d for d in self.drafts if d.same_tokenizer):  # it cannot draft across tokenizers
            family = Family(f"openvino-genai · draft {draft.label}", GENAI, self.target_path, draft=draft.path, precision=self.precision)
            self.add(family, mode=SPEC, drafter=DRAFT_MODEL, draft=draft.label, k=self.peer_k, dynamic=False, sampled=False,
                     max_new_tokens=self.n_sweep, prompt_set=self.open_set)
        for k in sorted({self.peer_k, GENAI_LOOKUP_K}):  # at our K and at its own default
            self.add(self._genai_lookup(), mode=SPEC, drafter=LOOKUP, draft=None, k=k, dynamic=False, sampled=False,
                     max_new_tokens=self.n_sweep, prompt_set=self.grounded_set)

    def optimum_intel(self) -> None:
        """optimum-intel plainly, at the largest N."""
        plain = Family("optimum-intel · plain", OPTIMUM, self.target_path, precision=self.precision)
        for prompt_set in (self.open_set, self.grounded_set):
            self.add(plain, mode=AR, drafter=None, draft=None, k=None, dynamic=False, sampled=False, max_new_tokens=self.n_max, prompt_set=prompt_set)

    def further_prompt_sets(self) -> None:
        """Further prompt sets (HumanEval, say): the paper's table and the per-prompt speed-ups at
        every N, beside the peers; the K sweep, sampling and the f32 check stay on the two sets above."""
        for prompt_set in (s.name for s in self.prompt_sets if s.name not in (self.open_set, self.grounded_set)):
            greedy = dict(sampled=False, prompt_set=prompt_set)
            for n in self.max_new_tokens:
                self.add(self._ours_autoregressive(), mode=AR, drafter=None, draft=None, k=None, dynamic=False, max_new_tokens=n, **greedy)
                if self.dynamic:
                    self.add(self._ours_lookup(), mode=SPEC, drafter=LOOKUP, draft=None, k=self.k_default, dynamic=True, max_new_tokens=n, **greedy)
                    for draft in self.drafts:
                        self.add(self._ours_draft(draft), mode=SPEC, drafter=HYBRID, draft=draft.label, k=self.k_default, dynamic=True,
                                 max_new_tokens=n, **greedy)
                if GENAI in self.peers:
                    self.add(self._genai_plain(), mode=AR, drafter=None, draft=None, k=None, dynamic=False, max_new_tokens=n, **greedy)
                    self.add(self._genai_lookup(), mode=SPEC, drafter=LOOKUP, draft=None, k=self.peer_k, dynamic=False, max_new_tokens=n, **greedy)
