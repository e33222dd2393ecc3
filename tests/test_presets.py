"""What a shared server lets visitors name: presets that cannot run here say why, and a visitor's
own model is a Hub id, never a path on the server."""
from __future__ import annotations

import pytest

from spec.errors import ModelError
from spec.models.resolve import resolve_model
from spec.serving.presets import CUSTOM, PRESETS


def test_a_hub_pair_is_unavailable_offline_unless_cached():
    hub_pair = next(p for p in PRESETS if p.needs_hub and p.label != CUSTOM)
    offline_pair = next(p for p in PRESETS if not p.needs_hub)
    assert hub_pair.unavailable(hub_reachable=True, cached=lambda ref: False) is None
    assert "cannot be reached" in hub_pair.unavailable(hub_reachable=False, cached=lambda ref: False)
    assert hub_pair.unavailable(hub_reachable=False, cached=lambda ref: True) is None
    assert offline_pair.unavailable(hub_reachable=False, cached=lambda ref: False) is None


@pytest.mark.parametrize("ref", ["/etc", "../../../../etc/passwd", "~/models", "spec/config.py", "tests", "C:\\models"])
def test_hub_only_never_looks_at_the_server_or_names_its_paths(ref, monkeypatch):
    import spec.models.resolve

    def no_disk(*args, **kwargs):
        raise AssertionError("a hub-only reference must not be resolved on the server's disk")

    monkeypatch.setattr(spec.models.resolve, "_resolve_local", no_disk)
    monkeypatch.setattr(spec.models.resolve.hub, "download", lambda repo_id, report: (_ for _ in ()).throw(
        ModelError(f"Could not reach the Hugging Face Hub to download {repo_id}")))
    with pytest.raises(ModelError) as error:
        resolve_model(ref, hub_only=True)
    message = str(error.value)
    if "/" not in ref or ref.startswith(("/", ".", "~")):
        assert "Hugging Face model ids only" in message and ref not in message
    else:  # written like owner/name: it goes to the Hub, which does not have it
        assert "Hugging Face Hub" in message


def test_a_visitor_who_may_name_hub_ids_only_is_not_told_to_use_an_embedded_model():
    from spec.serving.requests import readable

    message = "Could not reach the Hub to download a/b, and it is not cached: check the network, or use embedded:Qwen2.5-Coder-1.5B-Instruct."
    assert readable(message, None, allow_local_models=False).endswith("or pick an offline pair from the list.")
    assert readable(message, None, allow_local_models=True) == message  # where a custom pair may name it, it works
