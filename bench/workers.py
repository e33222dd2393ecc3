"""Benchmark workers: one process per configuration family (an engine with its models loaded).

Every family lives in its own process for the whole run, so its peak RSS is its own: models,
runtime and caches of that family alone. The parent sends one generation at a time, round-robin
over all families, so drift on a shared machine hits every configuration alike.

Engines: "ours" (spec.decoding.engine), "openvino-genai" (LLMPipeline: plain, draft_model, prompt_lookup),
"optimum-intel" (OVModelForCausalLM.generate, plain) and "costs" (spec.models.runtime directly: the
per-call cost of a target and draft forward, for "where the time goes").
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
import resource
import signal
import time
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.records import Measurement

CPU = "CPU"


@dataclass(frozen=True)
class Family:
    """What one worker process loads: an engine, a target and how it drafts."""

    name: str  # label in reports, e.g. "ours · draft self-int4"
    engine: str  # "ours" | "openvino-genai" | "optimum-intel" | "costs"
    target: str  # OpenVINO IR folder of the target
    draft: str | None = None  # IR folder of the draft model, if it drafts with one
    drafts: tuple[str, ...] = ()  # "costs" only: every draft whose forward to time
    prompt_lookup: bool = False  # openvino-genai only: build the pipeline with prompt_lookup=True
    precision: str = "default"  # spec.models.runtime's precision; peers compile with the same CPU properties
    draft_vocabulary: int | None = None  # ours only: the draft's head scores only this many frequent tokens
    draft_vocabularies: tuple[int | None, ...] = ()  # "costs" only: the same for each of `drafts`


class WorkerError(RuntimeError):
    pass


_WORKERS: weakref.WeakSet = weakref.WeakSet()  # every Worker of this process, for kill_all


class Worker:
    """A family's process. Starting it returns at once; `ready` waits for its models to load."""

    def __init__(self, family: Family):
        self.family = family
        context = mp.get_context("spawn")  # never fork a process that holds OpenVINO threads
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, family), daemon=True, name=f"bench:{family.name}")
        self._process.start()
        child.close()
        _WORKERS.add(self)
        self.info: dict = {}
        self._stopping = False

    def kill(self) -> None:
        """End the process now, whatever it is doing (Ctrl-C: the run is abandoned)."""
        if self._process.is_alive():
            self._process.kill()

    def ready(self) -> dict:
        """Wait until the models are loaded; return load time, RSS before/after loading, compiled properties."""
        if not self.info:
            self.info = self._receive()
        return self.info

    def run(self, job: dict) -> Measurement | dict:
        """One job: a generation's Measurement, or (the costs family) each kind of call's seconds."""
        self._conn.send(job)
        return self._receive()

    def stop(self) -> None:
        """Ask the worker to finish (without waiting); `close` then collects its memory record."""
        if not self._stopping and self._process.is_alive():
            self._stopping = True
            self._conn.send(None)

    def close(self) -> dict:
        """Stop the worker; return its memory record (peak RSS and the RSS before any model)."""
        memory = {}
        try:
            self.stop()
            if self._stopping:
                memory = self._receive()
        except (WorkerError, OSError):
            pass
        finally:
            self._process.join(timeout=30)
            if self._process.is_alive():
                self._process.kill()
        return memory

    def _receive(self) -> dict:
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            raise WorkerError(f"worker {self.family.name!r} died (exit code {self._process.exitcode})") from None
        if kind == "error":
            raise WorkerError(payload)
        return payload


# Imported before the "before models" RSS reading, so that it counts the libraries, not the models.
_IMPORTS = {
    "ours": ("openvino", "transformers", "spec.decoding.engine", "spec.models.registry"),
    "costs": ("openvino", "spec.models.runtime", "spec.decoding.sampling"),
    "openvino-genai": ("openvino", "openvino_genai"),
    "optimum-intel": ("openvino", "torch", "transformers", "optimum.intel"),
}


def kill_all() -> None:
    """End every worker this process started, now."""
    for worker in list(_WORKERS):
        worker.kill()


def _serve(conn, family: Family) -> None:
    # Ctrl-C reaches the whole process group: the parent ends its workers (kill_all) and says so once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for module in _IMPORTS[family.engine]:
            importlib.import_module(module)
        rss_before = _rss()
        started = time.perf_counter()
        runner = _RUNNERS[family.engine](family)
        info = {"load_seconds": time.perf_counter() - started, "rss_before_load": rss_before, "rss_after_load": _rss()}
        info.update(getattr(runner, "info", {}))
        conn.send(("ok", info))
    except BaseException:
        conn.send(("error", traceback.format_exc(limit=6)))
        return
    while True:
        job = conn.recv()
        if job is None:
            conn.send(("ok", {"peak_rss": _peak_rss(), "rss_before_load": rss_before, "rss_end": _rss()}))
            return
        try:
            conn.send(("ok", runner.run(job)))
        except BaseException:
            conn.send(("error", traceback.format_exc(limit=6)))


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _peak_rss() -> int:
    # Linux reports ru_maxrss in KiB: the high-water mark of this process's resident set.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _strip_eos(tokens: list[int], eos: set[int]) -> list[int]:
    """Tokens up to the first end-of-sequence token (ours never counts or emits it)."""
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[:i]
    return tokens


class _Ours:
    """spec.decoding.engine.generate, exactly as the app and CLI call it."""

    def __init__(self, family: Family):
        from spec.config import ModelKey
        from spec.models.registry import load_model

        self.target = load_model(ModelKey(family.target, precision=family.precision))
        self.draft = None
        if family.draft:
            self.draft = load_model(ModelKey(family.draft, precision=family.precision, vocabulary=family.draft_vocabulary))
        compiled = self.target.model.compiled
        self.info = {"compiled": {key: str(compiled.get_property(key)) for key in _PROPERTIES if _has(compiled, key)},
                     "settings": self.settings(), "curve": self._curve()}
        # The target's answers so far, as a server keeps them: lookup searches those to other prompts.
        from spec.decoding.history import AnswerHistory
        from spec.decoding.target_memory import LearnedState

        self.history = AnswerHistory()
        self.learned = LearnedState()  # what its generations learned of the target and the pair, as a server keeps it

    def settings(self) -> dict[str, str]:
        """The compile settings each method runs with, as measurement on this CPU chose them (spec.models.tuning)."""
        settings = {"autoregressive": self.target.settings(), "speculative": self.target.settings(speculative=True)}
        if self.draft is not None:
            settings["draft"] = self.draft.settings()
        return settings

    def _curve(self) -> dict[str, float] | None:
        """What the target's verify calls cost per width in steps on this CPU, as its calibration timed them."""
        curve = self.target.for_rounds()[1]
        return None if curve is None else {str(width): cost for width, cost in curve.in_steps().items()}

    def run(self, job: dict) -> Measurement:
        from spec.config import AUTOREGRESSIVE, DRAFT_MODEL, GenerationConfig
        from spec.decoding.engine import stream
        from spec.decoding.generation import CORRECTION
        from spec.decoding.plugins import needs_draft_model

        k = job.get("k") or 4
        config = GenerationConfig(
            max_new_tokens=job["max_new_tokens"],
            temperature=job["temperature"],
            top_p=job["top_p"],
            seed=job["seed"],
            num_assistant_tokens=k,
            dynamic_k=job["dynamic"],
        )
        history = self.history if job.get("history", True) else None
        drafter = None if job["mode"] == AUTOREGRESSIVE else job.get("drafter") or DRAFT_MODEL
        draft = self.draft if needs_draft_model(drafter) else None
        steps = stream(job["prompt"], self.target, config, draft=draft, drafter=drafter, history=history, learned=self.learned)
        tokens, corrections, step = [], 0, None
        started = time.perf_counter()  # encoding the prompt is done; prefill starts with the first step
        for step in steps:
            tokens += step.token_ids
            corrections += step.kinds.count(CORRECTION)
        seconds = time.perf_counter() - started
        stats = step.stats
        return Measurement(
            tokens=tokens, new_tokens=len(tokens), seconds=seconds, ttft_seconds=stats.ttft_seconds,
            prompt_tokens=stats.prompt_tokens, target_calls=stats.target_calls, plain_steps=stats.plain_steps,
            drafted=stats.drafted, draft_tokens=stats.draft_tokens, accepted=stats.accepted,
            accepted_lookup=stats.accepted_lookup, corrections=corrections, draft_seconds=stats.draft_seconds,
            draft_catch_up_seconds=stats.draft_catch_up_seconds, target_seconds=stats.target_seconds,
        )


_PROPERTIES = ("INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION", "PERFORMANCE_HINT", "INFERENCE_NUM_THREADS", "NUM_STREAMS")


def _has(compiled, key: str) -> bool:
    try:
        compiled.get_property(key)
        return True
    except Exception:
        return False


class _Genai:
    """openvino_genai.LLMPipeline on the prompt's token ids (no tokenization in the timed call)."""

    def __init__(self, family: Family):
        import openvino_genai

        from spec.models.runtime import precision_config

        self._genai = openvino_genai
        # The CPU properties our engine compiles with: the comparison is of the loops, not of settings.
        properties = precision_config(family.precision)
        kwargs = dict(properties)
        if family.draft:
            kwargs["draft_model"] = openvino_genai.draft_model(family.draft, CPU, **properties)
        if family.prompt_lookup:
            kwargs["prompt_lookup"] = True
        # Its own latency-oriented defaults, but without prefix caching: it would otherwise reuse a
        # prompt's KV cache from the warm-up and earlier repeats and skip most of its prefill (time to
        # first token 0.17 s against ~1 s for ours), which a new prompt never gets.
        scheduler = openvino_genai.SchedulerConfig()
        scheduler.max_num_batched_tokens = 2**64 - 1  # as its default: no limit on a batch's tokens
        scheduler.enable_prefix_caching = False
        kwargs["scheduler_config"] = scheduler
        self.pipe = openvino_genai.LLMPipeline(family.target, CPU, **kwargs)
        self.speculative = bool(family.draft or family.prompt_lookup)
        self.info = {"version": openvino_genai.get_version(), "prefix_caching": False, "properties": properties}

    def run(self, job: dict) -> Measurement:
        import openvino as ov

        ids = np.asarray([job["prompt_ids"]], dtype=np.int64)
        config = self.pipe.get_generation_config()
        config.max_new_tokens = job["max_new_tokens"]
        if job["temperature"] > 0:
            config.do_sample = True
            config.temperature = job["temperature"]
            config.top_p = job["top_p"]
            config.top_k = 0
            config.rng_seed = job["seed"]
        else:
            config.do_sample = False
        if self.speculative:
            config.num_assistant_tokens = job["k"]
            config.max_ngram_size = job["max_ngram_size"]
        inputs = self._genai.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        started = time.perf_counter()
        result = self.pipe.generate(inputs, config)
        seconds = time.perf_counter() - started
        tokens = _strip_eos([int(t) for t in result.tokens[0]], set(job["eos_token_ids"]))
        out = Measurement(tokens=tokens, new_tokens=len(tokens), seconds=seconds,
                          ttft_seconds=result.perf_metrics.get_ttft().mean / 1000.0, prompt_tokens=ids.shape[1])
        if self.speculative:
            try:
                metrics = result.extended_perf_metrics
                out.drafted, out.accepted = int(metrics.get_num_draft_tokens()), int(metrics.get_num_accepted_tokens())
            except (AttributeError, RuntimeError):  # not every pipeline reports them
                pass
        return out


class _Optimum:
    """optimum-intel's OVModelForCausalLM.generate (Transformers' loop over a stateful OpenVINO model)."""

    def __init__(self, family: Family):
        import optimum.intel
        from optimum.intel import OVModelForCausalLM

        from spec.models.runtime import precision_config

        ov_config = {"PERFORMANCE_HINT": "LATENCY", **precision_config(family.precision)}
        self.model = OVModelForCausalLM.from_pretrained(family.target, device=CPU, ov_config=ov_config)
        self.info = {"version": getattr(optimum.intel, "__version__", "?")}

    def run(self, job: dict) -> Measurement:
        import torch

        ids = torch.tensor([job["prompt_ids"]], dtype=torch.int64)
        kwargs = {"do_sample": False}
        if job["temperature"] > 0:
            torch.manual_seed(job["seed"])
            kwargs = {"do_sample": True, "temperature": job["temperature"], "top_p": job["top_p"], "top_k": 0}
        started = time.perf_counter()
        output = self.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=job["max_new_tokens"],
            pad_token_id=job["eos_token_ids"][0], **kwargs,
        )
        seconds = time.perf_counter() - started
        tokens = _strip_eos(output[0, ids.shape[1] :].tolist(), set(job["eos_token_ids"]))
        return Measurement(tokens=tokens, new_tokens=len(tokens), seconds=seconds, prompt_tokens=ids.shape[1])


def _token_ids(path: str, vocabulary: int | None):
    """The tokens a draft's head scores, as spec.models.registry.load_model chooses them; None: all."""
    if vocabulary is None:
        return None
    from transformers import AutoTokenizer

    from spec.models.draft_vocabulary import frequent_token_ids

    tokenizer = AutoTokenizer.from_pretrained(path)
    return frequent_token_ids(tokenizer, vocabulary) if vocabulary < len(tokenizer) else None


class _Costs:
    """Per-call costs through spec.models.runtime.StatefulLM: where a speculative round spends its time."""

    def __init__(self, family: Family):
        from spec.models.registry import compiled_blobs_dir
        from spec.models.runtime import compile_model

        cache_dir = compiled_blobs_dir()  # as spec.models.registry.load_model compiles

        def compile(path: str, vocabulary: int | None = None):
            return compile_model(Path(path) / "openvino_model.xml", family.precision, CPU, cache_dir, _token_ids(path, vocabulary))

        self.target = compile(family.target)
        vocabularies = family.draft_vocabularies or (None,) * len(family.drafts)
        self.drafts = {path: compile(path, vocabulary) for path, vocabulary in zip(family.drafts, vocabularies)}
        self.bytes_per_step = weight_bytes_per_step(Path(family.target) / "openvino_model.xml")

    def run(self, job: dict) -> dict:
        """Median seconds of: a target call on 1 and on K+1 tokens at a steady width, a call whose width
        differs from the previous one, a 1-token draft call, a trim, and turning logits into p.

        Each repeat starts from a fresh cache holding the prompt. A width is timed on its fourth call
        in a row, as the engine calls it (every verify call has one width); the first call at a new
        width pays for the CPU plugin re-preparing every layer, which is timed separately.
        """
        from spec.decoding.sampling import Sampler

        prompt_ids, ks = job["prompt_ids"], job["ks"]
        rng = np.random.default_rng(0)
        vocab = min(self.target.vocab_size, job["vocab_size"])
        greedy = Sampler(0.0, 0, 1.0, vocab, rng)
        sampled = Sampler(job["temperature"], 0, job["top_p"], vocab, rng)
        target = self.target.new_cache()
        drafts = {path: compiled.new_cache() for path, compiled in self.drafts.items()}
        token = int(prompt_ids[-1])
        samples: dict[str, list[float]] = {}

        def timed(name: str, call):
            started = time.perf_counter()
            result = call()
            samples.setdefault(name, []).append(time.perf_counter() - started)
            return result

        def verify(width: int):
            logits = target.forward([token] * width)
            target.trim(target.length - width + 1)  # as after a round that kept nothing
            return logits

        for repeat in range(job["warmup"] + job["repeats"]):
            if repeat == job["warmup"]:
                samples.clear()
            target.reset()
            target.forward(prompt_ids)
            for width in [1] + [k + 1 for k in ks]:
                for _ in range(3):
                    verify(width)
                logits = timed(f"target_{width}", lambda width=width: verify(width))
                if width == 5:
                    timed("greedy_choice_5", lambda logits=logits: greedy.distribution(logits))
                    timed("sampled_distribution_5", lambda logits=logits: sampled.distribution(logits))
            timed("target_1_after_5", lambda: verify(1))
            timed("target_5_after_1", lambda: verify(5))
            target.forward([token] * 5)
            timed("trim_5", lambda: target.trim(target.length - 4))
            for path, cache in drafts.items():
                cache.reset()
                cache.forward(prompt_ids)
                cache.forward([token])
                timed(f"draft_1:{path}", lambda cache=cache: cache.forward([token]))
        out = {name: float(np.median(values)) for name, values in samples.items()}
        return out | {"context_tokens": len(prompt_ids), "bytes_per_step": self.bytes_per_step,
                      "read_bytes_per_second": read_bandwidth()}


def weight_bytes_per_step(xml: Path) -> int:
    """Bytes of weights a one-token decoding step reads: every constant, except the embedding table,
    of which a step gathers one row (with its scales and zero points)."""
    import openvino as ov

    model = ov.Core().read_model(str(xml))
    gathered: set = set()
    for op in model.get_ops():
        if op.get_type_name() != "Gather":
            continue
        stack = [op.input_value(0).get_node()]
        while stack:  # the table and its decompression (Convert, Subtract, Multiply, Reshape) up to constants
            node = stack.pop()
            if node.get_type_name() == "Constant":
                gathered.add(node.get_friendly_name())
            elif node.get_type_name() in ("Convert", "Subtract", "Multiply", "Reshape"):
                stack += [value.get_node() for value in node.input_values()]
    total = 0
    for op in model.get_ops():
        if op.get_type_name() == "Constant" and op.get_friendly_name() not in gathered:
            shape = op.get_output_shape(0)
            total += int(np.prod(list(shape), dtype=np.int64)) * op.get_element_type().bitwidth // 8
    return total


def read_bandwidth(gib: float = 2.0, threads: int = 2, repeats: int = 5) -> float:
    """Bytes per second a memory-bound kernel reads: the max of an int8 array, split over threads.

    (A float64 sum would be compute-bound here; max over int8 is not.)
    """
    import threading

    data = np.ones(int(gib * 2**30), dtype=np.int8)
    parts = np.array_split(data, threads)
    best = []
    for _ in range(repeats):
        workers = [threading.Thread(target=np.max, args=(part,)) for part in parts]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        best.append(data.nbytes / (time.perf_counter() - started))
    return float(np.median(best))


_RUNNERS = {"ours": _Ours, "openvino-genai": _Genai, "optimum-intel": _Optimum, "costs": _Costs}

