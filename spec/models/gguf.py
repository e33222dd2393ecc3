"""GGUF files (llama.cpp's format) as sources the converter takes: the file, with the Hugging Face
tokenizer, config.json and generation_config.json the engine reads beside it.

The weights are read by spec.models.gguf_ir, one tensor at a time; tokenizers come from the file's
own vocabulary. Neither is trusted blindly: spec.models.embedded checks each model's tokenizer
against ids we know.
"""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import gguf as gguf_lib
import numpy as np


class QuickReader(gguf_lib.GGUFReader):
    """The `gguf` package's reader, slicing a plain ndarray view of the file's mapping.

    The package slices its numpy memmap once per value, and a memmap's Python-level `__getitem__`
    and `__array_finalize__` make a 151,665-token vocabulary take seconds; the same slices of a plain
    view of the same mapping, an array's taken in one pass, give the same fields and tensors in a
    twentieth of the time (docs/design-notes.md)."""

    def _get(self, offset, dtype, count=1, override_order=None):
        plain = self.__dict__.get("_plain")
        if plain is None:
            plain = self._plain = self.data.view(np.ndarray)
        count = int(count)
        values = plain[offset:offset + int(np.dtype(dtype).itemsize) * count].view(dtype=dtype)[:count]
        return values.view(values.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    def _get_field_parts(self, orig_offs, raw_type):
        """The package's parts for an array of strings or of numbers, built in one pass over the
        array (a vocabulary and its merges: 300,000 strings, two thirds of a Qwen reading); any
        other field as the package builds it."""
        if gguf_lib.GGUFValueType(raw_type) != gguf_lib.GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, raw_type)
        raw_itype = self._get(orig_offs, np.uint32)
        item = gguf_lib.GGUFValueType(int(raw_itype[0]))
        scalar = self.gguf_scalar_to_np.get(item)
        if item != gguf_lib.GGUFValueType.STRING and scalar is None:
            return super()._get_field_parts(orig_offs, raw_type)  # arrays of arrays
        alen = self._get(orig_offs + 4, np.uint64)
        offs, count = orig_offs + 12, int(alen[0])
        parts, idxs = [raw_itype, alen], []
        types = [gguf_lib.GGUFValueType.ARRAY] + ([item] if count else [])
        if scalar is not None:  # one view of the whole array, split into a one-value part per item
            values = self._get(offs, scalar, count)
            parts += list(values.reshape(count, 1)) if count else []
            idxs += range(2, 2 + count)
            return 12 + int(values.nbytes), parts, idxs, types
        plain, lengths = self._plain, alen.dtype  # a length is a uint64 in the file's byte order
        for _ in range(count):
            slen = plain[offs:offs + 8].view(lengths)
            end = offs + 8 + int(slen[0])
            idxs.append(len(parts) + 1)
            parts += (slen, plain[offs + 8:end])
            offs = end
        return offs - orig_offs, parts, idxs, types


_kept: tuple[tuple, QuickReader] | None = None  # the latest file's reader, until its conversion takes it
_kept_lock, _substitution_lock = threading.Lock(), threading.Lock()


def reader(gguf: Path, keep: bool = True) -> QuickReader:
    """`gguf`'s reader, parsed once for a conversion: `read` keeps it, and the conversion's skeleton
    (spec.models.gguf_ir) takes it with `keep=False`, so that its parsed metadata, hundreds of MB for
    a large vocabulary, goes before the weights are converted."""
    global _kept
    identity = _identity(gguf)
    with _kept_lock:
        if _kept is not None and _kept[0] == identity:
            found = _kept[1]
            if not keep:
                _kept = None
            return found
    found = QuickReader(str(gguf))
    if keep:
        with _kept_lock:
            _kept = identity, found
    return found


def _identity(path) -> tuple | None:
    """The file itself, whichever of its links or names `path` is."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def read(gguf: Path) -> dict:
    """Transformers' reading of the GGUF's metadata (its "config", "tokenizer" and
    "tokenizer_config"), no weights. Read it once and pass it on: a reading parses every token of
    the vocabulary, and Transformers' own `gguf_file=` paths each read the file again. Transformers
    is handed this file's `reader` rather than parsing it once more with the package's slower one.

    Transformers refuses to read a GGUF where torch is missing (or hidden: spec.models.torch_free),
    though only the tensors, which this reading leaves out, need it; it is told torch is there."""
    from transformers import modeling_gguf_pytorch_utils as transformers_gguf

    parsed, identity = reader(gguf), _identity(gguf)
    with _substitution_lock:  # Transformers looks both up in their modules when it is called
        original_reader, original_check = gguf_lib.GGUFReader, transformers_gguf.is_torch_available

        def this_files(path, *args, **kwargs):
            return parsed if _identity(path) == identity else original_reader(path, *args, **kwargs)

        gguf_lib.GGUFReader, transformers_gguf.is_torch_available = this_files, lambda: True
        try:
            return transformers_gguf.load_gguf_checkpoint(str(gguf), return_tensors=False)
        finally:
            gguf_lib.GGUFReader, transformers_gguf.is_torch_available = original_reader, original_check


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
