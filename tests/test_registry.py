"""The process-wide model cache: one load per key, however many sessions ask at once."""
import threading
import time

import spec.models.registry as registry_module
from spec.config import ModelKey


class FakeModel:
    def __init__(self, ref, size):
        self.ref, self.size_bytes = ref, size


def test_two_threads_asking_for_one_model_load_it_once(monkeypatch):
    loads = []

    def slow_load(key, progress, *rest, **settings):
        loads.append(key.ref)
        time.sleep(0.3)  # long enough for the second thread to arrive while the first loads
        return FakeModel(key.ref, 1)

    monkeypatch.setattr(registry_module, "load_model", slow_load)
    registry = registry_module.ModelRegistry()
    results = []
    threads = [threading.Thread(target=lambda: results.append(registry.get(ModelKey("a/target")))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["a/target"]
    assert len(results) == 4 and all(r is results[0] for r in results)
    # Another precision is another compiled model.
    registry.get(ModelKey("a/target", precision="f32"))
    assert loads == ["a/target", "a/target"]


def test_least_recently_used_models_go_beyond_the_budget(monkeypatch):
    monkeypatch.setattr(registry_module, "load_model", lambda key, *rest, **settings: FakeModel(key.ref, 40))
    registry = registry_module.ModelRegistry(budget_bytes=100)
    for ref in ("a/one", "a/two"):
        registry.get(ModelKey(ref))
    registry.get(ModelKey("a/one"))  # used again: now "a/two" is the least recently used
    registry.get(ModelKey("a/three"))
    assert [key.ref for key in registry.loaded()] == ["a/one", "a/three"]


def test_a_pair_over_the_budget_keeps_both_halves(monkeypatch):
    monkeypatch.setattr(registry_module, "load_model", lambda key, *rest, **settings: FakeModel(key.ref, 80))
    registry = registry_module.ModelRegistry(budget_bytes=100)
    registry.get(ModelKey("a/old"))
    registry.get(ModelKey("a/target"))
    registry.get(ModelKey("a/draft"))  # the pair alone is over budget: only the older model goes
    assert [key.ref for key in registry.loaded()] == ["a/target", "a/draft"]


def test_everyone_waiting_for_a_load_sees_its_progress(monkeypatch):
    started, release = threading.Event(), threading.Event()

    def slow_load(key, progress, *rest, **settings):
        progress("Exporting x — about 2 min left", None)
        started.set()
        release.wait(5)
        progress("Exporting x — done in 5 s", 1.0)
        return FakeModel(key.ref, 1)

    monkeypatch.setattr(registry_module, "load_model", slow_load)
    registry = registry_module.ModelRegistry()
    first, second = [], []
    loader = threading.Thread(target=lambda: registry.get(ModelKey("a/big"), lambda m, f: first.append(m)))
    loader.start()
    started.wait(5)
    assert registry.progress(ModelKey("a/big")) == ("Exporting x — about 2 min left", None)
    waiter = threading.Thread(target=lambda: registry.get(ModelKey("a/big"), lambda m, f: second.append(m)))
    waiter.start()
    time.sleep(0.1)
    release.set()
    loader.join(5)
    waiter.join(5)
    assert first == second == ["Exporting x — about 2 min left", "Exporting x — done in 5 s"]
    assert registry.progress(ModelKey("a/big")) is None


def test_a_visitors_load_stops_once_everyone_waiting_for_it_has_left(monkeypatch):
    asked, ended = threading.Event(), threading.Event()

    def load(key, progress, visitors, stopped, curves_later=False):
        asked.set()
        while not stopped():
            time.sleep(0.01)
        ended.set()
        raise registry_module.Cancelled("nobody waits")

    monkeypatch.setattr(registry_module, "load_model", load)
    registry = registry_module.ModelRegistry()
    key = ModelKey("someone/model", hub_only=True)
    first, second, outcomes = threading.Event(), threading.Event(), []

    def wait(cancel):
        try:
            registry.get(key, None, cancel)
        except registry_module.Cancelled as error:
            outcomes.append(error)

    threads = [threading.Thread(target=wait, args=(cancel,)) for cancel in (first, second)]
    threads[0].start()
    asked.wait(5)
    threads[1].start()
    time.sleep(0.05)
    first.set()  # one visitor left: the other still waits
    time.sleep(0.1)
    assert not ended.is_set()
    second.set()
    for thread in threads:
        thread.join(5)
    assert ended.is_set() and len(outcomes) == 2, "stopped, and the second waiter does not start it again"
