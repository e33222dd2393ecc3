"""The benchmark runs end to end on tiny models and reports what it measured, in every output."""
from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, tiny_pairs, tiny_models_dir):
    """One quick benchmark run (1 repeat, 8 and 16 tokens, K 2 and dynamic) on a tiny pair, with openvino-genai.

    optimum-intel is left out only to keep the test fast (its process imports torch).
    """
    from bench import run as bench

    root = tmp_path_factory.mktemp("bench")
    target, draft = (loaded.ref for loaded in tiny_pairs["llama"])  # checkpoints, already converted at fp32; the draft is a noisy copy
    prompts = []
    for kind, text in (("open", "Hello world, hello"), ("grounded", "the cat and the dog and the cat and the")):
        path = root / f"{kind}.json"
        path.write_text(json.dumps({"name": kind, "kind": kind, "prompts": [{"id": f"{kind}-1", "text": text}]}))
        prompts.append(str(path))
    out = root / "results"
    argv = [
        "--quick", "--target", str(target), "--draft", str(draft), "--weight-format", "fp32", "--precision", "f32",
        "--prompts", *prompts, "humaneval:0-1", "--out", str(out), "--name", "smoke", "--cost-repeats", "3",
        "--peers", "openvino-genai",
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPEC_MODELS_DIR", str(tiny_models_dir))  # the tiny conversions' cache, inherited by the workers
        assert bench.main(argv) == 0
    return out, json.loads((out / "smoke.json").read_text()), (out / "smoke.md").read_text()


def test_writes_json_markdown_and_plot(smoke_run):
    out, report, text = smoke_run
    assert (out / "smoke.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["command"].startswith("python -m bench --quick")
    assert report["machine"]["cores"] >= 1 and "openvino" in report["versions"]
    for family in report["families"].values():
        assert family["memory"]["peak_rss"] >= family["info"]["rss_before_load"] > 0


def test_table_has_the_papers_rows_and_the_sweep(smoke_run):
    _, report, text = smoke_run
    for n in (8, 16):
        assert f"| {n} | open | autoregressive | " in text
        assert f"| {n} | grounded | autoregressive | " in text
        assert f"| {n} | open | speculative · draft llama-draft · dynamic K | " in text
        assert f"| {n} | grounded | speculative · prompt lookup · dynamic K | " in text
        assert f"| {n} | grounded | speculative · hybrid (llama-draft + lookup) · dynamic K | " in text
    for row in ("| draft llama-draft | open | 2 |", "| prompt lookup | grounded | 2 |", "| draft llama-draft | open | 4 |"):
        assert row in text  # 4 is the peers' K, which ours runs too
    assert "### Per prompt: grounded" in text and "**Roofline.**" in text
    assert "## Sampled" in text and "## Where the time goes" in text and "## Peak memory" in text
    ours = [s for s, su in zip(report["settings"], report["summaries"]) if s["engine"] == "ours"]
    assert ours and all(su["tokens_per_second"] > 0 for s, su in zip(report["settings"], report["summaries"]) if s["engine"] == "ours")


def test_greedy_speculative_matches_autoregressive_in_the_benchmark(smoke_run):
    """At f32, every greedy speculative run must reproduce our autoregressive tokens exactly."""
    _, report, _ = smoke_run
    greedy_spec = [
        su for s, su in zip(report["settings"], report["summaries"])
        if s["engine"] == "ours" and s["mode"] == "speculative" and not s["sampled"]
    ]
    assert greedy_spec and all(su["same_tokens_as_ar"] == "1/1" for su in greedy_spec)
    drafted = [su for su in greedy_spec if su.get("mean_k")]
    assert drafted and all(0.0 <= su["alpha"] <= 1.0 for su in drafted)


def test_humaneval_runs_beside_the_peers_and_matches_autoregressive(smoke_run):
    """A further prompt set (HumanEval's first problem, --quick keeps one) gets our autoregressive,
    prompt lookup and hybrid and openvino-genai's plain and prompt-lookup runs at every N."""
    _, report, text = smoke_run
    runs = [(s, su) for s, su in zip(report["settings"], report["summaries"]) if s["prompt_set"] == "humaneval"]
    assert {(s["engine"], s["drafter"], s["max_new_tokens"]) for s, _ in runs} >= {
        (engine, drafter, n) for n in (8, 16)
        for engine, drafter in (("ours", None), ("ours", "prompt-lookup"), ("ours", "hybrid"),
                                ("openvino-genai", None), ("openvino-genai", "prompt-lookup"))
    }
    assert all(su["same_tokens_as_ar"] == "1/1" for s, su in runs if s["engine"] == "ours" and s["mode"] == "speculative")
    assert "### Per prompt: humaneval" in text


def test_humaneval_prompts_are_the_stubs_with_an_instruction():
    from bench.humaneval import INSTRUCTION
    from bench.run import read_prompt_sets

    (humaneval,) = read_prompt_sets(["humaneval:3-5"], None)
    assert humaneval.kind == "grounded" and [p for p, _ in humaneval.prompts] == ["HumanEval-3", "HumanEval-4", "HumanEval-5"]
    assert all(text.startswith(INSTRUCTION + "from typing import List") for _, text in humaneval.prompts)
    assert len(read_prompt_sets(["humaneval"], None)[0].prompts) == 100
    with pytest.raises(ValueError, match="from 0 to 163"):
        read_prompt_sets(["humaneval:100-200"], None)


def test_targets_are_all_checked(smoke_run):
    from bench.report.goals import goals_for

    _, report, text = smoke_run
    goals = {t["target"] for t in report["targets"]}
    pair, draft_token = goals_for(report["machine"]["cpu_class"])  # this CPU's class: AVX2's goals are lower
    assert any(g.startswith("dynamic K ≥ 0.95×") for g in goals)
    assert any(g.startswith(f"the default pair (hybrid) ≥ {pair['open']}× autoregressive, median over open") for g in goals)
    assert any(g.startswith(f"the default pair (hybrid) ≥ {pair['grounded']}× autoregressive, median over grounded") for g in goals)
    assert any(g.startswith(f"the default pair (hybrid) ≥ {pair['sampled']}× autoregressive") for g in goals)  # sampled, open prompts
    assert any(g.startswith("target call on K+1=5 tokens") for g in goals)
    assert any(g.startswith("a decoding step ≥ 0.85 × the bandwidth roofline") for g in goals)
    assert any(g.startswith("dynamic K ≥ 0.95 × the best fixed K on every prompt") for g in goals)
    assert any(g.startswith("hybrid ≥ 0.95 × the better of its drafters") for g in goals)
    assert any(g.startswith(f"a llama-draft token, all in, ≤ {draft_token} of a target step") for g in goals)
    assert any(g.startswith("hybrid ≥ 0.95 × the better of its drafters") and g.endswith("(sampled)") for g in goals)
    if "openvino-genai" in report["versions"] and not report["peer_notes"]:
        assert "our autoregressive ≥ openvino-genai plain" in goals
        assert "our speculative ≥ openvino-genai speculative (same pair, K)" in goals
    assert all(t["met"] in (True, False) for t in report["targets"])
    assert "## Targets" in text and ("**met**" in text or "**missed**" in text)


def test_rewrite_derives_the_same_report_from_the_records(smoke_run, tmp_path):
    """`python -m bench.rewrite` rebuilds the plan from a results file and derives the same tables."""
    from bench.records import read_records
    from bench.rewrite import main as rewrite

    out, report, text = smoke_run
    records = read_records(report["records"])  # typed, and written back as the file keeps them
    assert records and [record.to_json() for record in records] == report["records"]
    (tmp_path / "smoke.json").write_text((out / "smoke.json").read_text())
    assert rewrite([str(tmp_path / "smoke.json")]) == 0
    assert (tmp_path / "smoke.md").read_text() == text
    assert rewrite([str(tmp_path / "missing.json")]) == 1


def test_a_run_is_held_to_the_goals_of_its_cpu_class(smoke_run, tmp_path):
    """Issue 38 sets lower goals where AVX2 kernels make a verify call dear; the report names the class."""
    from bench.rewrite import main as rewrite

    out, report, _ = smoke_run
    assert report["machine"]["cpu_class"] in ("AMX", "AVX-512", "AVX2 + VNNI", "AVX2", "other")
    for cpu_class, open_goal, grounded_goal, draft_token in (("AVX2", 1.25, 1.7, 0.35), ("AMX", 1.35, 1.9, 0.3)):
        moved = json.loads((out / "smoke.json").read_text())
        moved["machine"]["cpu_class"] = cpu_class
        (tmp_path / "smoke.json").write_text(json.dumps(moved))
        assert rewrite([str(tmp_path / "smoke.json")]) == 0
        goals = {t["target"] for t in json.loads((tmp_path / "smoke.json").read_text())["targets"]}
        assert any(g.startswith(f"the default pair (hybrid) ≥ {open_goal}× autoregressive, median over open") for g in goals), goals
        assert any(g.startswith(f"the default pair (hybrid) ≥ {grounded_goal}× autoregressive, median over grounded") for g in goals)
        assert any(g.startswith(f"a llama-draft token, all in, ≤ {draft_token} of a target step") for g in goals)
        assert f", {cpu_class} class, " in (tmp_path / "smoke.md").read_text()


def test_decode_speedups_leave_out_the_prefill():
    """Whole-run speed-up counts the prefill (time to first token); decode speed-up is what follows it."""
    from bench.plan import AR, LOOKUP, OURS, SPEC, BenchPlan, PromptSet, Setting
    from bench.records import Record
    from bench.report import summarize

    common = dict(family="f", engine=OURS, k=None, dynamic=False, sampled=False, max_new_tokens=11, prompt_set="s", draft=None)
    ar = Setting(mode=AR, drafter=None, **common)
    lookup = Setting(mode=SPEC, drafter=LOOKUP, **{**common, "k": 4, "dynamic": True})
    plan = BenchPlan("t", "t", [], [PromptSet("s", "grounded", "", (("a", ""), ("b", "")))], [], [ar, lookup], None)
    record = lambda setting, prompt, seconds, ttft: Record(setting=setting, repeat=0, prompt=prompt, new_tokens=11,  # noqa: E731
                                                           seconds=seconds, ttft_seconds=ttft, prompt_tokens=5)
    # a: 10 decode tokens in 10 s plain, in 5 s speculative; b: in 10 s and 2.5 s. Prefill 1 s each time.
    records = [record(0, "a", 11.0, 1.0), record(1, "a", 6.0, 1.0), record(0, "b", 11.0, 1.0), record(1, "b", 3.5, 1.0)]
    summary = summarize(plan, records, None)[1]
    assert summary["speedup"] == pytest.approx(22 / 9.5)
    assert summary["decode_speedup"] == pytest.approx(20 / 7.5)
    assert summary["prompt_median_speedup"] == pytest.approx((11 / 6 + 11 / 3.5) / 2)
    assert summary["prompt_median_decode_speedup"] == pytest.approx((2 + 4) / 2)


def test_ceiling_finds_the_cheapest_schedule_of_widths():
    """The ceiling's dynamic program agrees with trying every sequence of call widths."""
    import random

    from bench.studies.ceiling import WIDTHS, best_decode_speedup
    from spec.decoding.policy import prior_width_cost

    def exhaustive(runs, i=1, last=None):
        if i >= len(runs):
            return 0.0
        return min(prior_width_cost(w) + (0.15 if w != last else 0.0) + exhaustive(runs, i + min(runs[i], w - 1) + 1, w)
                   for w in WIDTHS)

    rng = random.Random(0)
    for _ in range(20):
        runs = [0] + [rng.choice([0, 0, 1, 2, 5, 9]) for _ in range(rng.randint(1, 5))]
        assert best_decode_speedup(runs, prior_width_cost) == pytest.approx((len(runs) - 1 + 0.15) / exhaustive(runs))
    assert best_decode_speedup([0] * 6, prior_width_cost) == pytest.approx(1.0)  # nothing to copy: plain decoding
    whole_copy = [0, 32] + [0] * 32  # one call of width 33 makes the 33 tokens after the first
    assert best_decode_speedup(whole_copy, prior_width_cost) == pytest.approx(33.15 / (prior_width_cost(33) + 0.15))


def test_ceiling_rules_copy_from_where_each_may_look():
    """ours: where our lookup's match points; suffix: the best occurrence after the context's last
    token; anywhere: the best span anywhere, the other answers included."""
    from bench.studies.ceiling import ANYWHERE, OURS, RULES, SUFFIX, copy_runs

    prompt = [10, 11, 12, 13, 14]
    answer = [20, 11, 12, 13, 21, 12, 13, 14]
    others = [[21, 12, 13, 14]]
    runs = {rule: copy_runs(prompt, answer, (), rule) for rule in RULES}
    # after 20 (new): only a copy from anywhere finds 11 12 13
    assert (runs[OURS][1], runs[SUFFIX][1], runs[ANYWHERE][1]) == (0, 0, 3)
    # after 11: all three copy 12 13 from the prompt
    assert (runs[OURS][2], runs[SUFFIX][2], runs[ANYWHERE][2]) == (2, 2, 2)
    # after 21 (an edit): the prompt's 12 13 14 again, found by no suffix
    assert (runs[OURS][5], runs[SUFFIX][5], runs[ANYWHERE][5]) == (0, 0, 3)
    with_others = {rule: copy_runs(prompt, answer, others, rule) for rule in RULES}
    assert with_others[SUFFIX][5] == 3  # another answer has 21 12 13 14
    assert with_others[OURS][5] == 0  # ours searches other answers for 3-token matches only
    for table in (runs, with_others):
        assert all(o <= s <= a for o, s, a in zip(table[OURS], table[SUFFIX], table[ANYWHERE]))
    with pytest.raises(ValueError, match="rule"):
        copy_runs(prompt, answer, (), "oracle")


def test_ceiling_reads_a_benchmark_run(smoke_run, tmp_path, capsys):
    """`python -m bench.studies.ceiling RESULTS.json` sets each prompt's ceilings beside the measured decode speed-up."""
    from bench.studies.ceiling import main as ceiling

    out, report, _ = smoke_run
    assert ceiling([str(out / "smoke.json"), "--json", str(tmp_path / "ceilings.json")]) == 0
    table = capsys.readouterr().out
    assert "| humaneval | 16 | 1 | decode |" in table and "| humaneval | 16 | 1 | whole run |" in table
    rows = json.loads((tmp_path / "ceilings.json").read_text())
    assert {(row["prompt_set"], row["max_new_tokens"]) for row in rows} >= {("humaneval", 8), ("humaneval", 16)}
    for row in rows:
        for prompt in row["prompts"]:
            assert 0 < prompt["ours"] <= prompt["suffix"] <= prompt["anywhere"]
            assert prompt["ours_whole_run"] <= prompt["ours"]  # the prefill gains nothing
            assert prompt["measured"] is not None or row["prompt_set"] != "humaneval"  # lookup ran beside it there
    (tmp_path / "not-results.json").write_text("{}")
    assert ceiling([str(tmp_path / "not-results.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_run_gives_its_own_cost_curve_and_answers(smoke_run):
    """bench.studies.calls can replay on the curve a run timed (an AVX2 CPU's is not the prior's) and on its answers."""
    from bench.studies.calls import answers_from_results
    from bench.studies.curve import measured_curve

    _, report, _ = smoke_run
    points, switch = measured_curve(report)
    costs = report["costs"]
    assert points[1] == 1.0 and points[5] == pytest.approx(costs["target_5"] / costs["target_1"])
    assert set(points) >= {1, 2, 3, 5, 9} and switch >= 0.0
    answers = answers_from_results(report)
    ar = next(s for s in report["settings"] if s["mode"] == "autoregressive" and s["prompt_set"] == "grounded" and s["max_new_tokens"] == 16)
    first = next(r for r in report["records"] if r["setting"] == ar["index"] and r["repeat"] == 0)
    assert answers["grounded/grounded-1/16"] == first["tokens"]
    with pytest.raises(ValueError, match="1-token"):
        measured_curve({"name": "x", "costs": {}})
    with pytest.raises(ValueError, match="autoregressive"):
        answers_from_results({"name": "x", "settings": [], "records": []})


def test_a_replayed_target_answers_what_the_loop_asks_of_a_target(tiny_pairs):
    """`bench.studies.calls --replay` runs the engine's loop against a stand-in that answers with a
    recorded answer: it must answer whatever the loop asks of a target's cache (it once lacked
    what the loop asks of the other lane's calls, and every replay failed)."""
    import numpy as np

    from bench.studies.calls import _ReplayTarget
    from spec import GenerationConfig
    from spec.decoding.drafters import PromptLookupDrafter
    from spec.decoding.generation import Generation
    from spec.decoding.policy import LookupK
    from spec.decoding.sampling import Sampler
    from spec.decoding.speculative import speculative

    tokenizer = tiny_pairs["llama"][0].tokenizer
    eos = tokenizer.eos_token_id
    prompt, answer = [5, 6, 7, 8, 5, 6], [7, 8, 5, 6, 7, 8, 9]
    target = _ReplayTarget(prompt + answer + [eos], len(tokenizer))
    generation = Generation(tokenizer, prompt, GenerationConfig(max_new_tokens=len(answer)), {eos})
    sampler = Sampler(0.0, 0, 1.0, len(tokenizer), np.random.default_rng(0))
    steps = list(speculative(target, PromptLookupDrafter(3), LookupK(4), sampler, generation))
    assert [t for step in steps for t in step.token_ids] == answer and max(target.widths[1:]) > 1  # copied in verify calls


def test_a_first_start_that_cannot_prepare_its_pair_is_reported_at_once(tmp_path):
    from bench.tools.first_start import FAILED
    from bench.tools.served_app import SetupError, wait_for_line

    class Running:
        returncode = None

        def poll(self):
            return None

    log = tmp_path / "app.log"
    log.write_text("app INFO Ready: quick pair\napp WARNING Could not load the default pair: No space left on device\n")
    with pytest.raises(SetupError, match="No space left"):
        wait_for_line(log, "Ready: the default pair", Running(), timeout=5, fail=FAILED, every=0.01)
    log.write_text("app INFO Ready: the default pair (offline)\n")
    wait_for_line(log, "Ready: the default pair", Running(), timeout=5, fail=FAILED, every=0.01)


def test_calls_prices_a_draft_models_calls_at_the_cost_given():
    """bench.studies.calls --draft-call: a CPU whose draft token costs half a step (the AVX2 EPYC's)
    makes less of the same rounds than one whose costs 0.15 of a step."""
    from bench.studies.calls import _record

    rounds = dict(prompt_id="p", drafter="draft-model", tokens=[7] * 10, want=[7] * 10, widths=[2] * 5, draft_calls=5,
                  curve=lambda width: 1.0, switch=0.0)
    assert _record(**rounds)["predicted_decode_speedup"] == pytest.approx(9 / (5 + 0.15 * 5))
    assert _record(**rounds, draft_call=0.5)["predicted_decode_speedup"] == pytest.approx(9 / (5 + 0.5 * 5))


def test_after_switch_times_each_call_after_a_change_of_width(tiny_pairs):
    """bench.studies.after_switch: each width's first calls after another width's, and each over the steady ones."""
    from bench.studies.after_switch import _CALLS, calls_after_switch, of_steady

    seconds = calls_after_switch(tiny_pairs["llama"][0].model, (1, 2, 4))
    assert sorted(seconds) == [1, 2, 4] and all(len(calls) == _CALLS and min(calls) > 0 for calls in seconds.values())
    assert of_steady([0.3, 0.12, 0.1, 0.1, 0.1]) == [3.0, 1.2, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("options, message", [
    (["--temperature", "-1"], "--temperature must be a number from 0 to 10"),
    (["--top-p", "2"], "--top-p must be in (0, 1]"),
    (["--peer-k", "100"], "--peer-k must be an integer from 1 to 64"),
    (["--max-new-tokens", "9000"], "--max-new-tokens must be an integer from 1 to 8192"),
    (["--draft-vocabulary", "-5"], "--draft-vocabulary takes 0"),
    (["--cost-repeats", "-1"], "--cost-repeats ≥ 1"),
    (["--name", "a/b"], "--name is a file name"),
    (["--out", "OUT/a file"], "cannot be written"),
    (["--drafters", "toy"], "--drafters takes drafters registered beside the shipped three"),
    (["--drafters", "hybrid"], "which always run), got 'hybrid'"),
])
def test_a_value_the_run_would_fail_on_is_refused_before_a_model_loads(options, message, tmp_path, monkeypatch, capsys):
    """An hour's run must not end in a traceback over an option it could have read at the start."""
    from bench import run as bench

    (tmp_path / "a file").write_text("")
    monkeypatch.setattr(bench, "make_plan", lambda *_, **__: pytest.fail("a model was loaded"))
    argv = ["--quick", "--out", str(tmp_path), *[option.replace("OUT", str(tmp_path)) for option in options]]
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_ctrl_c_ends_the_workers_at_once_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """The workers ignore Ctrl-C (no traceback from each); the parent ends them and says so once."""
    import signal

    from bench import run as bench
    from bench.workers import Family, Worker

    worker = Worker(Family("costs", "costs", "nowhere"))  # importing OpenVINO takes it a while before it fails

    def interrupted(*_, **__):
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(bench, "make_plan", interrupted)
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 130
    worker._process.join(timeout=10)
    assert worker._process.exitcode == -signal.SIGKILL, "the worker should have been ended, not left to finish"
    assert "interrupted after" in capsys.readouterr().err and not list(tmp_path.iterdir())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_verdict_by_less_than_a_percent_says_by_how_much():
    from bench.report.tables import _verdict

    assert _verdict({"met": False, "margin": -0.002}) == "**missed** by 0.2%"
    assert _verdict({"met": True, "margin": 0.0}) == "**met**"
    assert _verdict({"met": True, "margin": 0.25}) == "**met** (+25%)"


def test_a_smoke_run_writes_outside_the_committed_results(monkeypatch, capsys):
    """bench/results holds the runs docs/benchmarks.md cites; --quick goes to the git-ignored test-artifacts."""
    from bench import run as bench

    chosen = []

    def plan(args, *_):
        chosen.append(args.out)
        raise ValueError("stop here")

    monkeypatch.setattr(bench, "make_plan", plan)
    assert bench.main(["--quick"]) == 2 and bench.main([]) == 2
    assert chosen == [bench.QUICK_OUT, bench.DEFAULT_OUT] and chosen[0].parent.name == "test-artifacts"


def test_rewriting_a_file_the_benchmark_did_not_write_says_so(tmp_path, capsys):
    from bench.rewrite import main as rewrite

    (tmp_path / "prompts.json").write_text('{"name": "open", "kind": "open", "prompts": []}')
    assert rewrite([str(tmp_path / "prompts.json")]) == 1
    assert "not a results file of python -m bench (it has no 'settings' field)" in capsys.readouterr().err


def test_a_drafter_of_your_own_is_swept_as_the_shipped_one_it_is_like(monkeypatch):
    """`--drafters NAME`: a plug-in without a model is swept as prompt lookup, in a worker of its own;
    one with a draft model as the draft model, beside each draft; both checked at f32."""
    from types import SimpleNamespace

    from bench.plan import DRAFT_MODEL, LOOKUP, OURS, Draft, PromptSet, build_plan
    from spec.decoding.plugins import PLUGINS

    monkeypatch.setitem(PLUGINS, "toy", SimpleNamespace(name="toy", needs_draft_model=False))
    monkeypatch.setitem(PLUGINS, "toy-model", SimpleNamespace(name="toy-model", needs_draft_model=True))
    sets = [PromptSet("o", "open", "open", (("o1", "x"),)), PromptSet("g", "grounded", "grounded", (("g1", "y"),))]
    draft = Draft("d", "/d", "a draft", True, None)

    def plan(drafts, plugins):
        return build_plan("t", "/t", drafts, sets, [8, 16], [2], True, False, [], 2, "default", True, plugins)

    def like(plan, drafter):
        return [(s.family, s.draft, s.k, s.dynamic, s.max_new_tokens, s.prompt_set, s.exactness)
                for s in plan.settings if s.engine == OURS and s.drafter == drafter]

    ran = plan([draft], ["toy", "toy-model"])
    assert [s[1:] for s in like(ran, "toy")] == [s[1:] for s in like(ran, LOOKUP)]
    assert {s[0] for s in like(ran, "toy") if not s[-1]} == {"ours · toy"}
    assert [s[1:] for s in like(ran, "toy-model")] == [s[1:] for s in like(ran, DRAFT_MODEL)]
    assert next(s for s in ran.settings if s.drafter == "toy-model").method == "speculative · toy-model (d) · K=2"
    assert not any(s.drafter == "toy" for s in plan([draft], []).settings)  # only when named
    with pytest.raises(ValueError, match="drafts with a draft model, and this run has none"):
        plan([], ["toy-model"])
