"""The Space, served in-process on tiny models and driven like its visitors drive it.

gradio_client checks the streams, the numbers, the errors, Stop and the queue; Playwright with
Debian's Chromium checks the real page (and that closing the tab stops the race).
"""
from __future__ import annotations

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

import spec.race
from spec.config import ModelKey
from tests.tiny_models import build_checkpoint

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
LONG_PROMPT = "Tell me a story"  # greedy on the tiny target, it runs to 512 tokens without an EOS
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
        for ref in (pair.target, pair.draft):  # converted into the session's cache, once, here
            app.registry.get(ModelKey(ref, pair.weight_format, pair.precision))
    finally:  # the app has read its settings; other tests see the environment they had
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    port = _free_port()
    app.demo.launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **app.LAUNCH_OPTIONS
    )
    yield SimpleNamespace(app=app, url=f"http://127.0.0.1:{port}/", pair=pair)
    app.demo.close()


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


def test_both_panes_stream_and_greedy_texts_match(served):
    job = client(served).submit(**race_args(served, "The quick brown fox", max_new_tokens=64), api_name="/race")
    ar_pane, spec_pane, ar_stats, spec_stats, summary = job.result(timeout=60)
    updates = job.outputs()

    ar_texts = {text_of(update[0]) for update in updates if "placeholder" not in update[0]}
    spec_texts = {text_of(update[1]) for update in updates if "placeholder" not in update[1]}
    assert len(ar_texts) >= 5 and len(spec_texts) >= 3, "the panes should fill step by step, not all at once"
    assert text_of(ar_pane) and text_of(ar_pane) == text_of(spec_pane)
    assert "identical" in summary and ("faster" in summary or "slower" in summary)

    ar, spec = numbers(ar_stats), numbers(spec_stats)
    assert ar["new tokens"] == spec["new tokens"] == "64"
    assert float(ar["tokens/s"]) > 0 and float(spec["tokens/s"]) > 0
    assert re.fullmatch(r"\d+ ms|\d+\.\d\d s", ar["time to first token"]) and ar["elapsed (compute)"].endswith("s")
    assert spec["acceptance rate"].endswith("%") and float(spec["tokens per target call"]) > 1.0
    assert int(spec["target calls"]) < int(ar["target calls"]), "speculative must verify several tokens per call"
    assert "kept</span>" in spec_stats, "the histogram of kept draft tokens is missing"


def test_tokens_are_coloured_by_provenance(served):
    _, spec_pane, *_ = client(served).predict(**race_args(served, "The quick brown fox", max_new_tokens=64), api_name="/race")
    kinds = re.findall(r'class="tok tok-(\w+)"', spec_pane)
    assert set(kinds) <= {"target", "accepted", "correction", "bonus"}
    assert "accepted" in kinds and {"correction", "bonus"} & set(kinds), kinds


def test_prompt_lookup_and_sampling_run(served):
    c = client(served)
    *_, summary = c.predict(**race_args(served, "one two three one two three one two", drafter="prompt-lookup"), api_name="/race")
    assert "prompt lookup" in summary and "identical" in summary
    *_, summary = c.predict(**race_args(served, "one two three", temperature=0.8, top_p=0.9), api_name="/race")
    assert "Sampling at temperature 0.8" in summary


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(prompt="   "), "prompt is empty"),
        (dict(max_new_tokens=0), "less than minimum value 1"),  # the slider's own check
        (dict(drafter="draft-model", preset_label="SmolLM2-135M-Instruct (quick, offline)"), "no draft model"),
        (dict(preset_label="Custom pair", custom_target="/nonexistent/model", drafter="prompt-lookup"), "no directory"),
        (dict(preset_label="Custom pair", custom_target="", drafter="prompt-lookup"), "type a target model"),
    ],
)
def test_bad_input_comes_back_as_a_sentence(served, overrides, message):
    from gradio_client.exceptions import AppError

    job = client(served).submit(**{**race_args(served, "Hello"), **overrides}, api_name="/race")
    with pytest.raises(AppError) as error:
        job.result(timeout=30)
    text = str(error.value)
    assert message in text and "Traceback" not in text and 'File "' not in text, text
    if job.outputs():  # our own checks also leave the sentence on the page, under the panes
        assert html.escape(text) in job.outputs()[-1][4] and "summary-error" in job.outputs()[-1][4]


def test_stop_stops_both_panes(served):
    c = client(served)
    job = c.submit(**race_args(served, LONG_PROMPT, max_new_tokens=512), api_name="/race")
    wait_for(lambda: len(job.outputs()) >= 5, 30, "the race to start streaming")
    c.predict(api_name="/stop")
    ar_pane, spec_pane, ar_stats, spec_stats, summary = job.result(timeout=10)
    assert "Stopped" in summary
    assert int(numbers(ar_stats)["new tokens"]) < 512 and int(numbers(spec_stats)["new tokens"]) < 512
    assert "caret" not in ar_pane + spec_pane
    wait_for(lambda: served.app.sessions.running() == 0, 5, "the race to let go of its cancel event")


def test_several_clients_at_once_each_get_their_own_text(served):
    from spec.config import GenerationConfig
    from spec.engine import generate

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
        ar_pane, spec_pane, *_ = results[prompt]
        steps = generate(prompt, target, GenerationConfig(max_new_tokens=24), "autoregressive")
        alone = "".join(step.text for step in steps)
        assert text_of(ar_pane) == text_of(spec_pane) == alone, prompt
    assert len({text_of(results[p][0]) for p in prompts}) == len(prompts)


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


def start_long_race(page, url: str) -> None:
    """Open the page, start a 512-token race on LONG_PROMPT and wait until the first pane streams."""
    page.goto(url, wait_until="domcontentloaded")
    page.locator("#prompt textarea").fill(LONG_PROMPT)
    page.locator("#max-new-tokens input[type=number]").fill("512")
    page.locator("#max-new-tokens input[type=number]").press("Enter")
    page.locator("#run").click()
    page.locator("#ar-output .pane:not(:has(.placeholder))").wait_for(timeout=30_000)


def test_browser_runs_a_race(served, browser, monkeypatch):
    monkeypatch.setitem(served.app._hub, "reachable", False)  # as on a machine without the Hub
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    try:
        page.goto(served.url, wait_until="domcontentloaded")
        page.locator("#hub-notice").get_by_text("cannot be reached").wait_for(timeout=10_000)
        page.locator("#prompt textarea").fill("The quick brown fox")  # some drafts get accepted
        page.get_by_text("Advanced: K, sampling, seed").click()
        page.get_by_label("Dynamic K", exact=False).uncheck()  # fixed K: see race_args
        page.locator("#run").click()
        page.locator("#summary").get_by_text("identical").wait_for(timeout=30_000)
        ar, spec = page.locator("#ar-output .pane").inner_text(), page.locator("#spec-output .pane").inner_text()
        assert ar.strip() and ar == spec
        assert page.locator("#spec-output .tok-accepted").count() > 0
        assert "tokens/s" in page.locator("#ar-stats").inner_text()
        assert "acceptance rate" in page.locator("#spec-stats").inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "app.png"), full_page=True)

        # Switching pairs changes the drafters offered, per visitor: the server must accept the new
        # choice (here "Draft model" for a custom pair, which the embedded pair does not offer).
        for label in ("SmolLM2-135M-Instruct (quick, offline)", "Custom pair"):
            page.get_by_label("Model pair (target + draft)").click()
            page.get_by_role("option", name=label).click()
        page.get_by_label("Target model").fill("/nonexistent/model")
        page.get_by_label("Draft model", exact=True).check()
        page.locator("#run").click()
        page.locator("#summary .summary-error").get_by_text("no draft model").wait_for(timeout=10_000)
    finally:
        page.close()


def test_closing_the_tab_stops_the_race(served, browser, monkeypatch):
    app = served.app
    closed_early = []  # one entry per engine generator closed before it finished
    real_generate = spec.race.generate

    def spying_generate(*args, **kwargs):
        steps = real_generate(*args, **kwargs)

        def spy():
            finished = False
            try:
                for step in steps:
                    finished = step.finished
                    yield step
                    time.sleep(0.01)  # wall time only (the clock is paused): the race outlasts the page
            except GeneratorExit:
                if not finished:
                    closed_early.append(args[3] if len(args) > 3 else kwargs.get("mode"))
                raise
            finally:
                steps.close()

        return spy()

    monkeypatch.setattr(spec.race, "generate", spying_generate)
    page = browser.new_page()
    start_long_race(page, served.url)
    page.close()
    wait_for(lambda: app.sessions.running() == 0, 15, "the server to drop the race of a closed tab")
    assert sorted(closed_early) == ["autoregressive", "speculative"], f"closed before finishing: {closed_early}"


@pytest.fixture
def slow_races(served, monkeypatch) -> list[str]:
    """Races that last seconds (a pause per step, in wall time only); returns the prompts that started."""
    real_generate = spec.race.generate
    started = []

    def slow_generate(prompt, *args, **kwargs):
        started.append(prompt)
        steps = real_generate(prompt, *args, **kwargs)

        def slowly():
            try:
                for step in steps:
                    yield step
                    time.sleep(0.01)
            finally:
                steps.close()

        return slowly()

    monkeypatch.setattr(spec.race, "generate", slow_generate)
    return started


def test_stop_while_waiting_in_the_queue_drops_the_race(served, browser, slow_races):
    """With the one race slot taken, a visitor who presses Stop before their turn gets no race."""
    app = served.app
    c = client(served)
    first = c.submit(**race_args(served, LONG_PROMPT, max_new_tokens=512), api_name="/race")
    wait_for(lambda: len(first.outputs()) >= 3, 30, "the first race to start streaming")
    page = browser.new_page()
    try:
        page.goto(served.url, wait_until="domcontentloaded")
        page.locator("#prompt textarea").fill("The quick brown fox")
        page.locator("#run").click()
        time.sleep(0.5)  # the visitor's race now waits behind the first one
        page.locator("#stop").click()
        time.sleep(app.STOP_GRACE_SECONDS + 1.0)
        assert app.sessions.running() == 1, "the first race ended before the check: make it longer"
        c.predict(api_name="/stop")  # the slot frees: a race still queued would start now
        first.result(timeout=10)
        time.sleep(1.5)
        assert "The quick brown fox" not in slow_races and app.sessions.running() == 0
        assert "identical" not in page.locator("#summary").inner_text()
    finally:
        page.close()


def test_stop_in_the_browser_keeps_the_final_stopped_summary(served, browser, slow_races):
    """The delayed cancel of queued races must not cut off the running race's last update."""
    page = browser.new_page()
    try:
        start_long_race(page, served.url)
        assert served.app.sessions.running() == 1, "the race ended before Stop: the test checks nothing"
        page.locator("#stop").click()
        page.locator("#summary").get_by_text("Stopped").wait_for(timeout=10_000)
        time.sleep(served.app.STOP_GRACE_SECONDS + 1.0)  # the cancel of queued races has fired by now
        assert "Stopped" in page.locator("#summary").inner_text()
        assert page.locator("#ar-output .caret, #spec-output .caret").count() == 0
    finally:
        page.close()


def test_a_full_queue_turns_the_next_visitor_away(served, slow_races):
    """One race runs and SPEC_MAX_QUEUE wait; one more is refused (the page then says the app is busy)."""
    app = served.app
    c = client(served)
    jobs = [c.submit(**race_args(served, LONG_PROMPT, max_new_tokens=512), api_name="/race") for _ in range(app.MAX_QUEUE + 2)]
    try:
        refused = []

        def some_refused() -> bool:
            for job in jobs:
                if job.done():
                    try:
                        job.result(timeout=0)
                    except Exception as error:  # gradio_client raises the server's queue_full as an error
                        refused.append(str(error))
            return bool(refused)

        wait_for(some_refused, 30, "a submission past the queue's size to be refused")
        assert any("full" in message.lower() for message in refused), refused
    finally:
        for job in jobs:
            job.cancel()
        while app.sessions.running():
            c.predict(api_name="/stop")
            time.sleep(0.2)
