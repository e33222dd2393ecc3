"""`python -m spec run` and `race`: the contract the Space and the benchmark also rely on."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spec.cli import build_parser, format_race, main
from tests.conftest import models_dir_at, real_models_dir

REPO = Path(__file__).resolve().parents[1]
KEYS = {"text", "token_ids", "new_tokens", "seconds", "tokens_per_second", "ttft_seconds",
        "target_calls", "drafted", "accepted", "acceptance_rate"}


class _Terminal(io.StringIO):
    """stdin as a terminal: nothing piped in."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--prompt", "  "], "the prompt is empty"),
        (["run", "hi", "--prompt", "there"], "give the prompt once"),
        (["run"], "no prompt: give one as an argument"),
        (["run", "hi", "--max-new-tokens", "0"], "--max-new-tokens must be an integer from 1 to 8192, got 0"),
        (["run", "hi", "--temperature", "-1"], "--temperature must be a number from 0 to 10, got -1.0"),
        (["run", "hi", "--prompt-lookup", "--k", "0"], "--k must be an integer from 1 to 64, got 0"),
        (["run", "hi", "--k", "3"], "--k and --no-dynamic-k set how drafts are verified"),
        (["run", "hi", "--top-p", "0.5"], "--top-p and --top-k shape sampling"),
        (["run", "hi", "--mode", "autoregressive", "--target", "/no/such/model"], "no directory"),
        (["run", "hi", "--target", "not a model id!"], "Hugging Face model id"),
        (["run", "hi", "--mode", "fastest"], "invalid choice"),
        (["run", "hi", "--drafter", "hybrid"], "--drafter hybrid chooses how a draft model drafts: give --draft REF too"),
        (["run", "hi", "--draft", "a/b", "--drafter", "draft-model", "--prompt-lookup"],
         "--drafter draft-model drafts without prompt lookup: leave out --prompt-lookup, or use --drafter hybrid"),
        (["run", "hi", "--draft", "a/b", "--drafter", "prompt-lookup"], "--drafter prompt-lookup drafts without a model: leave out --draft"),
        (["run", "hi", "--mode", "speculative"], "--mode speculative needs a drafter"),
        (["run", "hi", "--mode", "autoregressive", "--prompt-lookup"], "--mode autoregressive decodes without drafts"),
        (["race", "hi", "--target", "REPLACED"], "a race needs a drafter for its speculative lane"),
        (["race", "hi", "--drafter", "draft-model"], "give --draft REF too"),
        (["race", "hi", "--mode", "autoregressive"], "unrecognized arguments"),
        (["prepare", "--offline", "embedded:SmolLM2-135M-Instruct"], "name models or give --offline, not both"),
        (["run", "caf\udce9"], "the prompt is not UTF-8 text"),  # Latin-1 bytes in argv, kept as a lone surrogate
    ],
)
def test_bad_input_is_one_line_on_stderr(argv, fragment, capsys, tiny_checkpoints, tiny_models_dir):
    argv = [str(tiny_checkpoints[0]) if a == "REPLACED" else a for a in argv]
    with models_dir_at(tiny_models_dir):
        code = main(argv, stdin=_Terminal())
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err


def tiny_options(target: str) -> list[str]:
    return ["--target", target, "--max-new-tokens", "12", "--weight-format", "fp32", "--precision", "f32", "--json", "--quiet"]


def test_json_contract_and_greedy_agreement(capsys, tiny_checkpoints, tiny_models_dir):
    target, draft = map(str, tiny_checkpoints)
    common = ["run", "Hello world", *tiny_options(target)]
    results = []
    with models_dir_at(tiny_models_dir):
        for extra in ([], ["--draft", draft, "--k", "3", "--no-dynamic-k"], ["--prompt-lookup"],
                      ["--draft", draft, "--prompt-lookup"], ["--draft", draft, "--drafter", "hybrid"]):
            assert main(common + extra) == 0
            out = capsys.readouterr().out.strip().splitlines()
            assert len(out) == 1, "--json prints exactly one JSON object"
            results.append(json.loads(out[0]))
    for result in results:
        assert KEYS <= set(result) and result["new_tokens"] == len(result["token_ids"]) > 0
    assert all(result["token_ids"] == results[0]["token_ids"] for result in results)
    assert results[1]["drafted"] > 0 and results[0]["drafted"] == 0
    assert [r["mode"] for r in results] == ["autoregressive"] + ["speculative"] * 4, "plain decoding unless a drafter is given"
    assert [r["drafter"] for r in results] == [None, "draft-model", "prompt-lookup", "hybrid", "hybrid"]
    assert [r["drafted_by"] for r in results] == [None, "draft model", "prompt lookup"] + ["hybrid: draft model or prompt lookup"] * 2
    assert results[0]["target"] == target and results[1]["draft"] == draft


def test_a_speculative_run_keeps_what_it_learned_of_the_pair_for_the_next(capsys, tiny_checkpoints, tiny_models_dir):
    """As the page does (spec.decoding.kept_pairs): a command line run is a process of its own, and
    without the record each would try the draft model afresh where it does not pay."""
    import time

    from spec.decoding.kept_pairs import FILE

    target, draft = map(str, tiny_checkpoints)
    started = time.time()
    with models_dir_at(tiny_models_dir):
        assert main(["run", "Hello world", *tiny_options(target), "--draft", draft, "--drafter", "hybrid"]) == 0
    capsys.readouterr()
    kept = json.loads((tiny_models_dir / FILE).read_text())
    assert any(entry["kept_at"] >= started and entry.get("call_seconds") is not None for entry in kept.values())  # a pair's record


def test_the_prompt_comes_from_the_argument_the_option_or_stdin(capsys, tiny_checkpoints, tiny_models_dir):
    options = tiny_options(str(tiny_checkpoints[0]))
    texts = []
    with models_dir_at(tiny_models_dir):
        for argv, stdin in ((["run", "Hello world"], None), (["run", "--prompt", "Hello world"], None),
                            (["run"], io.StringIO("Hello world")), (["run", "-"], io.StringIO("Hello world"))):
            assert main(argv + options, stdin=stdin or _Terminal()) == 0
            texts.append(json.loads(capsys.readouterr().out)["token_ids"])
        assert main(["run", "Goodbye moon, goodbye", *options], stdin=_Terminal()) == 0
        other = json.loads(capsys.readouterr().out)["token_ids"]
    assert texts[0] == texts[1] == texts[2] == texts[3] and other != texts[0], "every source gives the same prompt"


def test_race_prints_both_lanes_with_the_speedup(capsys, monkeypatch, tiny_checkpoints, tiny_models_dir):
    target, draft = map(str, tiny_checkpoints)
    options = ["race", "Hello world, hello world", "--draft", draft, "--prompt-lookup", *tiny_options(target)]
    with models_dir_at(tiny_models_dir):
        assert main(options) == 0
        numbers = json.loads(capsys.readouterr().out)
        monkeypatch.setenv("COLUMNS", "120")
        assert main([o for o in options if o != "--json"]) == 0
    text = capsys.readouterr().out
    ar, sp = numbers["autoregressive"], numbers["speculative"]
    assert KEYS <= set(ar) and KEYS <= set(sp) and ar["token_ids"] == sp["token_ids"] and ar["new_tokens"] > 0
    assert (ar["mode"], ar["drafter"], sp["mode"], sp["drafter"]) == ("autoregressive", None, "speculative", "hybrid")
    assert sp["drafted"] > 0 and ar["drafted"] == 0 and numbers["draft"] == draft
    assert numbers["verdict"]["identical"] is True and numbers["verdict"]["stopped"] is None
    first = text.splitlines()[0]
    assert first.startswith("Autoregressive") and "│ Speculative (hybrid)" in first, "the two lanes side by side"
    assert "Speed-up:" in text and "Greedy texts: identical, token for token." in text


def test_a_narrow_terminal_shows_the_lanes_one_after_the_other():
    lane = dict(text="def f(x):\n    return x  # " + "long " * 30, new_tokens=70, decode_tokens_per_second=9.5,
                target_calls=70, tokens_per_target_call=1.0, accepted=0, drafted=0, drafter=None)
    numbers = {"autoregressive": lane, "speculative": {**lane, "drafter": "prompt-lookup", "decode_tokens_per_second": 19.0},
               "verdict": dict(speedup=2.0, settled=True, identical=False, first_difference=5, stopped=None),
               "explanation": dict(tokens=70, alpha=None, verify_cost=None, tokens_per_call=1.0, predicted=None)}
    wide, narrow = format_race(numbers, 120).splitlines(), format_race(numbers, 50).splitlines()
    assert "│" in wide[0] and all(len(line) <= 120 for line in wide)
    assert not any("│" in line for line in narrow) and all(len(line) <= 50 for line in narrow)
    titles = [i for i, line in enumerate(narrow) if line.startswith(("Autoregressive", "Speculative (prompt-lookup)"))]
    code = [i for i, line in enumerate(narrow) if line.startswith("    return x")]
    assert len(titles) == 2 and titles[0] < code[0] < titles[1] < code[1], "each lane whole, one after the other"
    assert "Speed-up: 2.00×" in "\n".join(narrow) and "differ from token 5" in " ".join(narrow)


def test_spec_device_is_the_default_device_of_every_command(capsys, monkeypatch, tiny_checkpoints, tiny_models_dir):
    monkeypatch.setenv("SPEC_DEVICE", "NO_SUCH_DEVICE")
    options = tiny_options(str(tiny_checkpoints[0]))
    with models_dir_at(tiny_models_dir):
        for argv in (["run", "hi", *options], ["race", "hi", "--prompt-lookup", *options]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert "NO_SUCH_DEVICE" in err and len(err.strip().splitlines()) == 1, err
        assert main(["run", "hi", *options, "--device", "CPU"]) == 0, "--device wins over SPEC_DEVICE"
    assert build_parser().parse_args(["prepare"]).device is None  # prepare reads SPEC_DEVICE when it runs


def test_json_stays_alone_on_stdout_while_a_model_converts(tmp_path, tiny_checkpoints):
    """A first use converts the model, and NNCF prints tables: they go to the conversion's log, never
    to stdout (the JSON) nor to the terminal (one progress line per phase)."""
    target = str(tiny_checkpoints[0])
    env = {**os.environ, "SPEC_MODELS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "spec", "run", "--target", target, "--mode", "autoregressive", "--prompt", "Hi",
         "--max-new-tokens", "3", "--weight-format", "int8", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["new_tokens"] > 0
    logs = list((tmp_path / "logs").glob("*.log"))
    assert logs and "nncf" in logs[0].read_text().lower(), "nothing was converted: the test checks nothing"
    assert "nncf" not in done.stderr.lower() and "Warning" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("[spec] Exporting target to OpenVINO INT8") for line in lines), lines
    assert all(line.startswith("[spec] ") for line in lines), lines


@pytest.mark.parametrize("mode", ["autoregressive", "speculative"])
def test_runs_offline_on_the_quick_embedded_model(mode):
    """A real model, from the real command line, with the Hub unreachable."""
    with real_models_dir():  # prepared once, in the user's cache, like the app
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "spec", "run", "--target", "embedded:SmolLM2-135M-Instruct",
         "--prompt", "Rewrite politely: give me the report now.", *(["--prompt-lookup"] if mode == "speculative" else []),
         "--max-new-tokens", "12", "--json", "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["target"] == "embedded:SmolLM2-135M-Instruct" and result["text"].strip()
    assert result["new_tokens"] > 0 and (mode == "autoregressive" or result["drafter"] == "prompt-lookup")


def test_with_json_a_failure_is_the_one_json_object_too(capsys):
    """A script reading --json's stdout learns why there is no result, as a reader of stderr does."""
    assert main(["run", "hi", "--json", "--max-new-tokens", "0"], stdin=_Terminal()) == 2
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": "--max-new-tokens must be an integer from 1 to 8192, got 0", "exit_code": 2}
    assert err.strip() == "error: --max-new-tokens must be an integer from 1 to 8192, got 0"
    assert main(["run", "hi", "--json", "--no-such-option"], stdin=_Terminal()) == 2  # before the options are parsed
    assert "no-such-option" in json.loads(capsys.readouterr().out)["error"]


def test_ctrl_c_while_decoding_prints_what_was_made_and_exits_130(capsys, tiny_checkpoints, tiny_models_dir, monkeypatch):
    from spec.decoding import engine

    real_stream = engine.stream

    def interrupted(*args, **kwargs):
        steps = real_stream(*args, **kwargs)
        yield next(steps)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "stream", interrupted)
    with models_dir_at(tiny_models_dir):
        assert main(["run", "Hello world", *tiny_options(str(tiny_checkpoints[0]))]) == 130
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "cancelled" and result["new_tokens"] >= 1


def test_a_models_folder_that_cannot_be_one_is_named_with_what_to_do(capsys, tiny_checkpoints, tmp_path):
    (tmp_path / "a file").write_text("")
    with models_dir_at(tmp_path / "a file"):
        assert main(["run", "Hello world", *tiny_options(str(tiny_checkpoints[0]))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be used" in err[0] and "point SPEC_MODELS_DIR at a folder" in err[0], err


def test_a_prompt_longer_than_the_context_is_refused_before_decoding(capsys, tiny_checkpoints, tiny_models_dir):
    with models_dir_at(tiny_models_dir):
        assert main(["run", "word " * 5000, *tiny_options(str(tiny_checkpoints[0]))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: The prompt is") and "would not fit the model's context" in err[-1], err
