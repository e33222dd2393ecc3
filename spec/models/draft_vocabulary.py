"""The tokens a draft may propose: the target's most frequent ones (FR-Spec, Zhao et al., ACL 2025).

A small draft spends a large share of each step on its LM head, a matmul over the whole
vocabulary (Qwen's 151,936 tokens), although text keeps to a small part of it. Scoring only the
most frequent tokens makes every draft step cheaper; the target still verifies each draft over the
whole vocabulary, so the output is unchanged: a token outside the subset is one the draft cannot
guess, and the target writes it itself.

Frequencies come from text every installation has, never from the network: the Python standard
library's own source (code, with its comments and docstrings in English), and a short sample of
the Markdown a chat model answers in (fences, headings, lists), which the library hardly uses.
Tokens neither uses are ranked by id, which for byte-level BPE follows the order of the merges,
roughly their frequency in the tokenizer's training text. Counting takes seconds; each result is
kept on disk.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
import threading
from pathlib import Path

import numpy as np

from spec.errors import ModelError
from spec.models.conversion_cache import models_dir, prepared_dir
from spec.progress import ProgressFn, phase

_CORPUS_BYTES = 16 << 20  # the whole library but its tests: its rarer modules hold much of the English
_SKIPPED = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo", "ensurepip"}
_FOLDER = "draft-vocabulary"
_TEXTS_AT_ONCE = 128  # files tokenized in one batch, in parallel


def frequent_token_ids(tokenizer, size: int) -> np.ndarray:
    """The `size` ids `tokenizer` uses most on the reference text, its special tokens always among
    them; sorted ascending. ValueError when `size` is not a sensible subset of the vocabulary."""
    vocab = len(tokenizer)
    if not isinstance(size, int) or not 1 <= size < vocab:
        raise ValueError(f"a draft vocabulary must have from 1 to {vocab - 1} tokens (the whole vocabulary is {vocab}), got {size!r}")
    name = f"{_tokenizer_digest(tokenizer)}-py{sys.version_info[0]}{sys.version_info[1]}-{size}.npy"
    for folder in (prepared_dir(), models_dir()):
        if folder is not None and (folder / _FOLDER / name).is_file():
            return np.load(folder / _FOLDER / name)
    ids = _rank(tokenizer, size)
    path = models_dir() / _FOLDER / name
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.npy")
    np.save(partial, ids)
    os.replace(partial, path)
    return ids


def choosing(ref: str, size: int) -> str:
    """The progress phase of counting `ref`'s `size` most frequent tokens."""
    return f"Choosing {ref}'s {size:,} most frequent tokens"


class CountAhead:
    """A draft's frequent tokens counted beside its conversion, so that loading it finds them kept.

    `start(folder)` counts on a thread of its own from the tokenizer in `folder` (the draft's
    source, written before it is exported: the count runs while it, or its target, converts);
    `finish(folder)` waits for that count, or, where it never started or failed, counts from the
    tokenizer in `folder` (the converted model) before it returns. ModelError when it cannot.
    """

    def __init__(self, ref: str, size: int, report: ProgressFn):
        self.ref, self.size, self.report = ref, size, report
        self._thread: threading.Thread | None = None
        self._counted = False

    def start(self, folder: Path) -> None:
        self._thread = threading.Thread(target=self._count_quietly, args=(folder,), name=f"count {self.ref}'s tokens", daemon=True)
        self._thread.start()

    def finish(self, folder: Path) -> None:
        if self._thread is not None:
            self._thread.join()
        if not self._counted:
            try:
                self._count(folder)
            except (OSError, ValueError) as error:
                raise ModelError(f"Could not count {self.ref}'s most frequent tokens with the tokenizer in {folder}: {error}") from error

    def _count_quietly(self, folder: Path) -> None:
        try:
            self._count(folder)
        except Exception:  # noqa: BLE001 -- finish() counts again from the converted model, and says why if it fails
            pass

    def _count(self, folder: Path) -> None:
        from transformers import AutoTokenizer  # heavy import

        tokenizer = AutoTokenizer.from_pretrained(folder)
        if self.size < len(tokenizer):
            with phase(self.report, choosing(self.ref, self.size)):
                frequent_token_ids(tokenizer, self.size)
        self._counted = True


def _rank(tokenizer, size: int) -> np.ndarray:
    vocab = len(tokenizer)
    counts = np.zeros(vocab, dtype=np.int64)
    texts = reference_text() + [CHAT_SAMPLE] * _CHAT_SAMPLE_WEIGHT
    for start in range(0, len(texts), _TEXTS_AT_ONCE):  # a batch at a time: its encodings are dropped before the next
        ids = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in _token_ids(tokenizer, texts[start:start + _TEXTS_AT_ONCE])])
        counts += np.bincount(ids, minlength=vocab)[:vocab]
    special = np.array(sorted({i for i in tokenizer.all_special_ids} | set(tokenizer.added_tokens_decoder)), dtype=np.int64)
    special = special[special < vocab]
    counts[special] = counts.max() + 1  # end of turn and the chat template's markers: the draft must be able to say them
    order = np.lexsort((np.arange(vocab), -counts))  # most used first, then by id
    return np.sort(order[:size])


def _token_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Each text's token ids, no special tokens added. A fast tokenizer's `encode_batch_fast` skips
    the character offsets, which counting has no use for: half the time of the usual call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "encode_batch_fast"):
        return [encoding.ids for encoding in backend.encode_batch_fast(texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def reference_text() -> list[str]:
    """The Python standard library's source files in a fixed order, up to about _CORPUS_BYTES."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(stdlib.rglob("*.py")):
        if _SKIPPED & set(path.relative_to(stdlib).parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        total += len(text)
        if total >= _CORPUS_BYTES:
            break
    if not texts:
        raise ValueError(f"no Python source found under {stdlib} to count token frequencies on")
    return texts


# Markdown as chat models answer in it: the fences alone are about one token in a hundred of
# Qwen2.5-Coder's answers, and the standard library has almost none.
CHAT_SAMPLE = """Certainly! Here's how you can do it in Python:

```python
def example(values: list[int]) -> int:
    return sum(values)
```

### Explanation:
1. **Function definition**: The function takes a list.
2. **Return value**: It returns the sum.

Sure, here is the corrected code:

```bash
mkdir -p build && cd build
```

```javascript
const x = 1;
```

```sql
SELECT name FROM users WHERE id = 1;
```

This approach is efficient and easy to understand. Let me know if you have any questions!
"""
_CHAT_SAMPLE_WEIGHT = 200  # copies: as often as a few hundred answers would use these markers


def _tokenizer_digest(tokenizer) -> str:
    """What identifies a vocabulary (and the special tokens added to it) for the cache."""
    identity = json.dumps([sorted(tokenizer.get_vocab().items()), sorted(map(int, tokenizer.added_tokens_decoder))])
    return hashlib.sha256(identity.encode()).hexdigest()[:16]
