"""The Space, served in-process on tiny models and driven like its visitors drive it.

gradio_client checks the streams, the numbers, the errors, Stop, the line, joins and replays;
Playwright with Debian's Chromium checks the real page (and that closing the tab stops the race).
"""
from __future__ import annotations

import contextlib
import html
import importlib
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import spec.serving.race
from spec.config import ModelKey
from tests.tiny_models import build_checkpoint

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
LONG_PROMPT = "Tell me a story"  # greedy on the tiny target, it runs to LONG_TOKENS tokens without an EOS
LONG_TOKENS = 400  # with the prompt, within the tiny models' context of 512
ENV = {
    "SPEC_APP_WEIGHT_FORMAT": "fp32",
    "SPEC_APP_PRECISION": "f32",  # exact arithmetic: greedy speculative must equal greedy autoregressive
    "SPEC_APP_UPDATE_SECONDS": "0",  # a page update per step, so even tiny models stream visibly
    "SPEC_APP_PRELOAD": "0",
    "SPEC_CONCURRENCY": "1",
    "SPEC_MAX_QUEUE": "8",
}


def _noisy_draft(path: Path, noise: float = 0.15, seed: int = 1) -> Path:
    """A draft that agrees with the seed-0 target often but not always: its weights plus noise."""
    import torch
    from transformers import AutoModelForCausalLM

    build_checkpoint(path, arch="llama", seed=0)  # the target's tokenizer and weights...
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():  # ...then nudged
            param.add_(torch.randn(param.shape, generator=generator) * noise)
    model.save_pretrained(path)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def served(tmp_path_factory, tiny_models_dir):
    """The app on a tiny llama pair, listening on a free localhost port for the whole session."""
    root = tmp_path_factory.mktemp("app-checkpoints")
    target = build_checkpoint(root / "target", arch="llama", seed=0)
    draft = _noisy_draft(root / "draft")
    env = {**ENV, "SPEC_APP_TARGET": str(target), "SPEC_APP_DRAFT": str(draft), "SPEC_MODELS_DIR": str(tiny_models_dir)}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        sys.modules.pop("app", None)
        app = importlib.import_module("app")
        pair = app.DEFAULT_PRESET
        for key in pair.keys(pair.target, pair.draft):  # converted into the session's cache, once, here
            app.registry.get(key)
    finally:  # the app has read its settings; other tests see the environment they had
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # Turns as long in steps as the real pair's (half a second is 4-5 steps of Qwen, 100 or more of
    # these tiny models): else a fast machine's speculative lane can finish a whole race in its
    # first turn, before the page shows anything to stop or close on.
    turn, spec.serving.race.TURN_SECONDS = spec.serving.race.TURN_SECONDS, 0.01
    port = _free_port()
    app.demo.launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **app.LAUNCH_OPTIONS
    )
    yield SimpleNamespace(app=app, url=f"http://127.0.0.1:{port}/", pair=pair)
    app.demo.close()
    spec.serving.race.TURN_SECONDS = turn


def client(served):
    from gradio_client import Client

    return Client(served.url, verbose=False)


def race_args(served, prompt, drafter="draft-model", max_new_tokens=48, temperature=0.0, **overrides):
    # Fixed K: the tiny draft costs about as much as the tiny target, so dynamic K may rightly stop
    # drafting (more so on a loaded machine), and these tests need drafts to colour and count.
    args = dict(
        prompt=prompt, preset_label=served.pair.label, custom_target="", custom_draft="", drafter=drafter,
        k=4, dynamic_k=False, temperature=temperature, top_p=1.0, seed=0, max_new_tokens=max_new_tokens, exact=False,
    )
    args.update(overrides)
    return args


def text_of(pane_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", pane_html))


def feeds(updates) -> list[dict]:
    """The browser's part of each update (new tokens and chart points), where it had one."""
    import json

    return [json.loads(update[2]) for update in updates if isinstance(update[2], str) and update[2].startswith("{")]


def texts(result) -> tuple[str, str]:
    """(autoregressive, speculative) text of a finished race, from the numbers /race returns last."""
    return result[6]["autoregressive"]["text"], result[6]["speculative"]["text"]


def numbers(stats_html: str) -> dict[str, str]:
    """label -> shown value, from the stats cells."""
    return {label: value for value, label in re.findall(r"<b>(.*?)</b><span>(.*?)</span>", stats_html)}


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_the_queue_does_not_poll_every_millisecond(served):
    from spec.serving.warmup import PROGRESS_POLL_SECONDS, QUEUE_POLL_SECONDS

    queue = served.app.demo._queue  # a Gradio upgrade that renames these fails here, not silently
    assert (queue.sleep_when_free, queue.progress_update_sleep_when_free) == (QUEUE_POLL_SECONDS, PROGRESS_POLL_SECONDS)


def test_the_apis_unchanged_fields_are_none_not_rebuilt_components(served):
    job = client(served).submit(**race_args(served, "The quick brown fox", max_new_tokens=24), api_name="/race_live")
    job.result(timeout=60)
    updates = job.outputs()
    assert any(update[3] is None for update in updates), "mid-race updates should leave the stats as they are"
    rebuilt = [field for update in updates for field in update if isinstance(field, dict) and "__type__" in field]
    assert not rebuilt, f"a field left as it is should come as None (outputs.api), not as {rebuilt[0]}"


def test_both_panes_stream_and_greedy_texts_match(served):
    job = client(served).submit(**race_args(served, "The quick brown fox", max_new_tokens=64), api_name="/race")
    status, speedup, feed, ar_stats, spec_stats, summary, result = job.result(timeout=60)
    updates = feeds(job.outputs())
    assert sum(1 for u in updates if u["lanes"]["ar"]["pieces"]) >= 5 and sum(1 for u in updates if u["lanes"]["sp"]["pieces"]) >= 3, \
        "the panes should fill step by step, not all at once"
    streamed = "".join(text for u in updates if not u["full"] for text, _ in u["lanes"]["ar"]["pieces"])
    ar_text, spec_text = texts((status, speedup, feed, ar_stats, spec_stats, summary, result))
    assert ar_text and ar_text == spec_text and streamed == ar_text, "each update carries only the new tokens"
    assert updates[-1]["full"] and "".join(t for t, _ in updates[-1]["lanes"]["sp"]["pieces"]) == spec_text
    assert "identical" in summary and ("faster" in speedup or "slower" in speedup)
    assert "tokens per target call" in speedup and "verify call costs" in speedup and "predicts" in speedup
    assert result["how"] == "live" and result["verdict"]["identical"] and result["phase"] == "done"
    assert result["speculative"]["new_tokens"] == 64 and result["speculative"]["decode_tokens_per_second"] > 0

    ar, spec = numbers(ar_stats), numbers(spec_stats)
    assert ar["new tokens"] == spec["new tokens"] == "64"
    assert float(ar["decode tokens/s"]) > 0 and float(spec["decode tokens/s"]) > 0
    assert re.fullmatch(r"\d+ ms|\d+\.\d\d s", ar["time to first token"]) and ar["compute time"].endswith("s")
    assert spec["drafts kept"].endswith("%") and float(spec["tokens per target call"]) > 1.0
    assert int(spec["target calls"]) < int(ar["target calls"]), "speculative must verify several tokens per call"
    assert "kept</span>" in spec_stats, "the histogram of kept draft tokens is missing"


def test_the_same_race_again_is_a_replay_labelled_on_the_page_and_in_the_api(served):
    c = client(served)
    args = race_args(served, "The quick brown fox", max_new_tokens=64)
    first = c.predict(**args, api_name="/race")
    job = c.submit(**args, api_name="/race")
    again = job.result(timeout=60)
    assert again[6]["how"] == "replay" and again[6]["replay_of"].startswith("replay of a race run on this server at")
    assert "Replay of a race run on this server" in again[0] and texts(again) == texts(first)
    live = c.predict(**args, api_name="/race_live")
    assert live[6]["how"] == "live" and texts(live) == texts(first), "race it live computes it again"


def test_tokens_are_coloured_by_provenance(served):
    job = client(served).submit(**race_args(served, "The quick brown fox", max_new_tokens=60), api_name="/race")
    job.result(timeout=60)
    kinds = [kind for _, kind in feeds(job.outputs())[-1]["lanes"]["sp"]["pieces"]]
    assert set(kinds) <= {"target", "accepted", "correction", "bonus"}
    assert "accepted" in kinds and {"correction", "bonus"} & set(kinds), kinds


def test_prompt_lookup_and_sampling_run(served):
    c = client(served)
    summary = c.predict(**race_args(served, "one two three one two three one two", drafter="prompt-lookup"), api_name="/race")[5]
    assert "identical" in summary
    result = c.predict(**race_args(served, "one two three", temperature=0.8, top_p=0.9), api_name="/race")
    assert "Sampling at temperature 0.8" in result[5] and result[6]["verdict"]["identical"] is None
    again = c.predict(**race_args(served, "one two three", temperature=0.8, top_p=0.9), api_name="/race")
    assert again[6]["how"] == "replay", "a sampled race with the same seed is the same race"
    fresh = c.predict(**race_args(served, "one two three", temperature=0.8, top_p=0.9, seed=""), api_name="/race")
    assert fresh[6]["how"] == "live", "without a seed a sampled race is never replayed"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(prompt="   "), "prompt is empty"),
        (dict(max_new_tokens=0), "Max new tokens must be from 1 to"),
        (dict(k=99), "K must be from 1 to 16"),
        (dict(temperature="hot"), "Temperature must be a number"),
        (dict(temperature=1e-320), "temperature must be 0 (greedy) or from 0.01"),
        (dict(prompt=12345), "The prompt must be text, got int"),
        (dict(dynamic_k="false"), "Dynamic K must be true or false, got 'false'"),
        (dict(exact="false"), "Exact must be true or false, got 'false'"),
        (dict(seed=-1), "The seed must be from 0 to 9223372036854775807"),
        (dict(drafter="Hybrid"), "Prompt lookup ('prompt-lookup')"),
        (dict(drafter="no-such-drafter"), "not 'no-such-drafter'"),
        (dict(preset_label="No such pair"), "Unknown model pair"),
        (dict(drafter="draft-model", preset_label="SmolLM2-135M-Instruct (quick, offline)"), "no draft model"),
        (dict(preset_label="Custom pair", custom_target="/nonexistent/model", drafter="prompt-lookup"), "no directory"),
        (dict(preset_label="Custom pair", custom_target="", drafter="prompt-lookup"), "type a target model"),
    ],
)
def test_bad_input_comes_back_as_a_sentence(served, overrides, message, capfd):
    from gradio_client.exceptions import AppError

    job = client(served).submit(**{**race_args(served, "Hello"), **overrides}, api_name="/race")
    with pytest.raises(AppError) as error:
        job.result(timeout=30)
    text = str(error.value)
    assert message in text and "Traceback" not in text and 'File "' not in text, text
    # The sentence stays on the page next to Race; the previous race is left as it was.
    assert html.escape(text) in job.outputs()[-1][0] and "status-error" in job.outputs()[-1][0]
    assert "Traceback" not in capfd.readouterr().err, "bad input printed a traceback in the server log"


def test_a_client_gives_only_the_inputs_it_changes(served):
    """Every /race input has a default (the custom pair's boxes too), so a script names only what it sets."""
    result = client(served).predict(prompt="The quick brown fox", max_new_tokens=8, api_name="/race")
    assert result[6]["phase"] == "done" and result[6]["speculative"]["new_tokens"] == 8


def test_requests_gradio_would_log_with_a_traceback_get_a_sentence(served, capfd):
    """Raw HTTP that Gradio itself answers with a traceback in the server log (bad_requests.py): an
    unknown endpoint or event, too few inputs, an example the page lacks, a stream of a session gone."""
    import json

    import httpx

    api = served.url + "gradio_api"
    post = lambda path, body: httpx.post(api + path, json=body, timeout=30)  # noqa: E731
    answer = post("/call/no_such_api", {"data": []})
    assert answer.status_code == 404 and "no API endpoint named 'no_such_api'" in answer.json()["error"]
    for path in ("/run/predict", "/queue/join"):
        answer = post(path, {"data": [], "fn_index": 9999, "session_hash": "gone"})
        assert answer.status_code == 404 and "no event number 9999" in answer.json()["error"], path
    examples = next(i for i, fn in served.app.demo.fns.items() if fn.name == "load_example")
    answer = post("/run/predict", {"data": [99], "fn_index": examples, "session_hash": "gone"})
    assert "was: 99" in answer.json()["error"]
    event = post("/call/race", {"data": []}).json()["event_id"]
    streamed = httpx.get(f"{api}/call/race/{event}", timeout=30).text
    assert "This event takes 12 inputs (Prompt," in json.loads(streamed.split("data:", 1)[1])["error"]
    assert "session_not_found" in httpx.get(api + "/queue/data", params={"session_hash": "gone"}, timeout=30).text
    answer = post("/call/v2/race", {"promptx": "Hello"})
    assert answer.status_code == 404 and "`promptx` is not a valid" in answer.json()["error"]
    time.sleep(0.5)  # the server's threads write their log lines after answering
    log = capfd.readouterr().err
    assert "Traceback" not in log and "ERROR" not in log, log


def test_stop_stops_both_panes(served):
    c = client(served)
    job = c.submit(**race_args(served, LONG_PROMPT, max_new_tokens=LONG_TOKENS), api_name="/race")
    wait_for(lambda: len(job.outputs()) >= 5, 30, "the race to start streaming")
    c.predict(api_name="/stop")
    status, speedup, feed, ar_stats, spec_stats, summary, result = job.result(timeout=10)
    assert "Stopped" in summary and "Stopped" in status and result["verdict"]["stopped"] == "cancelled"
    assert int(numbers(ar_stats)["new tokens"]) < LONG_TOKENS and int(numbers(spec_stats)["new tokens"]) < LONG_TOKENS
    assert feeds(job.outputs())[-1]["lanes"]["ar"]["done"], "the panes end (no caret)"
    wait_for(lambda: served.app.sessions.running() == 0, 5, "the race to let go of its cancel event")
    wait_for(lambda: served.app.scheduler.counts() == (0, 0), 10, "the race nobody watches any more to stop")


def test_several_clients_at_once_each_get_their_own_text(served):
    from spec.decoding.engine import generate

    prompts = ["The quick brown fox", "one two three", "Write a poem about the sea"]
    results, errors = {}, []

    def visit(prompt):
        try:
            results[prompt] = client(served).predict(**race_args(served, prompt, max_new_tokens=24), api_name="/race")
        except Exception as error:  # collected: an assertion in a thread would be lost
            errors.append(f"{prompt!r}: {error!r}")

    threads = [threading.Thread(target=visit, args=(prompt,)) for prompt in prompts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not errors, errors
    target = served.app.registry.get(ModelKey(served.pair.target, served.pair.weight_format, served.pair.precision))
    for prompt in prompts:
        alone = generate(prompt, target, max_new_tokens=24).text
        assert texts(results[prompt]) == (alone, alone), prompt
    assert len({texts(results[p])[0] for p in prompts}) == len(prompts)


def test_visitors_asking_for_the_same_race_share_one_computation(served, slow_races):
    c = client(served)
    args = race_args(served, LONG_PROMPT, max_new_tokens=LONG_TOKENS - 7)
    jobs = [c.submit(**args, api_name="/race") for _ in range(3)]
    results = [job.result(timeout=120) for job in jobs]
    assert sorted(r[6]["how"] for r in results) == ["joined", "joined", "live"]
    assert slow_races.count(LONG_PROMPT) == 2, "one race computes two lanes, once"
    assert len({texts(r) for r in results}) == 1


def test_the_examples_are_raced_before_anyone_asks(served, monkeypatch):
    app = served.app
    # Short examples: the page's own do not fit the tiny models' context with 128 new tokens.
    monkeypatch.setattr(app, "EXAMPLES", [("Fox", "The quick brown fox jumps"), ("Count", "one two three four")])
    assert app.scheduler.preheat(app.example_requests()) == 2
    wait_for(lambda: all(app.store.get(r.key) for r in app.example_requests()), 120, "the examples to be preheated")
    defaults = dict(k=app.DEFAULTS["k"], dynamic_k=app.DEFAULTS["dynamic_k"], max_new_tokens=app.DEFAULTS["max_new_tokens"],
                    drafter=served.pair.drafters[0])
    job = client(served).submit(**race_args(served, "one two three four", **defaults), api_name="/race")
    result = job.result(timeout=60)
    assert result[6]["how"] == "replay" and "Replay" in result[0], "a clicked example is a replay from the first click"
    assert "waiting" not in job.outputs()[0][0] and "Loading" not in job.outputs()[0][0]


# --- a real browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        message = f"no {CHROMIUM}: install Debian's chromium (./run.sh test does) to run the browser test"
        if os.environ.get("CI"):  # CI must not pass by skipping the one test a person would run
            pytest.fail(message)
        pytest.skip(message)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is missing: pip install -r requirements-dev.txt")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
            ],
        )
        yield browser
        browser.close()


def start_long_race(page, url: str, tokens: int = LONG_TOKENS) -> None:
    """Open the page, start a race of `tokens` on LONG_PROMPT and wait until the first pane streams
    (each test its own length: a race that ran before would be a replay)."""
    page.goto(url, wait_until="domcontentloaded")
    page.locator("#prompt textarea").fill(LONG_PROMPT)
    page.locator("#max-new-tokens input[type=number]").fill(str(tokens))
    page.locator("#max-new-tokens input[type=number]").press("Enter")
    page.locator("#run").click()
    page.locator("#ar-output .pane span:not(.placeholder)").first.wait_for(timeout=30_000)


def choose_pair(page, label: str) -> None:
    page.get_by_label("Model pair (target + draft)").click()
    page.get_by_role("option", name=label).click()


def test_browser_runs_a_race_and_shows_the_result_above_the_fold(served, browser, monkeypatch):
    monkeypatch.setattr(served.app.hub_status, "reachable", False)  # as on a machine without the Hub
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(served.url, wait_until="domcontentloaded")
        page.locator("#hub-notice").get_by_text("Not available on this server").wait_for(timeout=10_000)
        assert page.locator("#prompt textarea").input_value().strip(), "the prompt should start with an example"
        ticks = page.locator("#race-chart svg text")
        ticks.filter(has_text="128").wait_for(timeout=10_000)  # before any race: the chart's empty frame, up to the slider's tokens
        assert page.locator("#race-chart svg polyline").count() == 2 and "0.5" in page.locator("#race-chart svg").text_content()
        page.locator("#prompt textarea").fill("The quick brown fox")  # some drafts get accepted
        assert page.get_by_label("Hybrid").is_checked(), "a pair with a draft model races the hybrid by default"
        page.get_by_label("Draft model").check()  # on random tiny models, lookup's guesses rarely hold
        page.get_by_text("Advanced: K, sampling, seed").click()
        page.get_by_label("Dynamic K", exact=False).uncheck()  # fixed K: see race_args
        page.get_by_text("Advanced: K, sampling, seed").click()
        page.locator("#max-new-tokens input[type=number]").fill("81")
        page.locator("#max-new-tokens input[type=number]").press("Enter")
        page.evaluate("window.scrollTo(0, 0)")
        page.locator("#run").click()
        page.locator("#summary").get_by_text("identical").wait_for(timeout=60_000)
        ar, spec = page.locator("#ar-output .pane").inner_text(), page.locator("#spec-output .pane").inner_text()
        assert ar.strip() and ar == spec
        assert page.locator("#spec-output .tok-accepted").count() > 0
        assert "decode tokens/s" in page.locator("#ar-stats").inner_text()
        assert "tokens per target call" in page.locator("#spec-stats").inner_text()
        speedup = page.locator("#speedup").inner_text()
        assert re.search(r"\d\.\d\d×", speedup) and "Why:" in speedup and "predicts" in speedup, speedup
        page.evaluate("window.scrollTo(0, 0)")
        for element in ("#speedup", "#race-chart"):  # the result, without scrolling
            box = page.locator(element).bounding_box()
            assert box and box["height"] > 40 and box["y"] + box["height"] <= 1000, (element, box)
        assert page.locator("#race-chart svg polyline").count() == 2
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "app.png"))

        # A custom pair with only a target works with prompt lookup: no "Draft model" is preselected.
        choose_pair(page, "Custom pair")
        # The drafter choices update when the server answers the pair's change: wait for it, not a race.
        page.get_by_label("Draft model", exact=True).wait_for(state="detached", timeout=10_000)
        page.get_by_label("Target model").fill(str(served.pair.target))
        page.locator("#run").click()  # converted to INT8 on first use, so at the default precision: "Greedy: ..."
        page.locator("#summary").get_by_text("Greedy").wait_for(timeout=180_000)
        page.get_by_label("Draft model (optional", exact=False).fill(str(served.pair.draft))
        page.get_by_label("Draft model", exact=True).wait_for(timeout=5_000)  # offered once a draft is typed
        # and selected as the pair's default, the hybrid: lookup was the only choice, not the visitor's
        page.get_by_role("radio", name="Hybrid", checked=True).wait_for(timeout=5_000)
    finally:
        page.close()


def test_the_room_view_shows_the_public_address_as_a_qr_code_and_who_watches(served, browser, monkeypatch):
    """A presenter opens ?present (or presses the button): the Space's address as a large QR code,
    its short link and how many have the page open; a page on this machine only says how to share it."""
    # A race an earlier test left (a model converting in this process) would slow the page down.
    wait_for(lambda: served.app.scheduler.counts() == (0, 0), 240, "earlier tests' races to end")
    wait_for(lambda: len(served.app.audience) == 0, 20, "the pages of earlier tests to count out")
    presenter = browser.new_page(viewport={"width": 1280, "height": 800})
    visitor = browser.new_page()
    try:
        presenter.goto(served.url, wait_until="domcontentloaded")
        presenter.locator("#room-open").click(timeout=60_000)
        presenter.locator("#room").get_by_text("served on this machine only").wait_for(timeout=10_000)
        assert presenter.locator("#room svg").count() == 0, "a loopback address is no use to a room"
        presenter.locator("#room-close").click()
        presenter.locator("#room-view").wait_for(state="hidden", timeout=5_000)

        monkeypatch.setenv("SPACE_HOST", "owner-race.hf.space")
        visitor.goto(served.url, wait_until="domcontentloaded")
        presenter.goto(served.url + "?present", wait_until="domcontentloaded")
        presenter.locator("#room").get_by_text("owner-race.hf.space").wait_for(timeout=10_000)
        code = presenter.locator("#room svg.room-qr").bounding_box()
        assert code and code["height"] >= 0.6 * 800 and code["y"] >= 0, f"the code should fill the screen: {code}"
        wait_for(lambda: len(served.app.audience) == 2, 10, "both pages to count in")
        presenter.locator("#room-open").evaluate("e => e.click()")  # refreshed at once rather than at the next tick
        presenter.locator("#room").get_by_text("2 people have this page open").wait_for(timeout=10_000)
        ARTIFACTS.mkdir(exist_ok=True)
        presenter.screenshot(path=str(ARTIFACTS / "room.png"))
        visitor.close()
        wait_for(lambda: len(served.app.audience) == 1, 20, "a closed tab to count out")
    finally:
        for page in (presenter, visitor):
            if not page.is_closed():
                page.close()


# Counts the page's requests for an animation frame (installed before Gradio's scripts load).
COUNT_FRAMES = """
window.__frames = 0;
const request = window.requestAnimationFrame.bind(window);
window.requestAnimationFrame = (callback) => { window.__frames++; return request(callback); };
"""


@contextlib.contextmanager
def instrumented_page(browser, url: str, script: str):
    """The page in a context of its own with `script` run before the page's own, once it shows Race."""
    context = browser.new_context()
    context.add_init_script(script)
    page = context.new_page()
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.locator("#run").wait_for(timeout=30_000)
        yield page
    finally:
        context.close()


def test_an_open_page_draws_no_frames_while_nothing_changes(served, browser):
    """Gradio's loading screen leaves its status tracker's frame loop running (60 frames a second,
    for as long as the page is open, on the race's cores); page_fix.py stops it. A race's page
    still draws its chart, and a page left alone after it draws nothing."""
    with instrumented_page(browser, served.url, COUNT_FRAMES) as page:

        def frames_in(seconds: float) -> int:
            before = page.evaluate("window.__frames")
            time.sleep(seconds)
            return page.evaluate("window.__frames") - before

        def goes_quiet(within: float) -> bool:  # the loading screen's logo ends its last turn
            deadline = time.monotonic() + within
            return any(frames_in(1.0) <= 1 for _ in iter(lambda: time.monotonic() < deadline, False))

        assert goes_quiet(10), "an idle page keeps asking for frames"
        page.locator("#prompt textarea").fill("A quiet page")  # a prompt of its own: others' races must not be replays
        page.locator("#run").click()
        page.locator("#summary").get_by_text("Greedy").wait_for(timeout=60_000)
        assert page.locator("#race-chart svg polyline").count() == 2, "the chart is drawn in an animation frame"
        assert goes_quiet(5) and frames_in(1.5) <= 1, "a page left alone after a race keeps asking for frames"


# Which Gradio components' status trackers change while the page runs, by the component's id (the
# inputs' change as an event starts and ends).
COUNT_TRACKERS = """
window.__trackers = new Set();
new MutationObserver((records) => {
  for (const r of records) {
    const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    const tracker = node && node.closest('[data-testid="status-tracker"]');
    if (tracker) window.__trackers.add(tracker.parentElement.closest("[id]").id);
  }
}).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
"""


def test_a_race_updates_one_component_a_message_and_the_page_still_shows_everything(served, browser):
    """Gradio handles each output of an update (its props, its status tracker) in the browser that
    shares the race's cores: the page's race has one output an update, and app.js sets the status,
    the speed-up, both lanes' numbers and the summary from it. The API still answers with each."""
    with instrumented_page(browser, served.url, COUNT_TRACKERS) as page:
        time.sleep(1.0)  # the page's load events are done
        page.evaluate("window.__trackers.clear()")
        page.locator("#prompt textarea").fill("One output an update")
        page.locator("#run").click()
        page.locator("#status").get_by_text("Racing live").wait_for(timeout=30_000)
        page.locator("#summary").get_by_text("Greedy").wait_for(timeout=60_000)
        assert "decode tokens/s" in page.locator("#ar-stats").inner_text()
        assert "tokens per target call" in page.locator("#spec-stats").inner_text()
        assert "×" in page.locator("#speedup").inner_text()
        changed = set(page.evaluate("[...window.__trackers]")) & set(served.app.render.PAGE_IDS.values())
        assert not changed, f"Gradio re-rendered {changed} (their status trackers changed): app.js should set them"
    api = client(served).predict(**race_args(served, "One output an update"), api_name="/race")
    assert "decode tokens/s" in api[3] and "tokens per target call" in api[4] and api[6]["speculative"]["text"], "the API's outputs, each"


# Counts the messages each EventSource the page opens receives, by the first part of its path, and
# notes whether a pane showed tokens while the status said Racing: checked as the page changes, not
# by polling, which a loaded machine can make late enough to see only the race's end.
COUNT_STREAMED = """
window.__streamed = {};
window.__tokensWhileRacing = false;
const RealSource = window.EventSource;
window.EventSource = function (url, options) {
  const source = new RealSource(url, options), key = new URL(url, location.href).pathname.split("/")[1];
  source.addEventListener("message", () => { window.__streamed[key] = (window.__streamed[key] || 0) + 1; });
  return source;
};
new MutationObserver(() => {
  const status = document.querySelector("#status");
  if (status && status.textContent.includes("Racing") && document.querySelector("#ar-output .pane span:not(.placeholder)")) {
    window.__tokensWhileRacing = true;
  }
}).observe(document, { childList: true, subtree: true, characterData: true });
"""


def test_the_page_gets_a_race_down_its_own_stream_and_gradio_only_its_first_and_last_updates(served, browser, monkeypatch):
    """Gradio's client handles each message of an event for every component on the page, in the
    browser that shares the race's cores: the page's race sends its first update (naming a stream)
    and its last through Gradio, and every one between down that stream, which the page reads."""
    app = served.app
    routed = {"gradio": 0, "stream": 0}
    real_route = app.outputs.PageFeed.route

    def counting_route(self, update, last):
        outputs = real_route(self, update, last)
        routed["stream" if outputs is None else "gradio"] += 1
        return outputs

    monkeypatch.setattr(app.outputs.PageFeed, "route", counting_route)
    with instrumented_page(browser, served.url, COUNT_STREAMED) as page:
        page.locator("#prompt textarea").fill(LONG_PROMPT)
        page.locator("#max-new-tokens input[type=number]").fill(str(LONG_TOKENS - 2))
        page.locator("#max-new-tokens input[type=number]").press("Enter")
        page.locator("#run").click()
        page.locator("#summary").get_by_text("Greedy").wait_for(timeout=120_000)
        assert page.evaluate("window.__tokensWhileRacing"), "the panes stream before the race ends"
        streamed = page.evaluate("window.__streamed")
    assert routed["gradio"] == 2 and routed["stream"] >= 3, f"updates sent: {routed}"
    assert streamed.get("race_stream", 0) == routed["stream"], f"the page read {streamed} of {routed['stream']} streamed updates"
    assert not app.page_streams._streams, "a finished watch's stream is still open"


def test_phone_width_and_dark_mode_stay_readable(served, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    for name, url, size in (("phone-400px", served.url, (400, 900)), ("dark", served.url + "?__theme=dark", (1400, 1000))):
        page = browser.new_page(viewport={"width": size[0], "height": size[1]})
        try:
            page.goto(url, wait_until="domcontentloaded")
            page.locator("#prompt textarea").fill("The quick brown fox")
            page.locator("#run").click()
            page.locator("#summary").get_by_text("identical").wait_for(timeout=60_000)
            if size[0] < 1000:  # a phone: the prompt, Race and the live result come first
                page.evaluate("window.scrollTo(0, 0)")
                assert page.locator("#run").bounding_box()["y"] + 40 < size[1], "Race is below the first screen"
                assert page.locator("#speedup").bounding_box()["y"] < size[1], "the result starts below the first screen"
                panes = page.locator("#ar-output").bounding_box()["y"]
                assert panes < page.locator("#race-chart").bounding_box()["y"] and panes < page.locator("#examples").bounding_box()["y"], \
                    "on a phone the answers come straight after the speed-up, before the chart and the examples"
                assert page.locator("#spec-output").bounding_box()["y"] < page.locator("#ar-stats").bounding_box()["y"], \
                    "on a phone the two answers come one after the other, their numbers below both"
                assert page.locator("#hub-notice").bounding_box() is None or \
                    page.locator("#hub-notice").bounding_box()["y"] > page.locator("#spec-output").bounding_box()["y"]
            prompt_width = page.locator("#prompt textarea").bounding_box()["width"]
            assert prompt_width >= 0.75 * size[0] or size[0] > 1000, f"the prompt is squeezed to {prompt_width:.0f} px"
            overflowing = page.evaluate(
                "[...document.querySelectorAll('.stat, .bar-row, .speedup, .status')]"
                ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className)"
            )
            assert not overflowing, f"text runs out of its box: {overflowing}"
            if name == "dark":
                assert page.locator("#spec-output .tok").count(), "the speculative pane shows no tokens after the race"
                # A drafted token where the race kept one (dynamic K may take plain steps alone on a busy machine).
                colour = page.evaluate(
                    "getComputedStyle(document.querySelector('#spec-output .tok-accepted, #spec-output .tok-lookup, "
                    "#spec-output .tok-correction') || document.querySelector('#spec-output .tok')).color"
                )
                assert colour != "rgb(0, 0, 0)", "dark mode: token text must not be black on a dark pane"
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        finally:
            page.close()


def test_closing_the_tab_stops_the_race(served, browser, monkeypatch):
    app = served.app
    cut_short = []  # one entry per engine generator that ended before its tokens were all made

    def spying_stream(*args, **kwargs):
        steps = real_stream(*args, **kwargs)

        def spy():
            step = None
            try:
                for step in steps:
                    yield step
                    time.sleep(0.01)  # wall time only (the clock is paused): the race outlasts the page
            finally:
                steps.close()
                if step is None or step.stats.new_tokens < LONG_TOKENS - 1:
                    cut_short.append("autoregressive" if kwargs.get("drafter") is None else "speculative")

        return spy()

    real_stream = spec.serving.race.stream
    monkeypatch.setattr(spec.serving.race, "stream", spying_stream)
    page = browser.new_page()
    start_long_race(page, served.url, LONG_TOKENS - 1)
    page.close()
    wait_for(lambda: app.sessions.running() == 0, 15, "the server to drop the race of a closed tab")
    wait_for(lambda: app.scheduler.counts() == (0, 0), 15, "the race nobody watches to stop")
    deadline = time.monotonic() + 5
    while len(cut_short) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(cut_short) == ["autoregressive", "speculative"], f"lanes that ended cut short: {cut_short}"


@pytest.fixture
def slow_races(served, monkeypatch) -> list[str]:
    """Races that last seconds (a pause per step, in wall time only); returns the prompts that started."""
    real_stream = spec.serving.race.stream
    started = []

    def slow_stream(prompt, *args, **kwargs):
        started.append(prompt)
        steps = real_stream(prompt, *args, **kwargs)

        def slowly():
            try:
                for step in steps:
                    yield step
                    time.sleep(0.03)  # about 20 s a race: it outlasts what the test does meanwhile
            finally:
                steps.close()

        return slowly()

    monkeypatch.setattr(spec.serving.race, "stream", slow_stream)
    return started


def stop_everything(served, c) -> None:
    while served.app.sessions.running():
        c.predict(api_name="/stop")
        time.sleep(0.2)


def test_a_queued_visitor_sees_its_place_and_stop_drops_its_race(served, browser, slow_races):
    """With the one race slot taken, a visitor waits, sees how many are ahead, and Stop ends the wait."""
    app = served.app
    c = client(served)
    first = c.submit(**race_args(served, LONG_PROMPT, max_new_tokens=LONG_TOKENS - 2), api_name="/race")
    wait_for(lambda: len(first.outputs()) >= 3, 30, "the first race to start streaming")
    page = browser.new_page()
    try:
        page.goto(served.url, wait_until="domcontentloaded")
        page.locator("#prompt textarea").fill("A queued fox")  # never raced before: not a replay
        page.locator("#run").click()
        page.locator("#status").get_by_text("waiting: 1 ahead").wait_for(timeout=5_000)
        page.locator("#stop").click()
        page.locator("#status").get_by_text("Stopped before the race began").wait_for(timeout=5_000)
        # A visitor who closes the tab while waiting gives up the place too.
        leaving = browser.new_page()
        leaving.goto(served.url, wait_until="domcontentloaded")
        leaving.locator("#prompt textarea").fill("Once upon a time")  # the tiny model's context is short
        leaving.locator("#run").click()
        leaving.locator("#status").get_by_text("waiting: 1 ahead").wait_for(timeout=5_000)
        leaving.close()
        wait_for(lambda: app.scheduler.counts() == (1, 0), 10, "the closed tab's race to leave the line")
        assert app.sessions.running() == 1, "the first race ended before the check: make it longer"
        c.predict(api_name="/stop")  # the slot frees: a race still waiting would start now
        first.result(timeout=10)
        time.sleep(1.0)
        assert "A queued fox" not in slow_races and app.sessions.running() == 0
        assert "identical" not in page.locator("#summary").inner_text()
    finally:
        page.close()
        stop_everything(served, c)


def test_stop_in_the_browser_keeps_the_final_stopped_summary(served, browser, slow_races):
    page = browser.new_page()
    try:
        start_long_race(page, served.url, LONG_TOKENS - 3)
        assert served.app.sessions.running() == 1, "the race ended before Stop: the test checks nothing"
        page.locator("#stop").click()
        page.locator("#summary").get_by_text("Stopped").wait_for(timeout=10_000)
        time.sleep(1.0)
        assert "Stopped" in page.locator("#summary").inner_text()
        assert page.locator("#ar-output .pane.running, #spec-output .pane.running").count() == 0
    finally:
        page.close()


def test_a_full_line_reads_busy_without_error_styling(served, browser, slow_races):
    """One race runs and SPEC_MAX_QUEUE wait; the next visitor is told, calmly, to come back."""
    app = served.app
    c = client(served)
    # Distinct races (another length each): identical ones would join, taking no place in line. One
    # visitor each: a visitor's second race would replace its first in line, not queue behind it.
    visitors = [client(served) for _ in range(app.S.max_queue + 1)]
    jobs = []

    def arrive(i: int) -> None:
        jobs.append(visitors[i].submit(**race_args(served, LONG_PROMPT, max_new_tokens=LONG_TOKENS - 10 - i), api_name="/race"))

    page = browser.new_page()
    try:
        # The first race runs before the others arrive: all at once, they could find the worker timing a
        # model's curves (spec.serving.scheduler) and fill the line before one of them leaves it to run.
        arrive(0)
        wait_for(lambda: app.scheduler.counts() == (1, 0), 30, "the first race to run")
        for i in range(1, len(visitors)):
            arrive(i)
        wait_for(lambda: app.scheduler.counts() == (1, app.S.max_queue), 30, "the line to fill")
        page.goto(served.url, wait_until="domcontentloaded")
        page.locator("#prompt textarea").fill("Once upon a time")  # the tiny model's context is short
        page.locator("#run").click()
        busy = page.locator("#status .status-busy")
        busy.get_by_text("try again in a minute").wait_for(timeout=10_000)
        assert page.locator("#status .status-error").count() == 0
        assert "Error" not in page.locator("body").inner_text()
        assert page.locator(".toast-body").count() == 0, "a full line must not pop up an error"
        # An API client is told the same, as a result rather than an exception.
        status = c.predict(**race_args(served, "Hello"), api_name="/race")[0]
        assert "try again in a minute" in status
    finally:
        page.close()
        for job in jobs:
            job.cancel()
        for visitor in visitors:
            visitor.predict(api_name="/stop")
        stop_everything(served, c)


def test_a_too_long_prompt_gets_its_sentence_at_once_and_the_next_race_runs(served, browser):
    page = browser.new_page()
    try:
        page.goto(served.url, wait_until="domcontentloaded")
        page.locator("#prompt textarea").fill("All work and no play makes Jack a dull boy. " * 1140)  # 50,000+ characters
        started = time.monotonic()
        page.locator("#run").click()
        page.locator("#status .status-error").get_by_text("shorten it").wait_for(timeout=5_000)
        assert time.monotonic() - started < 1.5, "the sentence must come at once"  # a second, plus the browser's round trip
        page.locator("#prompt textarea").fill("The quick brown fox")
        page.locator("#run").click()
        page.locator("#summary").get_by_text("identical").wait_for(timeout=60_000)
        assert page.locator("#status .status-error").count() == 0
    finally:
        page.close()


@pytest.mark.parametrize("ref", ["/etc", "../../../../etc/passwd", "~/.ssh"])
def test_with_local_models_disallowed_no_message_names_a_server_path(served, browser, monkeypatch, ref):
    monkeypatch.setattr(served.app, "ALLOW_LOCAL_MODELS", False)
    monkeypatch.setattr(served.app.hub_status, "reachable", False)
    page = browser.new_page()
    try:
        page.goto(served.url, wait_until="domcontentloaded")
        # The page's load handler replaces the pair list (unavailable pairs out): choosing before it
        # lands can meet both lists at once.
        page.locator("#hub-notice").get_by_text("Not available on this server").wait_for(timeout=10_000)
        choose_pair(page, "Custom pair")
        page.get_by_label("Target model").fill(ref)
        page.locator("#run").click()
        error = page.locator("#status .status-error")
        error.wait_for(timeout=20_000)
        shown = page.locator("body").inner_text()
        assert ref not in shown, error.inner_text()
        for server_path in (str(served.pair.target), os.environ.get("HOME", "/root"), "/tmp"):
            assert server_path not in shown, f"the page names a server path: {server_path}"
    finally:
        page.close()


def test_the_api_accepts_every_drafter_the_page_offers(served, monkeypatch):
    """For every pair in the list and every drafter the page offers it, /race takes the request."""
    from spec.serving.scheduler import Busy

    app = served.app
    asked = []

    def submit(request, fresh=False, *session):  # stands in for the scheduler: no model loads
        asked.append((request.target.ref, request.draft.ref if request.draft else None, request.drafter))
        raise Busy(0, 0)

    monkeypatch.setattr(app.scheduler, "submit", submit)
    monkeypatch.setattr(app.hub_status, "reachable", True)
    c = client(served)
    expected = []
    for pair in app.PRESETS:
        custom = pair.label == app.CUSTOM
        offered = app.drafter_choices(pair, custom_draft="owner/draft" if custom else "").choices
        assert offered, pair.label
        for _, drafter in offered:
            args = race_args(served, "Hello", drafter=drafter, preset_label=pair.label)
            if custom:
                args.update(custom_target="owner/target", custom_draft="owner/draft")
            status = c.predict(**args, api_name="/race")[0]
            assert "busy" in status, (pair.label, drafter, status)
            expected.append(drafter)
    assert [drafter for *_, drafter in asked] == expected and {"draft-model", "hybrid"} <= set(expected)


def test_the_hub_is_asked_once_with_a_short_timeout(served, monkeypatch):
    """The page's first load and the preload may ask together: one question, then every page reads the answer."""
    app = served.app
    asked = []

    def reachable(timeout: float) -> bool:
        asked.append(timeout)
        time.sleep(0.2)  # long enough for the other callers to arrive while it is asked
        return False

    monkeypatch.setattr(app.hub_status, "reachable", None)
    monkeypatch.setattr(app.hub, "reachable", reachable)
    threads = [threading.Thread(target=app.hub_status.check, args=(False,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert app.hub_status.check(False) is False and len(asked) == 1 and asked[0] <= 5
    notice = app.on_load()[4]
    assert "Not available on this server" in notice.value and notice.visible


def test_every_example_label_shows_whole():
    """Gradio's page cuts an example's label after 60 characters ("..."): a label says what the
    example shows, so it must fit."""
    from spec.serving.examples import EXAMPLES

    assert all(len(label) <= 60 for label, _ in EXAMPLES), [label for label, _ in EXAMPLES if len(label) > 60]
