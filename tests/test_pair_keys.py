"""One pair, one definition: the page, `spec run`, `spec race` and the benchmark load a pair's models
the same way (spec.serving.presets.pair_keys), and an option given on the command line still wins.
No model is loaded: each path is stopped where it would load, and what it asked for is compared."""
from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from spec import cli
from spec.config import DEFAULT_PRECISION, DRAFT_VOCABULARY, F32, FP32, INT8, ModelKey
from spec.models.draft_format import draft_format
from spec.models.embedded import DEFAULT_REF, DRAFT_REF
from spec.serving.presets import CUSTOM, PRESETS, pair_keys


def default_pair() -> list[ModelKey]:
    """The default pair's keys: its draft at the format this machine multiplies faster (INT4 or INT8)."""
    return [ModelKey(DEFAULT_REF, INT8, DEFAULT_PRECISION, "CPU"),
            ModelKey(DRAFT_REF, draft_format(), DEFAULT_PRECISION, "CPU", vocabulary=DRAFT_VOCABULARY)]


class _Loading(Exception):
    pass


@pytest.fixture(autouse=True)
def _on_the_cpu(monkeypatch):
    monkeypatch.delenv("SPEC_DEVICE", raising=False)


def _cli_keys(monkeypatch, *argv: str) -> list[ModelKey | None]:
    """The keys `python -m spec ARGV` asks to load (it stops there)."""
    asked = []

    def load(keys, quiet, *_, **__):
        asked.extend(keys)
        raise _Loading

    monkeypatch.setattr(cli, "_load", load)
    args = cli.build_parser().parse_args(list(argv))
    with pytest.raises(_Loading):
        (cli.run if args.command == "run" else cli.race)(args, io.StringIO())
    return asked


def _page_keys(monkeypatch, tmp_path) -> list[ModelKey | None]:
    """The keys a click on one of the page's examples asks for (app.py imported, no server started)."""
    for name in ("SPEC_APP_TARGET", "SPEC_APP_DRAFT", "SPEC_APP_WEIGHT_FORMAT", "SPEC_APP_PRECISION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPEC_APP_PRELOAD", "0")
    monkeypatch.setenv("SPEC_MODELS_DIR", str(tmp_path))
    sys.modules.pop("app", None)
    try:
        request = importlib.import_module("app").example_requests()[0]
    finally:
        sys.modules.pop("app", None)  # other tests import it under their own environment
    return [request.target, request.draft]


def _bench_keys(monkeypatch, *argv: str) -> list[ModelKey | None]:
    """The keys of the models `python -m bench ARGV` resolves, as its workers then load them."""
    import bench.run
    import spec.models.resolve

    asked = []

    def resolve(ref, weight_format=INT8, progress=None, *rest):
        asked.append((ref, weight_format))
        return SimpleNamespace(ref=ref, path=Path(f"/ir/{len(asked)}"), weight_format=weight_format)

    monkeypatch.setattr(spec.models.resolve, "resolve_model", resolve)
    monkeypatch.setattr(bench.run, "_same_tokenizer", lambda target, draft: True)
    plan = bench.run.make_plan(bench.run.build_parser().parse_args([*argv, "--quick", "--no-peers", "--max-new-tokens", "8"]), [2], True, 1)
    (target_ref, target_format), (draft_ref, draft_format) = asked
    family = next(f for f in plan.families if f.draft == str(plan.drafts[0].path))
    return [ModelKey(target_ref, target_format, family.precision),
            ModelKey(draft_ref, draft_format, family.precision, vocabulary=family.draft_vocabulary)]


def test_the_page_spec_run_spec_race_and_the_benchmark_load_the_default_pair_alike(monkeypatch, tmp_path):
    assert _cli_keys(monkeypatch, "run", "Hi", "--draft", DRAFT_REF) == default_pair()
    assert _cli_keys(monkeypatch, "run", "Hi", "--target", DEFAULT_REF, "--draft", DRAFT_REF, "--prompt-lookup") == default_pair()
    assert _cli_keys(monkeypatch, "race", "Hi") == default_pair()
    assert _page_keys(monkeypatch, tmp_path) == default_pair()
    assert _bench_keys(monkeypatch) == default_pair()


def test_the_served_benchmark_runs_alone_the_models_the_page_races(monkeypatch):
    from bench.tools.served import _formats

    operator_pair = [ModelKey("/srv/target", FP32, F32, "CPU"), ModelKey("/srv/draft", FP32, F32, "CPU", vocabulary=DRAFT_VOCABULARY)]
    for target, draft in (default_pair(), operator_pair):
        options = _formats(target, draft)
        assert _cli_keys(monkeypatch, "run", "Hi", "--target", target.ref, "--draft", draft.ref, *options) == [target, draft]
        assert _cli_keys(monkeypatch, "run", "Hi", "--target", target.ref, *options) == [target, None]


def test_an_option_given_still_wins(monkeypatch):
    exact = [ModelKey(DEFAULT_REF, INT8, F32, "CPU"), ModelKey(DRAFT_REF, INT8, F32, "CPU", vocabulary=DRAFT_VOCABULARY)]
    assert _cli_keys(monkeypatch, "race", "Hi", "--weight-format", "int8", "--precision", "f32") == exact
    assert _cli_keys(monkeypatch, "run", "Hi", "--draft", DRAFT_REF, "--weight-format", "int8", "--precision", "f32") == exact
    assert _bench_keys(monkeypatch, "--draft-weight-format", "int8", "--draft-vocabulary", "0") == [
        default_pair()[0], ModelKey(DRAFT_REF, INT8, DEFAULT_PRECISION, "CPU")]


def test_plain_decoding_loads_the_target_as_its_pair_does(monkeypatch):
    assert _cli_keys(monkeypatch, "run", "Hi") == [default_pair()[0], None]
    assert _cli_keys(monkeypatch, "run", "Hi", "--prompt-lookup") == [default_pair()[0], None]


def test_each_preset_is_found_as_itself_and_any_other_pair_loads_as_the_custom_pair():
    for preset in PRESETS:
        if preset.label != CUSTOM:
            assert pair_keys(preset.target, preset.draft) == preset.keys(preset.target, preset.draft), preset.label
    custom = next(p for p in PRESETS if p.label == CUSTOM)
    assert pair_keys("owner/target", "owner/draft") == custom.keys("owner/target", "owner/draft")
