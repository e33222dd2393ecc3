"""Whether the Hugging Face Hub (or the mirror HF_ENDPOINT names) answers this server: asked once,
by whichever asks first (the page's first load or the start-up preload), with a short timeout."""
from __future__ import annotations

import logging
import threading

from spec.models import hub

log = logging.getLogger("app")


class HubStatus:
    def __init__(self) -> None:
        self.reachable: bool | None = None  # None until the check has answered
        self._lock = threading.Lock()  # the page's first load and the preload may both ask: the Hub is asked once

    def check(self, allow_local_models: bool, timeout: float = 3.0) -> bool:
        """Whether the Hub answers, asking it the first time; says in the log what works without it."""
        with self._lock:
            if self.reachable is None:
                self.reachable = hub.reachable(timeout=timeout)
                if not self.reachable:
                    log.info("Not reachable: %s; only the embedded models%s will work.", hub.hub_name(),
                             " and local folders" if allow_local_models else "")
            return self.reachable
