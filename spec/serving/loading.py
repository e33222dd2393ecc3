"""Loading a race's pair: both models from the shared registry, each warmed up once, with a line
of progress per model while they load (and, the first time, are prepared)."""
from __future__ import annotations

import queue
import threading
from typing import Callable

from spec.config import ModelKey
from spec.models.registry import LoadedModel, ModelRegistry
from spec.serving.phases import RacePhase
from spec.serving.race import RaceUpdate


def warm_up(model: LoadedModel) -> LoadedModel:
    """`model`, its compiled model's first call run: a model's first call pays one-off set-up costs,
    and the race must not charge them to whichever method happens to go first. load_model already
    runs it for every model it compiles, so this only makes sure (CompiledLM.warm_up: once)."""
    model.model.warm_up()
    return model


def load_pair(
    registry: ModelRegistry, target_key: ModelKey, draft_key: ModelKey | None, cancel: threading.Event,
    report: Callable[[RaceUpdate], None] = lambda update: None,
) -> tuple[LoadedModel, LoadedModel | None] | None:
    """The pair from the shared registry, warmed up: (target, draft or None), or None when `cancel`
    is set first. While it loads, `report` gets a LOADING update with each line of progress, and
    every half second besides.

    Stopped, an operator's model goes on loading in the background, so the next race starts
    sooner; a visitor's stops once nobody waits for it (see ModelRegistry.get).
    """
    wanted = [("Target", target_key)] + ([("Draft", draft_key)] if draft_key else [])
    if {key for _, key in wanted} <= set(registry.loaded()):
        models = [warm_up(registry.get(key)) for _, key in wanted]
        return models[0], (models[1] if draft_key else None)

    updates: queue.Queue = queue.Queue()
    result: dict = {}

    def work() -> None:
        try:
            models = []
            for role, key in wanted:
                def progress(message: str, fraction: float | None, role=role) -> None:
                    percent = f" {fraction:.0%}" if fraction is not None else ""
                    updates.put((role, f"{message}{percent}"))

                updates.put((role, f"{key.ref}: starting"))
                # Only a visitor's model stops loading with the race: the operator's are worth finishing.
                models.append(warm_up(registry.get(key, progress, cancel if key.hub_only else None)))
                updates.put((role, f"{key.ref}: ready"))
            result["models"] = models
        except BaseException as error:  # handed to the caller's thread, which raises it
            result["error"] = error
        finally:
            updates.put(None)

    threading.Thread(target=work, name="load-models", daemon=True).start()
    status: dict[str, str] = {}
    while True:
        try:
            update = updates.get(timeout=0.5)
        except queue.Empty:
            update = ...
        if update is None or cancel.is_set():
            break
        if update is not ...:
            status[update[0]] = update[1]
        report(RaceUpdate(RacePhase.LOADING, loading=dict(status)))
    if cancel.is_set():
        return None
    if "error" in result:
        raise result["error"]
    models = result["models"]
    return models[0], (models[1] if draft_key else None)
