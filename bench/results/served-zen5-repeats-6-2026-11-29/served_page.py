# ruff: noqa: E402, I001
"""The app started as bench.tools.served starts it, and headless Chromium on its page, for the
profiling scripts beside this file."""
import contextlib
import sys
from pathlib import Path
sys.path.insert(0, ".")
from bench.tools.served import Browser
from bench.tools.served_app import free_port, start_app, stop_app, wait_for_line

OUT = Path("/tmp/served-zen5-profile")


@contextlib.contextmanager
def served_page():
    """A Browser on the app's page, the default pair loaded; both stop on leaving."""
    OUT.mkdir(exist_ok=True)
    port = free_port()
    log = OUT / f"app-{port}.log"
    server = start_app(port, log, {"SPEC_APP_PRELOAD": "1", "SPEC_APP_PREHEAT": "0"})
    try:
        wait_for_line(log, "Ready: ", server, 900, fail="Could not load")
        browser = Browser(f"http://127.0.0.1:{port}/", 600)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        stop_app(server)
