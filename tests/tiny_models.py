"""Tiny random-weight Transformers causal LMs, built on the fly for tests in a few seconds.

Every checkpoint built with the same `tokenizer_kind` gets the same tokenizer, so a draft and a
target built here share a vocabulary, as a same-family pair does; a "bytes" tokenizer splits text
differently, for drafting across tokenizers. Tokenizers are byte-level, so any text encodes
without unknown tokens.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]  # ids 0..3 in the default tokenizer
UNK, BOS, EOS, PAD = SPECIAL_TOKENS

# A few merges of common English pairs on top of the 256 byte symbols: enough to make tokens
# longer than one byte (as real tokenizers do) while staying deterministic with no training.
_MERGES = [
    ("t", "h"), ("h", "e"), ("th", "e"), ("Ġ", "t"), ("Ġt", "he"), ("i", "n"), ("a", "n"),
    ("e", "r"), ("o", "n"), ("r", "e"), ("Ġ", "a"), ("e", "n"), ("a", "t"), ("o", "r"),
    ("Ġ", "s"), ("e", "s"), ("Ġ", "w"), ("Ġ", "o"), ("i", "s"), ("i", "t"), ("Ġ", "c"),
    ("l", "l"), ("o", "u"), ("n", "d"), ("an", "d"), ("Ġ", "b"), ("in", "g"), ("Ġ", "f"),
    ("Ġ", "h"), ("e", "d"), ("Ġ", "i"), ("Ġ", "m"), ("Ġ", "p"), ("a", "r"), ("Ġa", "nd"),
    ("Ġ", "d"), ("Ġ", "l"), ("Ġ", "n"), ("Ġo", "n"), ("Ġ", "e"), ("Ġw", "or"), ("l", "d"),
    ("Ġwor", "ld"), ("H", "e"), ("He", "ll"), ("Hell", "o"), ("Ġ", "1"), ("Ġ", "2"),
]

# ChatML-style, like SmolLM2 and Qwen, so chat formatting code runs unchanged on tiny models.
_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<s>' + message['role'] + '\n' + message['content'] + '</s>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<s>assistant\n' }}{% endif %}"
)

_ARCH_CONFIGS = {
    # Grouped-query attention (2 KV heads for 4 query heads), rotary positions, untied head.
    "llama": lambda hidden, layers: dict(
        model_type="llama", hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
    ),
    # Biased QKV projections and tied embeddings, as in Qwen2.5-0.5B.
    "qwen2": lambda hidden, layers: dict(
        model_type="qwen2", hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=512, tie_word_embeddings=True,
        use_sliding_window=False,
    ),
    # Multi-head attention with learned absolute positions and fused QKV (Conv1D).
    "gpt2": lambda hidden, layers: dict(
        model_type="gpt2", n_embd=hidden, n_layer=layers, n_head=4, n_positions=512,
    ),
}

ARCHITECTURES = tuple(_ARCH_CONFIGS)


def _byte_level_alphabet() -> list[str]:
    """The 256 printable stand-ins that ByteLevel uses for raw bytes, in byte order (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = (b for b in range(256) if b not in printable)
    table = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(others)}
    return [table[b] for b in range(256)]


TOKENIZER_KINDS = ("default", "other", "bytes")


def _merges(kind: str) -> list[tuple[str, str]]:
    return [] if kind == "bytes" else list(_MERGES)


def _vocab(kind: str) -> dict[str, int]:
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"tokenizer_kind must be one of {TOKENIZER_KINDS}, got {kind!r}")
    symbols = _byte_level_alphabet() + ["".join(pair) for pair in _merges(kind)]
    if kind == "other":
        # Same strings, different ids: a vocabulary mismatch that only the id mapping reveals.
        symbols = symbols[::-1]
    # "bytes": one token per byte, no merges: text splits quite differently from "default".
    return {token: i for i, token in enumerate(SPECIAL_TOKENS + symbols)}


def build_tokenizer(path: str | Path, tokenizer_kind: str = "default") -> None:
    """Save a small byte-level BPE tokenizer (~310 tokens) with bos/eos/pad/unk into `path`."""
    bpe = models.BPE(vocab=_vocab(tokenizer_kind), merges=_merges(tokenizer_kind), unk_token=UNK)
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK,
        chat_template=_CHAT_TEMPLATE,
    )
    fast.save_pretrained(str(path))


def build_checkpoint(
    path: str | Path,
    arch: str = "llama",
    seed: int = 0,
    num_layers: int = 2,
    hidden: int = 64,
    vocab_size: int | None = None,
    tokenizer_kind: str = "default",
    printable: bool = False,
) -> Path:
    """Write a random-weight causal LM plus tokenizer to `path` and return it.

    `vocab_size` may exceed the tokenizer's vocabulary (a padded embedding, like Qwen's 151936
    tokens behind a 152064-row matrix). Weights are drawn with a large std so that logits are
    spread out and greedy decoding is not decided by near-ties. `printable`: tokens that are not
    printable ASCII get a zero row in the (untied) output layer, so the model almost always writes
    valid text, as real models do (random bytes are mostly invalid UTF-8).
    """
    if arch not in _ARCH_CONFIGS:
        raise ValueError(f"arch must be one of {ARCHITECTURES}, got {arch!r}")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    build_tokenizer(path, tokenizer_kind)
    n_tokens = len(_vocab(tokenizer_kind))
    if vocab_size is not None and vocab_size < n_tokens:
        raise ValueError(f"vocab_size {vocab_size} is smaller than the tokenizer's {n_tokens} tokens")
    token_ids = _vocab(tokenizer_kind)
    config = AutoConfig.for_model(
        **_ARCH_CONFIGS[arch](hidden, num_layers),
        vocab_size=vocab_size or n_tokens,
        bos_token_id=token_ids[BOS], eos_token_id=token_ids[EOS], pad_token_id=token_ids[PAD],
        initializer_range=0.5,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _spread_weights(model, seed)
    if printable:
        _printable_only(model, tokenizer_kind)
    model.save_pretrained(str(path))
    GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
    ).save_pretrained(str(path))
    return path


def _spread_weights(model: torch.nn.Module, seed: int) -> None:
    # Transformers' init ignores initializer_range for some modules (norms, biases) and zeroes
    # biases; redraw every weight matrix so each seed gives a distinct, sharply peaked model.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)


def _printable_only(model: torch.nn.Module, tokenizer_kind: str) -> None:
    if model.config.tie_word_embeddings:
        raise ValueError("printable needs an untied output layer (llama here)")
    alphabet = _byte_level_alphabet()
    printable = {alphabet[b] for b in range(32, 127)} | {alphabet[b] for b in (9, 10)}  # and tab, newline
    head = model.get_output_embeddings().weight
    with torch.no_grad():
        for token, i in _vocab(tokenizer_kind).items():
            if token in SPECIAL_TOKENS or not set(token) <= printable:
                head[i] = 0.0
