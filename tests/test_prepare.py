"""`python -m spec prepare`: what it prepares, that it leaves a converted IR and compiled blobs
where the Space looks for them, and that a failure is a sentence and a non-zero exit.

The Hub case (a model downloaded through HF_ENDPOINT, then used offline) is in tests/test_hub.py.
"""
from __future__ import annotations

import io
import json
import re
import shlex
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from spec.cli import main
from spec.config import DEFAULT_PRECISION, DRAFT_VOCABULARY, F32, FP32, INT8, MEASURED, ModelKey
from spec.errors import ModelError
from spec.models import conversion_cache, export, library_output
from spec.models.draft_format import draft_format
from spec.models.embedded import DEFAULT_REF, DRAFT_REF, QUICK_REF
from spec.models.resolve import resolve_model
from spec.serving.prepare import plan
from spec.serving.presets import PRESETS, decided
from tests.conftest import models_dir_at

REPO = Path(__file__).resolve().parents[1]
HUB_REFS = {ref for p in PRESETS if p.needs_hub for ref in (p.target, p.draft) if ref}


@pytest.fixture
def terminal(monkeypatch) -> io.StringIO:
    """What the command writes to the terminal (progress goes to the process's first stderr, not sys.stderr)."""
    stream = io.StringIO()
    monkeypatch.setattr(library_output, "_terminal", stream)
    return stream


def _never_asked() -> bool:
    raise AssertionError("the Hub was asked although nothing needed it")


def test_by_default_the_offline_pairs_are_prepared_as_the_space_loads_them():
    offline = plan([], offline=True, hub_reachable=_never_asked)
    draft = ModelKey(DRAFT_REF, MEASURED, DEFAULT_PRECISION, vocabulary=DRAFT_VOCABULARY)  # its format timed as it is prepared
    assert offline.keys == (ModelKey(DEFAULT_REF, INT8, DEFAULT_PRECISION), draft,
                            ModelKey(QUICK_REF, INT8, DEFAULT_PRECISION))
    assert decided(draft) == PRESETS[0].own_keys()[1] == replace(draft, weight_format=draft_format())  # INT4 or INT8, as this CPU is quicker
    assert len(offline.skipped) == 1 and "--offline" in offline.skipped[0]
    assert all(ref in offline.skipped[0] for ref in HUB_REFS)


def test_the_hub_pairs_are_prepared_only_when_the_hub_answers():
    unreachable = plan([], offline=False, hub_reachable=lambda: False)
    assert {key.ref for key in unreachable.keys} == {DEFAULT_REF, DRAFT_REF, QUICK_REF}
    assert "cannot be reached" in unreachable.skipped[0]
    asked = []
    reachable = plan([], offline=False, hub_reachable=lambda: asked.append(1) or True)
    assert asked == [1] and reachable.skipped == ()
    assert [key.ref for key in reachable.keys][:3] == [DEFAULT_REF, DRAFT_REF, QUICK_REF]
    assert {key.ref for key in reachable.keys[3:]} == HUB_REFS and len(reachable.keys) == 3 + len(HUB_REFS)


def test_named_models_are_prepared_with_the_options_given():
    named = plan(["a/b", QUICK_REF, "a/b"], offline=False, hub_reachable=_never_asked, device="GPU", weight_format=FP32, precision=F32)
    assert named.keys == (ModelKey("a/b", FP32, F32, "GPU"), ModelKey(QUICK_REF, FP32, F32, "GPU")) and named.skipped == ()
    assert plan([QUICK_REF], False, _never_asked).keys == (ModelKey(QUICK_REF),)


def test_the_dockerfiles_command_converts_the_offline_pairs_without_asking_the_hub(monkeypatch, terminal, capsys):
    """The command the image's build runs (read from the Dockerfile), with the conversion itself stood in for:
    the real preparation of Qwen takes minutes (tests/test_embedded_qwen.py does it). It only converts:
    compiled blobs and timings belong to the builder's CPU, not the Space's."""
    import spec.models.registry
    from spec.models import hub

    command = re.search(r"then (python -m spec prepare[^;]*);", (REPO / "Dockerfile").read_text())[1]
    converted = []
    monkeypatch.setattr(spec.models.registry, "convert_model", lambda key, progress: converted.append((key.ref, key.weight_format)))
    monkeypatch.setattr(spec.models.registry, "load_model", lambda *a: pytest.fail("the image's build compiled a model"))
    monkeypatch.setattr(hub, "reachable", _never_asked)
    assert main(shlex.split(command)[3:]) == 0
    assert sorted(converted) == sorted([(DEFAULT_REF, INT8), (DRAFT_REF, draft_format()), (QUICK_REF, INT8)])  # side by side
    # The draft's format is kept beside the models the image copies: the Space loads the draft it holds.
    assert json.loads((conversion_cache.models_dir() / "draft-format.json").read_text())["format"] == draft_format()
    err = capsys.readouterr().err
    assert "Skipped the Hub pairs' models" in err and f"Ready: {DEFAULT_REF}, {DRAFT_REF}, {QUICK_REF}" in err


def test_the_drafts_format_is_timed_while_the_other_models_convert(monkeypatch, terminal):
    """Timing the draft's format takes seconds (a child process compiles and times its layers): the
    target and the quick model start converting meanwhile, and the draft converts in the format timed."""
    import spec.models.registry
    from spec.serving import presets
    from spec.serving.prepare import prepare

    others = {DEFAULT_REF, QUICK_REF}
    started, converted = threading.Event(), []

    def convert(key, progress):
        converted.append((key.ref, key.weight_format))
        if others <= {ref for ref, _ in converted}:
            started.set()

    def timing(report):  # done only once the others have started converting, else the preparation never ends
        assert started.wait(timeout=30), "the other models waited for the draft's format to be timed"
        return INT8

    monkeypatch.setattr(spec.models.registry, "convert_model", convert)
    monkeypatch.setattr(presets, "draft_format", timing)
    assert prepare(plan([], offline=True, hub_reachable=_never_asked).keys, lambda *a: None, compile=False) == []
    assert converted[-1] == (DRAFT_REF, INT8) and len(converted) == 3


def _compiled_blobs(models_dir) -> list:
    return list((models_dir / "compiled").glob("*.blob"))


def test_prepare_leaves_the_ir_and_the_compiled_blobs_in_the_models_dir(tiny_checkpoints, tmp_path, terminal, capsys):
    with models_dir_at(tmp_path):
        code = main(["prepare", str(tiny_checkpoints[0]), "--weight-format", "fp32"])
    lines = terminal.getvalue().splitlines() + capsys.readouterr().err.splitlines()
    assert code == 0, lines
    entries = [p for p in tmp_path.iterdir() if (p / export.IR_XML).exists() and conversion_cache.entry_problem(p) is None]
    assert len(entries) == 1
    assert _compiled_blobs(tmp_path), "compiled once, so the Space's first load reads a blob"
    assert [line for line in lines if line.startswith("[spec] Exporting target to OpenVINO FP32 — done in")]
    assert [line for line in lines if line.startswith(f"[spec] Compiling {tiny_checkpoints[0]} for CPU — done in")]
    assert lines[-1].startswith("[spec] Ready: ") and str(tmp_path) in lines[-1]


def test_convert_only_leaves_the_ir_and_neither_blobs_nor_timings(tiny_checkpoints, tmp_path, terminal, capsys):
    with models_dir_at(tmp_path):
        assert main(["prepare", str(tiny_checkpoints[0]), "--weight-format", "fp32", "--convert-only"]) == 0
    assert [p for p in tmp_path.iterdir() if (p / export.IR_XML).exists() and conversion_cache.entry_problem(p) is None]
    assert not _compiled_blobs(tmp_path) and not (tmp_path / "calibration.json").exists()
    assert "Compiling" not in terminal.getvalue()


def test_a_model_that_cannot_be_prepared_is_a_sentence_and_a_non_zero_exit(tiny_checkpoints, tmp_path, terminal, capsys):
    with models_dir_at(tmp_path):
        code = main(["prepare", "embedded:GPT-9", str(tiny_checkpoints[0]), "--weight-format", "fp32"])
    err = capsys.readouterr().err
    assert code == 2
    # (pytest's sys.stderr also shows what the export printed; the command line sends that to a log)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: There is no embedded model 'embedded:GPT-9'"), err
    assert "Traceback" not in terminal.getvalue() + err and "Ready" not in terminal.getvalue()
    assert _compiled_blobs(tmp_path), "the other model was still prepared"
    assert main(["prepare", "--offline", QUICK_REF]) == 2
    assert "name models or give --offline" in capsys.readouterr().err


def test_a_cache_prepared_ahead_of_time_is_used_without_converting_again(tiny_checkpoints, tmp_path, monkeypatch):
    """The image's models (SPEC_PREPARED_DIR) serve while SPEC_MODELS_DIR is an empty bucket."""
    ref = str(tiny_checkpoints[1])
    with models_dir_at(tmp_path / "image"):
        prepared = resolve_model(ref, FP32).path

    def no_export(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr(export, "_export_ir", no_export)
    monkeypatch.setenv("SPEC_PREPARED_DIR", str(tmp_path / "image"))
    with models_dir_at(tmp_path / "bucket"):
        assert resolve_model(ref, FP32).path == prepared
    monkeypatch.setenv("SPEC_PREPARED_DIR", str(tmp_path / "nothing-here"))
    with models_dir_at(tmp_path / "bucket"), pytest.raises(ModelError, match="converted again"):
        resolve_model(ref, FP32)


def test_a_prepared_folder_that_is_the_models_folder_is_not_called_a_mistake(tmp_path, monkeypatch, caplog):
    """The image's build names one folder, not made yet, as both (the Dockerfile): no warning then;
    a prepared folder that is missing and is not the models folder is warned of."""
    conversion_cache._say_once.cache_clear()
    monkeypatch.setenv("SPEC_PREPARED_DIR", str(tmp_path / "cache"))
    with models_dir_at(tmp_path / "cache"), caplog.at_level("WARNING"):
        assert conversion_cache.prepared_dir() == tmp_path / "cache"
    assert "SPEC_PREPARED_DIR" not in caplog.text
    monkeypatch.setenv("SPEC_PREPARED_DIR", str(tmp_path / "nothing-here"))
    with models_dir_at(tmp_path / "cache"), caplog.at_level("WARNING"):
        conversion_cache.prepared_dir()
    assert "nothing-here is not a folder" in caplog.text
