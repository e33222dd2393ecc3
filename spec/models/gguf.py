"""GGUF files (llama.cpp's format) as sources the converter takes: the file, with the Hugging Face
tokenizer, config.json and generation_config.json the engine reads beside it.

The weights are read by spec.models.gguf_ir, one tensor at a time; tokenizers come from the file's
own vocabulary. Neither is trusted blindly: spec.models.embedded checks each model's tokenizer
against ids we know.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def read(gguf: Path) -> dict:
    """Transformers' reading of the GGUF's metadata (its "config", "tokenizer" and
    "tokenizer_config"), no weights. Read it once and pass it on: a reading parses every token of
    the vocabulary, seconds for Qwen's 151,665, and Transformers' own `gguf_file=` paths each read
    the file again."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    return load_gguf_checkpoint(str(gguf), return_tensors=False)


def write_source(gguf: Path, reading: dict, out_dir: Path, tokenizer, eos_token_ids: list[int] | None = None) -> Path:
    """Put `gguf` into `out_dir` with `tokenizer`, its config and a generation config; returns `out_dir`.

    The config is Transformers' reading of the file's metadata (`read`);
    `eos_token_ids` are the tokens generation stops at (the tokenizer's end of sequence if None).
    The GGUF is linked there (copied where it cannot be), unless it is there already.
    """
    from transformers import AutoConfig, GenerationConfig

    out_dir.mkdir(parents=True, exist_ok=True)
    config = AutoConfig.for_model(**reading["config"])
    config.save_pretrained(str(out_dir))
    generation = GenerationConfig.from_model_config(config)
    eos = eos_token_ids or [tokenizer.eos_token_id]
    generation.eos_token_id = eos if len(eos) > 1 else eos[0]
    generation.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[-1]
    generation.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    _place(gguf, out_dir / gguf.name)
    return out_dir


def _place(gguf: Path, target: Path) -> None:
    if gguf.resolve() == target.resolve():
        return
    try:
        os.link(gguf, target)
    except OSError:
        try:
            target.symlink_to(gguf.resolve())
        except OSError:
            shutil.copyfile(gguf, target)


def transformers_tokenizer(reading: dict):
    """Transformers' conversion of the GGUF's tokenizer (`read`), with what it leaves out put back.

    The conversion keeps the vocabulary and merges but registers only a few of the added tokens
    (so `<|fim_prefix|>` would split into ordinary pieces) and may name another end-of-sequence
    token than the file does: every control and user-defined token is registered here under its
    own id, and eos, pad and the chat template are the file's.
    """
    import gguf as gguf_lib
    from tokenizers import AddedToken
    from transformers import AutoConfig
    from transformers.integrations.ggml import convert_gguf_tokenizer
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

    meta, config = reading["tokenizer"], reading["config"]
    backend, extra = convert_gguf_tokenizer(config["model_type"], meta)
    # The class AutoTokenizer picks for the model's type, built as its `gguf_file=` path builds it.
    tokenizer_class = TOKENIZER_MAPPING[type(AutoConfig.for_model(**config))]
    tokenizer = tokenizer_class(tokenizer_object=backend, **reading["tokenizer_config"], **extra)
    tokens, kinds = meta["tokens"], meta["token_type"]
    control, user = gguf_lib.TokenType.CONTROL, gguf_lib.TokenType.USER_DEFINED
    tokenizer.add_tokens(
        [AddedToken(token, special=kind == control, normalized=False) for token, kind in zip(tokens, kinds) if kind in (control, user)]
    )
    tokenizer.eos_token = tokens[meta["eos_token_id"]]
    if "pad_token_id" in meta:
        tokenizer.pad_token = tokens[meta["pad_token_id"]]
    tokenizer.chat_template = reading["tokenizer_config"].get("chat_template")
    return tokenizer


def rebuilt_bpe_tokenizer(reading: dict):
    """A byte-level BPE tokenizer assembled from the GGUF's vocabulary and merges (`read`), with single
    digits split off first (as SmolLM2's tokenizer.json defines it).

    For models whose Transformers conversion is wrong (SmolLM2's spaces come out as `<|endoftext|>`).
    """
    import gguf as gguf_lib
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    meta = reading["tokenizer"]
    tokens = meta["tokens"]
    merges = [tuple(merge.split(" ", 1)) for merge in meta["merges"]]
    bpe = Tokenizer(models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    control = gguf_lib.TokenType.CONTROL
    bpe.add_special_tokens(
        [AddedToken(token, special=True, normalized=False)
         for token, kind in zip(tokens, meta["token_type"]) if kind == control]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=tokens[meta["bos_token_id"]],
        eos_token=tokens[meta["eos_token_id"]],
        pad_token=tokens[meta["pad_token_id"]],
        unk_token=tokens[meta["unk_token_id"]],
        chat_template=reading["tokenizer_config"]["chat_template"],
        model_max_length=int(reading["config"]["max_position_embeddings"]),
    )
