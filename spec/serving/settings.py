"""The Space's settings, from environment variables: one dataclass, each field saying what it does.

A value that is not what its variable takes stops the server at start-up with a sentence naming it.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spec.config import PRECISIONS, WEIGHT_FORMATS

if TYPE_CHECKING:
    from spec.models.visitors import VisitorLimits


def _flag(raw: str) -> bool:
    if raw.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if raw.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


_flag.__name__ = "flag (1 or 0)"


LOOPBACK = ("127.0.0.1", "localhost", "::1")  # addresses only this machine reaches


@dataclass(frozen=True)
class ServerSettings:
    on_space: bool  # SPACE_ID is set: a Hugging Face Space
    host: str  # SPEC_HOST: the address to listen on (0.0.0.0 on a Space, else 127.0.0.1)
    port: int = 7860  # SPEC_PORT
    concurrency: int = 1  # SPEC_CONCURRENCY: races computed at once; each wants every core for a fair measurement
    max_queue: int = 16  # SPEC_MAX_QUEUE: visitors' races waiting their turn; more are told the server is busy
    memory_budget_gb: float = 12.0  # SPEC_MEMORY_BUDGET_GB: model weights kept loaded (least recently used go first)
    max_new_tokens: int = 512  # SPEC_APP_MAX_NEW_TOKENS: the slider's upper end
    max_prompt_tokens: int = 1024  # SPEC_MAX_PROMPT_TOKENS: longer prompts are refused (the model's context bounds them too)
    max_race_seconds: float = 120.0  # SPEC_MAX_RACE_SECONDS: both lanes stop after this long; 0 means no limit
    # SPEC_ALLOW_LOCAL_MODELS: custom pairs may name folders on this server; unset: see local_models_allowed
    allow_local_models: bool | None = None
    # SPEC_CUSTOM_MEMORY_GB: memory a visitor's model may take to convert or load (unset: 80% of what is available then)
    custom_memory_gb: float | None = None
    # SPEC_CUSTOM_DISK_GB: disk visitors' models may take together, least recently used evicted (unset: half the free disk)
    custom_disk_gb: float | None = None
    update_seconds: float = 0.25  # SPEC_APP_UPDATE_SECONDS: at most one page update per viewer this often
    preload: bool = True  # SPEC_APP_PRELOAD: load the default pair at start-up, before the first visitor
    preheat: bool = True  # SPEC_APP_PREHEAT: then race the page's examples, so a click is a replay
    stored_races: int = 64  # SPEC_STORED_RACES: finished races kept for replay ...
    stored_mb: float = 64.0  # SPEC_STORED_MB: ... within this many MB, least recently watched dropped first
    device: str = "CPU"  # SPEC_DEVICE: the OpenVINO device
    target: str | None = None  # SPEC_APP_TARGET: a pair of your own, first in the list (tests use tiny models) ...
    draft: str | None = None  # SPEC_APP_DRAFT: ... and its draft
    weight_format: str = "int8"  # SPEC_APP_WEIGHT_FORMAT: that pair's weights, when converted
    precision: str = "default"  # SPEC_APP_PRECISION: that pair's precision

    def visitor_limits(self) -> "VisitorLimits":
        """What visitors' models may take (spec.models.visitors), in bytes (GB as the Hub counts them: 10^9)."""
        from spec.models.visitors import VisitorLimits

        def as_bytes(gb: float | None) -> int | None:
            return None if gb is None else int(gb * 10**9)

        return VisitorLimits(as_bytes(self.custom_memory_gb), as_bytes(self.custom_disk_gb))

    def local_models_allowed(self, host: str, share: bool) -> bool:
        """Whether a visitor's custom pair may name folders on this server: as SPEC_ALLOW_LOCAL_MODELS
        says, else only where nobody else can open the page (not on a Space, not behind --share, not
        listening beyond this machine), so that no visitor probes the server's files."""
        if self.allow_local_models is not None:
            return self.allow_local_models
        return not (self.on_space or share) and host in LOOPBACK

    def flags(self, argv: list[str] | None = None) -> argparse.Namespace:
        """`python app.py`'s flags: --host and --port (which override the environment's) and --share."""
        parser = argparse.ArgumentParser(description="Race autoregressive against speculative decoding in the browser.")
        parser.add_argument("--host", default=self.host, help=f"address to listen on (default {self.host}; env SPEC_HOST)")
        parser.add_argument("--port", type=int, default=self.port, help=f"port (default {self.port}; env SPEC_PORT)")
        parser.add_argument("--share", action="store_true", help="also serve on a public gradio.live link")
        return parser.parse_args(argv)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "ServerSettings":
        env = os.environ if environ is None else environ
        on_space = bool(env.get("SPACE_ID"))

        def read(name: str, default, cast=str):
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                return default
            try:
                return cast(raw)
            except ValueError:
                raise SystemExit(f"{name}={raw!r} is not a valid {cast.__name__}") from None

        values = dict(
            on_space=on_space,
            host=read("SPEC_HOST", "0.0.0.0" if on_space else "127.0.0.1"),
            port=read("SPEC_PORT", 7860, int),
            concurrency=read("SPEC_CONCURRENCY", 1, int),
            max_queue=read("SPEC_MAX_QUEUE", 16, int),
            memory_budget_gb=read("SPEC_MEMORY_BUDGET_GB", 12.0, float),
            max_new_tokens=read("SPEC_APP_MAX_NEW_TOKENS", 512, int),
            max_prompt_tokens=read("SPEC_MAX_PROMPT_TOKENS", 1024, int),
            max_race_seconds=read("SPEC_MAX_RACE_SECONDS", 120.0, float),
            allow_local_models=read("SPEC_ALLOW_LOCAL_MODELS", None, _flag),
            custom_memory_gb=read("SPEC_CUSTOM_MEMORY_GB", None, float),
            custom_disk_gb=read("SPEC_CUSTOM_DISK_GB", None, float),
            update_seconds=read("SPEC_APP_UPDATE_SECONDS", 0.25, float),
            preload=read("SPEC_APP_PRELOAD", True, _flag),
            preheat=read("SPEC_APP_PREHEAT", True, _flag),
            stored_races=read("SPEC_STORED_RACES", 64, int),
            stored_mb=read("SPEC_STORED_MB", 64.0, float),
            device=read("SPEC_DEVICE", "CPU"),
            target=read("SPEC_APP_TARGET", None),
            draft=read("SPEC_APP_DRAFT", None),
            weight_format=read("SPEC_APP_WEIGHT_FORMAT", "int8"),
            precision=read("SPEC_APP_PRECISION", "default"),
        )
        for name, variable in (("concurrency", "SPEC_CONCURRENCY"), ("max_new_tokens", "SPEC_APP_MAX_NEW_TOKENS"),
                               ("max_prompt_tokens", "SPEC_MAX_PROMPT_TOKENS")):
            if values[name] < 1:
                raise SystemExit(f"{variable} must be at least 1, got {values[name]}")
        for name, variable in (("custom_memory_gb", "SPEC_CUSTOM_MEMORY_GB"), ("custom_disk_gb", "SPEC_CUSTOM_DISK_GB")):
            if values[name] is not None and values[name] <= 0:
                raise SystemExit(f"{variable} must be a positive number of GB, got {values[name]}")
        for name, variable in (("max_queue", "SPEC_MAX_QUEUE"), ("stored_races", "SPEC_STORED_RACES"), ("stored_mb", "SPEC_STORED_MB"),
                               ("update_seconds", "SPEC_APP_UPDATE_SECONDS"), ("max_race_seconds", "SPEC_MAX_RACE_SECONDS")):
            if values[name] < 0:
                raise SystemExit(f"{variable} must not be negative, got {values[name]}")
        for name, variable, allowed in (("weight_format", "SPEC_APP_WEIGHT_FORMAT", WEIGHT_FORMATS),
                                        ("precision", "SPEC_APP_PRECISION", PRECISIONS)):
            if values[name] not in allowed:
                raise SystemExit(f"{variable} must be one of {', '.join(allowed)}, got {values[name]!r}")
        from spec.models.runtime import check_device  # OpenVINO, once the cheap checks passed

        try:
            check_device(values["device"])  # before the page offers pairs that could never load
        except ValueError as error:
            raise SystemExit(f"SPEC_DEVICE={values['device']!r}: {error}") from None
        return cls(**values)
