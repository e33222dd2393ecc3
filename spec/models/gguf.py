"""GGUF files (llama.cpp's format) as Transformers checkpoints the exporter takes.

Weights are dequantized by Transformers' own GGUF reader (it undoes llama.cpp's Q/K permutation);
tokenizers come from the file's own vocabulary. Neither is trusted blindly: spec.models.embedded checks
each model's tokenizer against ids we know.
"""
from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Iterator

from spec.progress import ProgressFn, phase

_patching = threading.Lock()  # progress is hooked into a module attribute: one conversion at a time


def fields(gguf: Path) -> dict:
    """The GGUF's metadata as Python values (token lists, ids, the chat template)."""
    import gguf as gguf_lib

    return {name: field.contents() for name, field in gguf_lib.GGUFReader(str(gguf)).fields.items()}


def write_checkpoint(gguf: Path, out_dir: Path, tokenizer, report: ProgressFn, expected_seconds: float | None = None) -> Path:
    """Write `gguf` as a Transformers checkpoint (fp32 weights) with `tokenizer` into `out_dir`.

    `from_pretrained(gguf_file=...)` would do this but insists on `accelerate`, which nothing else
    needs; Transformers' GGUF reader alone needs only torch. Peak memory is about the fp32 weights
    plus a quarter.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    out_dir.mkdir(parents=True, exist_ok=True)
    with phase(report, f"Dequantizing {gguf.name}", expected_seconds) as progress, _reporting(progress):
        config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        with torch.device("meta"):  # a weightless model, only to name the tensors
            skeleton = AutoModelForCausalLM.from_config(config)
        tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton)["tensors"]
        model = type(skeleton).from_pretrained(None, config=config, state_dict=tensors)
        del tensors
        progress.update(None, "writing the checkpoint")
        model.save_pretrained(str(out_dir))
        model.generation_config.save_pretrained(str(out_dir))
        del model
    tokenizer.save_pretrained(str(out_dir))
    return out_dir


@contextlib.contextmanager
def _reporting(progress) -> Iterator[None]:
    """Route the GGUF reader's per-tensor progress bar into `progress` (it draws a tqdm bar otherwise)."""
    import transformers.modeling_gguf_pytorch_utils as reader
    from tqdm.auto import tqdm

    class Reporting(tqdm):
        def __init__(self, iterable=None, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(iterable, *args, **kwargs)
            self._items = list(iterable) if iterable is not None else []

        def __iter__(self):
            for i, item in enumerate(self._items):
                progress.update(i / max(len(self._items), 1), f"tensor {i + 1} of {len(self._items)}")
                yield item

    with _patching:
        original, reader.tqdm = reader.tqdm, Reporting
        try:
            yield
        finally:
            reader.tqdm = original


def transformers_tokenizer(gguf: Path):
    """Transformers' conversion of the GGUF's tokenizer, with what it leaves out put back.

    The conversion keeps the vocabulary and merges but registers only a few of the added tokens
    (so `<|fim_prefix|>` would split into ordinary pieces) and may name another end-of-sequence
    token than the file does: every control and user-defined token is registered here under its
    own id, and eos, pad and the chat template are the file's.
    """
    import gguf as gguf_lib
    from tokenizers import AddedToken
    from transformers import AutoTokenizer

    meta = fields(gguf)
    tokens, kinds = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    control, user = gguf_lib.TokenType.CONTROL, gguf_lib.TokenType.USER_DEFINED
    tokenizer.add_tokens(
        [AddedToken(token, special=kind == control, normalized=False) for token, kind in zip(tokens, kinds) if kind in (control, user)]
    )
    tokenizer.eos_token = tokens[meta["tokenizer.ggml.eos_token_id"]]
    if "tokenizer.ggml.padding_token_id" in meta:
        tokenizer.pad_token = tokens[meta["tokenizer.ggml.padding_token_id"]]
    tokenizer.chat_template = meta.get("tokenizer.chat_template")
    return tokenizer


def rebuilt_bpe_tokenizer(gguf: Path):
    """A byte-level BPE tokenizer assembled from the GGUF's vocabulary and merges, with single
    digits split off first (as SmolLM2's tokenizer.json defines it).

    For models whose Transformers conversion is wrong (SmolLM2's spaces come out as `<|endoftext|>`).
    """
    import gguf as gguf_lib
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    meta = fields(gguf)
    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(merge.split(" ", 1)) for merge in meta["tokenizer.ggml.merges"]]
    bpe = Tokenizer(models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    control = gguf_lib.TokenType.CONTROL
    bpe.add_special_tokens(
        [AddedToken(token, special=True, normalized=False)
         for token, kind in zip(tokens, meta["tokenizer.ggml.token_type"]) if kind == control]
    )
    architecture = meta["general.architecture"]
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=tokens[meta["tokenizer.ggml.bos_token_id"]],
        eos_token=tokens[meta["tokenizer.ggml.eos_token_id"]],
        pad_token=tokens[meta["tokenizer.ggml.padding_token_id"]],
        unk_token=tokens[meta["tokenizer.ggml.unknown_token_id"]],
        chat_template=meta["tokenizer.chat_template"],
        model_max_length=int(meta[f"{architecture}.context_length"]),
    )
