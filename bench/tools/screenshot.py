"""The README's picture, made from the real page: a finished race on the default pair.

    python -m bench.tools.screenshot                              # docs/screenshot.png, the page's first example
    python -m bench.tools.screenshot --example 1 --out /tmp/race.png --width 1400 --height 1100

Starts app.py on a free port (the default pair loaded at start-up, the examples not preheated, so
the race runs live; an example recorded earlier is raced again with "Race it live"), opens the page
in headless Chromium (Debian's, /usr/bin/chromium), presses Race on the chosen example with the
page's starting settings, waits for the verdict and saves what the window shows. The browser and
the app are stopped afterwards, also on failure. Models come from SPEC_MODELS_DIR as the app finds
them (prepared on first use: minutes). Exit 2 with one line when something is missing or does not
answer.
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from bench.tools import Parser, output_file, run_tool
from bench.tools.served_app import REPO, SetupError, free_port, page, race_live, start_app, stop_app, wait_for_line

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def screenshot(url: str, prompt: str, out: Path, width: int, height: int, timeout: float) -> str:
    """Race `prompt` on the page at `url` as a visitor does and save the window once the verdict is in;
    returns the page's summary line."""
    try:
        from playwright.sync_api import Error as BrowserError, sync_playwright
    except ImportError:
        raise SetupError("the playwright package is missing: pip install -r requirements-dev.txt") from None
    if not Path(CHROMIUM).exists():
        raise SetupError(f"no {CHROMIUM}: install Debian's chromium (apt-get install chromium)")
    try:
        return _race_and_save(sync_playwright, url, prompt, out, width, height, timeout)
    except BrowserError as error:  # a timeout, a page that changed: one line, not a traceback
        raise SetupError(f"the browser: {(str(error).splitlines() or ['?'])[0][:300]}") from None


def _race_and_save(sync_playwright, url: str, prompt: str, out: Path, width: int, height: int, timeout: float) -> str:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            view = browser.new_page(viewport={"width": width, "height": height})
            view.goto(url, timeout=timeout * 1000)
            view.wait_for_selector("#run", timeout=timeout * 1000)
            time.sleep(2)  # the page's load handler sets the pair list and the drafter
            view.locator("#prompt textarea").fill(prompt)
            race_live(view, timeout)
            view.wait_for_function("() => !document.querySelector('#status').innerText.includes('Racing')",
                                   polling=1000, timeout=timeout * 1000)
            view.locator(".speedup-faster, .speedup-slower, .speedup-unsettled").wait_for(timeout=30_000)
            time.sleep(1.5)  # the last update's numbers and chart
            view.evaluate("window.scrollTo(0, 0)")
            out.parent.mkdir(parents=True, exist_ok=True)
            view.screenshot(path=str(out))
            return " ".join(view.locator("#speedup").inner_text().split())
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=output_file, default=REPO / "docs" / "screenshot.png",
                        help="where to write the PNG (default docs/screenshot.png, the README's picture)")
    parser.add_argument("--example", type=int, default=0, help="which of the page's examples to race (default 0, the first)")
    parser.add_argument("--width", type=int, default=1400, help="the window's width in CSS pixels (default 1400)")
    parser.add_argument("--height", type=int, default=1350, help="the window's height (default 1350: the result, both panes and their numbers)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the pair to load and for the race")
    args = parser.parse_args(argv)
    server = None
    try:
        env = {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0"}
        the_page = page(env)
        if not 0 <= args.example < len(the_page.examples):
            raise SetupError(f"--example must be from 0 to {len(the_page.examples) - 1}, got {args.example}")
        label, prompt = the_page.examples[args.example]
        port = free_port()
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"screenshot-app-{port}.log"
        server = start_app(port, log, env, timeout=args.timeout)
        wait_for_line(log, "Ready: " + re.escape(the_page.preset), server, args.timeout, fail=r"Could not load")
        said = screenshot(f"http://127.0.0.1:{port}/", prompt, args.out, args.width, args.height, args.timeout)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stop_app(server)
    log.unlink(missing_ok=True)  # kept only where something went wrong, for the error that names it
    print(f"{args.out}: {the_page.preset}, {label!r}, {said}")
    return 0


if __name__ == "__main__":
    run_tool(main)
