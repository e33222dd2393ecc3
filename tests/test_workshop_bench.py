"""The load scripts (bench.tools.workshop, bench.tools.served) run end to end against app.py serving a tiny pair,
and report every visitor's ending and positive speed ratios."""
from __future__ import annotations

import json

import pytest

from tests.conftest import load_tiny
from tests.tiny_models import build_checkpoint

# Short prompts: the tiny models have a context of 512 tokens.
TINY_EXAMPLES = [["Tiny one", "The quick brown fox"], ["Tiny two", "Tell me a story"]]


@pytest.fixture(scope="module")
def tiny_app_env(tmp_path_factory, tiny_models_dir):
    """The environment under which app.py serves a tiny pair (converted once, here), and an examples file."""
    root = tmp_path_factory.mktemp("workshop")
    target = build_checkpoint(root / "target", arch="llama", seed=0)
    draft = build_checkpoint(root / "draft", arch="llama", seed=1)
    for path in (target, draft):
        load_tiny(path, tiny_models_dir)  # the app's subprocess finds the conversions in the session's cache
    examples = root / "examples.json"
    examples.write_text(json.dumps(TINY_EXAMPLES))
    env = {
        "SPEC_APP_TARGET": str(target), "SPEC_APP_DRAFT": str(draft), "SPEC_APP_WEIGHT_FORMAT": "fp32",
        "SPEC_APP_PRECISION": "f32", "SPEC_MODELS_DIR": str(tiny_models_dir), "SPEC_CONCURRENCY": "1",
        "TMPDIR": str(root),  # the served app's log: with the test's files, not left in /tmp
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield root, examples


def test_workshop_every_visitor_ends_in_a_verdict_or_busy(tiny_app_env, capsys):
    from bench.tools import workshop

    root, examples = tiny_app_env
    out = root / "workshop.json"
    code = workshop.main(["--visitors", "6", "--seconds", "3", "--examples-from", str(examples), "--max-new-tokens", "24",
                          "--no-preheat", "--app-env", "SPEC_APP_PRELOAD=0", "--timeout", "120", "--json-out", str(out)])
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert code == 0, printed
    assert result["lost"] == 0 and "Targets:" in printed and json.loads(printed.strip().splitlines()[-1])["visitors"] == 6
    visitors = result["per_visitor"]
    assert all(v["outcome"] in ("live", "joined", "replay", "busy") for v in visitors), visitors
    finished = [v for v in visitors if v["outcome"] != "busy"]
    assert finished and all(v["verdict"] > 0 and v["first_answer"] is not None and v["first_answer"] <= v["verdict"] for v in finished), visitors
    # An example asked for again is never raced twice: joined while it runs, replayed after.
    by_example: dict[str, list[dict]] = {}
    for v in sorted(visitors, key=lambda v: v["arrival"]):
        if v["kind"] == "example" and v["outcome"] != "busy":
            by_example.setdefault(v["label"], []).append(v)
    repeats = [v for group in by_example.values() for v in group[1:]]
    assert repeats and all(v["outcome"] in ("joined", "replay") for v in repeats), by_example
    customs = [v for v in visitors if v["kind"] == "custom"]
    assert len({v["prompt"] for v in customs}) == len(customs)


def test_workshop_says_one_sentence_for_an_unreachable_url(capsys):
    from bench.tools import workshop
    from bench.tools.served_app import free_port

    assert workshop.main(["--url", f"http://127.0.0.1:{free_port()}/", "--visitors", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no Gradio app answers at") and "Traceback" not in err


def test_served_reports_positive_ratios_per_lane(tiny_app_env, capsys):
    from bench.tools import served

    root, examples = tiny_app_env
    out = root / "served.json"
    code = served.main(["--examples", "1", "--repeats", "1", "--examples-from", str(examples), "--max-new-tokens", "24",
                        "--app-env", "SPEC_APP_PRELOAD=0", "--timeout", "120", "--json-out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    result = json.loads(out.read_text())
    ratios = result["per_example"]["Tiny one"]["race"]
    assert set(ratios) == {"autoregressive", "speculative"} and all(r > 0 for r in ratios.values()), ratios
    assert all(t["measured"] > 0 and "race: served / alone >= 0.95" in t["target"] for t in result["targets"])
    # Each median with how far it could move by chance, and whether the run settles its target.
    assert all(t["interval"][0] <= t["interval"][1] and t["settled"] in (True, False) for t in result["targets"])
    assert "90% interval" in printed
    assert "| Tiny one | autoregressive |" in printed and json.loads(printed.strip().splitlines()[-1])["medians"]["race"]
    # Every figure names its CPU, and says where the cores went while the app served the race.
    assert result["settings"]["cpu"] in printed and "cores" in result["settings"]["cpu"]
    assert result["cpu_seconds_per_race"]["race"]["computing"] > 0 and "CPU seconds per served race (race" in printed
    # And where each lane's compute went, alone and served: its calls, and their seconds.
    for channel in ("alone", "race"):
        run = result["calls"]["Tiny one"][channel]["autoregressive"][0]
        assert run["target_calls"] == run["plain_steps"] + 1 and run["target_seconds"] > 0 and run["draft_tokens"] == 0
    assert "| speculative | race |" in printed


def test_served_says_one_sentence_for_a_bad_option(capsys):
    from bench.tools import served

    with pytest.raises(SystemExit) as exit:
        served.main(["--repeats", "0"])
    assert exit.value.code == 2 and capsys.readouterr().err.startswith("error: --examples, --repeats")
