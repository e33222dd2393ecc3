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

_lock = threading.RLock()
_terminal: TextIO | None = None
_capture: "_Capture | None" = None  # the capture under way, shared by the threads inside one


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


def capturing() -> bool:
    """Whether a conversion is sending standard output and error to its log right now."""
    return _capture is not None


@contextlib.contextmanager
def captured(log: Path) -> Iterator[Path]:
    """Everything written to standard output and error while the block runs goes to a log: `log`,
    or, where another thread's capture is under way, that one's (file descriptors are process-wide,
    and two models convert side by side). Yields the log written to."""
    global _capture
    terminal()  # made before fd 2 moves
    with _lock:
        if _capture is None:
            log.parent.mkdir(parents=True, exist_ok=True)
            sys.stdout.flush()
            sys.stderr.flush()
            with open(log, "ab") as sink:
                saved = os.dup(1), os.dup(2)
                os.dup2(sink.fileno(), 1)
                os.dup2(sink.fileno(), 2)
            _capture = _Capture(log, saved)
        _capture.users += 1
        written = _capture.log
    try:
        yield written
    finally:
        with _lock:
            _capture.users -= 1
            if not _capture.users:
                sys.stdout.flush()
                sys.stderr.flush()
                for fd, saved_fd in zip((1, 2), _capture.saved):
                    os.dup2(saved_fd, fd)
                    os.close(saved_fd)
                _capture = None


class _Capture:
    def __init__(self, log: Path, saved: tuple[int, int]):
        self.log, self.saved, self.users = log, saved, 0
