"""`python -m spec run`: the contract the Space and the benchmark also rely on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spec.cli import main
from tests.conftest import models_dir_at, real_models_dir

REPO = Path(__file__).resolve().parents[1]
KEYS = {"text", "token_ids", "new_tokens", "seconds", "tokens_per_second", "ttft_seconds",
        "target_calls", "drafted", "accepted", "acceptance_rate"}


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--prompt", "  "], "the prompt is empty"),
        (["run", "--prompt", "hi", "--max-new-tokens", "0"], "max_new_tokens"),
        (["run", "--prompt", "hi", "--temperature", "-1"], "temperature"),
        (["run", "--prompt", "hi", "--k", "0"], "num_assistant_tokens"),
        (["run", "--prompt", "hi", "--mode", "autoregressive", "--target", "/no/such/model"], "no directory"),
        (["run", "--prompt", "hi", "--mode", "autoregressive", "--target", "not a model id!"], "Hugging Face model id"),
        (["run", "--prompt", "hi", "--mode", "fastest"], "invalid choice"),
        (["run"], "--prompt"),
        (["run", "--prompt", "hi", "--draft", "a/b", "--prompt-lookup"], "not allowed with"),
        (["run", "--prompt", "hi", "--target", "REPLACED"], "needs --draft"),
    ],
)
def test_bad_input_is_one_line_on_stderr(argv, fragment, capsys, tiny_checkpoints, tiny_models_dir):
    argv = [str(tiny_checkpoints[0]) if a == "REPLACED" else a for a in argv]
    with models_dir_at(tiny_models_dir):
        code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err


def test_json_contract_and_greedy_agreement(capsys, tiny_checkpoints, tiny_models_dir):
    target, draft = map(str, tiny_checkpoints)
    common = ["run", "--target", target, "--prompt", "Hello world", "--max-new-tokens", "12",
              "--weight-format", "fp32", "--precision", "f32", "--json", "--quiet"]
    results = []
    with models_dir_at(tiny_models_dir):
        for extra in (["--mode", "autoregressive"], ["--draft", draft, "--k", "3", "--no-dynamic-k"], ["--prompt-lookup"],
                      ["--draft", draft, "--drafter", "draft-model"]):
            assert main(common + extra) == 0
            out = capsys.readouterr().out.strip().splitlines()
            assert len(out) == 1, "--json prints exactly one JSON object"
            results.append(json.loads(out[0]))
    for result in results:
        assert KEYS <= set(result) and result["new_tokens"] == len(result["token_ids"]) > 0
    assert results[0]["token_ids"] == results[1]["token_ids"] == results[2]["token_ids"] == results[3]["token_ids"]
    assert results[1]["drafted"] > 0 and results[0]["drafted"] == 0
    assert [r["drafter"] for r in results] == [None, "hybrid", "prompt-lookup", "draft-model"]
    assert [r["drafted_by"] for r in results] == [None, "hybrid: draft model or prompt lookup", "prompt lookup", "draft model"]
    assert results[0]["target"] == target and results[1]["draft"] == draft


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
        [sys.executable, "-m", "spec", "run", "--target", "embedded:SmolLM2-135M-Instruct", "--prompt-lookup",
         "--prompt", "Rewrite politely: give me the report now.",
         "--mode", mode, "--max-new-tokens", "12", "--json", "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["target"] == "embedded:SmolLM2-135M-Instruct" and result["text"].strip()
    assert result["new_tokens"] > 0 and (mode == "autoregressive" or result["drafter"] == "prompt-lookup")
