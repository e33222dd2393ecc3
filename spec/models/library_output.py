"""What libraries print while a model converts (NNCF's tables, tracer warnings, progress bars)
goes to a log file, not to the terminal, where progress shows one line per phase instead.

The capture works at the file-descriptor level, so C++ output and Python warnings are caught too.
`terminal()` is a stream on the original standard error, made before any capture, for the lines
that must stay on screen (progress, the server's own log).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Iterator, TextIO

_lock = threading.RLock()  # one capture at a time: file descriptors are process-wide
_terminal: TextIO | None = None


def log_to_terminal() -> None:
    """The server's own log lines go to the terminal (even while a conversion captures library
    output), at INFO; the HTTP clients' request lines and the GGUF writer's file list do not."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=terminal())
    for noisy in ("httpx", "httpcore", "urllib3", "huggingface_hub", "gguf"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def terminal() -> TextIO:
    """A text stream on the standard error this process started with, never captured."""
    global _terminal
    with _lock:
        if _terminal is None:
            _terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        return _terminal


@contextlib.contextmanager
def captured(log: Path) -> Iterator[Path]:
    """Everything written to standard output and error while the block runs goes to `log`."""
    terminal()  # made before fd 2 moves
    log.parent.mkdir(parents=True, exist_ok=True)
    with _lock, open(log, "ab") as sink:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield log
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
