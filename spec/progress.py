"""How long work (downloading, converting, compiling) reports its progress to whoever waits."""
from __future__ import annotations

from typing import Callable

ProgressFn = Callable[[str, float | None], None]  # (message, fraction 0..1 or None when unknown)


def ignore(message: str, fraction: float | None) -> None:
    """A ProgressFn for callers that do not show progress."""
